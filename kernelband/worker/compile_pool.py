"""In a warm sibling (``derived_run.warm_calls``): every Triton warmup launch handed to a few
threads, so the sibling's compiles overlap instead of following its calls one by one.

A sibling made its calls in series, and each launch compiled before the next call began.
An autotuned candidate compiles every config at each new specialization: a matmul
rewrite's eight calls beyond the harness took 5-7 s each, 37 s of one candidate's 44 s
(benchmarks/results/eval_speed/h200_5711f5a, the traces' frame seconds), and the sibling,
as slow as the job, saved it nothing. Here a launch returns at once (the sibling reads no
launch's result) and its compile runs in the pool; Triton's compile releases the GIL for
most of its work. Launches that would compile the same specialization are submitted once
(``_specialization``: an approximation of Triton's key; a miss costs only a second
compile, a false match only a compile the job then makes itself).

Nothing here reaches the judge: the sibling's results are never read, a compile that
raises is dropped, and the pool is drained before the sibling's step ends.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Hashable

# threads a sibling compiles in: eight lanes share 16 cores on the GPU machine, and a
# sibling is niced below the processes being judged
POOL_THREADS = 4
THREADS_ENV = "KERNELBAND_SIBLING_COMPILE_THREADS"  # a number overrides POOL_THREADS (0 or 1: in series)
# calls whose compiles may still be pending when the next begins: a pending compile holds
# its call's inputs, so the sibling holds this many calls' tensors besides its current one
CALLS_AHEAD = 2


def pool_threads() -> int:
    """The threads a sibling compiles in (``Warm.compile_threads``): with cores to spare."""
    wanted = os.environ.get(THREADS_ENV, "")
    if wanted.isdigit():
        return int(wanted)
    return max(1, min(POOL_THREADS, (os.cpu_count() or 1) // 4))


class CompilePool:
    """Warmup launches compiled ``threads`` at a time, each distinct one once; at most
    ``CALLS_AHEAD`` earlier calls' compiles pending when a call begins (``next_call``)."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernelband-compile")
        self._seen: set[Hashable] = set()
        self._lock = threading.Lock()
        self._calls: list[list[Future[Any]]] = [[]]  # each call's compiles, the current one's last
        self.submitted = 0

    def next_call(self) -> None:
        """A new call begins: wait for the compiles of calls more than ``CALLS_AHEAD`` back."""
        while len(self._calls) > CALLS_AHEAD:
            for done in self._calls.pop(0):
                done.result()
        self._calls.append([])

    def submit(self, run: Callable[..., Any], kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        key = _specialization(kernel, args, kwargs)
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            self._calls[-1].append(self._pool.submit(_quietly, run, kernel, args, kwargs))
            self.submitted += 1

    def drain(self) -> None:
        """Wait for every submitted compile."""
        self._pool.shutdown(wait=True)


def _quietly(run: Callable[..., Any], kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        run(kernel, *args, **kwargs)
    except Exception:  # noqa: BLE001 - a head start only: the job meets any error itself
        pass


def _specialization(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
    """What Triton specializes a launch on, roughly: the kernel, its constexprs and the
    launch's options by value (keyword arguments), each tensor's dtype and 16-byte
    alignment, each other integer's ``== 1`` / ``% 16`` / width."""
    constexpr = _constexpr_positions(kernel)
    return (
        id(kernel),
        tuple(repr(a)[:200] if i in constexpr else _arg_key(a) for i, a in enumerate(args)),
        tuple(sorted((k, repr(v)[:200]) for k, v in kwargs.items() if k not in ("grid", "warmup"))),
    )


def _constexpr_positions(kernel: Any) -> set[int]:
    params = getattr(kernel, "params", None) or []
    return {i for i, p in enumerate(params) if getattr(p, "is_constexpr", False)}


def _arg_key(value: Any) -> Hashable:
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return ("tensor", str(value.dtype), value.data_ptr() % 16 == 0)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return ("int", value == 1, value % 16 == 0, -(1 << 31) <= value < (1 << 31))
    if isinstance(value, float):
        return "float"
    return repr(value)[:200]
