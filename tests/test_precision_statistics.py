"""The precision rule is a comparison of two draws of rounding noise: over few elements
(a long call's rows, a harness's scalar) the original's realised error is a poor estimate
of its precision, and a correct reordering was refused by chance (CI, an fp16-accumulating
rowsum on four rows). ``checks.precision_factor`` widens the bound where the sample is
small; a candidate that is really less precise is still refused."""
from __future__ import annotations

import pytest
import torch

from kernelband.worker import checks
from kernelband.worker.checks import ErrorStats, precision_factor, precision_reason


def _equal_noise_ratios(n: int, trials: int, seed: int) -> torch.Tensor:
    """The ratio of two L2 norms of n draws each of the same normal noise."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(trials, n, generator=g, dtype=torch.float64).norm(dim=1)
    b = torch.randn(trials, n, generator=g, dtype=torch.float64).norm(dim=1)
    return b / a


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8, 9, 10, 16, 64])
def test_equally_precise_roundings_exceed_the_factor_about_once_in_ten_thousand(n):
    ratios = _equal_noise_ratios(n, 400_000, seed=n)
    rate = float((ratios > precision_factor(n)).double().mean())
    assert rate < 3e-4, (n, rate)  # 1e-4 by construction, with room for the draw's noise


def test_the_flat_factor_alone_refused_equal_roundings_on_four_rows_often():
    """What the table is for: 4x over four elements is within the noise (about 1%)."""
    ratios = _equal_noise_ratios(4, 400_000, seed=0)
    assert float((ratios > checks.PRECISION_FACTOR).double().mean()) > 5e-3
    assert precision_factor(4) > 3 * checks.PRECISION_FACTOR


def test_the_factor_never_drops_below_the_flat_one_and_shrinks_with_the_sample():
    factors = [precision_factor(n) for n in range(1, 40)]
    assert all(f >= checks.PRECISION_FACTOR for f in factors)
    assert factors == sorted(factors, reverse=True)
    assert precision_factor(10) == precision_factor(10_000) == checks.PRECISION_FACTOR
    assert precision_factor(0) == checks.PRECISION_FACTOR  # nothing finite compared: no widening


def _rowsum_fp16(x: torch.Tensor, lanes: int) -> torch.Tensor:
    """A rowsum accumulated in float16 over ``lanes`` partial sums, as a Triton kernel with
    BLOCK = lanes and an fp16 accumulator computes it."""
    rows, cols = x.shape
    pad = (-cols) % lanes
    tiles = torch.nn.functional.pad(x, (0, pad)).view(rows, -1, lanes)
    acc = torch.zeros(rows, lanes, dtype=torch.float16)
    for t in range(tiles.shape[1]):
        acc = acc + tiles[:, t]
    total = torch.zeros(rows, dtype=torch.float16)
    for lane in range(lanes):  # the tile's sum in float16 too
        total = total + acc[:, lane]
    return total


def _centred_rows(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp16 rows summing to about 0 as the long call draws them, their exact sums)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, (1 << 14) + 3, generator=g) * 8.0
    x16 = (x - x.mean(dim=1, keepdim=True)).to(torch.float16)
    return x16, x16.double().sum(dim=1)


# seeds where four rows of the reordering were more than 4x off the exact sums than the
# original's (9 of seeds 0..1499): refused by the flat factor alone
FLAT_FACTOR_REFUSED = (505, 912, 959, 1069, 1070, 1156, 1316, 1352, 1462)


@pytest.mark.parametrize("rows", [4, 8])
def test_a_reordered_fp16_accumulation_is_as_precise_as_the_originals_on_every_seed(rows):
    """The CI case: BLOCK 32 -> 64 of an original that accumulates in fp16, judged against
    the float32 twin's exact sums."""
    refused, flat_refused = [], []
    for seed in (*FLAT_FACTOR_REFUSED, *range(40)):
        x16, exact = _centred_rows(rows, seed)
        original = checks.error_against(exact, _rowsum_fp16(x16, 32))
        candidate = checks.error_against(exact, _rowsum_fp16(x16, 64))
        assert original.elements == candidate.elements == rows
        if precision_reason("out", torch.float16, original, candidate):
            refused.append(seed)
        if candidate.rel > checks.PRECISION_FACTOR * original.rel \
                or candidate.max_abs > checks.PRECISION_FACTOR * original.max_abs:
            flat_refused.append(seed)
    assert not refused
    if rows == 4:
        assert flat_refused, "the seeds no longer show what the flat factor refused"


@pytest.mark.parametrize("rows", [8, 16])
def test_an_accumulation_in_fp16_is_refused_where_the_original_accumulates_in_fp32(rows):
    """The attack the long call is for: a candidate that sums in 16 bits (fewer registers,
    faster) where the original sums in 32 is refused on every seed, the wider bound
    included."""
    for seed in range(20):
        x16, exact = _centred_rows(rows, seed)
        original = checks.error_against(exact, x16.float().sum(dim=1).to(torch.float16))
        candidate = checks.error_against(exact, _rowsum_fp16(x16, 32))
        assert precision_reason("out", torch.float16, original, candidate), seed


@pytest.mark.parametrize("rows,worse", [(8, 30.0), (16, 12.0), (64, 8.0)])
def test_a_candidate_many_times_less_precise_is_refused_at_each_sample_size(rows, worse):
    """Noise ``worse`` times the original's, above the output's roundoff: refused on every
    seed (the widened bound is a statement about chance, not a licence)."""
    for seed in range(50):
        g = torch.Generator().manual_seed(seed)
        exact = torch.full((rows,), 1000.0, dtype=torch.float64)
        original = exact + 1e-2 * torch.randn(rows, generator=g, dtype=torch.float64)
        candidate = exact + worse * 1e-2 * torch.randn(rows, generator=g, dtype=torch.float64)
        reason = precision_reason("out", torch.float32, checks.error_against(exact, original.float()),
                                  checks.error_against(exact, candidate.float()))
        assert reason and f"{precision_factor(rows):g}x" in reason, seed


def test_error_stats_count_only_elements_finite_in_both():
    high = torch.tensor([1.0, 2.0, float("inf"), 4.0], dtype=torch.float64)
    got = torch.tensor([1.0, float("nan"), float("inf"), 4.5])
    stats = checks.error_against(high, got)
    assert stats == ErrorStats(stats.rel, 0.5, 4.0, 2)
