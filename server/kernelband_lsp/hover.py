"""The hover card of a kernel: profile, bottleneck, last optimization, harness.

The profile's card is the engine's (``kernelband.profile.render.profile_card_markdown``,
pure: no torch or triton); the rest is worded here. Never runs anything: the card is
built from the store and memory only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kernelband.harness import HarnessChoice
from kernelband.model import FOUND_STATUSES, KernelInfo, Result, ResultStatus
from kernelband.profile.render import profile_card_markdown
from kernelband.profile.schema import Profile

from . import display as D
from . import summary as S

ANALYSING = "the file is still being analysed"


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


def result_line(result: Result) -> str:
    status = result.status
    evals = f", {result.evaluations} evaluations" if result.evaluations else ""
    if status in FOUND_STATUSES:
        via = D.via(result)
        if not D.result_claims_speed(result):
            return f"**Last optimization:** a variant that is {D.INTERPRETED_NOTE} (CPU interpreter){via}{evals}"
        base, best = S.num(result.baseline_ms), S.num(result.best_ms)
        how = "paired re-measurement" if result.paired_rounds else "measured by the optimizer"
        times = (
            f" (original {S.fmt_ms(base)} → variant {S.fmt_ms(best)}, {how})"
            if base is not None and best is not None
            else ""
        )
        return f"**Last optimization:** {D.speedup_phrase(result) or 'faster'}{times}{via}{evals}"
    if status == ResultStatus.NO_IMPROVEMENT:
        return f"**Last optimization:** no faster variant found{evals}"
    if status == ResultStatus.CANCELLED:
        return "**Last optimization:** cancelled"
    msg = result.message
    return f"**Last optimization:** failed{': ' + msg if msg else ''}"


def card(inp: CardInputs) -> str:
    k = inp.kernel
    parts = ["### KernelBand"]
    if inp.stale:
        parts.append("_The file does not parse right now; showing the last good version._")
    if inp.profile is not None:
        # the server's result line (below) says which times are the profile's and which
        # the optimizer's paired re-measurement
        body = profile_card_markdown(inp.profile)
    else:
        tags = (
            ["Triton kernel"] + (["autotuned"] if k.is_autotuned else []) + (["heuristics"] if k.has_heuristics else [])
        )
        body = f"**{k.name}** · {' · '.join(tags)}" + (
            "\n\nNot profiled yet: use **Profile** (code lens) to measure it."
            if inp.harness.found or inp.harness.reason == ANALYSING
            else "\n\nNot profiled yet: create a harness first (then **Profile** measures it)."
        )
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
