"""Turn a profile's tiers into what the search and the editor use: the 9-dim hardware
vector phi, the clustering vectors, the saturation dict and the diagnosis. Pure (no
torch): runs in the worker after tiers 1-2 and again in the session when tier 3's
counters arrive (``attach_counters``).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .diagnose import diagnose_profile

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

# Clustering features (kernelband/search/cluster.py FEATURE_SETS): raw values by name.
RUNTIME_FEATURES: dict[str, tuple[str, ...]] = {
    "v1": ("log_time_ms", "log_footprint_bytes", "arithmetic_intensity", "log2_block_elems", "occupancy"),
    "v2": ("log_time_ms", "registers", "shared_kb", "log_threads", "occupancy"),
}


def _clamp01(x: Optional[float]) -> Optional[float]:
    if x is None or not math.isfinite(x):
        return None
    return round(min(max(float(x), 0.0), 1.0), 4)


def runtime_values(profile: dict[str, Any]) -> dict[str, Optional[float]]:
    tiers = profile.get("tiers") or {}
    st = tiers.get("static") or {}
    tm = tiers.get("timing") or {}
    ct = (tiers.get("counters") or {}).get("values") or {}
    launch = profile.get("launch") or {}
    occ: Optional[float] = None
    if ct.get("achieved_occupancy") is not None:
        occ = ct["achieved_occupancy"] / 100.0
    elif (st.get("occupancy") or {}).get("theoretical") is not None:
        occ = st["occupancy"]["theoretical"]
    threads = st.get("threads_per_program")
    if threads is None and launch.get("num_warps"):
        threads = launch["num_warps"] * 32
    shared = st.get("shared_bytes")
    return {
        "time_ms": profile.get("time_ms"),
        "footprint_bytes": launch.get("footprint_bytes"),
        "arithmetic_intensity": tm.get("arithmetic_intensity"),
        "block_elems": launch.get("block_elems"),
        "occupancy": occ,
        "registers": st.get("n_regs"),
        "shared_kb": shared / 1024.0 if shared is not None else None,
        "threads": threads,
    }


def runtime_vector(values: dict[str, Optional[float]], feature_set: str) -> list[float]:
    """Like search.cluster.runtime_vector, but JSON-safe: an unknown feature is 0.0
    (within one pool the same features are unknown for every member, so a constant
    column that standardises to 0), never NaN."""
    out: list[float] = []
    for name in RUNTIME_FEATURES[feature_set]:
        fn = None
        key = name
        for prefix, f in (("log2_", math.log2), ("log_", math.log)):
            if name.startswith(prefix):
                key, fn = name[len(prefix):], f
                break
        raw = values.get(key)
        if raw is None or (fn is not None and raw <= 0) or not math.isfinite(float(raw)):
            out.append(0.0)
        else:
            out.append(round(float(fn(raw) if fn else raw), 6))
    return out


def saturation(profile: dict[str, Any]) -> tuple[dict[str, Optional[float]], dict[str, str]]:
    """{"L2","DRAM","SM"} as fractions of peak (None = unknown) and where each came from."""
    tiers = profile.get("tiers") or {}
    tm = tiers.get("timing") or {}
    ct = (tiers.get("counters") or {}).get("values") or {}
    sat: dict[str, Optional[float]] = {"L2": None, "DRAM": None, "SM": None}
    basis = {"L2": "unknown", "DRAM": "unknown", "SM": "unknown"}
    for key, metric in (("L2", "l2_throughput"), ("DRAM", "dram_throughput"), ("SM", "sm_throughput")):
        if ct.get(metric) is not None:
            sat[key], basis[key] = _clamp01(ct[metric] / 100.0), "ncu"
    if sat["DRAM"] is None and tm.get("bandwidth_frac") is not None:
        sat["DRAM"], basis["DRAM"] = _clamp01(tm["bandwidth_frac"]), "timing (bytes / measured copy bandwidth)"
    if sat["SM"] is None and tm.get("compute_frac") is not None:
        sat["SM"], basis["SM"] = _clamp01(tm["compute_frac"]), "timing (FLOPs / measured matrix rate)"
    return sat, basis


def phi(profile: dict[str, Any]) -> Optional[list[Optional[float]]]:
    ct = (profile.get("tiers") or {}).get("counters") or {}
    values = ct.get("values")
    if not values:
        return None
    return [values.get(n) for n in PHI_NAMES]


def finalize(profile: dict[str, Any]) -> dict[str, Any]:
    """(Re)compute every derived field of a profile from its tiers, in place."""
    values = runtime_values(profile)
    profile["runtime_values"] = values
    profile["runtime_vectors"] = {fs: runtime_vector(values, fs) for fs in RUNTIME_FEATURES}
    profile["runtime_vector"] = profile["runtime_vectors"]["v1"]
    profile["phi"] = phi(profile)
    profile["phi_names"] = list(PHI_NAMES)
    profile["saturation"], profile["saturation_basis"] = saturation(profile)
    profile["diagnosis"] = diagnose_profile(profile).to_dict()
    return profile


def attach_counters(profile: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Merge a tier-3 result from ncu.collect_counters into a profile and re-derive."""
    tiers = profile.setdefault("tiers", {"static": None, "timing": None, "counters": None})
    unavailable = profile.setdefault("unavailable", {})
    if result.get("ok"):
        tiers["counters"] = {k: v for k, v in result.items() if k not in ("ok", "reason")}
        unavailable.pop("counters", None)
    else:
        tiers["counters"] = None
        unavailable["counters"] = result.get("reason") or "counters unavailable"
    return finalize(profile)
