"""KernelBand sessions end to end on the CPU (Triton interpreter, real worker, real
SQLite, and a real local OpenAI-compatible HTTP server for the LLM path)."""
from __future__ import annotations

import signal
import subprocess
import time
from types import SimpleNamespace
from pathlib import Path

import pytest

from kernelband.events import Event
from kernelband.profile.schema import Profile
from kernelband.session import Budget, SessionConfig, run_session
from kernelband.store import Store
from helpers.llm_server import LLMServer, Reply, fenced
from helpers.session import AXPY_SESSION, GOOD_LLM_KERNEL, cli as _cli, collect, task_of, workspace


@pytest.mark.slow
def test_rules_session_finds_verified_speedup_and_persists(tmp_path):
    path = workspace(tmp_path)
    emitter, events = collect()
    store = Store.for_file(path)
    # --cpu-tuning: CPU times may decide (the interpreter alone makes no speed claim)
    cfg = SessionConfig(search="kernelband", budget=Budget(evaluations=6), paired_rounds=6,
                        strategies=["tiling"], cpu_tuning=True)
    result = run_session(task_of(path), cfg, emitter, store)
    # the interpreter runs one program at a time: bigger blocks really are faster on the CPU
    assert result.status == "improved", result.message
    assert result.applicable and not result.speed_claim and "CPU-interpreter time" in result.message
    assert result.baseline_ms / result.best_ms == pytest.approx(result.speedup)  # printed times agree
    assert result.speedup_ci[0] > 1.0 and result.speedup > 1.0
    assert result.evaluations == 6 and result.interpreted and result.clock == "cpu-interpreter"
    assert result.strategy_path and set(result.strategy_path) == {"tiling"}
    # the original's bottleneck class (from its tier-2 profile) travels with the Result for the benchmarks
    assert result.baseline_bottleneck in ("memory-bound", "compute-bound", "latency-bound", "launch-bound", "unknown")
    assert result.diff.startswith("--- a/axpy.py") and result.best_source != AXPY_SESSION
    types = [e.type for e in events]
    assert types[0] == "started" and types[1] == "baseline" and types[-1] == "result"
    assert types.count("candidate") == 6
    # nothing is lost: history, evaluations, verified variants and the result are in SQLite
    assert len(store.history(result.session_id)) == 6
    assert store.count_evaluations(result.session_id) == 6
    assert store.latest_result(str(path), "axpy_kernel")["speedup"] == pytest.approx(result.speedup)
    assert store.variants(result.original_hash, "axpy_kernel", result.gpu)

    # a second session on the same kernel starts from what the first found
    emitter2, events2 = collect()
    result2 = run_session(task_of(path), SessionConfig(budget=Budget(evaluations=1), paired_rounds=4, cpu_tuning=True),
                          emitter2, store)
    first = next(e for e in events2 if e.type == "candidate")
    assert first.data["generator"] == "stored" and first.data["status"] == "ok"
    assert result2.speedup > 1.0
    # the re-check of the stored winner is not one of the budget's evaluations
    assert [e.data["generator"] for e in events2 if e.type == "candidate"].count("stored") == 1
    assert sum(1 for e in events2 if e.type == "candidate") == 2
    # a session restricted to other strategies does not start from that (tiling) winner
    emitter3, events3 = collect()
    run_session(task_of(path), SessionConfig(budget=Budget(evaluations=1), strategies=["access_layout"],
                                             paired_rounds=2), emitter3, store)
    assert all(e.data["generator"] != "stored" for e in events3 if e.type == "candidate")
    store.close()


@pytest.mark.slow
def test_budgets_stop_where_they_should(tmp_path):
    path = workspace(tmp_path)
    r = run_session(task_of(path), SessionConfig(search="random", budget=Budget(evaluations=2), paired_rounds=2,
                                                 warm_start=False))
    assert r.evaluations == 2 and "evaluation budget" in r.stop_reason
    t0 = time.monotonic()
    r = run_session(task_of(path), SessionConfig(search="greedy", budget=Budget(evaluations=None, seconds=0.5),
                                                 paired_rounds=2, warm_start=False))
    assert "time budget" in r.stop_reason and r.evaluations <= 2
    assert time.monotonic() - t0 < 120
    with pytest.raises(ValueError, match="budget"):
        SessionConfig(budget=Budget(evaluations=None)).budget.validate()


@pytest.mark.slow
def test_exhaustive_search_walks_the_space_within_budget(tmp_path):
    path = workspace(tmp_path)
    r = run_session(task_of(path), SessionConfig(search="exhaustive", budget=Budget(evaluations=3), paired_rounds=2))
    assert r.evaluations == 3
    assert all(h["generator"] == "rules" for h in r.history)


@pytest.mark.slow
def test_llm_session_records_rejections_and_goes_on(tmp_path):
    path = workspace(tmp_path)
    script = [
        Reply(content="I cannot help with that."),                                  # no code block
        Reply(content=fenced("def axpy_kernel(:\n    pass")),                       # does not parse
        Reply(content=fenced(GOOD_LLM_KERNEL.replace("def axpy_kernel", "def fast_axpy").replace("axpy_kernel[", "fast_axpy["))),
        Reply(content=fenced("import os\n" + GOOD_LLM_KERNEL)),                     # imports os
        Reply(status=429), Reply(status=500),                                       # retried, not evaluations
        Reply(content=fenced(GOOD_LLM_KERNEL), prompt_tokens=1000, completion_tokens=500),
    ]
    emitter, events = collect()
    with LLMServer(script, lifetime_s=600) as server:  # outlives a slow setup on a loaded CPU
        cfg = SessionConfig(search="kernelband", generator="openai", budget=Budget(evaluations=5), paired_rounds=4,
                            cpu_tuning=True,
                            generator_options={"base_url": server.url, "model": "test-model", "api_key": "sk-test",
                                               "timeout": 5, "retries": 3, "backoff_s": 0.01,
                                               "default_price": (1.0, 2.0)})
        result = run_session(task_of(path), cfg, emitter, None)
        requests = server.count
    statuses = [e.data["status"] for e in events if e.type == "candidate"]
    assert statuses == ["rejected"] * 4 + ["ok"], [e.data["message"] for e in events if e.type == "candidate"]
    messages = [e.data["message"] for e in events if e.type == "candidate"][:4]
    assert any("os" in m for m in messages) and any("axpy_kernel" in m for m in messages)
    assert requests == 7  # 429 and 500 were retried inside one generation
    assert result.evaluations == 5 and result.tokens >= 1500 and result.cost_usd > 0
    assert result.status == "improved" and result.speedup_ci[0] > 1.0


def _optimize_events(path: Path, *extra: str) -> tuple[subprocess.Popen, list[Event], str]:
    p = _cli("optimize", str(path), "--budget", "2", "--strategies", "tiling", "--events", "jsonl", "--device", "cpu",
             "--rounds", "3", "--apply", *extra)
    out, err = p.communicate(timeout=600)
    events = [Event.from_json(ln) for ln in out.splitlines() if ln.strip()]  # every stdout line is an event
    assert events[0].type == "started" and events[-1].type == "result", err
    return p, events, err


@pytest.mark.slow
def test_cli_interpreter_verdict_makes_no_speed_claim_and_apply_refuses(tmp_path):
    path = workspace(tmp_path)
    p, events, err = _optimize_events(path)
    result = events[-1].data["result"]
    assert result["status"] == "verified_correct" and p.returncode == 1, result["message"]
    assert not result["speed_claim"] and not result["applicable"] and result["speedup"] is None
    assert "cannot be measured without a GPU" in result["message"] and result["diff"]
    assert "not applied" in err and "--cpu-tuning" in err and path.read_text() == AXPY_SESSION
    baseline = next(e for e in events if e.type == "baseline")
    assert baseline.data["speed_claim"] is False and baseline.data["prepare_ms"] > 0
    # per-candidate ratios are against the original timed like a candidate (warm), not prepare's cold timing
    for c in (e for e in events if e.type == "candidate" and e.data["status"] == "ok"):
        assert c.data["speed_claim"] is False
        assert c.data["speedup"] == pytest.approx(baseline.data["time_ms"] / c.data["time_ms"])


@pytest.mark.slow
def test_cli_cpu_tuning_applies_by_cpu_time(tmp_path):
    path = workspace(tmp_path)
    p, events, err = _optimize_events(path, "--cpu-tuning")
    result = events[-1].data["result"]
    assert p.returncode == (0 if result["status"] == "improved" else 1)
    if result["status"] == "improved":
        assert result["applicable"] and not result["speed_claim"]
        assert path.read_text() == result["best_source"]  # --apply wrote the unchanged file


def test_apply_refuses_a_file_changed_during_the_session(tmp_path):
    from kernelband.commands.optimize_cmd import _apply

    path = workspace(tmp_path)
    path.write_text(AXPY_SESSION + "\n# edited by the user meanwhile\n")
    applied, note = _apply(str(path), AXPY_SESSION, "new text")
    assert not applied and "changed since" in note
    assert path.read_text().endswith("# edited by the user meanwhile\n")


def test_apply_keeps_a_byte_order_mark(tmp_path):
    """read_module reads a BOM file as Python does (without the mark); --apply compares the
    same text and writes the winner back with the mark the file had."""
    from kernelband.commands.common import read_module
    from kernelband.commands.optimize_cmd import _apply

    path = workspace(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + AXPY_SESSION.encode())
    _, started_from = read_module(str(path))
    assert started_from == AXPY_SESSION
    applied, note = _apply(str(path), started_from, AXPY_SESSION + "# better\n")
    assert applied, note
    assert path.read_bytes() == b"\xef\xbb\xbf" + (AXPY_SESSION + "# better\n").encode()


def test_cli_usage_errors_exit_2(tmp_path):
    path = workspace(tmp_path)
    for args, needle in [(("optimize", str(tmp_path / "missing.py")), "no such file"),
                         (("optimize", str(path), "--kernel", "nope"), "no kernel named"),
                         (("optimize", str(path), "--strategies", "magic"), "unknown strategies"),
                         (("check", str(path), "--variant", str(tmp_path / "missing.py")), "no such file"),
                         # this machine (and CI) has no GPU: asking for one is a clear error, not a fallback
                         (("check", str(path), "--variant", str(path), "--device", "cuda"), "no CUDA GPU is visible")]:
        p = _cli(*args)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2 and needle in err, (args, err)


@pytest.mark.slow
def test_sigint_stops_cleanly_with_best_so_far(tmp_path):
    path = workspace(tmp_path)
    p = _cli("optimize", str(path), "--budget", "50", "--search", "greedy", "--events", "jsonl", "--device", "cpu",
             "--rounds", "3", "--no-store")
    seen: list[Event] = []
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(Event.from_json(line))
        if seen[-1].type == "candidate":
            p.send_signal(signal.SIGINT)
            break
    rest, _ = p.communicate(timeout=300)
    seen += [Event.from_json(ln) for ln in rest.splitlines() if ln.strip()]
    assert seen[-1].type == "result"
    result = seen[-1].data["result"]
    assert result["stop_reason"] == "stopped by request" and result["evaluations"] < 50


# --------------------------------------------------------------------------- config, failures, budgets


def test_stored_compatibility_models_get_the_bandit_config(tmp_path, monkeypatch):
    import kernelband.search.registry as search_registry
    from kernelband.search.config import BanditConfig
    from kernelband.session import Session

    seen = {}

    def capture(name, config=None, compat=None):
        seen["compat"] = compat
        raise RuntimeError("captured")  # the search itself is not needed

    monkeypatch.setattr(search_registry, "make_policy", capture)
    path = workspace(tmp_path)
    store = Store.for_file(path)
    cfg = BanditConfig(compat_buffer=7, compat_prior_strength=9.0, phi_none_psi=0.3)
    s = Session(task_of(path), SessionConfig(bandit=cfg), store=store, evaluator=SimpleNamespace())
    with pytest.raises(RuntimeError, match="captured"):
        s._search(generator=None)
    assert seen["compat"].config == cfg and seen["compat"].probability(None, "tiling") == 0.3
    store.close()


def test_clustering_feature_set_follows_the_bandit_config(tmp_path):
    from kernelband.model import Variant
    from kernelband.search.config import BanditConfig
    from kernelband.session import Session

    path = workspace(tmp_path)
    profile = {"runtime_vectors": {"v1": [1.0], "v2": [2.0, 3.0]}}

    def vector(search, bandit):
        s = Session(task_of(path), SessionConfig(search=search, bandit=bandit), evaluator=SimpleNamespace())
        return s.pool.candidate(Variant("x"), 1.0, Profile.from_dict(profile), None).runtime_vector

    assert vector("kernelband", None) == [1.0] and vector("kernelband-v2", None) == [2.0, 3.0]  # default: the variant's
    assert vector("kernelband", BanditConfig(feature_set="v2")) == [2.0, 3.0]
    assert vector("kernelband-v2", BanditConfig(feature_set="v1")) == [1.0]
    assert vector("ucb1", BanditConfig(feature_set="v2")) == [2.0, 3.0]


@pytest.mark.slow
def test_a_failed_final_remeasurement_still_gives_a_result(tmp_path):
    from kernelband.evaluate import Evaluator
    from kernelband.session import Session
    from kernelband.worker.client import WorkerError
    from kernelband.worker.requests import ErrorKind

    class HangsOnRemeasure(Evaluator):
        def paired_timing(self, variant, rounds=10):
            raise WorkerError(ErrorKind.TIMEOUT, "no reply in 240 s")

    path = workspace(tmp_path)
    task = task_of(path)
    store = Store.for_file(path)
    emitter, events = collect()
    cfg = SessionConfig(search="kernelband", budget=Budget(evaluations=3), strategies=["tiling"], warm_start=False,
                        cpu_tuning=True)
    result = Session(task, cfg, emitter, store, evaluator=HangsOnRemeasure(task, profile_tier=2)).run()
    assert result.search_best_ms < result.baseline_ms  # the search did find a faster candidate...
    assert result.status == "no_improvement" and "not a verified speedup" in result.message  # ...not verified
    assert "re-measurement" in result.message and "timeout" in result.message
    assert any("re-measurement" in w and "no reply in 240 s" in w for w in result.warnings)
    assert result.best_source == AXPY_SESSION and result.speedup == 1.0 and not result.diff
    assert events[-1].type == "result" and any(e.type == "log" and e.data.get("level") == "warning" for e in events)
    assert store.latest_result(str(path), "axpy_kernel")["status"] == "no_improvement"
    assert len(store.history(result.session_id)) == 3
    store.close()


def _llm_budget_session(tmp_path, budget: Budget) -> tuple[dict, int]:
    tmp_path.mkdir()
    path = workspace(tmp_path)
    # 100 + 50 tokens, rejected each time; the server outlives a slow setup on a loaded CPU
    with LLMServer([Reply(content="I cannot help with that.")], lifetime_s=600) as server:
        cfg = SessionConfig(generator="openai", budget=budget, warm_start=False,
                            generator_options={"base_url": server.url, "model": "test-model", "api_key": "sk-test",
                                               "timeout": 5, "retries": 0, "default_price": (1.0, 2.0)})
        result = run_session(task_of(path), cfg)
        return result, server.count


@pytest.mark.slow
def test_token_and_dollar_budgets_stop_an_llm_session(tmp_path):
    # checked before each request: 150, 300 (< 400), then 450 stops it, past the budget, and says so
    r, requests = _llm_budget_session(tmp_path / "tokens", Budget(evaluations=None, tokens=400))
    assert r.stop_reason == "token budget reached (450 of 400)" and requests == 3
    assert r.tokens == 450 and r.evaluations == 3 and r.status == "no_improvement"
    assert any("went past the budget (450 of 400 tokens)" in w for w in r.warnings)
    # $0.0002 a request at (1, 2) USD per 1M tokens
    r, requests = _llm_budget_session(tmp_path / "dollars", Budget(evaluations=None, dollars=0.0005))
    assert r.stop_reason == "dollar budget reached ($0.0006 of $0.0005)" and requests == 3
    assert r.cost_usd == pytest.approx(0.0006) and r.evaluations == 3 and r.tokens == 450
    assert any("went past the budget ($0.0006 of $0.0005)" in w for w in r.warnings)
    # exactly at the budget: no overshoot to report
    r, requests = _llm_budget_session(tmp_path / "exact", Budget(evaluations=None, tokens=300))
    assert r.tokens == 300 and requests == 2 and not any("went past" in w for w in r.warnings)


@pytest.mark.slow
def test_a_re_measurement_in_sequence_is_said_in_the_result(tmp_path, monkeypatch):
    """Where two runs of the harness do not fit on the GPU together the winner is
    re-measured one block after the other (forced here; the worker reads it at start):
    the verdict stands on it, and the result says it was not interleaved."""
    from kernelband.result_builder import SEQUENTIAL_NOTE
    from kernelband.session import Session

    monkeypatch.setenv("KERNELBAND_TEST_PAIRED_ORDER", "sequential")
    path = workspace(tmp_path)
    cfg = SessionConfig(search="kernelband", budget=Budget(evaluations=3), strategies=["tiling"], warm_start=False,
                        cpu_tuning=True)
    result = Session(task_of(path), cfg, collect()[0]).run()
    assert result.status == "improved" and result.paired_rounds and result.speedup_ci[0] > 1.0, result.message
    assert SEQUENTIAL_NOTE in result.warnings
