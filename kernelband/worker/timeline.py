"""Where an evaluation's seconds go, inside the variant process: cumulative seconds per
activity (CUDA context, import, Triton compile, fingerprints, frame sends, waits for the
judge), sent with every frame so the judge can report them beside its own phases."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

SECONDS: dict[str, float] = {}
COUNTS: dict[str, int] = {}


def add(name: str, seconds: float) -> None:
    SECONDS[name] = SECONDS.get(name, 0.0) + max(seconds, 0.0)
    COUNTS[name] = COUNTS.get(name, 0) + 1


def longest(name: str, seconds: float) -> None:
    """The longest of a kind of interval (not a sum: its count says how many there were)."""
    SECONDS[name] = max(SECONDS.get(name, 0.0), seconds)
    COUNTS[name] = COUNTS.get(name, 0) + 1


@contextmanager
def span(name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        add(name, time.perf_counter() - t0)


def snapshot() -> dict[str, Any]:
    return {"seconds": {k: round(v, 6) for k, v in SECONDS.items()}, "counts": dict(COUNTS)}


def time_triton_compiles() -> None:
    """Count the seconds Triton spends compiling (JITFunction looks ``compile`` up in
    ``triton.compiler`` when it first needs it)."""
    try:
        import triton.compiler as compiler
    except ImportError:  # pragma: no cover
        return
    original: Callable[..., Any] = compiler.compile
    if getattr(original, "__kernelband_timed__", False):
        return

    def compile(*args: Any, **kwargs: Any) -> Any:
        with span("compile"):
            return original(*args, **kwargs)

    compile.__kernelband_timed__ = True  # type: ignore[attr-defined]
    compiler.compile = compile
