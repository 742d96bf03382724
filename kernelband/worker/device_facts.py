"""Measuring the device facts in the judge, which owns the GPU (a second or two);
what they mean and how they are cached: ``kernelband.profile.device``.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Optional

from ..profile.device import FACTS_VERSION, interpreter_facts
from ..profile.occupancy import arch_limits
from ..profile.schema import DeviceFacts


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


def _time_ms(fn: Callable[[], Any], reps: int, warmup: int = 3) -> float:
    """Median time of fn in ms with CUDA events (each call timed alone)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_copy_gbs(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s (1e9 bytes), bytes read + written."""
    import torch

    free, _ = torch.cuda.mem_get_info()
    nbytes = int(min(nbytes, free // 4))
    n = nbytes // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = _time_ms(lambda: dst.copy_(src), reps=20)
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def measure_matmul_tflops(dtype_name: str, n: int) -> float:
    """Dense n x n x n matrix product rate in TFLOP/s (torch.matmul on random data)."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[dtype_name]
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    try:
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        ms = _time_ms(lambda: torch.matmul(a, b, out=c), reps=10)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return 2.0 * n**3 / (ms * 1e-3) / 1e12


def static_facts(device: Optional[int] = None) -> DeviceFacts:
    """Limits that need no measurement: SM count, shared memory, registers, warps."""
    import torch
    import triton

    idx = torch.cuda.current_device() if device is None else device
    p = torch.cuda.get_device_properties(idx)
    lim = arch_limits(p.major, p.minor)
    warp_size = int(getattr(p, "warp_size", 32) or 32)
    max_threads = getattr(p, "max_threads_per_multi_processor", None)
    shared_optin = int(getattr(p, "shared_memory_per_block_optin", 0) or 0) or None
    max_regs_per_block = None
    try:  # Triton's own view (max dynamic shared memory per block, registers per block)
        from triton.runtime import driver

        props = driver.active.utils.get_device_properties(idx)
        shared_optin = shared_optin or props.get("max_shared_mem")
        max_regs_per_block = props.get("max_num_regs")
    except Exception:  # noqa: BLE001 - optional detail
        pass
    return DeviceFacts(
        name=p.name,
        compute_capability=f"{p.major}.{p.minor}",
        sm_count=p.multi_processor_count,
        warp_size=warp_size,
        max_warps_per_sm=int(max_threads // warp_size) if max_threads else lim["max_warps_per_sm"],
        max_blocks_per_sm=lim["max_blocks_per_sm"],
        regs_per_sm=int(getattr(p, "regs_per_multiprocessor", 0) or lim["regs_per_sm"]),
        max_regs_per_thread=255,
        shared_per_sm=int(getattr(p, "shared_memory_per_multiprocessor", 0) or lim["shared_per_sm"]),
        shared_per_block_optin=shared_optin,
        reserved_shared_per_block=lim["reserved_shared_per_block"],
        l2_bytes=int(getattr(p, "L2_cache_size", 0) or 0) or None,
        memory_bytes=int(p.total_memory),
        torch=torch.__version__,
        triton=triton.__version__,
        facts_version=FACTS_VERSION,
        max_regs_per_block=max_regs_per_block,
    )


def measure_device_facts(device: Optional[int] = None) -> DeviceFacts:
    """All facts of the current device, measured now (a second or two on a GPU).
    Under the interpreter, the labelled placeholder."""
    if not _on_gpu():
        return interpreter_facts()
    import torch

    t0 = time.perf_counter()
    if device is not None:
        torch.cuda.set_device(device)
    facts = static_facts(device)
    copy_gbs = round(measure_copy_gbs(), 1)
    tflops: dict[str, Optional[float]] = {}
    for name, n in (("bf16", 8192), ("tf32", 8192), ("fp32", 4096)):
        try:
            tflops[name] = round(measure_matmul_tflops(name, n), 1)
        except Exception:  # noqa: BLE001 - e.g. bf16 on an old GPU
            tflops[name] = None
    measured = replace(
        facts,
        copy_gbs=copy_gbs,
        matmul_tflops=tflops,
        measured_at=time.time(),
        measure_s=round(time.perf_counter() - t0, 3),
    )
    torch.cuda.empty_cache()
    return measured
