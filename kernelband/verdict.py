"""The one place that decides what a measured speedup means (CLI, session and editor).

``decide_verdict`` turns a paired re-measurement into a status:
- ``improved``: GPU time, and the 95% CI's lower bound is above the noise floor
  ``min_speedup`` (never below 1);
- ``verified_correct``: the interpreter ran it (no GPU): the variant is correct, but a
  CPU time says nothing about GPU speed, so no speed claim and no Apply, unless the user
  asked for CPU tuning explicitly (``cpu_tuning``; then CPU times decide as GPU times do);
- ``no_improvement``: anything else.

The language server imports ``DEFAULT_MIN_SPEEDUP`` from here; so do the CLI's
``--min-speedup`` and ``SessionConfig.min_speedup``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .model import ResultStatus

# The noise floor. Measured on the committed H200 results (benchmarks/results/results.json,
# 324 GPU sessions run as 6-8 shards sharing one GPU, i.e. noisier than a solo session):
# the paired 95% CI is narrow (half-width below the speedup: median 0.25%, 95th percentile
# 0.8%, 99th 1.9%), and the same winning variant re-measured in different sessions spread
# by at most 1.25% around its mean (95th percentile 0.55%, 112 repeats). So a CI that
# clears 1.0 by a hair (47 of 324 "improved" verdicts were below 1.03x; one
# session had 7 of 16) is statistically separated yet within session-to-session drift, and not worth an
# edit. 1.03 is about 2.5x the largest drift seen and 1.5x the 99th-percentile CI
# half-width: a verdict above it reproduces in another session.
DEFAULT_MIN_SPEEDUP = 1.03

NO_GPU_NOTE = "its speed cannot be measured without a GPU (the Triton interpreter's CPU times are not GPU times)"


@dataclass(frozen=True)
class Verdict:
    status: ResultStatus  # IMPROVED | NO_IMPROVEMENT | VERIFIED_CORRECT: the Result's own statuses
    speed_claim: bool  # the numbers are GPU times and may be read as a speedup
    applicable: bool  # an editor may offer Apply and --apply may write it


def floor(min_speedup: Optional[float] = None) -> float:
    """The effective threshold: the configured minimum, never below 1."""
    return max(1.0, DEFAULT_MIN_SPEEDUP if min_speedup is None else float(min_speedup))


def is_improvement(ci_low: Optional[float], min_speedup: Optional[float] = None) -> bool:
    """The rule: the CI's lower bound strictly above the noise floor."""
    return ci_low is not None and ci_low > floor(min_speedup)


def decide_verdict(
    ci_low: Optional[float], *, interpreted: bool, cpu_tuning: bool = False, min_speedup: Optional[float] = None
) -> Verdict:
    """The verdict for a correct candidate whose paired CI's lower bound is ``ci_low``
    (None: not re-measured)."""
    if interpreted and not cpu_tuning:
        return Verdict(ResultStatus.VERIFIED_CORRECT, speed_claim=False, applicable=False)
    improved = is_improvement(ci_low, min_speedup)
    status = ResultStatus.IMPROVED if improved else ResultStatus.NO_IMPROVEMENT
    return Verdict(status, speed_claim=not interpreted, applicable=improved)


def consistent_times(
    baseline_ms: float, variant_ms: float, speedup: float, ci: tuple[float, float]
) -> tuple[float, float, Optional[str]]:
    """Times to print beside ``speedup`` so that original / variant == speedup.

    The paired speedup is the geometric mean of per-round ratios; the ratio of the two
    medians can differ (noisy rounds), and printing both would contradict itself. The
    original's median is kept and the variant's time is the one the speedup implies; a
    median ratio outside the CI is reported as noise instead of being hidden."""
    if speedup <= 0 or baseline_ms <= 0 or variant_ms <= 0:
        return baseline_ms, variant_ms, None
    implied = baseline_ms / speedup
    ratio = baseline_ms / variant_ms
    note = None
    if not (ci[0] <= ratio <= ci[1]):
        note = (
            f"noisy re-measurement: the ratio of the medians ({baseline_ms:.4g} ms / {variant_ms:.4g} ms = "
            f"{ratio:.3f}x) lies outside the paired CI {ci[0]:.3f}-{ci[1]:.3f}"
        )
    return baseline_ms, implied, note
