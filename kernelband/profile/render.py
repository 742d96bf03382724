"""Profiles in words: a terminal table (``kernelband profile``) and the markdown card
the editor shows on hover (``profile_card_markdown``). Pure: the language server
imports this, so no torch / triton here or in what it imports.
"""
from __future__ import annotations

from typing import Any, Optional


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


def rows(profile: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs shared by the terminal table and the card."""
    tiers = profile.get("tiers") or {}
    st = tiers.get("static") or {}
    tm = tiers.get("timing") or {}
    ct = (tiers.get("counters") or {}).get("values") or {}
    launch = profile.get("launch") or {}
    out: list[tuple[str, str]] = []
    interpreted = bool(profile.get("interpreted"))
    if tm or profile.get("time_ms") is not None:
        n = tm.get("launches") or launch.get("count") or 1
        per = tm.get("time_per_launch_ms")
        if per is None and profile.get("time_ms") is not None:
            per = profile["time_ms"] / n
        clock = " (CPU time, interpreter)" if interpreted else ""
        out.append(("time", f"{_ms(per)} per launch, {n} launch{'es' if n != 1 else ''}{clock}"))
    if launch.get("grid"):
        consts = ", ".join(f"{k}={v}" for k, v in (launch.get("constexprs") or {}).items())
        out.append(("grid", f"{launch['grid']} = {launch.get('programs')} programs" + (f"; {consts}" if consts else "")))
    out += (_traffic_rows(tm) if tm else []) + (_static_rows(st) if st else [])
    if ct:
        out.append(("counters", ", ".join([
            f"DRAM {_num(ct.get('dram_throughput'))}%", f"SM {_num(ct.get('sm_throughput'))}%",
            f"L2 hit {_num(ct.get('l2_hit_rate'))}%", f"occupancy {_num(ct.get('achieved_occupancy'))}%",
            f"warp eff {_num(ct.get('warp_efficiency'))}%", f"{_num(ct.get('sectors_per_request'), '{:.1f}')} sectors/req",
            f"bank conflicts {_num(ct.get('shared_bank_conflicts'), '{:.2f}')}/req",
            f"tensor {_num(ct.get('tensor_core_utilisation'))}%",
        ])))
    diag = profile.get("diagnosis") or {}
    if diag:
        out.append(("bottleneck", diag.get("evidence") or diag.get("bottleneck", "unknown")))
        if diag.get("strategies"):
            out.append(("suggests", ", ".join(diag["strategies"])))
    return out


def _traffic_rows(tm: dict[str, Any]) -> list[tuple[str, str]]:
    """Tier 2: bytes, bandwidth, FLOPs and the roofline."""
    out = [("bytes moved", f"{_bytes(tm.get('bytes_total'))} ({_bytes(tm.get('bytes_read'))} read, "
                           f"{_bytes(tm.get('bytes_written'))} written)")]
    if tm.get("bandwidth_gbs") is not None:
        frac = (f" = {_pct(tm['bandwidth_frac'])} of measured copy peak {_gbs(tm.get('copy_peak_gbs'))}"
                if tm.get("bandwidth_frac") is not None else "")
        out.append(("bandwidth", f"{_gbs(tm['bandwidth_gbs'])}{frac}"))
    if tm.get("flops") is not None:
        txt = _flops(tm["flops"])
        if tm.get("tflops") is not None:
            txt += f", {tm['tflops']:.1f} TFLOP/s"
        if tm.get("compute_frac") is not None:
            txt += f" = {_pct(tm['compute_frac'])} of measured {tm.get('compute_peak')} peak {tm.get('compute_peak_tflops')} TFLOP/s"
        out.append(("FLOPs", txt))
    else:
        out.append(("FLOPs", tm.get("flops_note") or "unknown"))
    roof = tm.get("roofline") or {}
    if roof.get("bound"):
        txt = f"{roof['bound']} side"
        if tm.get("arithmetic_intensity") is not None and roof.get("ridge") is not None:
            txt += f" (intensity {tm['arithmetic_intensity']:.1f} FLOP/B, ridge {roof['ridge']:.0f})"
        if roof.get("fraction_of_attainable") is not None:
            txt += f", at {_pct(roof['fraction_of_attainable'])} of the roof"
        out.append(("roofline", txt))
    return out


def _static_rows(st: dict[str, Any]) -> list[tuple[str, str]]:
    """Tier 1: registers, shared memory, warps, stages and occupancy."""
    out = [("registers", f"{_num(st.get('n_regs'))}/thread, {_num(st.get('n_spills'))} spilled; shared "
                         f"{_bytes(st.get('shared_bytes'))}; {st.get('num_warps')} warps, {st.get('num_stages')} stages")]
    occ = st.get("occupancy") or {}
    if occ:
        txt = f"{_pct(occ.get('theoretical'))} theoretical (limited by {str(occ.get('limiter')).replace('_', ' ')})"
        if occ.get("waves") is not None:
            txt += f", {occ['waves']:.2f} waves"
        out.append(("occupancy", txt))
    return out


def header(profile: dict[str, Any]) -> str:
    dev = profile.get("device") or {}
    name = dev.get("name") or ("CPU (Triton interpreter)" if profile.get("interpreted") else "unknown device")
    return f"{profile.get('kernel', '?')}  ·  {name}  ·  tier {profile.get('tier', '?')}"


def render_table(profile: dict[str, Any]) -> str:
    """Plain-text table for a terminal."""
    lines = [header(profile)]
    body = rows(profile)
    width = max((len(k) for k, _ in body), default=8) + 2
    lines += [f"  {k.ljust(width)}{v}" for k, v in body]
    for tier, why in (profile.get("unavailable") or {}).items():
        if not str(why).startswith("not requested"):
            lines.append(f"  {'(' + tier + ')':<{width}}unavailable: {why}")
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def result_line(last_result: Optional[dict[str, Any]]) -> Optional[str]:
    if not last_result:
        return None
    status = last_result.get("status", "?")
    sp = last_result.get("speedup")
    ci = last_result.get("speedup_ci") or []
    evals = last_result.get("evaluations")
    path = " → ".join(last_result.get("strategy_path") or [])
    if status == "improved" and sp:
        txt = f"{sp:.2f}× faster"
        if len(ci) == 2 and ci[0] is not None and ci[1] is not None:
            txt += f" (95% CI {ci[0]:.2f}–{ci[1]:.2f}×)"
        if last_result.get("baseline_ms") is not None and last_result.get("best_ms") is not None:
            txt += f", {_ms(last_result['baseline_ms'])} → {_ms(last_result['best_ms'])}"
    elif status == "no_improvement":
        txt = "no faster variant found"
    else:
        txt = status.replace("_", " ")
    if path:
        txt += f"; strategies: {path}"
    if evals is not None:
        txt += f"; {evals} evaluations"
    if last_result.get("interpreted"):
        txt += " (CPU interpreter times)"
    return txt


def profile_card_markdown(profile: Optional[dict[str, Any]], last_result: Optional[dict[str, Any]] = None) -> str:
    """Hover card: a title, a two-column table, the bottleneck and the last result."""
    if not profile:
        parts = ["**KernelBand**: not profiled yet. Run *Profile* from the code lens."]
        line = result_line(last_result)
        if line:
            parts.append(f"**Last optimization:** {_md_escape(line)}")
        return "\n\n".join(parts)
    diag = profile.get("diagnosis") or {}
    title = f"**{profile.get('kernel') or '?'}**"  # Profile.to_dict() gives "" for a missing name
    dev = (profile.get("device") or {}).get("name")
    if dev:
        title += f" · {dev}"
    if diag.get("bottleneck"):
        title += f" · {diag['bottleneck']}"
    body = [(k, v) for k, v in rows(profile) if k not in ("bottleneck", "suggests")]
    parts = [title]
    if body:
        table = ["| | |", "| --- | --- |"] + [f"| {k} | {_md_escape(v)} |" for k, v in body]
        parts.append("\n".join(table))
    if diag.get("evidence"):
        sug = f" Suggested: {', '.join(diag['strategies'])}." if diag.get("strategies") else ""
        parts.append(f"**Bottleneck:** {_md_escape(diag['evidence'])}{sug}")
    missing = {k: v for k, v in (profile.get("unavailable") or {}).items() if not str(v).startswith("not requested")}
    if missing:
        parts.append("_" + "; ".join(f"{k}: {_md_escape(v)}" for k, v in missing.items()) + "_")
    line = result_line(last_result)
    if line:
        parts.append(f"**Last optimization:** {_md_escape(line)}")
    return "\n\n".join(parts)
