"""Diagnosis: a profile's numbers -> a bottleneck class, the evidence in words, and
the strategies it points to (names from kernelband/strategies.py). Pure functions.

Classes (the thresholds are module constants):
- launch-bound: a launch takes under LAUNCH_BOUND_MS and uses little of any peak, so
  launch overhead and ramp-up dominate.
- memory-bound: DRAM at >= BOUND_FRACTION of the measured copy bandwidth (or of ncu's
  DRAM peak), and more so than compute.
- compute-bound: compute at >= BOUND_FRACTION of the measured matrix rate (or ncu's SM
  throughput), and more so than memory.
- latency-bound: neither is near its peak: the kernel waits (too few programs,
  low occupancy, spills, dependent loads). Shown as "latency/occupancy-bound".
- unknown: no peaks to compare against (the interpreter, or facts not measured).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..strategies import STRATEGIES
from .schema import Diagnosis, Launch, Profile, StaticTier, TimingTier

BOUND_FRACTION = 0.6  # ncu's "speed of light" convention for a saturated unit
LAUNCH_BOUND_MS = 0.010  # 10 us per launch: a few launch overheads
LAUNCH_MAX_FRACTION = 0.3
LOW_LOAD_EFFICIENCY_PCT = 60.0  # % of each fetched sector's bytes actually used
LOW_L2_HIT_PCT = 50.0
LOW_TENSOR_PCT = 50.0
LOW_OCCUPANCY = 0.25
BANK_CONFLICTS_PER_REQUEST = 1.0
L2_OVER_DRAM = 1.5  # L2 throughput this many times DRAM's: re-reads, not just streaming through L2


@dataclass
class Numbers:
    """Everything the rules look at; None = not known."""

    interpreted: bool = False
    time_per_launch_ms: Optional[float] = None
    launches: int = 1
    bytes_total: Optional[int] = None
    flops: Optional[int] = None
    dram_frac: Optional[float] = None  # achieved bandwidth / measured copy peak (tier 2)
    compute_frac: Optional[float] = None  # achieved FLOP/s / measured matrix peak (tier 2)
    compute_peak: Optional[str] = None  # "bf16" | "tf32" | "fp32"
    arithmetic_intensity: Optional[float] = None
    ridge: Optional[float] = None
    has_dot: bool = False
    # tier 1
    n_regs: Optional[int] = None
    n_spills: Optional[int] = None
    occupancy: Optional[float] = None  # theoretical
    occupancy_limiter: Optional[str] = None
    programs: Optional[int] = None
    sm_count: Optional[int] = None
    block_elems: Optional[int] = None  # product of the BLOCK_* constexprs
    threads: Optional[int] = None  # threads per program
    # tier 3 (percent as ncu reports them)
    dram_pct: Optional[float] = None
    sm_pct: Optional[float] = None
    l2_pct: Optional[float] = None
    l2_hit_pct: Optional[float] = None
    achieved_occupancy_pct: Optional[float] = None
    warp_efficiency_pct: Optional[float] = None
    load_efficiency_pct: Optional[float] = None
    sectors_per_request: Optional[float] = None
    bank_conflicts_per_request: Optional[float] = None
    tensor_pct: Optional[float] = None


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _us_or_ms(ms: float) -> str:
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.2f} ms"


def _mb(b: int) -> str:
    return f"{b / 1e6:.2f} MB" if b >= 1e5 else f"{b / 1e3:.1f} kB"


def _ordered(names: list[str]) -> list[str]:
    """The known strategies among ``names``, each once, in the order first named."""
    return [n for n in dict.fromkeys(names) if n in STRATEGIES]


def _occupancy_note(n: Numbers) -> Optional[str]:
    """Low occupancy in words; the limiter only where the theoretical value is the low one."""
    theo = n.occupancy
    why = f", limited by {n.occupancy_limiter.replace('_', ' ')}" if n.occupancy_limiter else ""
    if n.achieved_occupancy_pct is not None:
        ach = n.achieved_occupancy_pct / 100
        if ach >= LOW_OCCUPANCY * 2:
            return None
        if theo is None:
            return f"achieved occupancy {_pct(ach)}"
        if theo >= LOW_OCCUPANCY * 2:
            return f"achieved occupancy {_pct(ach)} of a theoretical {_pct(theo)}: programs start and end too quickly"
        return f"achieved occupancy {_pct(ach)} (theoretical {_pct(theo)}{why})"
    if theo is None or theo >= LOW_OCCUPANCY * 2:
        return None
    return f"theoretical occupancy {_pct(theo)}{why}"


def _static_only(n: Numbers) -> Diagnosis:
    """Tier 1: no timing, so no bottleneck; say what the compile metadata shows."""
    notes: list[str] = []
    strategies: list[str] = []
    if n.occupancy is not None:
        why = f", limited by {n.occupancy_limiter.replace('_', ' ')}" if n.occupancy_limiter and n.occupancy < 1 else ""
        notes.append(f"theoretical occupancy {_pct(n.occupancy)}{why}")
    if n.n_regs is not None:
        notes.append(f"{n.n_regs} registers/thread")
    if n.n_spills:
        notes.append(f"{n.n_spills} registers spilled")
        strategies.append("tiling")
    if not notes:
        return Diagnosis(
            "unknown",
            "unknown: no measured device peaks or counters to compare against "
            "(profile at tier 2 with device facts, or tier 3).",
            [],
        )
    return Diagnosis(
        "unknown",
        "unknown: no timing at tier 1 to place against the peaks; " + "; ".join(notes) + ".",
        _ordered(strategies),
    )


def diagnose(n: Numbers) -> Diagnosis:
    mem = n.dram_pct / 100 if n.dram_pct is not None else n.dram_frac
    comp = n.sm_pct / 100 if n.sm_pct is not None else n.compute_frac
    l2 = n.l2_pct / 100 if n.l2_pct is not None else None
    mem_src = "DRAM peak" if n.dram_pct is not None else "measured copy bandwidth"
    if n.interpreted:
        return _interpreted(n)
    if mem is None and comp is None:
        return _static_only(n)
    m = mem or 0.0
    c = comp or 0.0
    if (
        n.time_per_launch_ms is not None
        and n.time_per_launch_ms < LAUNCH_BOUND_MS
        and max(m, c, l2 or 0.0) < LAUNCH_MAX_FRACTION
    ):
        ev = f"launch-bound: {_us_or_ms(n.time_per_launch_ms)} per launch at {_pct(m)} of {mem_src}"
        if n.programs is not None and n.sm_count:
            ev += f" ({n.programs} programs for {n.sm_count} SMs)"
        ev += "; fixed launch cost dominates: do more work per launch or fuse launches."
        return Diagnosis("launch-bound", ev, _ordered(["fusion", "tiling"]))
    if m >= BOUND_FRACTION and m >= c:
        return _dram_bound(n, m, mem_src)
    if l2 is not None and l2 >= BOUND_FRACTION and l2 > c and l2 >= L2_OVER_DRAM * m:
        # L2 busier than DRAM by far: the same data is fetched through L2 again and again
        ev = f"memory-bound: L2 at {_pct(l2)} of peak (DRAM {_pct(m)}): data is re-read through L2"
        ev += (
            "; larger tiles would reuse more of it from registers and shared memory"
            if n.has_dot
            else "; keep reused values in registers instead of re-loading them"
        )
        return Diagnosis("memory-bound", ev + ".", _ordered(["tiling", "reordering", "access_layout"]))
    if c >= BOUND_FRACTION and c > m:
        return _compute_bound(n, c)
    return _latency_bound(n, m, c, comp, mem_src)


def _interpreted(n: Numbers) -> Diagnosis:
    bits = []
    if n.time_per_launch_ms is not None:
        bits.append(f"{_us_or_ms(n.time_per_launch_ms)} per launch is CPU time")
    if n.bytes_total is not None:
        bits.append(f"{_mb(n.bytes_total)} moved")
    bits.append(f"{n.flops:.3g} FLOPs" if n.flops is not None else "FLOPs unknown")
    return Diagnosis("unknown", "unknown: no GPU peaks under the interpreter (" + "; ".join(bits) + ").", [])


def _with(ev: str, extras: list[str]) -> str:
    return ev + ("; " + "; ".join(extras) if extras else "") + "."


def _dram_bound(n: Numbers, m: float, mem_src: str) -> Diagnosis:
    extras: list[str] = []
    strategies: list[str] = []
    coalesce_bad = n.load_efficiency_pct is not None and n.load_efficiency_pct < LOW_LOAD_EFFICIENCY_PCT
    if coalesce_bad:
        spr = f"{n.sectors_per_request:.1f} sectors/request, " if n.sectors_per_request is not None else ""
        extras.append(f"loads are not coalesced ({spr}{n.load_efficiency_pct:.0f}% of fetched bytes used)")
        strategies += ["vectorization", "access_layout"]
    if n.l2_hit_pct is not None and n.l2_hit_pct < LOW_L2_HIT_PCT and n.has_dot:
        extras.append(f"L2 hit rate {n.l2_hit_pct:.0f}%: inputs are re-read from DRAM")
        strategies += ["reordering", "access_layout"]
    if n.has_dot:  # a matmul that waits on DRAM re-reads tiles: reuse them through L2 first
        strategies.append("reordering")
    strategies += ["fusion", "vectorization", "access_layout"]
    return Diagnosis("memory-bound", _with(f"memory-bound: {_pct(m)} of {mem_src}", extras), _ordered(strategies))


def _compute_bound(n: Numbers, c: float) -> Diagnosis:
    extras: list[str] = []
    if n.sm_pct is not None:
        ev = f"compute-bound: SM throughput {n.sm_pct:.0f}% of peak"
    else:
        ev = f"compute-bound: {_pct(c)} of the measured {n.compute_peak or 'matrix'} matrix rate"
    if n.tensor_pct is not None and n.has_dot and n.tensor_pct < LOW_TENSOR_PCT:
        extras.append(f"tensor cores busy only {n.tensor_pct:.0f}% of cycles")
    if n.n_spills:
        extras.append(f"{n.n_spills} registers spilled")
    strategies = ["tiling", "pipeline"] + (["reordering"] if n.has_dot else [])
    return Diagnosis("compute-bound", _with(ev, extras), _ordered(strategies))


def _latency_bound(n: Numbers, m: float, c: float, comp: Optional[float], mem_src: str) -> Diagnosis:
    """Neither unit near its peak: latency / occupancy, and what hides it."""
    parts = [f"{_pct(m)} of {mem_src}"]
    if comp is not None:
        parts.append(f"{_pct(c)} of compute peak" if n.sm_pct is None else f"SM throughput {n.sm_pct:.0f}%")
    elif n.flops is None:
        parts.append("FLOPs unknown")
    ev = "latency-bound: " + " and ".join(parts)
    extras, strategies = _latency_causes(n, c, comp)
    if not extras:
        extras.append("no unit is near its peak: memory latency is not hidden")
    strategies += ["pipeline", "tiling", "vectorization"]
    return Diagnosis("latency-bound", ev + "; " + "; ".join(extras) + ".", _ordered(strategies))


def _latency_causes(n: Numbers, c: float, comp: Optional[float]) -> tuple[list[str], list[str]]:
    extras: list[str] = []
    strategies: list[str] = []
    if n.programs is not None and n.sm_count and n.programs < n.sm_count:
        extras.append(f"only {n.programs} programs for {n.sm_count} SMs")
        strategies.append("tiling")
    if n.has_dot:
        if n.tensor_pct is not None and n.tensor_pct < LOW_TENSOR_PCT:
            extras.append(f"tensor cores busy only {n.tensor_pct:.0f}% of cycles")
            strategies += ["tiling", "pipeline"]
        elif n.tensor_pct is None and comp is not None and c < LAUNCH_MAX_FRACTION:
            extras.append("the matrix units are starved: tiles too small or loads not pipelined")
            strategies += ["tiling", "pipeline"]
    elif n.block_elems and n.threads and n.block_elems / n.threads <= 2:
        per = n.block_elems / n.threads
        extras.append(
            f"{per:g} element{'s' if per != 1 else ''} per thread ({n.block_elems} per program): "
            "too little work per program to hide memory latency"
        )
        strategies += ["tiling", "vectorization"]
    occ = _occupancy_note(n)
    if occ:
        extras.append(occ)
        strategies += ["tiling", "pipeline"]
    if n.n_spills:
        extras.append(f"{n.n_spills} registers spilled")
        strategies.append("tiling")
    if n.load_efficiency_pct is not None and n.load_efficiency_pct < LOW_LOAD_EFFICIENCY_PCT:
        extras.append(f"loads use {n.load_efficiency_pct:.0f}% of fetched bytes")
        strategies.append("vectorization")
    if n.bank_conflicts_per_request is not None and n.bank_conflicts_per_request >= BANK_CONFLICTS_PER_REQUEST:
        extras.append(f"{n.bank_conflicts_per_request:.1f} shared-memory bank conflicts per request")
        strategies.append("access_layout")
    return extras, strategies


def numbers_from_profile(p: Profile) -> Numbers:
    st, tm, launch = p.tiers.static or StaticTier(), p.tiers.timing or TimingTier(), p.launch or Launch()
    occ, ct = st.occupancy, p.counter
    return Numbers(
        interpreted=p.interpreted,
        time_per_launch_ms=p.time_per_launch_ms,
        launches=tm.launches or 1,
        bytes_total=tm.bytes_total,
        flops=tm.flops,
        dram_frac=tm.bandwidth_frac,
        compute_frac=tm.compute_frac,
        compute_peak=tm.compute_peak,
        arithmetic_intensity=tm.arithmetic_intensity,
        ridge=tm.roofline.ridge if tm.roofline else None,
        has_dot=p.has_dot,
        n_regs=st.n_regs,
        n_spills=st.n_spills,
        occupancy=occ.theoretical if occ else None,
        occupancy_limiter=occ.limiter if occ else None,
        programs=launch.programs,
        sm_count=p.device.sm_count,
        block_elems=launch.block_elems,
        threads=st.threads_per_program or ((launch.num_warps or 4) * 32 if p.launch else None),
        dram_pct=ct("dram_throughput"),
        sm_pct=ct("sm_throughput"),
        l2_pct=ct("l2_throughput"),
        l2_hit_pct=ct("l2_hit_rate"),
        achieved_occupancy_pct=ct("achieved_occupancy"),
        warp_efficiency_pct=ct("warp_efficiency"),
        load_efficiency_pct=ct("load_efficiency"),
        sectors_per_request=ct("sectors_per_request"),
        bank_conflicts_per_request=ct("shared_bank_conflicts"),
        tensor_pct=ct("tensor_core_utilisation"),
    )


def diagnose_profile(p: Profile) -> Diagnosis:
    return diagnose(numbers_from_profile(p))
