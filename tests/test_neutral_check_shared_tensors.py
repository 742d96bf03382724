"""The neutralised-launch check (``checks.change_masks`` / ``checks.unproduced``) passes
over a tensor that appears under several paths of an output tree (a result both returned
and written) once, not once per path: each pass over a production-size output cost
seconds where its reference lives on the host. Pairs of *different* tensors are still
checked each: a variant that returns a cached copy beside the tensor its launches write
is caught under the returned path."""
from __future__ import annotations

import torch

from kernelband.worker import checks


def _tree(returned: torch.Tensor, written: torch.Tensor) -> dict:
    return {"returned": [returned], "written": {"k.Y": [written]}}


def _count_passes(monkeypatch) -> list[int]:
    calls = [0]
    real = checks.chunk_pairs

    def counting(a, b, dtype=None):
        calls[0] += 1
        return real(a, b, dtype)

    monkeypatch.setattr(checks, "chunk_pairs", counting)
    return calls


def test_a_tensor_returned_and_written_is_masked_and_checked_once(monkeypatch):
    y = torch.randn(1000)
    ref = _tree(y, y)
    poisoned = torch.full_like(y, float("nan"))
    calls = _count_passes(monkeypatch)
    masks = checks.change_masks(ref, _tree(poisoned, poisoned))
    assert calls[0] == 1 and set(masks.values()) == {True}
    calls[0] = 0
    assert checks.unproduced(ref, masks, _tree(poisoned, poisoned)) is None
    assert calls[0] == 1


def test_a_cached_copy_returned_beside_the_written_tensor_is_still_refused(monkeypatch):
    y = torch.randn(1000)
    ref = _tree(y, y)
    masks = checks.change_masks(ref, _tree(torch.zeros_like(y), torch.zeros_like(y)))
    # neutralised: the launches wrote poison, but the wrapper returns a result torch made
    neutral_written = torch.full_like(y, float("nan"))
    cached = y.clone()
    reason = checks.unproduced(ref, masks, _tree(cached, neutral_written))
    assert reason is not None and "returned" in reason and "do not depend on the variant's launches" in reason


def test_a_partial_mask_is_counted_with_one_synchronisation_and_the_same_verdict():
    y = torch.randn(1 << 12)
    neutral_original = y.clone()
    neutral_original[::2] = float("nan")  # the original's launches produce every other element
    ref = _tree(y, y)
    masks = checks.change_masks(ref, _tree(neutral_original, neutral_original))
    mask = masks["output['returned'][0]"]
    assert isinstance(mask, torch.Tensor) and int(mask.sum()) == y.numel() // 2
    honest = torch.full_like(y, float("nan"))
    assert checks.unproduced(ref, masks, _tree(honest, honest)) is None
    partly_cached = honest.clone()
    partly_cached[:8] = y[:8]  # four of the produced elements come from elsewhere
    reason = checks.unproduced(ref, masks, _tree(partly_cached, partly_cached))
    assert reason is not None and f"4 of {y.numel() // 2} elements" in reason
