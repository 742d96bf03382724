"""What the installed Triton offers to the code rewrites (feature-detected, never by
version number): ``tl.range``'s keywords and working block pointers."""
from __future__ import annotations

import inspect


def tl_range_params() -> set[str]:
    """Keyword parameters of the installed ``tl.range`` (empty without one)."""
    try:
        import triton.language as tl

        return set(inspect.signature(tl.range.__init__).parameters) - {"self"}
    except Exception:  # no triton, or no tl.range (Triton < 3.0)
        return set()


def block_pointers_supported() -> bool:
    """tl.make_block_ptr exists and works: Triton 3.9 keeps the name but raises
    ("Block pointers have been removed in favor of the tensor descriptor API")."""
    try:
        import triton.language as tl

        fn = getattr(tl, "make_block_ptr", None)
        if fn is None:
            return False
        text = (getattr(fn, "__doc__", "") or "") + inspect.getsource(getattr(fn, "fn", fn))
        return "have been removed" not in text
    except Exception:  # source unavailable: trust the name
        return hasattr(tl, "make_block_ptr")
