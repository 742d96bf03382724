"""Read numbers out of a profile / Result dict without trusting their exact shape.

The profile contract (docs/ARCHITECTURE.md) fixes ``saturation``, ``diagnosis``,
``interpreted`` and the three tiers; the keys inside a tier are the profiler's, so
look-ups here try the usual spellings and give None rather than fail.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional


def num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, str):
        try:
            f = float(v)
            return f if math.isfinite(f) else None
        except ValueError:
            return None
    return None


def dig(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def first(d: Any, keys: Iterable[str]) -> Any:
    if not isinstance(d, dict):
        return None
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None


def tier(profile: Optional[dict], name: str) -> dict:
    t = dig(profile, "tiers", name)
    return t if isinstance(t, dict) else {}


# statuses whose Result carries a correct variant (``verified_correct``: under the CPU
# interpreter, correct but with no speed claim; see kernelband/verdict.py)
FOUND_STATUSES = ("improved", "verified_correct")


def has_variant(result: Optional[dict]) -> bool:
    return isinstance(result, dict) and result.get("status") in FOUND_STATUSES and bool(result.get("best_source"))


def result_time_ms(result: Optional[dict], module_hash: Optional[str] = None) -> Optional[float]:
    """The time of the code as it is now, from an optimization Result: the original's
    time (baseline) unless the text is the winner's (the variant was applied)."""
    if not result:
        return None
    best = result.get("best_source")
    if module_hash and isinstance(best, str) and result.get("status") in FOUND_STATUSES:
        import hashlib

        if hashlib.sha256(best.encode("utf-8")).hexdigest() == module_hash:
            return num(result.get("best_ms"))
    return num(result.get("baseline_ms"))


def time_ms(profile: Optional[dict], result: Optional[dict] = None, module_hash: Optional[str] = None) -> Optional[float]:
    t = tier(profile, "timing")
    v = num(first(t, ("time_per_launch_ms", "time_ms", "median_ms", "ms", "kernel_ms", "mean_ms")))
    if v is None and isinstance(profile, dict):
        v = num(profile.get("time_ms"))
    if v is None and profile is None:
        v = result_time_ms(result, module_hash)
    return v


def bottleneck(profile: Optional[dict]) -> Optional[str]:
    b = dig(profile, "diagnosis", "bottleneck")
    return b if isinstance(b, str) and b and b != "unknown" else None


def interpreted(profile: Optional[dict], result: Optional[dict] = None) -> bool:
    if isinstance(profile, dict) and profile.get("interpreted"):
        return True
    return bool(result and result.get("interpreted"))


def saturation(profile: Optional[dict], resource: str) -> Optional[float]:
    s = dig(profile, "saturation")
    v = num(s.get(resource)) if isinstance(s, dict) else None
    if v is None:  # the timing tier's own fractions of the measured peaks
        key = {"DRAM": "bandwidth_frac", "SM": "compute_frac"}.get(resource)
        v = num(tier(profile, "timing").get(key)) if key else None
    if v is None:
        return None
    return v / 100.0 if v > 1.5 else v  # tolerate percentages


def fmt_ms(ms: float) -> str:
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    if ms >= 0.01:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.1f} µs"


def peak_phrase(profile: Optional[dict]) -> Optional[str]:
    """'71% of HBM peak' (memory side) or '63% of compute peak', by the bottleneck."""
    if interpreted(profile):
        return None
    b = bottleneck(profile)
    dram, sm = saturation(profile, "DRAM"), saturation(profile, "SM")
    if b == "compute-bound" and sm is not None:
        return f"{sm * 100:.0f}% of compute peak"
    if dram is not None:
        return f"{dram * 100:.0f}% of HBM peak"
    if sm is not None:
        return f"{sm * 100:.0f}% of compute peak"
    return None


def lens_summary(profile: Optional[dict], result: Optional[dict], module_hash: Optional[str] = None) -> str:
    """`last: 0.42 ms, 71% of HBM peak, memory-bound` or `not profiled yet`."""
    parts: list[str] = []
    t = time_ms(profile, result, module_hash)
    if t is not None:
        parts.append(fmt_ms(t) + (" (interpreter)" if interpreted(profile, result) else ""))
    p = peak_phrase(profile)
    if p:
        parts.append(p)
    b = bottleneck(profile)
    if b:
        parts.append(b)
    if not parts:
        return "not profiled yet"
    return "last: " + ", ".join(parts)


def speedup_phrase(result: Optional[dict]) -> Optional[str]:
    if not result:
        return None
    sp = num(result.get("speedup"))
    if sp is None:
        return None
    ci = result.get("speedup_ci")
    text = f"{sp:.2f}x"
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and num(ci[0]) is not None and num(ci[1]) is not None:
        text += f" (95% CI {num(ci[0]):.2f}–{num(ci[1]):.2f}x)"
    return text
