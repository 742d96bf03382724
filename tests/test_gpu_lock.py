"""The cross-process GPU lock that keeps parallel sessions out of each other's timings."""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional
import pytest

HOLD = """
import os, sys, time
from kernelband.worker.timing import gpu_lock
print("waiting", time.time(), flush=True)
with gpu_lock(exclusive=sys.argv[1] == "ex"):
    print("in", time.time(), flush=True)
    while not os.path.exists(sys.argv[2]):  # held until the test says so, however slow the machine
        time.sleep(0.01)
    print("out", time.time(), flush=True)
"""


# a shared holder that compiles (a probe in place of Triton's compiler, behind the worker's
# wrapper): it prints "compiling" inside the compile, which lasts until argv[2] exists,
# then "back" once it holds the lock again, and leaves when argv[3] exists
COMPILER = """
import os, sys, time
import triton.compiler
from kernelband.worker.gpu_lock import compile_outside_lock, gpu_lock

def probe(*args, **kwargs):
    print("compiling", time.time(), flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    return "compiled"

triton.compiler.compile = probe
compile_outside_lock()
print("waiting", time.time(), flush=True)
with gpu_lock(exclusive=sys.argv[1] == "ex"):
    print("in", time.time(), flush=True)
    assert triton.compiler.compile() == "compiled"
    print("back", time.time(), flush=True)
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.01)
    print("out", time.time(), flush=True)
"""


class Holder:
    """A process that takes the lock; its lines ("waiting", "in", "out" with a time) are
    read by a thread, so a wait for the next one can time out."""

    def __init__(self, mode: str, release: Path, lock: str, script: str = HOLD, *more: Path) -> None:
        self.p = subprocess.Popen([sys.executable, "-c", script, mode, str(release), *map(str, more)],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "KERNELBAND_TIMING_LOCK": lock})
        self.lines: queue.Queue[tuple[str, float]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            word, t = line.split()
            self.lines.put((word, float(t)))

    def next(self, word: str, timeout: float) -> Optional[float]:
        """The time of the next line, which must be ``word``; None if none came within ``timeout``."""
        try:
            got, t = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        assert got == word, (got, word)
        return t

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


def test_exclusive_waits_for_shared_holders_and_shared_ones_overlap(tmp_path):
    lock, shared_go, exclusive_go = str(tmp_path / "gpu.lock"), tmp_path / "shared-go", tmp_path / "ex-go"
    exclusive_go.touch()  # the exclusive holder leaves as soon as it is in
    a, b = Holder("sh", shared_go, lock), Holder("sh", shared_go, lock)
    c: Optional[Holder] = None
    try:
        assert a.next("waiting", 60) and b.next("waiting", 60)
        # both shared holders get in while neither has left: two harness runs may overlap
        assert a.next("in", 60) and b.next("in", 60), "a second shared holder waited for the first"
        c = Holder("ex", exclusive_go, lock)
        assert c.next("waiting", 60)
        assert c.next("in", 1.0) is None  # a timed region never starts while a harness runs
        shared_go.touch()
        a_out, b_out = a.next("out", 60), b.next("out", 60)
        c_in = c.next("in", 60)
        assert a_out and b_out and c_in and c_in >= max(a_out, b_out)
        assert c.next("out", 60)
    finally:
        shared_go.touch()
        for h in (a, b, c):
            if h is not None:
                h.close()


def test_no_lock_file_means_no_locking(monkeypatch):
    from kernelband.worker.timing import gpu_lock

    monkeypatch.delenv("KERNELBAND_TIMING_LOCK", raising=False)
    with gpu_lock(exclusive=True), gpu_lock(exclusive=True):  # would deadlock if it locked
        pass


@pytest.mark.slow
def test_a_compile_steps_out_of_a_shared_hold_and_waits_to_take_it_back(tmp_path):
    """Compiling is CPU work: a timer gets the GPU meanwhile; the compiling process takes
    its hold back only once the timed region has ended."""
    lock, compiled, leave, timer_go = (str(tmp_path / "gpu.lock"), tmp_path / "compiled", tmp_path / "leave",
                                       tmp_path / "timer-go")
    a = Holder("sh", compiled, lock, COMPILER, leave)
    timer: Optional[Holder] = None
    try:
        assert a.next("waiting", 120) and a.next("in", 60) and a.next("compiling", 60)
        timer = Holder("ex", timer_go, lock)
        assert timer.next("waiting", 60) and timer.next("in", 60), "a timer waited for a compile"
        compiled.touch()
        assert a.next("back", 1.0) is None  # the hold is not taken back inside the timed region
        timer_go.touch()
        timer_out, a_back = timer.next("out", 60), a.next("back", 60)
        assert timer_out and a_back and a_back >= timer_out
        # held again: a new timer waits for it
        timer.close()
        timer = Holder("ex", tmp_path / "second-go", lock)
        (tmp_path / "second-go").touch()
        assert timer.next("waiting", 60) and timer.next("in", 1.0) is None
        leave.touch()
        assert a.next("out", 60) and timer.next("in", 60)
    finally:
        for path in (compiled, leave, timer_go, tmp_path / "second-go"):
            path.touch()
        for h in (a, timer):
            if h is not None:
                h.close()


def test_a_timed_region_is_never_left_for_a_compile(tmp_path):
    lock, compiled, leave = str(tmp_path / "gpu.lock"), tmp_path / "compiled", tmp_path / "leave"
    a = Holder("ex", compiled, lock, COMPILER, leave)
    other: Optional[Holder] = None
    try:
        assert a.next("waiting", 120) and a.next("in", 60) and a.next("compiling", 60)
        other = Holder("sh", tmp_path / "other-go", lock)
        (tmp_path / "other-go").touch()
        assert other.next("waiting", 60) and other.next("in", 1.0) is None
        compiled.touch()
        leave.touch()
        assert a.next("back", 60) and a.next("out", 60) and other.next("in", 60)
    finally:
        for path in (compiled, leave, tmp_path / "other-go"):
            path.touch()
        for h in (a, other):
            if h is not None:
                h.close()


# a shared holder whose run takes an exclusive turn (an autotuner timing its configs):
# "in" once it holds the lock shared, "turn" inside the turn (until argv[2] exists), "back"
# once it holds the lock shared again, "out" when argv[3] exists
TURN = """
import os, sys, time
from kernelband.worker.gpu_lock import exclusive_turn, gpu_lock

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)

print("waiting", time.time(), flush=True)
with gpu_lock(exclusive=False):
    print("in", time.time(), flush=True)
    with exclusive_turn(lambda: None):
        print("turn", time.time(), flush=True)
        wait_for(sys.argv[2])
    print("back", time.time(), flush=True)
    wait_for(sys.argv[3])
    print("out", time.time(), flush=True)
"""


@pytest.mark.slow
def test_an_exclusive_turn_inside_a_run_waits_for_other_runs_keeps_them_out_and_holds_shared_again(tmp_path):
    lock = str(tmp_path / "gpu.lock")
    other_go, turn_go, leave, late_go = (tmp_path / n for n in ("other-go", "turn-go", "leave", "late-go"))
    other = Holder("sh", other_go, lock)
    a: Optional[Holder] = None
    late: Optional[Holder] = None
    try:
        assert other.next("waiting", 120) and other.next("in", 60)
        a = Holder("sh", turn_go, lock, TURN, leave)
        assert a.next("waiting", 120) and a.next("in", 60)  # runs share the GPU
        assert a.next("turn", 1.0) is None  # the turn waits for the other run
        other_go.touch()
        other_out, a_turn = other.next("out", 60), a.next("turn", 60)
        assert other_out and a_turn and a_turn >= other_out
        late = Holder("sh", late_go, lock)
        late_go.touch()
        assert late.next("waiting", 60) and late.next("in", 1.0) is None  # no run inside the turn
        turn_go.touch()
        a_back, late_in = a.next("back", 60), late.next("in", 60)
        assert a_back and late_in  # after the turn both hold it shared again, side by side
        assert late.next("out", 60)
        leave.touch()
        assert a.next("out", 60)
    finally:
        for path in (other_go, turn_go, leave, late_go):
            path.touch()
        for h in (other, a, late):
            if h is not None:
                h.close()


def test_an_exclusive_turn_without_a_shared_hold_of_its_own_changes_nothing(tmp_path, monkeypatch):
    """A judge's timed region: the judge holds the lock exclusively and the variant process
    holds nothing; an autotuner there must not wait for the judge (it would wait forever)."""
    from kernelband.worker.gpu_lock import exclusive_turn

    lock, go = str(tmp_path / "gpu.lock"), tmp_path / "go"
    judge = Holder("ex", go, lock)
    try:
        assert judge.next("waiting", 120) and judge.next("in", 60)
        monkeypatch.setenv("KERNELBAND_TIMING_LOCK", lock)
        done = threading.Event()

        def turn() -> None:
            with exclusive_turn(lambda: None):
                done.set()

        t = threading.Thread(target=turn, daemon=True)
        t.start()
        assert done.wait(10), "an exclusive turn without a shared hold waited for the lock"
    finally:
        go.touch()
        judge.close()


def test_the_waits_for_the_lock_are_on_the_processs_timeline(tmp_path, monkeypatch):
    """Where GPU work queues (behind timed regions, or a timer behind runs) shows in a
    variant process's timeline, as ``vp.gpu_lock_wait_*`` phases."""
    from kernelband.worker import timeline
    from kernelband.worker.gpu_lock import LOCK_ENV, gpu_lock

    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "gpu.lock"))
    monkeypatch.setattr(timeline, "SECONDS", {})
    monkeypatch.setattr(timeline, "COUNTS", {})
    with gpu_lock(exclusive=False):
        with gpu_lock(exclusive=False):  # nested: taken once
            pass
    with gpu_lock(exclusive=True):
        pass
    waits = {k: v for k, v in timeline.COUNTS.items() if "wait" in k}
    assert waits == {"gpu_lock_wait_shared": 1, "gpu_lock_wait_exclusive": 1}
    assert all(seconds >= 0 for seconds in timeline.SECONDS.values())


def test_the_holds_of_the_lock_and_the_longest_are_on_the_processs_timeline(tmp_path, monkeypatch):
    """How long a process held the lock, in all and at most, per kind: a timer waits for the
    longest shared hold running when it asks. A compile's step out ends one hold and the
    hold taken back is another; a nested hold is not counted again."""
    import time

    from kernelband.worker import timeline
    from kernelband.worker.gpu_lock import LOCK_ENV, gpu_lock, stepped_out

    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "gpu.lock"))
    monkeypatch.setattr(timeline, "SECONDS", {})
    monkeypatch.setattr(timeline, "COUNTS", {})
    with gpu_lock(exclusive=False):
        time.sleep(0.05)
        with gpu_lock(exclusive=False):
            pass
        with stepped_out(lambda: None):
            time.sleep(0.2)  # not held: no part of a hold
        time.sleep(0.01)
    with gpu_lock(exclusive=True):
        time.sleep(0.02)
    assert timeline.COUNTS["gpu_lock_hold_shared"] == 2 and timeline.COUNTS["gpu_lock_hold_exclusive"] == 1
    assert 0.06 <= timeline.SECONDS["gpu_lock_hold_shared"] < 0.2
    assert 0.05 <= timeline.SECONDS["gpu_lock_hold_shared_longest"] < 0.2
    assert timeline.SECONDS["gpu_lock_hold_shared_longest"] < timeline.SECONDS["gpu_lock_hold_shared"]
    assert 0.02 <= timeline.SECONDS["gpu_lock_hold_exclusive_longest"] == timeline.SECONDS["gpu_lock_hold_exclusive"]


def test_a_candidates_timing_keeps_its_wait_for_the_turn_apart(tmp_path):
    """The timing phase is the turn itself; the wait for the lane and the exclusive turn is
    ``timing.wait`` (the turns of all lanes are what runs in series)."""
    from helpers.kernels import AXPY, edited, prepared_evaluator

    ev = prepared_evaluator(tmp_path, "axpy", AXPY, "axpy_kernel", "harness_axpy")
    try:
        timed = ev.evaluate(edited("tl.store(out_ptr + offsets, alpha * x + y, mask=mask)",
                                   "tl.store(out_ptr + offsets, y + alpha * x, mask=mask)"))
    finally:
        ev.close()
    assert timed.ok, timed.message
    assert timed.phases["timing.wait"] >= 0.0 and timed.phases["timing"] > 0.0, timed.phases
