"""Secrets never reach a log, the store or the event stream; messages are capped
(kernelband/redact.py, applied in events.py, store.py, the CLI and the session)."""
from __future__ import annotations

import io
import json
import sqlite3

from kernelband.events import EventEmitter, jsonl_sink
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
    EventEmitter(jsonl_sink(out)).emit("candidate", index=1, status="runtime_error", message=evaluation["message"])
    line = out.getvalue()
    assert ENV_KEY not in line and len(line) < MAX_MESSAGE_BYTES + 300 and line.count("\n") == 1
