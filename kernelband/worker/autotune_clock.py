"""Triton's autotuner picks a config by timing each one at the first call with a new key.
In a KernelBand process that call is inside a checked harness run: under the launch
recorder and the harness-locals trace (host work on every launch), holding the GPU shared
while other processes' runs use it. A pick timed there is whichever config the noise
favoured, made again in every process: the search and the paired re-measurement of one
candidate could run different configs, and the verdict judged a config the search never
saw. Here every autotuner of the process times its configs as the judge times kernels:
each config compiled and run once, then ``timing.bench_gpu`` (L2 flushed, CUDA events)
in an exclusive GPU turn with the trace and the recorder paused. Derived calls run one
config each, a different one from call to call (``one_config_per_call``), and the
interpreter keeps its CPU bench."""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from typing import Any, Callable, Iterator, Optional

_ABSENT = object()
# this thread's: ``bench``, the one a block of its calls chose (``one_config_per_call``);
# ``turn``, which config of a tuning round runs first (``config_turn``); ``ran``, whether
# the round has run one
_chosen = threading.local()
WARMUP_MS, REP_MS = 5.0, 25.0  # a paired round's sample budget (``messages.PAIRED_SAMPLE_MS``), per config


def install() -> None:
    """Every autotuner in this process (made before or after) times its configs with the
    judge's clock, on a GPU. Idempotent."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - triton without an autotuner
        return
    _install_turns(Autotuner)
    original = Autotuner.__dict__.get("_bench")
    if original is None or getattr(original, "__kernelband_clock__", False):
        return

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        bench = getattr(_chosen, "bench", None) or (judges_bench if _on_gpu() else None)
        if bench is None:
            return original(self, *args, config=config, **meta)
        name = bench_attribute(self)
        current = self.__dict__.get(name, _ABSENT)
        self.__dict__[name] = bench
        try:
            return original(self, *args, config=config, **meta)
        finally:
            if current is _ABSENT:
                self.__dict__.pop(name, None)
            else:
                self.__dict__[name] = current

    _bench.__kernelband_clock__ = True  # type: ignore[attr-defined]
    Autotuner._bench = _bench


def _install_turns(autotuner: Any) -> None:
    """Inside ``one_config_per_call``, each tuning round's configs (what the autotuner's own
    pruning leaves) start at this thread's ``turn``, modulo their count. Idempotent."""
    original = autotuner.__dict__.get("prune_configs")
    if original is None or getattr(original, "__kernelband_turns__", False):
        return

    def prune_configs(self: Any, *args: Any, **kwargs: Any) -> Any:
        pruned = original(self, *args, **kwargs)
        turn = getattr(_chosen, "turn", None)
        if turn is None or not pruned:
            return pruned
        _chosen.ran = False  # a tuning round begins: its configs are benched next, in this order
        k = turn % len(pruned)
        return list(pruned[k:]) + list(pruned[:k])

    prune_configs.__kernelband_turns__ = True  # type: ignore[attr-defined]
    autotuner.prune_configs = prune_configs


@contextlib.contextmanager
def one_config_per_call(synchronize: Callable[[], None]) -> Iterator[None]:
    """Derived calls have sizes (autotune keys) the harness never had: Triton's autotuner
    would compile and benchmark every config again at each (one compile a config: seconds a
    call on a GPU). Every config of a kernel must compute the same result, so inside the
    block an autotuner's tuning round runs one config: the first of its configs, from the
    call's ``config_turn`` on, that runs (one that cannot, out of resources, hands over to
    the next). Calls with different turns check different configs, where one pick by
    timing would check whichever the noise favoured. On a GPU or under the interpreter."""

    def bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
        if getattr(_chosen, "ran", False):  # this round has its config: the others are not run
            ms = math.inf
        else:
            ms = _ran_once(kernel_call, synchronize)
            _chosen.ran = True
        return [ms, ms, ms] if quantiles else ms

    with _benched_by(bench, turn=getattr(_chosen, "turn", None) or 0):
        yield


@contextlib.contextmanager
def every_config_once(synchronize: Callable[[], None]) -> Iterator[None]:
    """Under compute-sanitizer: an autotuner's tuning round runs each of its configs once
    (the tool checks every config the variant could run), none timed (an instrumented
    config's timing loop, L2 flushes included, took minutes: 276 s of memcheck for the
    matmul example's autotuned winner). Which config the round then picks does not matter:
    each has run under the tool."""

    def bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
        ms = _ran_once(kernel_call, synchronize)
        return [ms, ms, ms] if quantiles else ms

    with _benched_by(bench, turn=None):
        yield


def _ran_once(kernel_call: Callable[[], Any], synchronize: Callable[[], None]) -> float:
    """Milliseconds of one run of a config, to its end on the device."""
    import time

    t0 = time.perf_counter()
    kernel_call()
    synchronize()
    return (time.perf_counter() - t0) * 1e3


@contextlib.contextmanager
def _benched_by(bench: Callable[..., Any], turn: Optional[int]) -> Iterator[None]:
    """Inside the block, this thread's autotuners tune with ``bench`` (tuning rounds starting
    at config ``turn``, None: the autotuner's own order); the thread's previous ones after."""
    install()
    previous = getattr(_chosen, "bench", None), getattr(_chosen, "turn", None)
    _chosen.bench, _chosen.turn = bench, turn
    try:
        yield
    finally:
        _chosen.bench, _chosen.turn = previous


@contextlib.contextmanager
def config_turn(turn: int) -> Iterator[None]:
    """Inside ``one_config_per_call``: the tuning rounds of the block start at config
    ``turn`` (modulo each round's count). A derived call's turn is its seed, the same in
    every process that makes the call (the original's, a candidate's, their siblings')."""
    previous = getattr(_chosen, "turn", None)
    _chosen.turn = turn
    try:
        yield
    finally:
        _chosen.turn = previous


def bench_attribute(tuner: Any) -> str:
    """Where an autotuner instance keeps its bench function: ``_do_bench`` behind Triton
    3.3+'s ``do_bench`` property, else ``do_bench`` itself (3.2's attribute, or shadowing
    a cached_property)."""
    return "_do_bench" if isinstance(getattr(type(tuner), "do_bench", None), property) else "do_bench"


def judges_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    """One config's time for Triton's autotuner: compiled and run once under the run's
    shared hold (the compile steps out of it), then timed alone."""
    from .gpu_lock import exclusive_turn
    from .runner import synchronize
    from .timing import bench_gpu, quantiles_of

    kernel_call()
    synchronize()
    with exclusive_turn(synchronize), _untraced(), _unrecorded():
        p20, p50, p80 = quantiles_of(bench_gpu(kernel_call, None, WARMUP_MS, REP_MS))
    return [p50, p20, p80] if quantiles else p50


@contextlib.contextmanager
def _untraced() -> Iterator[None]:
    """No trace function (the harness-locals trace) while configs are timed."""
    previous = sys.gettrace()
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(previous)


@contextlib.contextmanager
def _unrecorded() -> Iterator[None]:
    """The launch recorder set aside: the configs' timing launches are not the run's."""
    from . import capture

    saved: Optional[Any] = capture.set_active(None)
    try:
        yield
    finally:
        capture.set_active(saved)


def _on_gpu() -> bool:
    from .timing import on_gpu

    return on_gpu()
