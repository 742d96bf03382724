"""The judge: the worker's trusted side. It holds the original's reference outputs,
compares, validates timings, computes statistics and writes every verdict. No code of a
module version ever runs here: the original and each candidate run in variant processes
(``variant.py``, one per job, sandboxed and killed with their whole tree afterwards),
which send back data frames only (``wire.py``).

What a candidate must pass (DESIGN section 6), in the order the checks run:
1. every harness (the timing one and the correctness ones) under every seed, fresh
   inputs per seed, all in one process: what the harness returns *and* every tensor the
   kernel's launches wrote (in-place outputs) match the original's within tolerance; a
   harness's own failing assert is a mismatch;
2. no input the original leaves unchanged is changed, no new launch argument is written,
   no launch runs on another stream, no thread is started, nothing of the runtime the
   measurement relies on is replaced;
3. precision: the error against a float64 (or float32) rerun of the *original's* launches
   is at most 4x the original's own error;
4. Triton produces the outputs: with the candidate's launches neutralised, its outputs
   change everywhere the original's do;
5. timing is of frozen replays (no module code runs while timing), and a replay of the
   timed launches, with their outputs poisoned first, reproduces the references;
6. after timing, the harness still gives the references (no state drift).

The judge's state and its variant jobs live in ``judge_core.py``; its ops, one module
per concern: the original (``judge_original``), candidates (``judge_candidate``),
re-timing and profiles (``judge_timing``), memcheck (``judge_memcheck``), calls past
int32 offsets (``judge_wide``).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

import torch

from . import judge_candidate, judge_memcheck, judge_original, judge_timing, judge_wide
from ..profile.schema import DeviceFacts
from .judge_core import JudgeCore, gpu
from .requests import (
    Evaluate,
    Hello,
    MeasureDevice,
    Paired,
    Prepare,
    ProfileRun,
    Request,
    Retime,
    SandboxInfo,
    Sanitize,
    Sync,
    WideCalls,
)


def _hello(judge: JudgeCore, req: Hello) -> dict[str, Any]:
    import triton

    out = {
        "device_name": judge.device_name(),
        "triton_version": triton.__version__,
        "torch_version": torch.__version__,
        "interpreted": judge.interpreted,
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "pid": os.getpid(),
        "gpu_uuid": _gpu_uuid(),
        "driver": _driver_version(),
    }
    judge.prestart_zygote()
    return out


def _gpu_uuid() -> str:
    if not gpu():
        return ""
    try:
        return str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", "") or "")
    except Exception:  # noqa: BLE001 - older torch: no uuid
        return ""


def _driver_version() -> str:
    if not gpu():
        return ""
    try:
        import ctypes

        version = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version))
        return str(version.value)
    except (OSError, AttributeError):
        return ""


def _device_facts(judge: JudgeCore, req: MeasureDevice) -> Optional[DeviceFacts]:
    try:
        from .device_facts import measure_device_facts
    except ImportError:
        return None
    return measure_device_facts()


def _sync(judge: JudgeCore, req: Sync) -> None:
    if gpu():
        torch.cuda.synchronize()


def _sandbox(judge: JudgeCore, req: SandboxInfo) -> dict[str, Any]:
    """What the sandbox could do on this machine (network isolation), for reports."""
    return {"network": judge.network}


# each op's handler, by its request's type (every type of requests.REQUESTS has one: a test checks)
OPS: dict[type[Request], Callable[[JudgeCore, Any], Any]] = {
    Hello: _hello,
    Prepare: judge_original.prepare,
    Evaluate: judge_candidate.evaluate,
    Paired: judge_timing.paired,
    Retime: judge_timing.retime,
    ProfileRun: judge_timing.profile,
    MeasureDevice: _device_facts,
    Sync: _sync,
    Sanitize: judge_memcheck.sanitize,
    WideCalls: judge_wide.wide,
    SandboxInfo: _sandbox,
}


def release_cached_gpu_memory() -> None:
    """Hand the allocator's cached blocks back to the device after each op. A candidate's
    large outputs are decoded onto the GPU to be compared; once compared they are garbage,
    but torch keeps their blocks cached, so the judge would hold one output's worth of GPU
    memory for the whole session (measured: 16 GiB of the 32 GiB layernorm's output, the
    room the final paired re-measurement of two kept runs needed). References on the GPU
    stay: they are in use, not cached."""
    if gpu():
        torch.cuda.empty_cache()


class JudgeService(JudgeCore):
    """The worker's service: one request (an op of ``OPS``) at a time."""

    def serve(self, request: Request) -> Any:
        """Serve one request, decoded and checked by the loop (worker/main.py, with
        requests.decode: a malformed request is refused there, nothing runs)."""
        try:
            return OPS[type(request)](self, request)
        finally:
            release_cached_gpu_memory()
