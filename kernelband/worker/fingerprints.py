"""Content hashes and memory identities of tensors, for the variant process's launch
capture and its replay state (no dependency on either)."""

from __future__ import annotations

from typing import Any

import torch

# --------------------------------------------------------------------------- fingerprints
_FP_CHUNK = 1 << 24


def fingerprint(t: torch.Tensor) -> tuple[int, int]:
    """A cheap content hash of a tensor (two weighted sums over its bytes viewed as
    integers), computed in slices so memory stays bounded. Equal content gives equal
    fingerprints; a change of any element changes them except with negligible chance."""
    from . import timeline

    with timeline.span("fingerprint"):
        return _fingerprint(t)


def _fingerprint(t: torch.Tensor) -> tuple[int, int]:
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return (0, 0)
    raw = flat.contiguous().view(torch.uint8) if flat.element_size() not in (2, 4, 8) else flat
    if raw.dtype.is_floating_point or raw.dtype in (torch.bool, torch.complex64, torch.complex128):
        size = raw.element_size()
        raw = raw.contiguous().view(
            {2: torch.int16, 4: torch.int32, 8: torch.int64, 1: torch.uint8}.get(size, torch.uint8)
        )
    s1 = 0
    s2 = 0
    mask = (1 << 64) - 1
    for start in range(0, raw.numel(), _FP_CHUNK):
        part = raw[start : start + _FP_CHUNK].to(torch.int64)
        w = torch.arange(start + 1, start + 1 + part.numel(), device=part.device, dtype=torch.int64)
        s1 = (s1 + int(part.sum())) & mask
        s2 = (s2 + int((part * (w * 2654435761 % 1000003 + 1)).sum())) & mask
    return (s1, s2)


def tensor_key(t: torch.Tensor) -> tuple[Any, ...]:
    """Identity of the memory a tensor argument views (the same buffer passed twice is one output)."""
    return (t.device.type, t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype))
