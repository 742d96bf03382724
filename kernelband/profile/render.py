"""Profiles in words: a terminal table (``kernelband profile``) and the markdown card
the editor shows on hover (``profile_card_markdown``). Pure: the language server
imports this, so no torch / triton here or in what it imports.
"""

from __future__ import annotations

from typing import Optional

from .schema import Profile, StaticTier, TimingTier


def _bytes(b: Optional[float]) -> str:
    if b is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b:.0f} B"


def _ms(ms: Optional[float]) -> str:
    if ms is None:
        return "?"
    if ms < 0.1:
        return f"{ms * 1e3:.1f} us"
    return f"{ms:.3f} ms" if ms < 100 else f"{ms:.0f} ms"


def _pct(x: Optional[float]) -> str:
    return "?" if x is None else f"{x * 100:.0f}%"


def _gbs(g: Optional[float]) -> str:
    if g is None:
        return "?"
    return f"{g / 1e3:.2f} TB/s" if g >= 1000 else f"{g:.1f} GB/s"


def _flops(f: Optional[float]) -> str:
    if f is None:
        return "?"
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if f >= scale:
            return f"{f / scale:.2f} {unit}"
    return f"{f:.0f} FLOP"


def _num(x: Optional[float], fmt: str = "{:.0f}") -> str:
    return "?" if x is None else fmt.format(x)


def rows(p: Profile) -> list[tuple[str, str]]:
    """(label, text) pairs shared by the terminal table and the card."""
    tm, st, launch = p.tiers.timing, p.tiers.static, p.launch
    out: list[tuple[str, str]] = []
    if tm or p.time_ms is not None:
        n = p.launches
        clock = " (CPU time, interpreter)" if p.interpreted else ""
        out.append(("time", f"{_ms(p.time_per_launch_ms)} per launch, {n} launch{'es' if n != 1 else ''}{clock}"))
    if launch and launch.grid:
        consts = ", ".join(f"{k}={v}" for k, v in launch.constexprs.items())
        out.append(("grid", f"{launch.grid} = {launch.programs} programs" + (f"; {consts}" if consts else "")))
    out += (_traffic_rows(tm) if tm else []) + (_static_rows(st) if st else [])
    ct = p.counter
    if p.tiers.counters and p.tiers.counters.values:
        out.append(
            (
                "counters",
                ", ".join(
                    [
                        f"DRAM {_num(ct('dram_throughput'))}%",
                        f"SM {_num(ct('sm_throughput'))}%",
                        f"L2 hit {_num(ct('l2_hit_rate'))}%",
                        f"occupancy {_num(ct('achieved_occupancy'))}%",
                        f"warp eff {_num(ct('warp_efficiency'))}%",
                        f"{_num(ct('sectors_per_request'), '{:.1f}')} sectors/req",
                        f"bank conflicts {_num(ct('shared_bank_conflicts'), '{:.2f}')}/req",
                        f"tensor {_num(ct('tensor_core_utilisation'))}%",
                    ]
                ),
            )
        )
    diag = p.diagnosis
    if diag.bottleneck or diag.evidence:
        out.append(("bottleneck", diag.evidence or diag.bottleneck or "unknown"))
        if diag.strategies:
            out.append(("suggests", ", ".join(diag.strategies)))
    return out


def _traffic_rows(tm: TimingTier) -> list[tuple[str, str]]:
    """Tier 2: bytes, bandwidth, FLOPs and the roofline."""
    out = [
        ("bytes moved", f"{_bytes(tm.bytes_total)} ({_bytes(tm.bytes_read)} read, {_bytes(tm.bytes_written)} written)")
    ]
    if tm.bandwidth_gbs is not None:
        frac = (
            f" = {_pct(tm.bandwidth_frac)} of measured copy peak {_gbs(tm.copy_peak_gbs)}"
            if tm.bandwidth_frac is not None
            else ""
        )
        out.append(("bandwidth", f"{_gbs(tm.bandwidth_gbs)}{frac}"))
    if tm.flops is not None:
        txt = _flops(tm.flops)
        if tm.tflops is not None:
            txt += f", {tm.tflops:.1f} TFLOP/s"
        if tm.compute_frac is not None:
            txt += f" = {_pct(tm.compute_frac)} of measured {tm.compute_peak} peak {tm.compute_peak_tflops} TFLOP/s"
        out.append(("FLOPs", txt))
    else:
        out.append(("FLOPs", tm.flops_note or "unknown"))
    roof = tm.roofline
    if roof and roof.bound:
        txt = f"{roof.bound} side"
        if tm.arithmetic_intensity is not None and roof.ridge is not None:
            txt += f" (intensity {tm.arithmetic_intensity:.1f} FLOP/B, ridge {roof.ridge:.0f})"
        if roof.fraction_of_attainable is not None:
            txt += f", at {_pct(roof.fraction_of_attainable)} of the roof"
        out.append(("roofline", txt))
    return out


def _static_rows(st: StaticTier) -> list[tuple[str, str]]:
    """Tier 1: registers, shared memory, warps, stages and occupancy."""
    out = [
        (
            "registers",
            f"{_num(st.n_regs)}/thread, {_num(st.n_spills)} spilled; shared "
            f"{_bytes(st.shared_bytes)}; {st.num_warps} warps, {st.num_stages} stages",
        )
    ]
    occ = st.occupancy
    if occ:
        txt = f"{_pct(occ.theoretical)} theoretical (limited by {str(occ.limiter).replace('_', ' ')})"
        if occ.waves is not None:
            txt += f", {occ.waves:.2f} waves"
        out.append(("occupancy", txt))
    return out


def header(p: Profile) -> str:
    name = p.device.name or ("CPU (Triton interpreter)" if p.interpreted else "unknown device")
    return f"{p.kernel or '?'}  ·  {name}  ·  tier {p.tier or '?'}"


def _missing(p: Profile) -> dict[str, str]:
    """Tiers not measured, less those not asked for."""
    return {k: v for k, v in p.unavailable.items() if not v.startswith("not requested")}


def render_table(p: Profile) -> str:
    """Plain-text table for a terminal."""
    lines = [header(p)]
    body = rows(p)
    width = max((len(k) for k, _ in body), default=8) + 2
    lines += [f"  {k.ljust(width)}{v}" for k, v in body]
    lines += [f"  {'(' + tier + ')':<{width}}unavailable: {why}" for tier, why in _missing(p).items()]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def profile_card_markdown(p: Profile) -> str:
    """Hover card: a title, a two-column table, the bottleneck and the tiers not measured
    (the editor words the last optimization from its typed Result: kernelband_lsp.hover)."""
    diag = p.diagnosis
    title = f"**{p.kernel or '?'}**"
    if p.device.name:
        title += f" · {p.device.name}"
    if diag.bottleneck:
        title += f" · {diag.bottleneck}"
    body = [(k, v) for k, v in rows(p) if k not in ("bottleneck", "suggests")]
    parts = [title]
    if body:
        table = ["| | |", "| --- | --- |"] + [f"| {k} | {_md_escape(v)} |" for k, v in body]
        parts.append("\n".join(table))
    if diag.evidence:
        sug = f" Suggested: {', '.join(diag.strategies)}." if diag.strategies else ""
        parts.append(f"**Bottleneck:** {_md_escape(diag.evidence)}{sug}")
    missing = _missing(p)
    if missing:
        parts.append("_" + "; ".join(f"{k}: {_md_escape(v)}" for k, v in missing.items()) + "_")
    return "\n\n".join(parts)
