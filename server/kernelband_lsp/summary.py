"""Phrases and numbers for lenses, hovers and progress: from a typed Result
(kernelband.model) and a typed Profile (kernelband.profile.schema), the one reader of
both in the server.
"""

from __future__ import annotations

import math
from typing import Optional

from kernelband.model import FOUND_STATUSES, Result
from kernelband.profile.schema import Profile


def num(v: object) -> Optional[float]:
    """A finite number from an int, a float or a numeric string; None for anything else (a bool too)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        f = float(v)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def result_time_ms(result: Optional[Result], module_hash: Optional[str] = None) -> Optional[float]:
    """The time of the code as it is now, from an optimization Result: the original's
    time (baseline) unless the text is the winner's (the variant was applied)."""
    if result is None:
        return None
    if module_hash and result.best_source and result.status in FOUND_STATUSES:
        import hashlib

        if hashlib.sha256(result.best_source.encode("utf-8")).hexdigest() == module_hash:
            return num(result.best_ms)
    return num(result.baseline_ms)


def time_ms(
    profile: Optional[Profile], result: Optional[Result] = None, module_hash: Optional[str] = None
) -> Optional[float]:
    """A launch's time: the profile's, else (no profile) the last optimization's."""
    if profile is not None:
        return profile.time_per_launch_ms
    return result_time_ms(result, module_hash)


def interpreted(profile: Optional[Profile], result: Optional[Result] = None) -> bool:
    if profile is not None and profile.interpreted:
        return True
    return result is not None and result.interpreted


def fmt_ms(ms: float) -> str:
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    if ms >= 0.01:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.1f} µs"


def peak_phrase(profile: Optional[Profile]) -> Optional[str]:
    """'71% of HBM peak' (memory side) or '63% of compute peak', by the bottleneck (each a
    fraction of the resource's peak; None when not known)."""
    if profile is None or profile.interpreted:
        return None
    dram, sm = profile.saturation.get("DRAM"), profile.saturation.get("SM")
    if sm is not None and (profile.bottleneck == "compute-bound" or dram is None):
        return f"{sm * 100:.0f}% of compute peak"
    return f"{dram * 100:.0f}% of HBM peak" if dram is not None else None


def lens_summary(profile: Optional[Profile], result: Optional[Result], module_hash: Optional[str] = None) -> str:
    """`last: 0.42 ms, 71% of HBM peak, memory-bound` or `not profiled yet`."""
    parts: list[str] = []
    t = time_ms(profile, result, module_hash)
    if t is not None:
        parts.append(fmt_ms(t) + (" (interpreter)" if interpreted(profile, result) else ""))
    p = peak_phrase(profile)
    if p:
        parts.append(p)
    if profile is not None and profile.bottleneck:
        parts.append(profile.bottleneck)
    if not parts:
        return "not profiled yet"
    return "last: " + ", ".join(parts)


def speedup_phrase(result: Optional[Result]) -> Optional[str]:
    """`1.43x (95% CI 1.30–1.50x)`, or None without a speedup."""
    sp = num(result.speedup) if result is not None else None
    if result is None or sp is None:
        return None
    ci = ci_bounds(result.speedup_ci)
    return f"{sp:.2f}x" + (f" (95% CI {ci[0]:.2f}–{ci[1]:.2f}x)" if ci else "")


def ci_bounds(ci: object) -> Optional[tuple[float, float]]:
    """(low, high) of a confidence interval given as two numbers; None otherwise."""
    lo, hi = (num(ci[0]), num(ci[1])) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)
    return (lo, hi) if lo is not None and hi is not None else None
