"""Inlay hints: the last profile after a kernel's signature, the best found config at
its launch sites. Pure functions of an analysis and the per-kernel status (store)."""

from __future__ import annotations

import functools
from typing import Optional

from lsprotocol import types

from kernelband.detect import detect
from kernelband.model import KernelInfo, Result, ResultStatus
from kernelband.profile.schema import Profile, StaticTier

from . import summary as S
from .documents import Analysis
from .incremental import _header_end


def profile_label(profile: Optional[Profile], exact: bool) -> Optional[str]:
    """'32 regs · 0 spills · 0 KB smem · occ 100% · 0.42 ms · 71% of HBM peak'."""
    if profile is None:
        return None
    st, occupancy = profile.tiers.static or StaticTier(), profile.occupancy
    parts = [f"{st.n_regs} regs"] if st.n_regs is not None else []
    if st.n_spills is not None:
        parts.append(f"{st.n_spills} spills")
    if st.shared_bytes is not None:
        parts.append(f"{st.shared_bytes / 1024:.0f} KB smem")
    if occupancy is not None:
        parts.append(f"occ {occupancy * 100:.0f}%")
    t = S.time_ms(profile)
    if t is not None:
        parts.append(S.fmt_ms(t) + (" (interpreter)" if S.interpreted(profile) else ""))
    peak = S.peak_phrase(profile)
    if peak:
        parts.append(peak)
    if not parts:
        return None
    return " · ".join(parts) + ("" if exact else " (earlier version)")


@functools.lru_cache(maxsize=64)
def best_launch_kwargs(best_source: str, kernel: str) -> list[dict[str, str]]:
    """Keyword arguments of each launch of the kernel in the found variant's source."""
    k = detect(best_source).kernel(kernel)
    return [dict(s.kwargs) for s in k.launch_sites] if k else []


def launch_label(k: KernelInfo, site_index: int, result: Result) -> Optional[str]:
    """'KernelBand: 1.43x with BLOCK_SIZE=1024' from a found variant (never for an
    interpreted one: no speed claim)."""
    if result.interpreted or result.status != ResultStatus.IMPROVED or not result.best_source:
        return None
    sites = best_launch_kwargs(result.best_source, k.name)
    if site_index >= len(sites) or site_index >= len(k.launch_sites):
        return None
    now = k.launch_sites[site_index].kwargs
    diff = [f"{name}={v}" for name, v in sites[site_index].items() if now.get(name) != v]
    return f"KernelBand: {S.speedup_phrase(result) or 'faster'} with {', '.join(diff)}" if diff else None


def hints(a: Analysis, rng: types.Range, status, offer) -> list[types.InlayHint]:
    """status(k) -> KernelStatus; offer(name) -> FoundVariant or None."""
    src = a.source or a
    out: list[types.InlayHint] = []
    for k in src.detection.kernels:
        in_range = not (k.range.end_line - 1 < rng.start.line or k.range.start_line - 1 > rng.end.line)
        st = status(k) if in_range or k.launch_sites else None
        if st is None:
            continue
        label = profile_label(st.profile, st.profile_exact) if in_range else None
        if label:
            line0 = _header_end(src.index, k.def_range.start_line - 1)
            end = types.Position(line=line0, character=len(src.index.line_text(line0).encode("utf-16-le")) // 2)
            out.append(
                types.InlayHint(
                    position=end,
                    label=label,
                    kind=types.InlayHintKind.Type,
                    padding_left=True,
                    tooltip="KernelBand: the last profile of this kernel",
                )
            )
        fv = offer(k.name)
        if fv is None:
            continue
        for i, site in enumerate(k.launch_sites):
            line0 = site.range.end_line - 1
            if not (rng.start.line <= line0 <= rng.end.line):
                continue
            lab = launch_label(k, i, fv.result)
            if lab:
                pos = src.index.ast_to_position(site.range.end_line, site.range.end_col)
                out.append(
                    types.InlayHint(
                        position=pos,
                        label=lab,
                        kind=types.InlayHintKind.Parameter,
                        padding_left=True,
                        tooltip="Apply it with the quick fix on the kernel",
                    )
                )
    return out
