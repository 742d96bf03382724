"""The judge's content hash (``observe.fingerprint``) and the runs it lets the judge skip
comparing again (``matched_runs.MatchedRuns``).

The cheat these stop: a change to a tensor chosen so that the hash stays the same. With
the old, public weights (position-derived) three elements changed by amounts solved from
those weights left both sums equal: a harness input the variant modified "came back
unchanged", and a cached tensor passed as a known input. The weights are now drawn from a
key the variant never sees, so the same construction changes the hash."""
from __future__ import annotations

import torch

from kernelband.worker import matched_runs, observe
from kernelband.worker.matched_runs import MatchedRuns


def _old_weights(n: int) -> torch.Tensor:
    w = torch.arange(1, n + 1, dtype=torch.int64)
    return w * 2654435761 % 1000003 + 1


def _old_fingerprint(t: torch.Tensor) -> tuple[int, int]:
    raw = t.reshape(-1).view(torch.int32).to(torch.int64)
    return int(raw.sum()), int((raw * _old_weights(raw.numel())).sum())


def _cancelling_change(t: torch.Tensor, weights: torch.Tensor, i: int, j: int, k: int) -> torch.Tensor:
    """``t`` with three elements' bits changed by amounts that cancel in the plain sum and
    in the sum weighted by ``weights``."""
    wi, wj, wk = (int(weights[x]) for x in (i, j, k))
    changed = t.clone()
    raw = changed.view(torch.int32)
    for x, d in ((i, wj - wk), (j, wk - wi), (k, wi - wj)):
        raw[x] += d
    return changed


def test_a_change_solved_against_public_weights_no_longer_keeps_the_fingerprint():
    x = torch.randn(4096)
    forged = _cancelling_change(x, _old_weights(x.numel()), 10, 500, 3000)
    assert not torch.equal(forged, x)
    assert _old_fingerprint(forged) == _old_fingerprint(x)  # the cheat against the old hash
    assert observe.fingerprint(forged) != observe.fingerprint(x)


def test_equal_content_gives_equal_fingerprints_anywhere_and_any_one_change_shows():
    x = torch.randn(3 * observe._FP_CHUNK // 2 + 7)  # more than one slice: per-slice salts
    assert observe.fingerprint(x) == observe.fingerprint(x.clone())
    assert observe.fingerprint(x[::2]) == observe.fingerprint(x[::2].contiguous())
    for pos in (0, observe._FP_CHUNK - 1, observe._FP_CHUNK, x.numel() - 1):
        y = x.clone()
        y.view(torch.int32)[pos] ^= 1  # one bit of one element
        assert observe.fingerprint(y) != observe.fingerprint(x)
    # the same values in another slice position differ (weights are per position)
    a = torch.zeros(observe._FP_CHUNK + 2)
    b = a.clone()
    a[1], b[observe._FP_CHUNK + 1] = 1.0, 1.0
    assert observe.fingerprint(a) != observe.fingerprint(b)
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.bool, torch.complex64):
        t = (torch.randn(257) * 3).to(dtype)
        assert observe.fingerprint(t) == observe.fingerprint(t.clone())


def _tree(y: torch.Tensor) -> dict:
    return {"returned": [y], "written": {"k.Y": [y]}, "harness_locals": {}}


def _counting_compare(monkeypatch) -> list[int]:
    calls = [0]
    real = matched_runs.compare_outputs

    def counting(ref, out, tol_scale=1.0):
        calls[0] += 1
        return real(ref, out, tol_scale)

    monkeypatch.setattr(matched_runs, "compare_outputs", counting)
    monkeypatch.setattr(matched_runs, "MIN_BYTES", 0)
    return calls


def test_a_bit_equal_rerun_reuses_the_verdict_and_any_other_is_compared_in_full(monkeypatch):
    calls = _counting_compare(monkeypatch)
    y = torch.randn(10_000)
    ref = _tree(y.clone())
    runs = MatchedRuns()
    assert runs.compare(ref, _tree(y.clone())).ok and calls[0] == 1
    runs.new_frame()
    again = runs.compare(ref, _tree(y.clone()))  # the re-check after timing, bit for bit
    assert again.ok and calls[0] == 1
    tree = _tree(y.clone())
    runs.new_frame()
    runs.compare(ref, tree)
    assert runs.fingerprint(tree["returned"][0]) == observe.fingerprint(y)  # taken once, shared
    # a rerun that differs, even within tolerance, is compared in full
    runs.new_frame()
    close = y.clone()
    close[3] += 1e-6
    assert runs.compare(ref, _tree(close)).ok and calls[0] == 2
    # one that is wrong is refused, however it was crafted against the public weights
    runs.new_frame()
    wrong = _cancelling_change(y, _old_weights(y.numel()), 1, 2, 3)
    verdict = runs.compare(ref, _tree(wrong))
    assert not verdict.ok and calls[0] == 3


def test_a_refused_run_is_not_remembered_and_a_match_counts_only_for_its_own_reference(monkeypatch):
    calls = _counting_compare(monkeypatch)
    y = torch.randn(1000)
    ref_a, ref_b = _tree(y.clone()), _tree(y * 2)
    runs = MatchedRuns()
    bad = _tree(y + 1)
    assert not runs.compare(ref_a, bad).ok
    assert not runs.compare(ref_a, _tree((y + 1).clone())).ok and calls[0] == 2
    assert runs.compare(ref_a, _tree(y.clone())).ok
    assert not runs.compare(ref_b, _tree(y.clone())).ok and calls[0] == 4  # another seed's reference


def test_small_outputs_or_references_on_the_gpu_are_compared_as_before(monkeypatch):
    calls = [0]
    real = matched_runs.compare_outputs
    monkeypatch.setattr(matched_runs, "compare_outputs", lambda r, o, s=1.0: (calls.__setitem__(0, calls[0] + 1), real(r, o, s))[1])
    y = torch.randn(100)
    runs = MatchedRuns()
    for _ in range(3):
        assert runs.compare(_tree(y), _tree(y.clone())).ok
    assert calls[0] == 3 and runs.prints == {}
