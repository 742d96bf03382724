"""The hover card of a kernel: profile, bottleneck, last optimization, harness.

Uses ``kernelband.profile.render.profile_card_markdown(profile, last_result)`` when the
engine provides it (and it imports without torch/triton); otherwise renders a table
here. Never runs anything: the card is built from the store and memory only.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kernelband.harness import HarnessChoice
from kernelband.model import FOUND_STATUSES, KernelInfo, Profile, Result

from . import display as D
from . import summary as S

log = logging.getLogger(__name__)

ANALYSING = "the file is still being analysed"

_renderer: Optional[Callable[..., str]] = None
_renderer_checked = False


def engine_renderer() -> Optional[Callable[..., str]]:
    global _renderer, _renderer_checked
    if not _renderer_checked:
        _renderer_checked = True
        try:
            from kernelband.profile.render import profile_card_markdown

            _renderer = profile_card_markdown
        except Exception as e:  # absent, or needs torch (blocked in the server)
            log.info("using the server's own profile card (kernelband.profile.render: %s)", e)
            _renderer = None
    return _renderer


@dataclass
class CardInputs:
    kernel: KernelInfo
    profile: Optional[Profile]
    profile_exact: bool
    result: Optional[Result]
    harness: HarnessChoice
    job_line: Optional[str] = None  # "optimizing: 5/16 evaluated, best 1.21x"
    variant_line: Optional[str] = None  # "a 1.31x variant is ready: use the quick fix"
    stale: bool = False  # the file does not parse; this is the last good detection
    evidence: Optional[str] = None  # markdown: what was checked behind a found variant


def _row(label: str, value: Any) -> str:
    return f"| {label} | {str(value).replace('|', '/').replace(chr(10), ' ')} |"


def _fmt_bytes_per_s(v: float) -> str:
    if v >= 1e12:
        return f"{v / 1e12:.2f} TB/s"
    if v >= 1e9:
        return f"{v / 1e9:.1f} GB/s"
    return f"{v / 1e6:.1f} MB/s"


def _fmt_flops(v: float) -> str:
    if v >= 1e12:
        return f"{v / 1e12:.1f} TFLOP/s"
    if v >= 1e9:
        return f"{v / 1e9:.1f} GFLOP/s"
    return f"{v / 1e6:.1f} MFLOP/s"


_SHOWN = {
    "time_ms", "time_per_launch_ms", "launches", "bandwidth_frac", "compute_frac", "median_ms", "ms", "kernel_ms", "mean_ms", "bandwidth_gbs", "achieved_gbs", "gbs", "bytes_per_s",
    "bandwidth", "tflops", "gflops", "flops_per_s", "flop_s", "registers", "regs", "n_regs", "num_regs",
    "spills", "n_spills", "spill", "shared", "shared_bytes", "shared_mem", "smem_bytes", "shared_kb",
    "occupancy", "achieved_occupancy", "occupancy_est", "num_warps", "num_stages", "clock",
}


def _timing_rows(p: Optional[Profile], result: Optional[Result]) -> list[str]:
    rows = []
    t = S.tier(p, "timing")
    ms = S.time_ms(p, result)
    if ms is not None:
        clock = t.get("clock") or ("cpu-interpreter" if S.interpreted(p, result) else "")
        # say where the time comes from: a profile's single run differs from a paired re-measurement
        label = "time (profile)" if S.time_ms(p) is not None else "time (last optimization)"
        rows.append(_row(label, S.fmt_ms(ms) + (f" ({clock})" if clock else "")))
    bw = S.num(S.first(t, ("bandwidth_gbs", "achieved_gbs", "gbs")))
    bw_bps = bw * 1e9 if bw is not None else S.num(S.first(t, ("bytes_per_s", "bandwidth")))
    dram = S.saturation(p, "DRAM")
    if bw_bps is not None or dram is not None:
        parts = []
        if bw_bps is not None:
            parts.append(_fmt_bytes_per_s(bw_bps))
        if dram is not None and not S.interpreted(p):
            parts.append(f"{dram * 100:.0f}% of peak")
        rows.append(_row("memory bandwidth", ", ".join(parts)))
    fl = S.num(S.first(t, ("flops_per_s", "flop_s")))
    if fl is None:
        tf = S.num(t.get("tflops"))
        gf = S.num(t.get("gflops"))
        fl = tf * 1e12 if tf is not None else (gf * 1e9 if gf is not None else None)
    sm = S.saturation(p, "SM")
    if fl is not None or sm is not None:
        parts = []
        if fl is not None:
            parts.append(_fmt_flops(fl))
        if sm is not None and not S.interpreted(p):
            parts.append(f"{sm * 100:.0f}% of peak")
        rows.append(_row("compute", ", ".join(parts)))
    l2 = S.saturation(p, "L2")
    if l2 is not None and not S.interpreted(p):
        rows.append(_row("L2", f"{l2 * 100:.0f}% of peak"))
    return rows


def _static_rows(p: Optional[Profile]) -> list[str]:
    st = S.tier(p, "static")
    rows = []
    regs, spills = S.static_num(p, S.REGS), S.static_num(p, S.SPILLS)
    if regs is not None or spills is not None:
        rows.append(_row("registers / spills", f"{'?' if regs is None else int(regs)} / {'?' if spills is None else int(spills)}"))
    sh = S.static_num(p, S.SHARED_BYTES)
    shkb = S.num(st.get("shared_kb"))
    if shkb is None and sh is not None:
        shkb = sh / 1024
    if shkb is not None:
        rows.append(_row("shared memory", f"{shkb:.1f} KB"))
    occ = S.occupancy(p)
    if occ is not None:
        rows.append(_row("occupancy", f"{occ * 100:.0f}%" if occ <= 1.0 else f"{occ:.0f}%"))
    w, s = S.num(st.get("num_warps")), S.num(st.get("num_stages"))
    if w is not None or s is not None:
        rows.append(_row("warps / stages", f"{'?' if w is None else int(w)} / {'?' if s is None else int(s)}"))
    # anything else the profiler reported as a plain number or word
    extra = 0
    for name in ("static", "timing", "counters"):
        for k, v in S.tier(p, name).items():
            if k in _SHOWN or extra >= 6:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, str)) or (isinstance(v, str) and len(v) > 60):
                continue
            rows.append(_row(k.replace("_", " "), f"{v:.4g}" if isinstance(v, float) else v))
            extra += 1
    return rows


def fallback_card(profile: Optional[Profile], result: Optional[Result]) -> str:
    """The profile card as a markdown table (used when the engine has no renderer)."""
    lines: list[str] = []
    rows = _timing_rows(profile, result) + _static_rows(profile)
    b = S.bottleneck(profile)
    if profile is not None and b:
        ev = profile.diagnosis.get("evidence")
        rows.append(_row("bottleneck", f"{b}: {ev}" if isinstance(ev, str) and ev else b))
        strat = profile.diagnosis.get("strategies")
        if isinstance(strat, list) and strat:
            rows.append(_row("suggested strategies", ", ".join(map(str, strat))))
    if rows:
        lines += ["| | |", "|---|---|", *rows]
    unavailable = profile.unavailable if profile is not None else None
    if unavailable:
        lines.append("")
        lines.append("_Not measured: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()) + "_")
    if S.interpreted(profile, result):
        lines.append("")
        lines.append("_Measured under the Triton interpreter: times are CPU times, not GPU times._")
    if result:
        lines.append("")
        lines.append(result_line(result))
    return "\n".join(lines)


def result_line(result: Result) -> str:
    status = result.status
    evals = f", {result.evaluations} evaluations" if result.evaluations else ""
    if status in FOUND_STATUSES:
        path = result.strategy_path
        via = f" via {' → '.join(map(str, path))}" if path else ""
        if not D.result_claims_speed(result):
            return f"**Last optimization:** a variant that is {D.INTERPRETED_NOTE} (CPU interpreter){via}{evals}"
        base, best = S.num(result.baseline_ms), S.num(result.best_ms)
        how = "paired re-measurement" if result.paired_rounds else "measured by the optimizer"
        times = (f" (original {S.fmt_ms(base)} → variant {S.fmt_ms(best)}, {how})"
                 if base is not None and best is not None else "")
        return f"**Last optimization:** {D.speedup_phrase(result) or 'faster'}{times}{via}{evals}"
    if status == "no_improvement":
        return f"**Last optimization:** no faster variant found{evals}"
    if status == "cancelled":
        return "**Last optimization:** cancelled"
    msg = result.message
    return f"**Last optimization:** failed{': ' + msg if msg else ''}"


def card(inp: CardInputs) -> str:
    k = inp.kernel
    parts = ["### KernelBand"]
    if inp.stale:
        parts.append("_The file does not parse right now; showing the last good version._")
    body = None
    r = engine_renderer() if inp.profile is not None else None
    if r is not None and inp.profile is not None:
        try:
            # the engine's card without the result: the server's result line says which
            # times are the profile's and which the optimizer's paired re-measurement
            body = r(inp.profile.to_dict(), None)  # the engine's renderer reads the wire dict
            if inp.result:
                body += "\n\n" + result_line(inp.result)
        except Exception as e:
            log.warning("profile_card_markdown failed (%s); using the fallback card", e)
    if body is None:
        tags = ["Triton kernel"] + (["autotuned"] if k.is_autotuned else []) + (["heuristics"] if k.has_heuristics else [])
        b = S.bottleneck(inp.profile)
        head = f"**{k.name}** · {' · '.join(tags)}" + (f" · {b}" if b else "")
        if inp.profile is not None:
            body = head + "\n\n" + fallback_card(inp.profile, inp.result)
        else:
            body = head + ("\n\nNot profiled yet: use **Profile** (code lens) to measure it."
                           if inp.harness.found or inp.harness.reason == ANALYSING
                           else "\n\nNot profiled yet: create a harness first (then **Profile** measures it).")
            if inp.result:
                body += "\n\n" + result_line(inp.result)
    if inp.profile is not None and not inp.profile_exact:
        parts.append("_Profiled on an earlier version of this file._")
    parts.append(body)
    if inp.variant_line:
        parts.append(inp.variant_line)
    if inp.evidence:
        parts.append(inp.evidence)
    if inp.job_line:
        parts.append(f"_{inp.job_line}_")
    h = inp.harness
    if h.reason == ANALYSING:
        parts.append("_Harness: the file is still being analysed._")
    elif h.found:
        where = f" in `{h.path}`" if h.path else ""
        parts.append(f"Harness: `{h.name}`{where} ({h.how})")
    else:
        parts.append(f"**No harness:** {h.reason}. Use the quick fix *Create harness*.")
    return "\n\n".join(p for p in parts if p)
