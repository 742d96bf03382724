"""Statistics of timings, computed by the judge from raw samples (no torch, no triton)."""

from __future__ import annotations

import math
import statistics

from ..model import PairedTiming, Timing

# two-sided 95% Student t quantiles by degrees of freedom (no scipy dependency)
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    25: 2.060,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t95(df: int) -> float:
    if df <= 0:
        return math.inf
    for k in sorted(_T95):
        if df <= k:
            return _T95[k]
    return 1.96


def paired_statistics(a_ms: list[float], b_ms: list[float], clock: str, order: str = "interleaved") -> PairedTiming:
    """Speedup A/B as the geometric mean over rounds (sample i of A with sample i of B),
    with a 95% CI on the log scale."""
    logs = [math.log(a / b) for a, b in zip(a_ms, b_ms) if a > 0 and b > 0 and math.isfinite(a / b)]
    if not logs:
        raise ValueError("no usable paired timing rounds (zero or non-finite times)")
    n = len(logs)
    mean = statistics.fmean(logs)
    half = t95(n - 1) * (statistics.stdev(logs) / math.sqrt(n)) if n > 1 else math.inf
    return PairedTiming(
        baseline_ms=statistics.median(a_ms),
        variant_ms=statistics.median(b_ms),
        speedup=math.exp(mean),
        ci_low=math.exp(mean - half),
        ci_high=math.exp(mean + half),
        rounds=n,
        clock=clock,
        order=order,
    )


def _quantile(sorted_ms: list[float], p: float) -> float:
    if len(sorted_ms) == 1:
        return sorted_ms[0]
    x = p * (len(sorted_ms) - 1)
    lo, hi = int(math.floor(x)), int(math.ceil(x))
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (x - lo)


def median_timing(samples_ms: list[float], clock: str, launches: int) -> Timing:
    """A Timing from samples (each one a do_bench median): their median and 20/80% points."""
    s = sorted(samples_ms)
    return Timing(statistics.median(s), _quantile(s, 0.2), _quantile(s, 0.8), clock, launches)
