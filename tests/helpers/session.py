"""A small session workspace (the AXPY example with a tiny first block) and the CLI
as a subprocess, for the session tests."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kernelband.events import Event, EventEmitter
from kernelband.evaluate import Evaluator
from kernelband.model import Task

from helpers.kernels import AXPY


# A small first block: each doubling halves the interpreter's per-program work, an effect
# far above CPU timing noise. SESSION_N is no multiple of any block size (every launch has
# a masked tail) and small: a session's cost is mostly the interpreter's programs. The
# block is 64, not smaller: the original's calls beyond the harness grow the input past
# 2**16 elements (and 2**14 for long rows), which at a block of 16 is thousands of
# interpreted programs; preparing a session took 10.7 s there, 3.6 s at 64.
SESSION_N = 1001
SESSION_BLOCK = 64
AXPY_SESSION = AXPY.replace("torch.randn(3001)", f"torch.randn({SESSION_N})").replace(
    "axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK_SIZE=128)",
    'grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)\n'
    f'    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE={SESSION_BLOCK})')
assert f"BLOCK_SIZE={SESSION_BLOCK})" in AXPY_SESSION


def workspace(tmp_path: Path, source: str = AXPY_SESSION) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'ws'\n")
    path = tmp_path / "axpy.py"
    path.write_text(source)
    return path


def task_of(path: Path) -> Task:
    return Task(module_path=str(path), source=path.read_text(), kernel="axpy_kernel", harness="harness_axpy",
                device="cpu", timeout_s=60)


def collect() -> tuple[EventEmitter, list[Event]]:
    events: list[Event] = []
    return EventEmitter(events.append), events


# what a model might answer: the kernel and its wrapper, launched with a bigger block
GOOD_LLM_KERNEL = AXPY[AXPY.index("@triton.jit"):AXPY.index("def harness_axpy")].replace(
    "axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK_SIZE=128)",
    "axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, alpha, n, BLOCK_SIZE=1024)")
assert "BLOCK_SIZE=1024" in GOOD_LLM_KERNEL


def cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kernelband", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=kw.get("cwd"), env={**os.environ, **kw.get("env", {})})


class LosesItsWorker(Evaluator):
    """After `after` evaluations the worker is killed (its whole process group, for real)
    and every restart fails for real: the worker is told to use a GPU this machine lacks."""

    def __init__(self, *a, after: int, **kw) -> None:
        super().__init__(*a, **kw)
        self.after = after
        self.calls = 0

    def evaluate(self, variant, *a, **kw):
        self.calls += 1
        if self.calls == self.after + 1:
            os.killpg(self.client._proc.pid, signal.SIGKILL)
            self.client._proc.wait()
            self.client.device = "cuda"  # no CUDA GPU here: the restarted worker refuses to start
            self.client.extra_env["TRITON_INTERPRET"] = "0"  # (TRITON_INTERPRET=1 would override the device)
        return super().evaluate(variant, *a, **kw)
