"""The cross-process GPU lock that keeps parallel sessions out of each other's timings."""
from __future__ import annotations

import subprocess
import sys
import time

HOLD = """
import sys, time
from kernelband.worker.timing import gpu_lock
with gpu_lock(exclusive=sys.argv[1] == "ex"):
    print("in", time.time(), flush=True)
    time.sleep(float(sys.argv[2]))
    print("out", time.time(), flush=True)
"""


def _spawn(mode: str, hold: float, lock: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLD, mode, str(hold)], stdout=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "KERNELBAND_TIMING_LOCK": lock})


def _times(p: subprocess.Popen) -> tuple[float, float]:
    out, _ = p.communicate(timeout=60)
    t = dict(line.split() for line in out.splitlines())
    return float(t["in"]), float(t["out"])


def test_exclusive_waits_for_shared_holders_and_shared_ones_overlap(tmp_path):
    lock = str(tmp_path / "gpu.lock")
    a = _spawn("sh", 1.0, lock)
    b = _spawn("sh", 1.0, lock)
    time.sleep(0.5)  # both shared holders are in
    c = _spawn("ex", 0.1, lock)
    (a_in, a_out), (b_in, b_out), (c_in, _) = _times(a), _times(b), _times(c)
    assert a_in < b_out and b_in < a_out  # two harness runs may overlap
    assert c_in >= max(a_out, b_out) - 0.05  # a timed region never overlaps them


def test_no_lock_file_means_no_locking(monkeypatch):
    from kernelband.worker.timing import gpu_lock

    monkeypatch.delenv("KERNELBAND_TIMING_LOCK", raising=False)
    with gpu_lock(exclusive=True), gpu_lock(exclusive=True):  # would deadlock if it locked
        pass
