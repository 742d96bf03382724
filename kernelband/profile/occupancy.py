"""Theoretical occupancy of a compiled kernel from the device's limits (pure).

Follows the CUDA occupancy calculator: resident programs (CTAs) per SM are limited
by warps, registers (allocated per warp in units of 256), shared memory (allocated
in 128-byte units plus a per-CTA reservation on sm_80+) and a hard CTA count. The
result is the fraction of the SM's warp slots a full wave keeps busy, and which
limit binds.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from .schema import DeviceFacts

# Per compute capability: (max warps per SM, max CTAs per SM, shared memory per SM in
# bytes, reserved shared memory per CTA). Used when the facts do not say.
_ARCH_LIMITS: dict[tuple[int, int], tuple[int, int, int, int]] = {
    (7, 0): (64, 32, 96 * 1024, 0),
    (7, 2): (64, 32, 96 * 1024, 0),
    (7, 5): (32, 16, 64 * 1024, 0),
    (8, 0): (64, 32, 164 * 1024, 1024),
    (8, 6): (48, 16, 100 * 1024, 1024),
    (8, 7): (48, 16, 164 * 1024, 1024),
    (8, 9): (48, 24, 100 * 1024, 1024),
    (9, 0): (64, 32, 228 * 1024, 1024),
    (10, 0): (64, 32, 228 * 1024, 1024),
    (12, 0): (48, 32, 100 * 1024, 1024),
}
REGS_PER_SM = 65536
REG_ALLOC_UNIT = 256  # registers, per warp
SHARED_ALLOC_UNIT = 128  # bytes


def arch_limits(major: Optional[int], minor: Optional[int]) -> dict[str, int]:
    """Default limits for a compute capability (nearest lower known one)."""
    key = (major or 8, minor or 0)
    known = sorted(k for k in _ARCH_LIMITS if k <= key) or [(8, 0)]
    warps, ctas, smem, reserved = _ARCH_LIMITS[known[-1]]
    return {
        "max_warps_per_sm": warps,
        "max_blocks_per_sm": ctas,
        "shared_per_sm": smem,
        "reserved_shared_per_block": reserved,
        "regs_per_sm": REGS_PER_SM,
        "warp_size": 32,
    }


def limits_from_facts(facts: DeviceFacts) -> dict[str, int]:
    """The limits the facts give, defaults for the rest (by compute capability)."""
    cc = facts.compute_capability or ""
    major = minor = None
    if "." in cc:
        try:
            major, minor = (int(x) for x in cc.split(".", 1))
        except ValueError:
            pass
    out = arch_limits(major, minor)
    given = {
        "max_warps_per_sm": facts.max_warps_per_sm,
        "max_blocks_per_sm": facts.max_blocks_per_sm,
        "shared_per_sm": facts.shared_per_sm,
        "reserved_shared_per_block": facts.reserved_shared_per_block,
        "regs_per_sm": facts.regs_per_sm,
        "warp_size": facts.warp_size,
    }
    out.update({k: v for k, v in given.items() if v is not None and v > 0})
    return out


def _ceil_to(x: int, unit: int) -> int:
    return int(math.ceil(x / unit) * unit)


def occupancy(
    num_warps: int,
    regs_per_thread: Optional[int],
    shared_bytes: Optional[int],
    limits: dict[str, int],
    programs: Optional[int] = None,
    sm_count: Optional[int] = None,
) -> dict[str, Any]:
    """Resident CTAs per SM, theoretical occupancy (0..1) and the binding limit.

    ``programs`` and ``sm_count`` add the number of waves (programs over what the
    whole GPU holds at once) and whether the grid fills the GPU at all."""
    warp_size = limits.get("warp_size", 32)
    max_warps = limits["max_warps_per_sm"]
    by: dict[str, float] = {"blocks": limits["max_blocks_per_sm"]}
    warps = max(1, int(num_warps))
    by["warps"] = max_warps // warps
    if regs_per_thread:
        per_warp = _ceil_to(int(regs_per_thread) * warp_size, REG_ALLOC_UNIT)
        by["registers"] = (limits["regs_per_sm"] // per_warp) // warps
    smem = int(shared_bytes or 0)
    if smem > 0 or limits.get("reserved_shared_per_block", 0):
        per_block = _ceil_to(smem + limits.get("reserved_shared_per_block", 0), SHARED_ALLOC_UNIT)
        by["shared_memory"] = limits["shared_per_sm"] // per_block if per_block else math.inf
    blocks = int(min(by.values()))
    # the binding limit: the smallest; on ties the hard caps first (a tie with the warp
    # cap means the resource is not what stops more programs from fitting)
    order = ["warps", "blocks", "registers", "shared_memory"]
    limiter = min((k for k in order if k in by), key=lambda k: (by[k], order.index(k)))
    out: dict[str, Any] = {
        "blocks_per_sm": blocks,
        "warps_per_sm": blocks * warps,
        "max_warps_per_sm": max_warps,
        "theoretical": round(blocks * warps / max_warps, 4) if max_warps else None,
        "limiter": limiter,
        "limits": {k: (None if v == math.inf else int(v)) for k, v in by.items()},
    }
    if programs is not None and sm_count:
        per_wave = max(1, blocks) * sm_count
        out["waves"] = round(programs / per_wave, 3)
        out["sm_fill"] = round(min(1.0, programs / sm_count), 4)
    return out
