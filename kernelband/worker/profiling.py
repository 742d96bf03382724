"""In-worker entry point (the variant process): ``collect_profile`` builds the typed Profile
(``kernelband.profile.schema``) from the launches the harness made.

Tier 1 (static) needs compiled binaries; tier 2 (timing) works everywhere, though
under the interpreter its times are CPU times and there are no peaks to compare
with; tier 3 (counters) runs Nsight Compute as a child process and needs the Task,
which the worker does not pass: the session adds it with ``counters.add_counters``
(or the worker may pass ``task=``). A tier that fails is reported in ``unavailable`` and
never fails the profile.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Callable, Optional

from ..json_types import JsonObject
from ..profile.assemble import attach_counters, derive
from ..profile.ncu import INTERPRETER
from ..profile.schema import DeviceFacts, Launch, Profile, Roofline, StaticTier, TimingTier, decode
from ..profile.static import INTERPRETER_REASON, grid_programs, static_profile
from .counters import COUNTERS_IN_SESSION

if TYPE_CHECKING:  # capture imports torch: the worker's modules load it where they use it
    from ..access import KernelAccess
    from ..model import Task
    from ..store import Store
    from .capture import CapturedLaunch
    from .traffic_replay import LaunchTraffic
_MAX_REPLAYED_SIGNATURES = 8  # distinct launch signatures whose writes are measured by replay


def launch_info(launches: list[CapturedLaunch]) -> JsonObject:
    """Grid, constexprs and footprint of the kernel's first launch (no replay)."""
    from .capture import launch_record as _launch_record  # the worker's own reading of a launch
    from .traffic_replay import tensor_args

    rec = _launch_record(launches[0])
    blocks = [
        int(v)
        for k, v in rec.constexprs.items()
        if k.upper().startswith("BLOCK") and isinstance(v, int) and not isinstance(v, bool) and v > 0
    ]
    return {
        "count": len(launches),
        "grid": list(rec.grid),
        "programs": grid_programs(rec.grid),
        "constexprs": rec.constexprs,
        "num_warps": rec.num_warps,
        "num_stages": rec.num_stages,
        "block_elems": math.prod(blocks) if blocks else None,
        "footprint_bytes": sum(t.nbytes for t in tensor_args(launches[0])),
    }


def _signature(launch: CapturedLaunch) -> tuple[object, ...]:
    import torch

    parts: list[object] = [id(launch.obj)]
    for a in list(launch.args) + [v for k, v in sorted(launch.kwargs.items()) if k not in ("grid", "warmup")]:
        if isinstance(a, torch.Tensor):
            parts.append(("T", tuple(a.shape), tuple(a.stride()), str(a.dtype)))
        elif isinstance(a, (int, float, bool, str)) or a is None:
            parts.append(a)
        else:
            parts.append(type(a).__name__)
    return tuple(parts)


def timing_tier(
    launches: list[CapturedLaunch],
    time_ms: Optional[float],
    facts: DeviceFacts,
    access: KernelAccess,
    interpreted: bool,
    clock: str,
) -> TimingTier:
    from ..profile.traffic import peak_key

    totals, flops, first = _traffic(launches, access)
    n = len(launches)
    bytes_total = totals["bytes_read"] + totals["bytes_written"]
    measured = float(time_ms) if time_ms is not None and math.isfinite(time_ms) else None  # JSON has no NaN
    out = TimingTier(
        time_ms=measured,
        clock=clock,
        launches=n,
        time_per_launch_ms=measured / n if measured is not None else None,
        bytes_read=totals["bytes_read"],
        bytes_written=totals["bytes_written"],
        bytes_total=bytes_total,
        tensors=[dict(row) for row in first["tensors"]],
        write_detection=first["write_detection"],
        flops=flops,
        flops_note=first["flops_note"],
        arithmetic_intensity=round(flops / bytes_total, 4) if flops is not None and bytes_total else None,
        compute_peak=peak_key(first["dot_dtype"], access.ieee_dot),
    )
    if interpreted or measured is None or measured <= 0:
        out.note = (
            "CPU time under the Triton interpreter: no bandwidth or FLOP/s"
            if interpreted
            else "no time measured: no bandwidth or FLOP/s"
        )
        return out
    seconds = measured * 1e-3
    out.bandwidth_gbs = round(bytes_total / seconds / 1e9, 2)
    if flops is not None:
        out.tflops = round(flops / seconds / 1e12, 3)
    if not facts.has_peaks:
        out.note = "device peaks not measured: no fractions of peak"
        return out
    _against_peaks(out, facts, access)
    return out


def _traffic(
    launches: list[CapturedLaunch], access: KernelAccess
) -> tuple[dict[str, int], Optional[int], LaunchTraffic]:
    """(bytes read and written, FLOPs or None, the first launch's traffic) over every
    launch; launches of one signature are measured once."""
    from .traffic_replay import launch_traffic

    per_sig: dict[tuple[object, ...], LaunchTraffic] = {}
    totals = {"bytes_read": 0, "bytes_written": 0}
    flops: Optional[int] = 0
    first: Optional[LaunchTraffic] = None
    for launch in launches:
        sig = _signature(launch)
        tr = per_sig.get(sig)
        if tr is None:
            tr = launch_traffic(launch, access, replay=len(per_sig) < _MAX_REPLAYED_SIGNATURES)
            per_sig[sig] = tr
        first = first or tr
        totals["bytes_read"] += tr["bytes_read"]
        totals["bytes_written"] += tr["bytes_written"]
        flops = None if (flops is None or tr["flops"] is None) else flops + tr["flops"]
    assert first is not None
    return totals, flops, first


def _against_peaks(out: TimingTier, facts: DeviceFacts, access: KernelAccess) -> None:
    """Fractions of the device's measured peaks, and the roofline (``facts.has_peaks``: a
    copy bandwidth was measured; ``out`` has a bandwidth: a time was)."""
    assert facts.copy_gbs and out.bandwidth_gbs is not None
    bw = float(facts.copy_gbs)
    out.copy_peak_gbs = bw
    out.bandwidth_frac = round(out.bandwidth_gbs / bw, 4)
    peak = facts.peak_tflops(out.compute_peak)
    out.compute_peak_tflops = float(peak) if peak is not None else None
    if peak and out.tflops is not None:
        out.compute_frac = round(out.tflops / peak, 4)
    if peak and out.arithmetic_intensity is not None:
        assert out.tflops is not None  # an intensity means FLOPs were counted, and a time was measured
        ridge = peak * 1e12 / (bw * 1e9)
        ai = out.arithmetic_intensity
        attainable = min(peak, ai * bw / 1e3)
        out.roofline = Roofline(
            ridge=round(ridge, 2),
            bound="memory" if ai < ridge else "compute",
            attainable_tflops=round(float(attainable), 3),
            fraction_of_attainable=round(out.tflops / attainable, 4) if attainable else None,
        )
    elif access.dots == 0:  # elementwise / reduction work: low intensity, judged against the bandwidth roof
        out.roofline = Roofline(
            bound="memory", fraction_of_attainable=out.bandwidth_frac, note="no tl.dot: placed on the bandwidth roof"
        )


def collect_profile(
    launches: list[CapturedLaunch],
    time_ms: Optional[float],
    tier: int,
    facts: DeviceFacts,
    kernel_source: str,
    kernel: str,
    interpreted: bool,
    *,
    task: Optional[Task] = None,
    store: Optional[Store] = None,
    restore: Optional[Callable[[], object]] = None,
) -> Profile:
    """The profile of ``kernel`` from the harness's captured launches at ``tier`` (1-3).

    ``time_ms`` is the worker's median for replaying all of ``launches``; when they
    include other kernels, this kernel's launches are re-timed alone, each replay from
    the kept run's starting state (``restore``), as the worker's timing is."""
    from ..profile.device import interpreter_facts

    t0 = time.perf_counter()
    if interpreted:
        facts = interpreter_facts()
    profile = Profile(kernel=kernel, tier=tier, device=facts, interpreted=interpreted, time_ms=time_ms)
    mine = [launch for launch in launches if getattr(launch, "name", None) == kernel]
    if not mine:
        seen = ", ".join(sorted({getattr(launch, "name", "?") for launch in launches})) or "nothing"
        why = f"the harness launched no {kernel} (it launched: {seen})"
        profile.unavailable = {"static": why, "timing": why, "counters": why}
        return derive(profile)
    time_ms, clock = _time_alone(profile, mine, len(launches), time_ms, interpreted, restore)
    try:
        profile.launch = decode(Launch, launch_info(mine), "launch")
    except Exception as e:  # noqa: BLE001
        profile.launch = Launch(count=len(mine), error=f"{type(e).__name__}: {e}")
    from ..profile.traffic import analyze_kernel

    access = analyze_kernel(kernel_source, kernel)
    profile.has_dot = access.dots > 0
    _static_tier(profile, mine, facts, interpreted)  # tier 1
    if tier >= 2:
        try:
            profile.tiers.timing = timing_tier(mine, time_ms, facts, access, interpreted, clock)
        except Exception as e:  # noqa: BLE001
            profile.unavailable["timing"] = f"error: {type(e).__name__}: {e}"
    else:
        profile.unavailable["timing"] = "not requested (tier 1)"
    if tier >= 3 and not interpreted and task is not None:
        from .counters import collect_counters

        result = collect_counters(
            task, store=store, gpu=facts.name or "", triton_version=facts.triton or "", launches=min(len(mine), 3)
        )
        profile.collect_s = round(time.perf_counter() - t0, 3)
        return attach_counters(profile, result)
    profile.unavailable["counters"] = (
        "not requested (tier < 3)" if tier < 3 else INTERPRETER if interpreted else COUNTERS_IN_SESSION
    )
    profile.collect_s = round(time.perf_counter() - t0, 3)
    return derive(profile)


def _time_alone(
    profile: Profile,
    mine: list[CapturedLaunch],
    n_launches: int,
    time_ms: Optional[float],
    interpreted: bool,
    restore: Optional[Callable[[], object]] = None,
) -> tuple[Optional[float], str]:
    """(time, clock) of this kernel's launches: re-timed alone when the harness launches
    other kernels too (the worker's time covers every launch)."""
    clock = "cpu-interpreter" if interpreted else "cuda-events"
    if len(mine) != n_launches and time_ms is not None:
        try:
            from .timing import time_launches

            t = time_launches(mine, restore=restore)
            profile.time_ms, time_ms, clock = t.median_ms, t.median_ms, t.clock
            profile.retimed = "the harness launches other kernels too: this kernel's launches were timed alone"
        except Exception as e:  # noqa: BLE001
            profile.retimed = f"could not time this kernel alone ({type(e).__name__}); the time covers every launch"
    return time_ms, clock


def _static_tier(profile: Profile, mine: list[CapturedLaunch], facts: DeviceFacts, interpreted: bool) -> None:
    """Tier 1: the compiled kernel's metadata (none under the interpreter), and how many
    other specializations of it the harness launched."""
    if interpreted:
        profile.unavailable["static"] = INTERPRETER_REASON
        return
    try:
        st, why = static_profile(mine[0], facts, profile.launch.programs if profile.launch else None)
        if st is None:
            profile.unavailable["static"] = why
            return
        hashes = set()
        for launch in mine[1:]:
            other = static_profile(launch, DeviceFacts(), None)[0]
            if other and other.get("hash"):
                hashes.add(other["hash"])
        hashes.discard(st.get("hash"))
        st["other_specializations"] = len(hashes)
        profile.tiers.static = decode(StaticTier, st, "static")
    except Exception as e:  # noqa: BLE001
        profile.unavailable["static"] = f"error reading compile metadata: {type(e).__name__}: {e}"
