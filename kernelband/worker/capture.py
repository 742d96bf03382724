"""Record the Triton launches a harness makes, so they can be replayed and timed alone.

Every launch ``k[grid](*args, **kwargs)`` ends in ``<KernelInterface>.run(*args,
grid=..., warmup=..., **kwargs)`` for JITFunction, InterpretedFunction, Autotuner and
Heuristics alike. We wrap ``run`` on those classes and record only the outermost call
(an autotuner's own benchmarking launches are inner calls). Replaying the outermost
object's ``run`` with the same arguments re-launches exactly what the harness did,
with an autotuner's cached best config, and without the harness's input creation.

Imports triton: only used inside the worker process.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import triton  # noqa: F401  (ensures triton.runtime is importable)
from triton.runtime import autotuner as _autotuner
from triton.runtime import jit as _jit

try:
    from triton.runtime import interpreter as _interpreter
except Exception:  # pragma: no cover - very old triton
    _interpreter = None  # type: ignore[assignment]


def _kernel_classes() -> list[type]:
    classes: list[type] = [_jit.JITFunction, _autotuner.Autotuner, _autotuner.Heuristics]
    if _interpreter is not None and hasattr(_interpreter, "InterpretedFunction"):
        classes.append(_interpreter.InterpretedFunction)
    return classes


def kernel_name(obj: Any) -> str:
    """Name of the user's function behind a JITFunction/Autotuner/Heuristics chain."""
    seen = 0
    while hasattr(obj, "fn") and seen < 8:
        obj = obj.fn
        seen += 1
    return getattr(obj, "__name__", type(obj).__name__)


@dataclass
class CapturedLaunch:
    obj: Any  # the outermost KernelInterface object (e.g. an Autotuner)
    args: tuple[Any, ...]
    kwargs: dict[str, Any]  # includes grid= and warmup=
    name: str
    result: Any = None  # what run() returned (a CompiledKernel on GPU, where triton returns one)

    def replay(self) -> Any:
        return self.obj.run(*self.args, **self.kwargs)

    @property
    def grid(self) -> Any:
        return self.kwargs.get("grid")

    def resolved_grid(self) -> list[int]:
        """The grid as integers (a callable grid is evaluated on the launch's meta-args)."""
        g = self.grid
        if callable(g):
            meta = dict(self.kwargs)
            arg_names = getattr(self.obj, "arg_names", None) or []
            meta.update({n: a for n, a in zip(arg_names, self.args)})
            best = getattr(self.obj, "best_config", None)
            if best is not None and hasattr(best, "kwargs"):
                meta.update(best.kwargs)
            try:
                g = g(meta)
            except Exception:
                return []
        if isinstance(g, int):
            return [g]
        try:
            return [int(x) for x in g]
        except Exception:
            return []


@dataclass
class LaunchRecorder:
    launches: list[CapturedLaunch] = field(default_factory=list)
    skip: bool = False  # record but do not execute (the weak-harness check)
    on_skip: Optional[Callable[[CapturedLaunch], None]] = None  # stands in for a skipped launch


_state = threading.local()


def _active() -> Optional[LaunchRecorder]:
    return getattr(_state, "recorder", None)


def _depth() -> int:
    return getattr(_state, "depth", 0)


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _active()
        if rec is None or _depth() > 0 or kwargs.get("warmup"):
            _state.depth = _depth() + 1
            try:
                return original(self, *args, **kwargs)
            finally:
                _state.depth -= 1
        launch = CapturedLaunch(self, args, dict(kwargs), kernel_name(self))
        rec.launches.append(launch)
        if rec.skip:
            if rec.on_skip is not None:
                _state.depth = 1  # launches made by the stand-in are not the harness's
                try:
                    rec.on_skip(launch)
                finally:
                    _state.depth = 0
            return None
        _state.depth = 1
        try:
            launch.result = original(self, *args, **kwargs)
            return launch.result
        finally:
            _state.depth = 0

    run.__kernelband_wrapped__ = original  # type: ignore[attr-defined]
    return run


def install() -> None:
    """Wrap ``run`` on every Triton kernel class once per process (idempotent)."""
    for cls in _kernel_classes():
        current = cls.__dict__.get("run")
        if current is None or hasattr(current, "__kernelband_wrapped__"):
            continue
        cls.run = _wrap(current)  # type: ignore[method-assign]


@contextlib.contextmanager
def recording(skip: bool = False, on_skip: Optional[Callable[[CapturedLaunch], None]] = None) -> Iterator[LaunchRecorder]:
    """Record the launches made inside the block (this thread only)."""
    install()
    rec = LaunchRecorder(skip=skip, on_skip=on_skip)
    prev = _active()
    _state.recorder = rec
    _state.depth = 0
    try:
        yield rec
    finally:
        _state.recorder = prev


def replay_all(launches: list[CapturedLaunch]) -> None:
    for launch in launches:
        launch.replay()
