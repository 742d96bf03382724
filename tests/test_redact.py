"""Secrets never reach a log, the store or the event stream; messages are capped
(kernelband/redact.py, applied in events.py, store.py, the CLI and the session)."""
from __future__ import annotations

import io
import json
import sqlite3

from kernelband.events import Candidate, EventEmitter, jsonl_sink
from kernelband.redact import MAX_MESSAGE_BYTES, REDACTED, cap, clean, redact, register_secret, scrub, secret_values
from kernelband.store import Store

ENV_KEY = "kb-env-secret-7f3a9c2e11"


def test_env_values_with_secret_names_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("HF_TOKEN", "hf-token-value-123456")
    monkeypatch.setenv("MY_SERVICE_SECRET", "another-secret-value")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # short: not a secret
    monkeypatch.setenv("KERNELBAND_DEVICE", "cpu-device-name")  # not a secret name
    text = f"key={ENV_KEY} hf=hf-token-value-123456 s=another-secret-value p=false d=cpu-device-name"
    out = redact(text)
    assert ENV_KEY not in out and "hf-token-value-123456" not in out and "another-secret-value" not in out
    assert out.count(REDACTED) == 3 and "p=false" in out and "cpu-device-name" in out
    assert ENV_KEY in secret_values()


def test_key_shapes_and_registered_secrets_are_redacted():
    register_secret("editor-stored-key-0042")
    text = ("sk-proj-abcDEF1234567890xyz ghp_" + "a" * 36 + " AKIAABCDEFGHIJKLMNOP Authorization: Bearer abc.def-123456"
            " editor-stored-key-0042 sk-x")
    out = redact(text)
    assert "abcDEF" not in out and "ghp_" not in out and "AKIA" not in out and "abc.def-123456" not in out
    assert "editor-stored-key-0042" not in out and out.endswith("sk-x")  # too short to be a key


def test_messages_are_capped_with_head_and_tail():
    big = "HEAD" + "x" * 5_000_000 + "TAIL"
    out = cap(big)
    assert len(out.encode()) < MAX_MESSAGE_BYTES + 100
    assert out.startswith("HEAD") and out.endswith("TAIL") and "bytes cut by kernelband" in out
    assert cap("short") == "short" and clean("é" * 5000).count("é") <= MAX_MESSAGE_BYTES // 2


def test_scrub_keeps_sources_whole_and_drops_secret_fields(monkeypatch):
    monkeypatch.setenv("KERNELBAND_API_KEY", ENV_KEY)
    src = "def k():\n    pass\n" * 1000  # 18 KB of module: not a message
    obj = {"message": f"boom {ENV_KEY}", "best_source": src, "generator_options": {"api_key": "sk-test"},
           "history": [{"message": "y" * 10_000, "tokens": 5}], "speedup": 1.5}
    out = scrub(obj)
    assert out["best_source"] == src and REDACTED in out["message"] and ENV_KEY not in json.dumps(out)
    assert out["generator_options"]["api_key"] == REDACTED
    assert len(out["history"][0]["message"]) < MAX_MESSAGE_BYTES + 100 and out["history"][0]["tokens"] == 5
    assert obj["message"].endswith(ENV_KEY)  # the input is untouched


def _all_rows(db_path) -> str:
    con = sqlite3.connect(db_path)
    try:
        return "\n".join(line for line in con.iterdump())
    finally:
        con.close()


def test_store_and_event_stream_never_carry_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    huge = "E" * 5_000_000
    evaluation = {"status": "runtime_error", "message": f"RuntimeError: leaked {ENV_KEY}\n{huge}"}
    with Store(tmp_path / "kb.db") as store:
        store.start_session("s1", "f.py", "k", "h", "cpu", "3.9", {"generator_options": {"api_key": ENV_KEY}})
        store.add_history("s1", 0, {"message": evaluation["message"]})
        store.add_evaluation(session_id="s1", source_hash="h", harness_hash="hh", gpu="cpu", triton_version="3.9",
                             kernel="k", variant_id="v", strategy="tiling", evaluation=evaluation)
        store.finish_session("s1", "no_improvement", {"message": f"done {ENV_KEY}", "warnings": [huge]})
        assert len(store.history("s1")[0]["message"]) < MAX_MESSAGE_BYTES + 100
    dump = _all_rows(tmp_path / "kb.db")
    assert ENV_KEY not in dump and REDACTED in dump and len(dump) < 100_000

    out = io.StringIO()
    EventEmitter(jsonl_sink(out)).emit(Candidate(index=1, status="runtime_error", message=evaluation["message"]))
    line = out.getvalue()
    assert ENV_KEY not in line and len(line) < MAX_MESSAGE_BYTES + 300 and line.count("\n") == 1


def _old_print_json(obj, one_line_each=None) -> str:
    """print_json as it was: scrub, then serialise."""
    obj = scrub(obj)
    rows = obj.get(one_line_each) if one_line_each and isinstance(obj, dict) else None
    if not isinstance(rows, list):
        return json.dumps(obj, indent=2, default=str) + "\n"
    head = json.dumps({k: v for k, v in obj.items() if k != one_line_each}, default=str)
    items = ",\n".join(json.dumps(r, default=str) for r in rows)
    return f"{head[:-1]}{', ' if len(head) > 2 else ''}{json.dumps(one_line_each)}: [\n{items}\n]}}\n"


PLAIN_KEY = "zq8w7e6r5t4y3u2i"  # a secret value with no word of a key shape in it


def _random_data(rng, depth=0):
    pieces = ["x", "kernel_1", "tl.constexpr", '"', "\\", "\\u", "é", "\n", "\t", "\x01", " ", ":", "sk-", "SK-",
              "sk-proj-abcDEF1234567890xyz", "ghp_" + "a" * 36, "AKIAABCDEFGHIJKLMNOP", "Bearer abc.def-123456",
              "BEARER ", "hf_", ENV_KEY, PLAIN_KEY, PLAIN_KEY[:-1], "token", "Api-Key", "pass", "word", "y" * 1020,
              "z" * 3000]
    keys = ["name", "grid", "kwargs", "source", "diff", "api_key", "x-api-key", "my_token", "Password", "TOKEN",
            "authorization", "apikey", "passwd", "k", "é", "tokens", "secret_sauce", 3]
    kind = rng.random()
    if depth > 3 or kind < 0.45:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
    if kind < 0.55:
        return rng.choice([None, True, 1, 2.5, -3])
    if kind < 0.75:
        seq = [_random_data(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return tuple(seq) if rng.random() < 0.2 else seq
    return {rng.choice(keys): _random_data(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def test_needs_scrub_is_true_whenever_scrub_changes_something(monkeypatch):
    """The CLI prints the unscrubbed text when needs_scrub says False: then scrub must be a
    no-op. Random data made of every trigger (secret values, key shapes in any case,
    secret-named keys, strings of 1,024 characters and more, escapes, non-ASCII)."""
    import random

    from kernelband.redact import needs_scrub

    monkeypatch.setenv("KERNELBAND_API_KEY", ENV_KEY)
    monkeypatch.setenv("OTHER_SERVICE_TOKEN", PLAIN_KEY)
    rng = random.Random(7)
    quiet = 0
    for _ in range(5000):
        obj = _random_data(rng)
        text = json.dumps(obj, default=str)
        if not needs_scrub(text):
            quiet += 1
            assert json.dumps(scrub(obj), default=str) == text, obj
    assert quiet > 500


def test_print_json_prints_what_scrubbing_first_printed(monkeypatch, capsys):
    import random

    from kernelband.commands.common import print_json

    monkeypatch.setenv("KERNELBAND_API_KEY", ENV_KEY)
    monkeypatch.setenv("OTHER_SERVICE_TOKEN", PLAIN_KEY)
    rng = random.Random(11)
    for i in range(500):
        obj = {"file": "/tmp/m.py", "kernels": [_random_data(rng) for _ in range(rng.randint(0, 4))]}
        if i % 3 == 0:
            obj["kernels"] = tuple(obj["kernels"])
        for one_line_each in ("kernels", None):
            print_json(obj, one_line_each=one_line_each)
            assert capsys.readouterr().out == _old_print_json(obj, one_line_each)
    print_json([1, {"api_key": "sk-live-0123456789"}])
    assert capsys.readouterr().out == _old_print_json([1, {"api_key": "sk-live-0123456789"}])


def test_needs_scrub_knows_every_shape_and_field_scrub_knows():
    """needs_scrub's word lists are a faster twin of _KEY_HINT and _SECRET_FIELD: every
    string the hint can match, expanded from the regex itself (so an alternative added
    there and not here fails this test), and a key of each secret-field form, must say True."""
    import itertools
    import re

    from kernelband.redact import _KEY_HINT, _SECRET_FIELD, needs_scrub

    for alt in _KEY_HINT.pattern.split("|"):
        alt = alt[len("(?i:"):-1] if alt.startswith("(?i:") else alt
        parts = re.split(r"(\[[^\]]+\])", alt)
        assert not any(c in "".join(p for p in parts if not p.startswith("[")) for c in "()?*+{\\"), alt
        for combo in itertools.product(*[list(p[1:-1]) if p.startswith("[") else [p] for p in parts]):
            hint = "".join(combo)
            assert _KEY_HINT.search(hint), hint
            assert needs_scrub(json.dumps({"message": f"x {hint}y"}), values=[]), hint
    for key in ("api_key", "apikey", "APIKey", "authorization", "password", "passwd", "secret", "token",
                "access_token", "x-api-key", "openai_api_key", "my_token", "db_secret", "user_password"):
        assert _SECRET_FIELD.match(key), key
        assert needs_scrub(json.dumps({key: "plain"}), values=[]), key
