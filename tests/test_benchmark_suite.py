"""The benchmark suite (benchmarks/suite/) and the runner (benchmarks/run.py).

Suite kernels run under Triton's interpreter on the CPU. TRITON_INTERPRET=1 must be
set before triton is imported in the process that runs them, and other test modules
may already have imported triton in this pytest process, so every kernel runs in ONE
child process started with that environment (``_run_suite_in_interpreter``); this
module itself never imports torch or triton. The runner tests use a fake session
function returning SYNTHETIC results: they test resumability, the deadline and the
report writers only, never KernelBand's search.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kernelband.detect import detect
from kernelband.harness import find_harness

REPO = Path(__file__).resolve().parent.parent
SUITE_INIT = REPO / "benchmarks" / "suite" / "__init__.py"
RUN_PY = REPO / "benchmarks" / "run.py"


def _load(path: Path, name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


suite = _load(SUITE_INIT, "kernelband_benchmark_suite")
run = _load(RUN_PY, "kernelband_benchmark_run")
IDS = [e.module for e in suite.SUITE]


# --------------------------------------------------------------------------- the interpreter child

_CHILD = textwrap.dedent(
    r'''
    import importlib.util, json, os, sys, time, traceback
    assert os.environ.get("TRITON_INTERPRET") == "1"
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter as _interp

    # Triton's interpreter keeps bfloat16 as uint16 and its tl.dot multiplies the bit
    # patterns (bf16 dot is "not supported yet" there); bmm_bf16 is right on a
    # GPU. Convert bf16 dot operands to fp32 here, in this test process only.
    _orig_dot = getattr(getattr(_interp, "InterpreterBuilder", None), "create_dot", None)

    def _fp32(h):
        if h.dtype == tl.bfloat16 and getattr(h.data, "dtype", None) == np.uint16:
            return _interp.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return h

    def _create_dot(self, a, b, *args, **kwargs):
        return _orig_dot(self, _fp32(a), _fp32(b), *args, **kwargs)

    if _orig_dot is not None:
        _interp.InterpreterBuilder.create_dot = _create_dot

    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    sys.path.insert(0, os.path.dirname(sys.argv[2]))  # run.py imports its sibling common.py
    suite = load(sys.argv[1], "kernelband_benchmark_suite")
    run = load(sys.argv[2], "kernelband_benchmark_run")
    results = {}
    for e in suite.SUITE:
        t0 = time.monotonic()
        try:
            mod = load(str(e.path), "suite_" + e.module)
            problems = []
            for seed in (0, 1):
                torch.manual_seed(seed)
                out = getattr(mod, e.harness)()
                torch.manual_seed(seed)
                ref = getattr(mod, e.reference)()
                problems += [f"seed {seed}: {p}" for p in suite.compare(out, ref)]
            # a broken kernel must not pass: scale the first output by 1.5 (integers: + 3)
            first = out if isinstance(out, torch.Tensor) else out[0]
            first.copy_(first * 1.5 + 3 if first.dtype.is_floating_point else first + 3)
            caught = bool(suite.compare(out, ref))
            results[e.module] = {"problems": problems, "broken_caught": caught, "error": None}
        except Exception:
            results[e.module] = {"problems": [], "broken_caught": None, "error": traceback.format_exc()}
        results[e.module]["seconds"] = round(time.monotonic() - t0, 3)

    # the runner's winner-vs-reference check, on a correct and on a wrong variant
    g = suite.entry("gelu_fp32")
    src = g.path.read_text()
    results["_verify_same"] = run.verify_against_reference(g, src)
    results["_verify_wrong"] = run.verify_against_reference(g, src.replace("0.044715", "0.5"))
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        rows = run.check_suite(Path(d), [suite.entry("gelu_fp32"), suite.entry("rotary_fp16")],
                               {"gpu": "cpu (interpreter)", "interpreted": True})
        results["_check_suite"] = [[r["kernel"], r["correct"], r.get("launches")] for r in rows]
        results["_check_suite_md"] = (Path(d) / "suite_check.md").read_text()
    print("RESULTS" + json.dumps(results))
    '''
)


@pytest.fixture(scope="module")
def interpreted():
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(SUITE_INIT), str(RUN_PY)],
        env=env, capture_output=True, text=True, timeout=300, cwd=str(REPO),
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line is not None, f"interpreter child failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(line[len("RESULTS"):])


@pytest.mark.slow
@pytest.mark.parametrize("module", IDS)
def test_harness_matches_reference_under_interpreter(interpreted, module):
    r = interpreted[module]
    assert r["error"] is None, r["error"]
    assert r["problems"] == [], r["problems"]
    assert r["broken_caught"], "the comparison did not notice a corrupted output"
    assert r["seconds"] < 5.0, f"{module} is too slow under the interpreter ({r['seconds']}s): shrink its CPU sizes"


def test_check_suite_mode(interpreted):
    assert interpreted["_check_suite"] == [["gelu_fp32", True, 1], ["rotary_fp16", True, 1]]
    assert "| gelu_fp32 | elementwise | fp32 | yes |" in interpreted["_check_suite_md"]


def test_reference_check_of_runner(interpreted):
    assert interpreted["_verify_same"] == []
    assert interpreted["_verify_wrong"], "a wrong variant passed the runner's reference check"


# --------------------------------------------------------------------------- detection and harness discovery


@pytest.mark.parametrize("module", IDS)
def test_detect_and_find_harness(module):
    e = suite.BY_MODULE[module]
    source = e.path.read_text(encoding="utf-8")
    result = detect(source, str(e.path))
    assert result.error is None
    assert [k.name for k in result.kernels] == [e.kernel]
    choice = find_harness(str(e.path), source, e.kernel)
    assert choice.found, choice.reason
    assert choice.name == e.harness and choice.path is None
    assert result.function(e.reference) is not None, f"no {e.reference}() in {module}"
    k = result.kernels[0]
    assert len(k.launch_sites) == 1
    site = k.launch_sites[0]
    # every constexpr is passed by keyword at the one launch site, where a tuner can rewrite it
    assert set(k.constexpr_params) <= set(site.kwargs), (k.constexpr_params, site.kwargs)
    assert 'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"' in source


def test_suite_coverage():
    assert len(suite.SUITE) >= 16
    assert len({e.module for e in suite.SUITE}) == len(suite.SUITE)
    assert len({e.kernel for e in suite.SUITE}) == len(suite.SUITE)
    cats = {e.category for e in suite.SUITE}
    assert set(suite.CATEGORIES) <= cats
    dtypes = " ".join(e.dtype for e in suite.SUITE)
    for d in ("fp32", "fp16", "bf16", "int8"):
        assert d in dtypes
    for e in suite.SUITE:
        assert e.path.is_file(), e.path
    files = {p.stem for p in SUITE_INIT.parent.glob("*.py") if p.stem != "__init__"}
    assert files == set(suite.BY_MODULE), "every suite module is listed in SUITE and every entry has a file"
    # most launch sites use literal block sizes (the row-per-program kernels size the block to the row)
    literal = 0
    for e in suite.SUITE:
        k = detect(e.path.read_text(encoding="utf-8")).kernels[0]
        kw = k.launch_sites[0].kwargs
        if any(kw.get(c, "").isdigit() for c in k.constexpr_params):
            literal += 1
    assert literal >= len(suite.SUITE) - 3


def test_compare_tolerances():
    import torch

    a = torch.ones(10, dtype=torch.bfloat16)
    assert suite.compare(a, a.clone()) == []
    assert suite.compare(a, a.float())  # dtype differs
    assert suite.compare((a,), [a])  == []  # tuple vs list: same structure
    assert suite.compare((a, a), (a,))
    q = torch.tensor([1, 2, 3], dtype=torch.int8)
    assert suite.compare(q, q + 1) == []  # int8 rounding may differ by one step
    assert suite.compare(q, q + 2)


# --------------------------------------------------------------------------- runner (SYNTHETIC session results)

GPU = "synthetic-gpu"
ENV = {"gpu": GPU, "interpreted": True, "triton_version": "x", "torch_version": "y", "device": "cpu"}


def fake_oracle(calls):
    """A stand-in for the chunked oracle: SYNTHETIC, like fake_session."""
    session = fake_session(calls)

    def fn(task_fields, checkpoint, stop, exhaustive_cap=512, log=None):
        return session(task_fields, "exhaustive", None, 0, stop, None)

    return fn


def fake_session(calls):
    """A stand-in for run_session returning SYNTHETIC Result dicts (not measurements)."""

    def fn(task_fields, method, budget, seed, stop, store_path, verbose=False, exhaustive_cap=512):
        calls.append((task_fields["kernel"], method, budget, seed))
        n = budget or 40
        final = 2.0 if method == "exhaustive" else 1.0 + 0.5 * (1 + (seed % 2)) * (n / 32)
        history = [{"index": i, "t": 0.5 * (i + 1), "best_speedup_so_far": 1.0 + (final - 1.0) * min(1.0, (i + 1) / (n / 2))}
                   for i in range(n)]
        return {"status": "improved", "speedup": final, "speedup_ci": [final * 0.97, final * 1.03],
                "baseline_ms": 1.0, "best_ms": 1.0 / final, "evaluations": n, "seconds": 0.5 * n,
                "history": history, "interpreted": True, "clock": "cpu-interpreter", "strategy_path": ["tiling"],
                "best_source": task_fields["source"], "phase_seconds": {"compile": 0.1 * n, "timing": 0.2 * n, "profile": 0.05 * n}}

    return fn


def test_runner_is_resumable(tmp_path):
    entries = [suite.entry("gelu_fp32"), suite.entry("matmul_fp16")]
    plan = run.plan_runs(entries, ["kernelband", "random"], [8, 16], [0, 1], oracle=True)
    assert len(plan) == 2 * (1 + 2 * 2 * 2)
    assert plan[0][1] == "exhaustive" and plan[9][1] == "exhaustive"
    calls: list = []
    runner = run.Runner(tmp_path, ENV, session_fn=fake_session(calls), oracle_fn=fake_oracle(calls), verify=False, log=lambda s: None)
    counts = runner.run_all(plan[:5])
    assert counts["ran"] == 5 and len(calls) == 5

    data = json.loads((tmp_path / run.RESULTS_FILE).read_text())
    assert len(data["runs"]) == 5
    for row in data["runs"]:
        for key in ("kernel", "method", "budget", "correct", "speedup", "oracle_fraction", "evaluations", "seconds", "gpu"):
            assert key in row
        assert row["gpu"] == GPU and row["correct"] is True
    first = data["runs"][1]  # gelu kernelband budget 8 seed 0: final 1.125, oracle 2.0
    assert first["method"] == "kernelband" and first["budget"] == 8
    assert first["oracle_fraction"] == pytest.approx(1.125 / 2.0, abs=1e-3)
    assert first["oracle_gain_fraction"] == pytest.approx(0.125, abs=1e-3)
    assert first["evals_to_95"] == 4 and first["seconds_to_95"] == pytest.approx(2.0)
    assert first["profiling_overhead"] == pytest.approx(0.05 / 0.5)
    assert first["phases_missing"] == ["correctness"]

    # a new runner over the same folder skips the five done rows and does the rest
    calls2: list = []
    runner2 = run.Runner(tmp_path, ENV, session_fn=fake_session(calls2), oracle_fn=fake_oracle(calls2), verify=False, log=lambda s: None)
    counts2 = runner2.run_all(plan)
    assert counts2["done_before"] == 5 and counts2["ran"] == len(plan) - 5
    assert len(calls2) == len(plan) - 5
    assert not set(calls2) & set(calls)
    data = json.loads((tmp_path / run.RESULTS_FILE).read_text())
    keys = [run.run_key(r) for r in data["runs"]]
    assert len(keys) == len(set(keys)) == len(plan)

    # another GPU is another key: nothing is skipped there
    calls3: list = []
    other = dict(ENV, gpu="other-gpu")
    run.Runner(tmp_path, other, session_fn=fake_session(calls3), oracle_fn=fake_oracle(calls3), verify=False, log=lambda s: None).run_all(plan[:2])
    assert len(calls3) == 2


def test_runner_records_errors_and_stops_on_systematic_ones(tmp_path):
    def broken(task_fields, method, budget, seed, stop, store_path, **kw):
        raise TypeError("SessionConfig() got an unexpected keyword argument 'search'")

    plan = run.plan_runs([suite.entry("gelu_fp32")], ["kernelband", "random", "ucb1"], [8, 16], [0], oracle=False)
    logs: list[str] = []
    counts = run.Runner(tmp_path, ENV, session_fn=broken, verify=False, log=logs.append).run_all(plan)
    assert counts["ran"] == 3 and counts["errors"] == 3 and counts["left"] == len(plan) - 3
    assert any("systematic" in s for s in logs)
    rows = json.loads((tmp_path / run.RESULTS_FILE).read_text())["runs"]
    assert all(r["error"] and r["correct"] is False for r in rows)
    # --retry-errors runs them again
    calls: list = []
    run.Runner(tmp_path, ENV, session_fn=fake_session(calls), oracle_fn=fake_oracle(calls), verify=False, retry_errors=True,
               log=lambda s: None).run_all(plan)
    assert len(calls) == len(plan)
    rows = json.loads((tmp_path / run.RESULTS_FILE).read_text())["runs"]
    assert len(rows) == len(plan) and not any(r["error"] for r in rows)


def test_runner_stops_cleanly_at_the_deadline(tmp_path):
    started = threading.Event()

    def slow(task_fields, method, budget, seed, stop, store_path, **kw):
        started.set()
        assert stop.wait(10), "the runner never set the stop event"
        return {"status": "cancelled", "speedup": 1.0, "history": []}

    plan = run.plan_runs([suite.entry("gelu_fp32")], ["kernelband"], [8, 16], [0], oracle=False)
    runner = run.Runner(tmp_path, ENV, session_fn=slow, verify=False, deadline=time.monotonic() + 0.3,
                        log=lambda s: None)
    t0 = time.monotonic()
    counts = runner.run_all(plan)
    assert time.monotonic() - t0 < 5
    assert started.is_set() and counts["stopped"] == 1 and counts["ran"] == 0 and counts["left"] == 2
    assert not (tmp_path / run.RESULTS_FILE).exists() or not json.loads((tmp_path / run.RESULTS_FILE).read_text())["runs"]

    # with no time left nothing starts
    runner = run.Runner(tmp_path, ENV, session_fn=slow, verify=False, deadline=time.monotonic() - 1, log=lambda s: None)
    assert runner.run_all(plan)["left"] == 2


def test_reach_point():
    h = [{"index": i, "t": float(i), "best_speedup_so_far": s} for i, s in enumerate([1.0, 1.0, 1.5, 1.9, 2.0, 2.0])]
    assert run.reach_point(h) == (5, 4.0)  # 95% of the gain (1.95x) is first reached at the 5th evaluation
    assert run.reach_point([{"index": 0, "t": 1.0, "best_speedup_so_far": 1.0}]) == (0, 0.0)
    assert run.reach_point([]) == (None, None)


def _synthetic_runs():
    rows = []
    for k in ("gelu_fp32", "matmul_fp16", "softmax_fp16"):
        e = suite.entry(k)
        res = fake_session([])({"kernel": e.kernel, "source": ""}, "exhaustive", None, 0, None, None)
        rows.append(run.make_row(e, "exhaustive", None, 0, ENV, res, 1.0))
        for m in ("kernelband", "kernelband-v2", "random"):
            for b in (8, 16, 32):
                for s in (0, 1):
                    res = fake_session([])({"kernel": e.kernel, "source": ""}, m, b, s, None, None)
                    rows.append(run.make_row(e, m, b, s, ENV, res, 1.0))
    rows[1]["correct"] = False  # one failed run: gelu_fp32 kernelband budget 8 seed 0
    return rows


def test_report_writers_from_synthetic_runs(tmp_path):
    note = "SYNTHETIC results: tests the report writer only"
    written = run.write_report(tmp_path, runs=_synthetic_runs(), plots=False, synthetic_note=note)
    md = (tmp_path / "report.md").read_text()
    assert note in md
    assert "| kernelband | 8 | 3 |" in md and "### Per kernel, budget 32" in md
    assert "Oracle (exhaustive) per kernel" in md and "| matmul_fp16 | 2.000x" in md
    assert "correctness" in md  # the phase the synthetic results lack is named
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["synthetic"] == note
    overall = {(o["method"], o["budget"]): o for o in summary["summaries"][0]["overall"]}
    o = overall[("random", 32)]
    assert o["kernels"] == 3 and o["correct_rate"] == 1.0
    assert o["mean_oracle_fraction"] == pytest.approx(((1.5 + 2.0) / 2) / 2.0, rel=0.05)
    assert o["mean_best_known_fraction"] == pytest.approx(((1.5 + 2.0) / 2) / 2.0, rel=0.05)  # the oracle is best here
    assert "best-known fraction" in md
    assert overall[("kernelband", 8)]["correct_rate"] == pytest.approx(5 / 6)
    assert math.isclose(o["geomean_speedup"], math.sqrt(1.5 * 2.0), rel_tol=1e-6)
    assert len(written) == 2


def test_strategy_pulls_from_a_session_history():
    """T_parent / T_child per generated candidate; the original (absent from the history) is
    recovered from time_ms * speedup; failures carry None; strategy-less entries are skipped."""
    history = [
        {"variant_id": "v1", "parent": "orig", "strategy": "tiling", "status": "ok", "time_ms": 0.5, "speedup": 2.0},
        {"variant_id": "v2", "parent": "v1", "strategy": "pipeline", "status": "ok", "time_ms": 0.4, "speedup": 2.5},
        {"variant_id": "v3", "parent": "v1", "strategy": "vectorization", "status": "mismatch", "time_ms": None, "speedup": None},
        {"variant_id": "p0", "parent": None, "strategy": None, "status": "ok", "time_ms": 0.9, "speedup": 1.1},
    ]
    assert run.strategy_pulls(history) == [
        {"strategy": "tiling", "status": "ok", "x": 2.0},
        {"strategy": "pipeline", "status": "ok", "x": 1.25},
        {"strategy": "vectorization", "status": "mismatch", "x": None},
    ]


def test_best_known_fraction_when_a_search_beats_the_oracle():
    """A capped oracle can lose to a search that chains rewrites: best_known_fraction then uses the
    best correct run, never exceeds 1, and ignores failed runs."""
    rows = [
        {"kernel": "k", "gpu": GPU, "method": "exhaustive", "budget": None, "correct": True, "speedup": 1.2},
        {"kernel": "k", "gpu": GPU, "method": "ucb1", "budget": 16, "correct": True, "speedup": 1.5},
        {"kernel": "k", "gpu": GPU, "method": "random", "budget": 16, "correct": True, "speedup": 1.0},
        {"kernel": "k", "gpu": GPU, "method": "greedy", "budget": 16, "correct": False, "speedup": 9.0},
    ]
    run.refresh_derived(rows)
    by = {r["method"]: r for r in rows}
    assert by["ucb1"]["oracle_fraction"] == pytest.approx(1.25)
    assert by["ucb1"]["best_known_fraction"] == pytest.approx(1.0)
    assert by["exhaustive"]["best_known_fraction"] == pytest.approx(0.8)
    assert by["random"]["best_known_fraction"] == pytest.approx(1.0 / 1.5, abs=1e-4)
    assert by["greedy"]["best_known_fraction"] is None and by["greedy"]["best_known_speedup"] == pytest.approx(1.5)


def test_plots_from_synthetic_runs(tmp_path):
    import matplotlib  # noqa: F401  (setup.sh installs the plots extra: missing is a failure)

    written = run.write_report(tmp_path, runs=_synthetic_runs(), plots=True, synthetic_note="SYNTHETIC")
    names = {p.name for p in written}
    assert {"speedup_vs_budget.png", "oracle_fraction_vs_budget.png", "best_known_fraction_vs_budget.png",
            "per_kernel.png"} <= names
    for n in ("speedup_vs_budget.png", "per_kernel.png"):
        assert (tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_throughput_rows_and_markdown(tmp_path):
    e = suite.entry("add_relu_fp16")
    res = fake_session([])({"kernel": e.kernel, "source": ""}, "random", 16, 0, None, None)
    row = run.throughput_row(e, 16, ENV, res, 9.0)
    assert row["evaluations"] == 16 and row["evals_per_minute"] == pytest.approx(16 / 8.0 * 60)
    assert row["steady_evals_per_minute"] == pytest.approx(15 / 7.5 * 60)
    assert row["process_overhead_seconds"] == pytest.approx(8.0 - 0.35 * 16)
    assert row["phases_missing"] == ["correctness"]
    run.write_throughput_markdown([row], tmp_path / "throughput.md")
    assert "Not reported by the session's Result" in (tmp_path / "throughput.md").read_text()


def test_cli_report_only_and_list(tmp_path, capsys):
    run.save_results(tmp_path / run.RESULTS_FILE, {"runs": _synthetic_runs()})
    assert run.main(["--report-only", "--no-plots", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").is_file()
    assert run.main(["--list", "--out", str(tmp_path), "--kernels", "gelu_fp32", "--methods", "kernelband",
                     "--budgets", "8,16,32", "--seeds", "0,1,2"]) == 0
    out = capsys.readouterr().out
    assert f"{len(suite.SUITE)} suite kernels" in out
    assert "10 planned runs, 7 done on some GPU, 3 to do" in out


def test_chunked_oracle_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """The oracle's bookkeeping, with a fake Evaluator giving SYNTHETIC times."""
    import kernelband.evaluate as kev
    from kernelband.model import Baseline, Evaluation, PairedTiming, Status, Timing

    evaluated: list[str] = []
    stop = threading.Event()

    class FakeEvaluator:
        interpreted = True

        def __init__(self, task, profile_tier=0):
            assert profile_tier == 0

        def start(self):
            return None

        def prepare(self):
            return Baseline(ok=True, timing=Timing(10.0, 10.0, 10.0, "cpu-interpreter", 1))

        def evaluate(self, variant):
            evaluated.append(variant.id)
            if len(evaluated) == 2:
                stop.set()  # the deadline arrives during the second point
            t = 5.0 if len(evaluated) == 2 else 12.0
            return Evaluation(Status.OK, timing=Timing(t, t, t, "cpu-interpreter", 1), variant_id=variant.id)

        def paired_timing(self, variant, rounds=10):
            assert variant.id == evaluated[1]
            return PairedTiming(10.0, 5.0, 2.0, 1.9, 2.1, rounds, "cpu-interpreter")

        def close(self):
            return None

    monkeypatch.setattr(kev, "Evaluator", FakeEvaluator)
    e = suite.entry("gelu_fp32")
    fields = {"module_path": str(e.path), "source": e.path.read_text(), "kernel": e.kernel, "harness": e.harness,
              "device": "cpu"}
    ckpt = tmp_path / "oracle.json"
    assert run.run_oracle_chunked(fields, ckpt, stop, exhaustive_cap=5) is None
    state = json.loads(ckpt.read_text())
    assert len(state["done"]) == 2 and state["chunks"] == 1

    result = run.run_oracle_chunked(fields, ckpt, threading.Event(), exhaustive_cap=5)
    assert len(evaluated) == 5 and len(set(evaluated)) == 5  # nothing evaluated twice
    assert result["evaluations"] == 5 and result["oracle_chunks"] == 2
    assert result["status"] == "improved" and result["speedup"] == 2.0 and result["best_variant_id"] == evaluated[1]
    assert [h["best_speedup_so_far"] for h in result["history"]] == [1.0, 2.0, 2.0, 2.0, 2.0]
    row = run.make_row(e, "exhaustive", None, 0, ENV, result, 1.0)
    assert row["correct"] and row["speedup"] == 2.0 and row["evals_to_95"] == 2


def test_throughput_runs_both_modes(tmp_path):
    calls: list = []
    session = fake_session(calls)
    tiers: list = []

    def fn(task_fields, method, budget, seed, stop, store_path, verbose=False, **opts):
        tiers.append(opts.get("profile_tier"))
        res = session(task_fields, method, budget, seed, stop, store_path)
        if opts.get("profile_tier") == 0:  # SYNTHETIC: profiling off makes evaluations faster
            res["history"] = [dict(h, t=h["t"] * 0.8) for h in res["history"]]
        return res

    rows = run.run_throughput(tmp_path, ENV, [suite.entry("add_relu_fp16")], 8, session_fn=fn)
    assert [r["method"] for r in rows] == ["throughput", "throughput-noprofile"] and tiers == [None, 0]
    md = (tmp_path / "throughput.md").read_text()
    assert "| 20% |" in md  # 1 - 0.8
    assert run.run_throughput(tmp_path, ENV, [suite.entry("add_relu_fp16")], 8, session_fn=fn) == rows  # resumable
    assert len(tiers) == 2
