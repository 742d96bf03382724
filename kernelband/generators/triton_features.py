"""What the installed Triton offers to the code rewrites (feature-detected, never by
version number): ``tl.range``'s keywords and working block pointers.

The rewrite modules import these functions by name from here, never through the
``generators`` package: the package's ``make_generator`` imports the rules generator,
which imports the rewrites, so a package-level import would close a circle."""

from __future__ import annotations

import inspect
from typing import Optional

_assumed_block_pointers: Optional[bool] = None


def tl_range_params() -> set[str]:
    """Keyword parameters of the installed ``tl.range`` (empty without one)."""
    try:
        import triton.language as tl

        return set(inspect.signature(tl.range.__init__).parameters) - {"self"}
    except Exception:  # no triton, or no tl.range (Triton < 3.0)
        return set()


def assume_block_pointers(available: Optional[bool]) -> None:
    """Decide block pointers as another machine's Triton would, in this process: True or
    False overrides the detection, None restores it. Measured tables and their replays
    must offer the same rewrites, and Triton 3.6 has block pointers where 3.9 removed them."""
    global _assumed_block_pointers
    _assumed_block_pointers = available


def block_pointers_supported() -> bool:
    """tl.make_block_ptr exists and works: Triton 3.9 keeps the name but raises
    ("Block pointers have been removed in favor of the tensor descriptor API")."""
    if _assumed_block_pointers is not None:
        return _assumed_block_pointers
    try:
        import triton.language as tl

        fn = getattr(tl, "make_block_ptr", None)
        if fn is None:
            return False
        text = (getattr(fn, "__doc__", "") or "") + inspect.getsource(getattr(fn, "fn", fn))
        return "have been removed" not in text
    except Exception:  # source unavailable: trust the name
        return hasattr(tl, "make_block_ptr")
