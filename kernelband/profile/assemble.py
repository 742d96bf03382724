"""Turn a profile's tiers into what the search and the editor use: the 9-dim hardware
vector phi, the clustering vectors, the saturation and the diagnosis. Pure (no torch):
runs in the worker after tiers 1-2 and again in the session when tier 3's counters
arrive (``attach_counters``). Each returns a new Profile; none changes the one it is given.

The clustering features are named here, once (``FEATURE_SETS``; search/cluster.py
clusters on them). Their one rule for what is not known: None in the profile (null on
the wire), NaN in the clustering matrix, where it takes its column's mean.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional

from .diagnose import diagnose_profile
from .schema import CounterTier, Launch, Profile, StaticTier, TimingTier, decode

# DESIGN section 2, in order; units as Nsight Compute reports them (kernelband/search/compat.py).
PHI_NAMES: tuple[str, ...] = (
    "l2_hit_rate",  # %
    "dram_throughput",  # % of peak
    "sm_throughput",  # % of peak
    "warp_efficiency",  # % of active threads per executed warp instruction
    "achieved_occupancy",  # % of max resident warps
    "registers_per_thread",
    "shared_bank_conflicts",  # bank conflicts per shared-memory instruction
    "sectors_per_request",  # global-load sectors per request
    "tensor_core_utilisation",  # % of peak tensor-pipe cycles
)

# Clustering features, in order. A raw value is looked up under the name after
# "log_"/"log2_" (time_ms, footprint_bytes, ...: ``runtime_values``).
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    # log time, log memory footprint, arithmetic intensity (FLOP/byte), block dims
    # (log2 of elements per program = product of BLOCK_* sizes), occupancy (0..1)
    "v1": ("log_time_ms", "log_footprint_bytes", "arithmetic_intensity", "log2_block_elems", "occupancy"),
    # log time, registers/thread, shared memory KB, log threads per program (num_warps*32), occupancy
    "v2": ("log_time_ms", "registers", "shared_kb", "log_threads", "occupancy"),
}


def _clamp01(x: Optional[float]) -> Optional[float]:
    if x is None or not math.isfinite(x):
        return None
    return round(min(max(float(x), 0.0), 1.0), 4)


def runtime_values(p: Profile) -> dict[str, Optional[float]]:
    st, tm, launch = p.tiers.static or StaticTier(), p.tiers.timing or TimingTier(), p.launch or Launch()
    threads = st.threads_per_program
    if threads is None and launch.num_warps:
        threads = launch.num_warps * 32
    return {
        "time_ms": p.time_ms,
        "footprint_bytes": launch.footprint_bytes,
        "arithmetic_intensity": tm.arithmetic_intensity,
        "block_elems": launch.block_elems,
        "occupancy": p.occupancy,
        "registers": st.n_regs,
        "shared_kb": st.shared_bytes / 1024.0 if st.shared_bytes is not None else None,
        "threads": threads,
    }


def runtime_vector(values: Mapping[str, Optional[float]], feature_set: str) -> list[Optional[float]]:
    """The clustering vector of ``feature_set`` from raw values: None for a value not
    known, or not positive under a log."""
    try:
        names = FEATURE_SETS[feature_set]
    except KeyError:
        raise ValueError(f"feature_set must be one of {sorted(FEATURE_SETS)}, not {feature_set!r}") from None
    out: list[Optional[float]] = []
    for name in names:
        fn, key = None, name
        for prefix, f in (("log2_", math.log2), ("log_", math.log)):
            if name.startswith(prefix):
                fn, key = f, name[len(prefix) :]
                break
        raw = values.get(key)
        if raw is None or not math.isfinite(float(raw)) or (fn is not None and raw <= 0):
            out.append(None)
        else:
            out.append(round(float(fn(raw) if fn else raw), 6))
    return out


def saturation(p: Profile) -> tuple[dict[str, Optional[float]], dict[str, str]]:
    """{"L2","DRAM","SM"} as fractions of peak (None = unknown) and where each came from."""
    tm = p.tiers.timing or TimingTier()
    sat: dict[str, Optional[float]] = {"L2": None, "DRAM": None, "SM": None}
    basis = {"L2": "unknown", "DRAM": "unknown", "SM": "unknown"}
    for key, metric in (("L2", "l2_throughput"), ("DRAM", "dram_throughput"), ("SM", "sm_throughput")):
        pct = p.counter(metric)
        if pct is not None:
            sat[key], basis[key] = _clamp01(pct / 100.0), "ncu"
    if sat["DRAM"] is None and tm.bandwidth_frac is not None:
        sat["DRAM"], basis["DRAM"] = _clamp01(tm.bandwidth_frac), "timing (bytes / measured copy bandwidth)"
    if sat["SM"] is None and tm.compute_frac is not None:
        sat["SM"], basis["SM"] = _clamp01(tm.compute_frac), "timing (FLOPs / measured matrix rate)"
    return sat, basis


def phi(p: Profile) -> Optional[list[Optional[float]]]:
    values = p.tiers.counters.values if p.tiers.counters else None
    return [values.get(n) for n in PHI_NAMES] if values else None


def derive(p: Profile) -> Profile:
    """The profile with every derived field computed from its tiers."""
    values = runtime_values(p)
    sat, basis = saturation(p)
    return dataclasses.replace(
        p,
        runtime_values=values,
        phi=phi(p),
        saturation=sat,
        saturation_basis=basis,
        runtime_vectors={fs: runtime_vector(values, fs) for fs in FEATURE_SETS},
        diagnosis=diagnose_profile(p),
    )


def attach_counters(p: Profile, result: Mapping[str, object]) -> Profile:
    """The profile with a tier-3 result of worker.counters.collect_counters, re-derived."""
    unavailable = {k: v for k, v in p.unavailable.items() if k != "counters"}
    counters = None
    if result.get("ok"):
        counters = decode(CounterTier, {k: v for k, v in result.items() if k not in ("ok", "reason")}, "counters")
    else:
        unavailable["counters"] = str(result.get("reason") or "counters unavailable")
    return derive(
        dataclasses.replace(p, tiers=dataclasses.replace(p.tiers, counters=counters), unavailable=unavailable)
    )
