"""In the variant process, before a step's calls beyond the harness run one by one: their
kernels compiled a few threads at a time.

The calls run in series, each after the judge has read the last (``derived_run``), and
each new specialization is a Triton compile of 0.2-1.5 s on the GPU machine (a
layernorm candidate's nine calls: 3-7 s of its 9; benchmarks/results/eval_speed/
h200_5777734, the traces' frame seconds). Triton's compile releases the GIL for most of
its work, so compiles in threads overlap (two: 1.74 s against 3.80 s in series). Here
each call is made once in a thread with every launch a warmup (nothing runs on the GPU,
``derived_run.launches_as_warmups``); the calls then run as before and find their kernels
in the process's own caches.

Nothing of this reaches the judge: what the warm calls return is dropped, a warm call
that raises is skipped (the real call meets the error itself), and the threads are gone
before the step's first runtime check (a thread still alive then would be refused as the
module's own). Not done where the module has an autotuner: its instance state (the
chosen configs, the bench it is lent) is per instance, not per thread, and concurrent
calls would leave it changed for the real ones.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .call_spec import DerivedCall
from .derived import call_bytes

# a warm call's tensors at most: larger calls are compiled when they run (the threads hold
# their calls' inputs at once, on top of the job's own)
WARM_CALL_BYTES = 128 << 20
WARM_ENV = "KERNELBAND_WARM"  # "auto" (default: on a GPU), "on" or "off": this and the siblings (warm.py)
THREADS_ENV = "KERNELBAND_WARM_THREADS"  # a number overrides the threads (0: none)
# one core in eight of the machine at most: eight lanes share 16 cores, and on one H200
# four threads a candidate (with its spares) slowed the judge's own work
AHEAD_THREADS = 2


def ahead_threads(on_gpu: bool) -> int:
    """The threads a job's calls beyond the harness are compiled in before they run
    (``Derived.warm_threads``, the judge's choice): on a GPU, with cores to spare; under the
    interpreter (nothing to compile) only where warming is "on" (the tests)."""
    wanted = os.environ.get(THREADS_ENV, "")
    if wanted.isdigit():
        return int(wanted)
    mode = os.environ.get(WARM_ENV, "auto")
    if mode in ("on", "off"):
        return AHEAD_THREADS if mode == "on" else 0
    return min(AHEAD_THREADS, (os.cpu_count() or 1) // 8) if on_gpu else 0


def warm_ahead(version: Any, calls: list[DerivedCall], threads: int) -> float:
    """Each of ``calls`` made once with every launch a warmup, ``threads`` at a time;
    the seconds it took (0 where nothing was warmed: fewer than two calls, no threads,
    an autotuned module)."""
    from .derived_run import PAD_ELEMENTS, autotuners, launches_as_warmups, padded_allocations

    todo = [c for c in calls if call_bytes(c) <= WARM_CALL_BYTES]
    if threads <= 1 or len(todo) < 2 or autotuners(version.module):
        return 0.0
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    # torch's factories make canary-padded buffers (contiguous views, whatever the template's
    # strides) in every thread while this thread waits, as they do around the real calls
    with (
        launches_as_warmups(),
        padded_allocations("a", PAD_ELEMENTS) as made,
        ThreadPoolExecutor(max_workers=min(threads, len(todo)), thread_name_prefix="kernelband-warm") as pool,
    ):
        for _ in pool.map(lambda call: _warm_one(version, call, made), todo):
            pass
    return time.perf_counter() - t0


def _warm_one(version: Any, call: DerivedCall, made: list[Any]) -> None:
    from .derived_run import warm_one

    try:
        warm_one(version, call)
    finally:
        made.clear()  # what the wrappers allocated is not kept (a thread still using one holds it)
