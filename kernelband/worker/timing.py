"""Kernel-only timing of captured launches.

GPU: CUDA events around each frozen replay of exactly the launches the harness made (so
input creation in the harness never counts), with the L2 cache flushed and, where the
kept run kept a copy of what its launches found, that state restored before every timed
replay: each timed replay does the work the checked run did, in-place and accumulating
kernels included, and a kernel cannot skip work because an earlier replay left its
results in place. The flush and the restore run before the start event, outside the
timed region; the loop is ``triton.testing.do_bench``'s (estimate, warm-up, repeats,
median). CPU interpreter: wall time of the same replays, labelled ``cpu-interpreter``
because it says nothing about GPU speed.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Callable, Optional

import torch

from ..model import Timing
from .capture import CapturedLaunch, replay_all
from .gpu_lock import gpu_lock
from .messages import PAIRED_SAMPLE_MS, SEARCH_SAMPLE_MIN_REPS, SEARCH_SAMPLE_MS

GPU_CLOCK = "cuda-events"
CPU_CLOCK = "cpu-interpreter"
_FLUSH_BYTES = 256 << 20  # larger than any L2 cache: zeroing it evicts the kernel's data

Restore = Optional[Callable[[], object]]


def exclusive_gpu_timing(held_by_judge: bool = False) -> "contextlib.AbstractContextManager[None]":
    """The timed region's exclusive turn on the GPU; the judge takes it itself when it
    interleaves samples of two processes (then the variant process must not wait for it)."""
    return contextlib.nullcontext() if held_by_judge else gpu_lock(exclusive=True)


def on_gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


def quantiles_of(samples: list[float]) -> tuple[float, float, float]:
    s = sorted(samples)

    def q(p: float) -> float:
        if len(s) == 1:
            return s[0]
        x = p * (len(s) - 1)
        lo, hi = int(math.floor(x)), int(math.ceil(x))
        return s[lo] + (s[hi] - s[lo]) * (x - lo)

    return q(0.2), q(0.5), q(0.8)


def bench_gpu(
    fn: Callable[[], None], restore: Restore, warmup_ms: float, rep_ms: float, min_reps: int = 1
) -> list[float]:
    """Milliseconds of each timed call of ``fn`` (CUDA events), do_bench's loop with the
    starting state restored before each call: ``rep_ms`` of calls, ``min_reps`` at least
    (one only where a single call fills ``rep_ms``)."""
    _reset_l2_persisting()
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def prepare() -> None:
        if restore is not None:
            restore()
        flush.zero_()

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    prepare()
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    first = start.elapsed_time(end)
    if first >= rep_ms:  # one call fills the repeat budget: it is the sample (a very slow
        return [first]  # candidate costs one call, not an estimate loop of five and more)
    start.record()
    for _ in range(5):
        prepare()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)  # an upper bound: the restore and flush are in it
    n_warmup, n_repeat = max(1, int(warmup_ms / estimate)), max(min_reps, int(rep_ms / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        prepare()
        fn()
    for i in range(n_repeat):
        prepare()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _cpu_samples(fn: Callable[[], None], restore: Restore, min_reps: int, budget_s: float) -> list[float]:
    fn()  # warm-up: the interpreter rewrites the kernel on first use
    samples: list[float] = []
    t_end = time.perf_counter() + budget_s
    while len(samples) < min_reps or (time.perf_counter() < t_end and len(samples) < 50):
        if restore is not None:
            restore()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def _replayer(launches: list[CapturedLaunch]) -> Callable[[], None]:
    if not launches:
        raise ValueError("no kernel launches to time")
    return lambda: replay_all(launches)


def time_launches(
    launches: list[CapturedLaunch], warmup_ms: int = 25, rep_ms: int = 100, restore: Restore = None
) -> Timing:
    fn = _replayer(launches)
    if on_gpu():
        with exclusive_gpu_timing():
            p20, p50, p80 = quantiles_of(bench_gpu(fn, restore, warmup_ms, rep_ms))
        return Timing(float(p50), float(p20), float(p80), GPU_CLOCK, len(launches))
    p20, p50, p80 = quantiles_of(_cpu_samples(fn, restore, min_reps=3, budget_s=0.5))
    return Timing(p50, p20, p80, CPU_CLOCK, len(launches))


def _reset_l2_persisting() -> None:
    """Drop any persisting-L2 window a kernel may have set (best effort: the driver call
    exists from CUDA 11; without it there is nothing to reset)."""
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache()
    except (OSError, AttributeError):
        pass


def _one(fn: Callable[[], None], restore: Restore, rep_ms: float, min_reps: int = 1) -> float:
    """One sample: the median of a short benchmark on a GPU, one warm run under the
    interpreter (the kept run compiled and ran it; CPU times are never a speed claim)."""
    if on_gpu():
        s = sorted(bench_gpu(fn, restore, 5, rep_ms, min_reps))
        return float(s[len(s) // 2]) if len(s) % 2 else float((s[len(s) // 2 - 1] + s[len(s) // 2]) / 2)
    if restore is not None:
        restore()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _sample_rounds(sets: list[tuple[list[CapturedLaunch], Restore]], rounds: int) -> tuple[list[list[float]], str]:
    """``rounds`` rounds (at least 2); each round one sample of every set in turn (A B A B
    ... for two), under the timing lock on a GPU."""
    fns = [(_replayer(launches), restore) for launches, restore in sets]
    samples: list[list[float]] = [[] for _ in sets]
    gpu = on_gpu()
    if not gpu:
        for fn, _ in fns:  # warm every set before the first timed round
            fn()
    with exclusive_gpu_timing() if gpu else contextlib.nullcontext():
        for _ in range(max(rounds, 2)):
            for (fn, restore), acc in zip(fns, samples):
                acc.append(_one(fn, restore, PAIRED_SAMPLE_MS))
    return samples, GPU_CLOCK if gpu else CPU_CLOCK


def one_sample(
    launches: list[CapturedLaunch],
    rep_ms: int = SEARCH_SAMPLE_MS,
    min_reps: int = SEARCH_SAMPLE_MIN_REPS,
    held_by_judge: bool = False,
    restore: Restore = None,
) -> tuple[float, str]:
    """One sample of the launches' replay: a round of an interleaved measurement that the
    judge drives across two processes (it holds the timing turn meanwhile)."""
    fn = _replayer(launches)
    if not on_gpu():
        return _one(fn, restore, rep_ms), CPU_CLOCK
    with exclusive_gpu_timing(held_by_judge):
        return _one(fn, restore, rep_ms, min_reps), GPU_CLOCK


def block_samples(launches: list[CapturedLaunch], rounds: int = 10, restore: Restore = None) -> tuple[list[float], str]:
    """One side's samples, as interleaved rounds take them, for a re-measurement in sequence
    (the original's block, then the variant's: two runs of the harness do not fit)."""
    (ms,), clock = _sample_rounds([(launches, restore)], rounds)
    return ms, clock
