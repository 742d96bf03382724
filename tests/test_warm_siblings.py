"""Siblings that compile a job's calls beyond the harness ahead of it
(kernelband/worker/warm.py). On a GPU they save the Triton compiles; here, under the
interpreter (``KERNELBAND_WARM=on``), what is tested is what must hold anywhere: a
sibling launches nothing, changes no verdict, writes only its job's Triton cache (not the
job's directory, not another job's), and is gone when its job is.

What would abuse it: a sibling is the candidate's own code in a second process, so it
could try to reach further than the candidate can (the job's directory, the judge's
files) or to outlive its job."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.kernels import AXPY, SLOW_BEYOND, axpy_task, judges_beyond_the_harness, load_module

from kernelband.worker.jobs import VariantJob
from kernelband.worker.messages import Job, Mark, Warm


def _trace(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_launches_as_warmups_launch_nothing_and_are_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelband.worker.derived_run import launches_as_warmups

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    module = load_module(tmp_path, AXPY, "axpy_warm")
    x, y = torch.ones(300), torch.ones(300)
    out = torch.full((300,), -7.0)
    with launches_as_warmups():
        module.axpy_kernel[(3,)](x, y, out, 2.0, 300, BLOCK_SIZE=128)
    assert bool((out == -7.0).all())  # nothing ran
    module.axpy_kernel[(3,)](x, y, out, 2.0, 300, BLOCK_SIZE=128)
    assert bool((out == 3.0).all())  # and launches run again after the block


# the module's import, in whichever process imports it: a sibling writes its job's cache
# and tries the job's own directory, which holds the job's files and is not the cache
_REACHING = AXPY + '''
import os as _os

_cache = _os.environ.get("TRITON_CACHE_DIR", "")
if _os.environ.get("KERNELBAND_SANDBOX_CACHE_WRITABLE") == "1":
    with open(_os.path.join(_cache, "written-by-sibling"), "w") as _f:
        _f.write("1")
    try:
        with open(_os.path.join(_os.path.dirname(_cache), "escaped"), "w") as _f:
            _f.write("1")
    except OSError:
        pass
'''


def test_a_sibling_writes_its_jobs_cache_and_nothing_else_of_the_job(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Sent straight to the sandbox (no screen): the sibling's import writes the job's
    Triton cache, where the job reads; where the sandbox's mount layer holds, its write
    into the job's own directory fails (the sandbox allows the cache, not its parent)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = axpy_task(tmp_path, _REACHING)
    job = VariantJob(Job(task, {"v": _REACHING}, [Mark()], interpreted=True), timeout_s=120)
    sibling = VariantJob(Job(task, {"v": _REACHING}, [Warm([], "v")], interpreted=True), timeout_s=120,
                         shared_cache=job.cache)
    try:
        job.start()
        assert [f.kind for f in job.frames()] == ["mark", "done"]
        sibling.start()
        assert [f.kind for f in sibling.frames()] == ["done"], sibling.stderr_tail()
        assert (job.cache / "written-by-sibling").exists()
        assert sibling.dir != job.dir and not (sibling.dir / "triton-cache").exists()  # no cache of its own
        if "mount held" in sibling.sandbox:
            assert not (job.dir / "escaped").exists(), sibling.sandbox
    finally:
        sibling.close()
        job.close()
    assert not sibling.dir.exists()


def test_siblings_change_no_verdict_and_end_with_their_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With siblings on (the original's derivation and every candidate), a candidate wrong
    only beyond the harness is still refused there and a correct one passes; every
    sibling started was closed."""
    from helpers.kernels import prepared_evaluator

    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KERNELBAND_WARM", "on")
    monkeypatch.setenv("KERNELBAND_DERIVE", "background")
    monkeypatch.setenv("KERNELBAND_TRACE", str(trace))
    ev = prepared_evaluator(tmp_path, "slow_beyond", SLOW_BEYOND, "scale_kernel", "harness_scale")
    try:
        judges_beyond_the_harness(ev)
    finally:
        ev.close()
    marks = _trace(trace)
    started = [m for m in marks if m["what"] == "warm.start"]
    closed = {m["job"] for m in marks if m["what"] == "job.closed"}
    assert len(started) >= 3, started  # the derivation's siblings and one per candidate
    assert {m["sibling"] for m in started} <= closed


def test_a_candidate_gets_a_sibling_only_where_the_originals_calls_were_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below CANDIDATE_MIN_S of the original's calls a sibling cost more than it saved;
    a candidate waiting for a long derivation starts its sibling while it waits."""
    import threading

    from kernelband.worker import warm
    from kernelband.worker.judge_core import Reference
    from kernelband.worker.judge_derivation import wait_for_references

    monkeypatch.delenv("KERNELBAND_WARM", raising=False)
    short, long = Reference(derived_calls_s=warm.CANDIDATE_MIN_S / 3), Reference(derived_calls_s=warm.CANDIDATE_MIN_S)
    assert not warm.pays_off(short) and warm.pays_off(long)
    # with fewer lanes (a harness whose runs fill the GPU) cores are idle: less pays
    assert warm.pays_off(short, lanes=1) and warm.pays_off(short, lanes=2)
    assert not warm.pays_off(short, lanes=3)
    assert not warm.pays_off(Reference(derived_calls_s=0.5), lanes=1)  # the floor: 6 s / 8 lanes
    import time

    still_running = Reference(derive_started=time.monotonic() - warm.CANDIDATE_MIN_S)
    assert warm.pays_off(still_running)  # one long compile: nothing summed yet
    still_running.derived_ready.set()
    assert not warm.pays_off(still_running)
    monkeypatch.setenv("KERNELBAND_WARM", "on")
    assert warm.pays_off(short)

    from types import SimpleNamespace

    seen: list[float] = []
    threading.Timer(0.6, long.derived_ready.set).start()
    judge = SimpleNamespace(ref=long, require_task=lambda: SimpleNamespace(timeout_s=5.0))
    assert wait_for_references(judge, lambda r: seen.append(r.derived_calls_s)) is long  # type: ignore[arg-type]
    assert seen and seen[0] == warm.CANDIDATE_MIN_S  # called while it waited, with the derivation's progress


def test_a_candidate_whose_first_run_compiles_far_slower_than_the_originals_gets_a_sibling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """However short the original's calls beyond the harness, a candidate whose first run
    took HEAVY_FIRST_RUN_S and HEAVY_RATIO times the original's (an autotuned rewrite
    compiling every config) gets one; a candidate as quick as the original, or one whose
    first run has not come yet, does not. The original's first run is its first outputs
    frame, not its slowest."""
    from kernelband.worker import warm
    from kernelband.worker.jobs import Frame
    from kernelband.worker.judge_core import Reference, note_run_seconds
    from kernelband.worker.messages import RunOutputs

    monkeypatch.delenv("KERNELBAND_WARM", raising=False)
    quick = Reference(first_run_s=0.5)
    assert not warm.pays_off(quick) and not warm.pays_off(quick, 0.9)
    assert not warm.pays_off(quick, warm.HEAVY_FIRST_RUN_S - 0.1)
    assert warm.pays_off(quick, warm.HEAVY_FIRST_RUN_S)
    slow_original = Reference(first_run_s=2.5)  # the original compiles slowly too: no sign of a heavier candidate
    assert not warm.pays_off(slow_original, 4.0) and warm.pays_off(slow_original, 2.5 * warm.HEAVY_RATIO)

    ref = Reference()
    for seconds in (1.2, 7.0, 0.1):
        note_run_seconds(ref, Frame(RunOutputs("h", 0, "check", seconds=seconds)))
    assert ref.first_run_s == 1.2 and ref.slowest_run_s == 7.0


def test_the_inputs_of_calls_beyond_the_harness_are_made_under_the_gpu_lock(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a call's inputs is GPU work (a 256 MiB buffer filled, drawn, copied): outside
    the shared hold it ran inside other processes' timed regions (a lane's samples read 11x
    slow on one H200 at 5777734, kv_cache_scatter). Both the job's calls and a sibling's."""
    from types import SimpleNamespace

    from kernelband.worker import derived_run, gpu_lock
    from kernelband.worker.call_spec import DerivedCall, TensorArg
    from kernelband.worker.messages import Derived

    monkeypatch.setenv("KERNELBAND_TIMING_LOCK", str(tmp_path / "lock"))
    held: list[int] = []
    real_build = derived_run.build

    def build(*args, **kwargs):  # type: ignore[no-untyped-def]
        held.append(getattr(gpu_lock._held, "depth", 0))
        return real_build(*args, **kwargs)

    monkeypatch.setattr(derived_run, "build", build)
    call = DerivedCall(fn="double", args=(TensorArg(shape=(8,), dtype="float32", device="cpu", contiguous=True, id=0,
                                                    floating=True),), kwargs={}, flavour="sizes", seed=1, sizes={})
    version = SimpleNamespace(module=SimpleNamespace(double=lambda x: x * 2))
    derived_run.warm_calls(version, Warm([call], "v"))
    sent: list[object] = []
    steps = SimpleNamespace(await_judge=lambda: None, check_runtime=lambda: None,
                            send=lambda meta, tree=None: sent.append(meta))
    derived_run.run_calls(version, Derived([call], "v", "a"), steps)
    assert held == [1, 1] and len(sent) == 1
