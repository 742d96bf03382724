"""Spare variant processes, started before a candidate needs one (kernelband/worker/spares.py).
On a GPU a spare saves the candidate its CUDA context; here, under the interpreter
(``KERNELBAND_SPARES``), what is tested is what must hold anywhere: candidate jobs take
spares, verdicts do not change, a dead spare is never handed out, and every spare is
closed with its judge.

What would abuse it: spares wait beside running candidates, each for a job to come, so a
candidate could try to plant something in a waiting spare's directory for the next
candidate (or for the judge) to find."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from helpers.kernels import AXPY, axpy_task, edited, prepared_evaluator

from kernelband.worker.jobs import VariantJob
from kernelband.worker.messages import Job, Mark
from kernelband.worker.spares import Spares


def _trace(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for_spares(trace: Path, count: int, timeout_s: float = 60.0) -> None:
    """Until the judge has marked ``count`` spares ready (its trace)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if trace.exists() and sum(m["what"] == "spare.ready" for m in _trace(trace)) >= count:
                return
        except ValueError:  # a line being written
            pass
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} spares ready after {timeout_s:.0f} s")


def test_candidates_take_spares_and_get_the_same_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KERNELBAND_SPARES", "2")
    monkeypatch.setenv("KERNELBAND_TRACE", str(trace))
    ev = prepared_evaluator(tmp_path, "axpy", AXPY, "axpy_kernel", "harness_axpy")
    try:
        _wait_for_spares(trace, 2)  # on a loaded machine a spare can still be starting
        right = ev.evaluate(edited("tl.store(out_ptr + offsets, alpha * x + y, mask=mask)",
                                   "tl.store(out_ptr + offsets, y + alpha * x, mask=mask)"), time_it=False)
        wrong = ev.evaluate(edited("tl.store(out_ptr + offsets, alpha * x + y, mask=mask)",
                                   "tl.store(out_ptr + offsets, alpha * x - y, mask=mask)"), time_it=False)
    finally:
        ev.close()
    assert right.ok, right.message
    assert wrong.status.value == "mismatch", wrong.message
    marks = _trace(trace)
    spares = {m["job"] for m in marks if m["what"] == "spare.ready"}
    candidate_starts = [m for m in marks if m["what"] == "job.start" and m.get("spare")]
    assert len(candidate_starts) >= 2 and {m["job"] for m in candidate_starts} <= spares
    closed = {m["job"] for m in marks if m["what"] == "job.closed"}
    assert spares <= closed  # taken or not, every spare ended with the judge
    assert not list(Path(ev.task.module_path).parent.glob("kernelband-variant-*"))


# the module's import, in a candidate's process: it writes into every other variant
# process's directory it can name (the spares waiting for their jobs among them, this one
# by its real path), and into its own (which it may)
_PLANTING = AXPY + '''
import glob as _glob

with open("planted-own", "w") as _f:
    _f.write("1")
for _d in [TARGET] + _glob.glob("/tmp/kernelband-variant-*") + _glob.glob("/tmp/*/kernelband-variant-*"):
    try:
        with open(_d + "/planted", "w") as _f:
            _f.write("1")
    except OSError:
        pass
'''


def test_a_candidate_cannot_plant_anything_in_a_waiting_spare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sent straight to the sandbox (no screen). Where the sandbox's mount layer holds, the
    spare's directory stays untouched, and the job it then takes finds nothing there."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = axpy_task(tmp_path)
    spare = VariantJob(Job(task, {}, [], interpreted=True), timeout_s=0.0)
    planting = _PLANTING.replace("[TARGET]", f"[{str(spare.dir)!r}]")
    attacker = VariantJob(Job(task, {"v": planting}, [Mark()], interpreted=True), timeout_s=120)
    try:
        spare.spawn()
        attacker.start()
        assert [f.kind for f in attacker.frames()] == ["mark", "done"], attacker.stderr_tail()
        if "mount held" not in attacker.sandbox:
            pytest.skip(f"the sandbox's mount layer does not hold here ({attacker.sandbox})")
        assert not (spare.dir / "planted").exists()
        assert (attacker.dir / "planted-own").exists()  # the import ran
        spare.adopt(Job(task, {"v": AXPY}, [Mark()], interpreted=True), timeout_s=120)
        spare.start()
        assert [f.kind for f in spare.frames()] == ["mark", "done"], spare.stderr_tail()
    finally:
        attacker.close()
        spare.close()
    assert not spare.dir.exists()


def _spare_maker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[VariantJob], Callable[[], VariantJob]]:
    """A ``make`` for ``Spares.keep`` under the interpreter, and the list of what it made."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = axpy_task(tmp_path)
    made: list[VariantJob] = []

    def make() -> VariantJob:
        job = VariantJob(Job(task, {}, [], interpreted=True), timeout_s=0.0)
        job.spawn()
        made.append(job)
        return job

    return made, make


def test_a_dead_spare_is_never_handed_out_and_close_ends_them_all(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    made, make = _spare_maker(tmp_path, monkeypatch)

    spares = Spares()
    spares.keep(2, make)
    deadline = time.monotonic() + 60
    while len(made) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # both in the ready list
    for job in made:  # both die before any job comes
        job.proc.kill()
        job.proc.wait()
    assert spares.take(lambda spare: True) is None
    assert all(not job.dir.exists() for job in made)  # closed, not kept
    spares.keep(1, make)
    while len(made) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    assert spares.take(lambda spare: False) is None  # no longer fits (another task): closed too
    assert not made[2].dir.exists()
    spares.close()
    time.sleep(0.5)  # a replacement still starting is closed when it is ready
    assert all(not job.dir.exists() for job in made)


def test_candidates_asking_at_once_each_take_a_ready_spare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first wave's candidates ask for spares at once, one judge thread each. A take
    that emptied the ready list while it looked sent the others to fresh processes (a CUDA
    context each, on the first verdicts' path) beside idle spares. ``fits`` is slowed here
    so that the threads overlap every time."""
    import threading
    import time

    made, make = _spare_maker(tmp_path, monkeypatch)

    def slow_fits(spare: VariantJob) -> bool:
        time.sleep(0.05)
        return True

    spares = Spares()
    spares.keep(4, make)
    deadline = time.monotonic() + 60
    while len(spares._ready) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    ready = list(spares._ready)
    assert len(ready) == 4
    start = threading.Barrier(4)
    got: list[VariantJob | None] = []

    def ask() -> None:
        start.wait()
        got.append(spares.take(slow_fits))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert None not in got, f"{got.count(None)} of 4 candidates spawned their own beside a ready spare"
        assert sorted(map(id, got)) == sorted(map(id, ready))  # each spare handed out once
    finally:
        spares.close()
        for job in made:
            job.close()


def test_a_cuda_context_is_made_inside_the_gpu_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a context is GPU work: outside the shared hold, spares making theirs ran
    inside the lane's timed rounds (a winner's search time 28% under its measured one on
    one H200). Both a spare's early context and a job's own are made under it."""
    import torch

    from kernelband.worker import gpu_lock, variant

    monkeypatch.setenv("KERNELBAND_TIMING_LOCK", str(tmp_path / "lock"))
    monkeypatch.setenv("KERNELBAND_EARLY_CUDA", "1")
    held: list[int] = []
    monkeypatch.setattr(torch.cuda, "init", lambda: held.append(getattr(gpu_lock._held, "depth", 0)))
    monkeypatch.setattr(torch, "empty", lambda *args, **kwargs: None)
    variant._early_cuda_context()
    variant.make_cuda_context("cuda_context")
    assert held == [1, 1]


def test_how_many_spares_a_judge_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """One a lane on a GPU, within an eighth of its free memory (several judges may share
    it); none under the interpreter; the override says how many."""
    from kernelband.worker.spares import CONTEXT_BYTES, wanted

    monkeypatch.delenv("KERNELBAND_SPARES", raising=False)
    assert wanted(True, 8, 140 << 30) == 8
    assert wanted(True, 8, 16 * CONTEXT_BYTES) == 2  # a small or crowded GPU
    assert wanted(True, 8, CONTEXT_BYTES) == 0
    assert wanted(False, 8, 140 << 30) == 0
    monkeypatch.setenv("KERNELBAND_SPARES", "3")
    assert wanted(False, 8) == 3


# the module's import, in the job a spare takes: it compiles (as Triton would) into a
# directory the judge copied from the original's cache after the spare was made
_COMPILES_INTO_COPIED = AXPY + '''
import os as _os

with open(_os.path.join(_os.environ["TRITON_CACHE_DIR"], "COPIED", "compiled-by-the-job"), "w") as _f:
    _f.write("1")
'''


def test_a_spare_compiles_into_what_the_judge_copied_after_it_was_made(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The original's cache gains a directory after a spare's sandbox gave the spare its
    cache; the judge copies it in when the spare takes its job. Where the spare runs as
    another uid than the judge, that directory must be the spare's to write (else every
    compile there is a PermissionError, a correct candidate refused)."""
    import os
    import stat
    import time

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shared = tmp_path / "readable"  # a task every uid can read: the sandbox may drop to nobody
    shared.mkdir()
    for d in (tmp_path, shared):
        d.chmod(d.stat().st_mode | stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    task = axpy_task(shared)
    trusted = shared / "trusted-cache"
    trusted.mkdir()
    spare = VariantJob(Job(task, {}, [], interpreted=True), timeout_s=0.0, trusted_cache=trusted)
    try:
        spare.spawn()
        deadline = time.monotonic() + 60
        while not spare.sandbox and time.monotonic() < deadline:  # in its sandbox, its cache handed over
            time.sleep(0.05)
        (trusted / "COPIED").mkdir(mode=0o755)  # the original compiled meanwhile, as the judge's uid
        (trusted / "COPIED" / "kernel.bin").write_bytes(b"1")
        spare.adopt(Job(task, {"v": _COMPILES_INTO_COPIED}, [Mark()], interpreted=True), timeout_s=120)
        spare.start()
        kinds = [f.kind for f in spare.frames()]
        assert kinds == ["mark", "done"], f"{spare.sandbox}: {spare.stderr_tail()}"
        assert (spare.cache / "COPIED" / "compiled-by-the-job").exists()
        if os.geteuid() == 0 and "uid 65534" not in spare.sandbox:
            pytest.skip(f"the spare kept the judge's uid here ({spare.sandbox}): nothing to hand over")
    finally:
        spare.close()
