"""The one noise floor and the verdict rule (kernelband/verdict.py)."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from kernelband.model import ResultStatus
from kernelband.verdict import DEFAULT_MIN_SPEEDUP, consistent_times, decide_verdict, floor, is_improvement
from helpers.paths import REPO


def test_improved_needs_the_lower_bound_above_the_floor():
    assert DEFAULT_MIN_SPEEDUP == 1.03
    gpu = dict(interpreted=False)
    assert decide_verdict(1.031, **gpu) == decide_verdict(1.2, **gpu)
    v = decide_verdict(1.031, **gpu)
    assert (v.status, v.speed_claim, v.applicable) == (ResultStatus.IMPROVED, True, True)
    for ci_low in (1.03, 1.011, 0.9, None):  # on the floor is not above it; not re-measured is not improved
        v = decide_verdict(ci_low, **gpu)
        assert (v.status, v.speed_claim, v.applicable) == (ResultStatus.NO_IMPROVEMENT, True, False)
    assert decide_verdict(1.011, interpreted=False, min_speedup=1.0).status == ResultStatus.IMPROVED
    assert floor(0.5) == 1.0 and not is_improvement(0.99, 0.5)  # never below 1


def test_the_interpreter_makes_no_speed_claim_unless_cpu_tuning_is_asked():
    v = decide_verdict(7.5, interpreted=True)
    assert (v.status, v.speed_claim, v.applicable) == (ResultStatus.VERIFIED_CORRECT, False, False)
    v = decide_verdict(7.5, interpreted=True, cpu_tuning=True)
    assert (v.status, v.speed_claim, v.applicable) == (ResultStatus.IMPROVED, False, True)
    assert decide_verdict(1.01, interpreted=True, cpu_tuning=True).status == ResultStatus.NO_IMPROVEMENT


def test_printed_times_agree_with_the_printed_speedup():
    # the case: medians 149.8 -> 212.9 ms beside a 0.950x geometric-mean speedup
    base, best, note = consistent_times(149.8, 212.9, 0.950, (0.90, 1.00))
    assert base == 149.8 and base / best == pytest.approx(0.950)
    assert note and "outside the paired CI" in note
    base, best, note = consistent_times(2.0, 1.0, 1.98, (1.95, 2.02))
    assert base / best == pytest.approx(1.98) and note is None


def test_the_default_floor_is_above_the_measured_noise():
    """The reasoning in verdict.py, re-checked on the committed GPU results: the same
    winning variant re-measured by different sessions never drifted by the floor."""
    runs = json.loads((REPO / "benchmarks/results/results.json").read_text())["runs"]
    by_variant = defaultdict(list)
    for r in runs:
        if r.get("interpreted") is False and r.get("status") == "improved" and r.get("best_variant_id"):
            by_variant[(r["kernel"], r["best_variant_id"])].append(r["speedup"])
    drift = [abs(s / (sum(v) / len(v)) - 1) for v in by_variant.values() if len(v) > 1 for s in v]
    assert len(drift) >= 50
    assert max(drift) < (DEFAULT_MIN_SPEEDUP - 1) / 2
