"""The evidence behind a proposed edit, read from an optimize Result.

Lists only what the Result says (never a number made up here): what was checked
(harness, shapes, seeds, error vs tolerance, trust checks) when the engine reports it,
the paired re-measurement with its CI, and the GPU. Keys the engine may add later (kept in
``Result.extra``) are read when present; a missing one is left out rather than guessed.
"""

from __future__ import annotations

from typing import Any, Optional

from kernelband.model import Result

from . import display as D
from . import summary as S


def evidence(result: Optional[Result]) -> list[dict[str, str]]:
    """[{label, value}] rows, in reading order."""
    if result is None:
        return []
    more = result.extra  # keys a later engine may report
    rows: list[dict[str, str]] = []

    def add(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            rows.append({"label": label, "value": str(value)})

    claim = D.result_claims_speed(result)
    if not claim:
        add(
            "Verdict",
            f"{D.INTERPRETED_NOTE}: it ran under Triton's interpreter on the CPU, whose times say nothing about a GPU",
        )
    ver = more.get("verification")
    if not isinstance(ver, dict):
        ver = {}
    add("Harness", ver.get("harness") or more.get("harness"))
    add("Shapes checked", _listed(ver.get("shapes") or more.get("shapes")))
    add("Seeds", _listed(ver.get("seeds") or more.get("seeds")))
    err = ver.get("max_error") if ver.get("max_error") is not None else ver.get("error")
    tol = ver.get("tolerance")
    if err is not None:
        add("Error vs tolerance", f"{err} (tolerance {tol})" if tol is not None else err)
    checks = ver.get("checks") or more.get("trust_checks") or more.get("checks")
    if isinstance(checks, dict):
        checks = [f"{k}: {v}" for k, v in checks.items()]
    add("Trust checks", _listed(checks))
    rounds = result.paired_rounds
    pair = D.time_pair(result.baseline_ms, result.best_ms, claim)
    if pair:
        what = "paired re-measurement" if rounds else "measured"
        add(f"Timing ({what})", pair + (f", {rounds} interleaved rounds" if rounds else ""))
    sp = S.num(result.speedup)
    if sp is not None and claim:
        ci = S.ci_bounds(result.speedup_ci)
        add("Speedup", f"{sp:.2f}x" + (f" (95% CI {ci[0]:.2f}–{ci[1]:.2f})" if ci else ""))
    search_pair = D.time_pair(result.search_baseline_ms, result.search_best_ms, claim)
    if search_pair:
        add("During the search", f"{search_pair} (single measurements, not the claim)")
    if claim:
        add("Clock", result.clock)
    label, device = D.device_text(result)
    add(label, device)
    add("Triton", result.triton_version)
    path = result.strategy_path
    add("Search", f"{result.evaluations} evaluations" + (f", via {' → '.join(map(str, path))}" if path else ""))
    if result.warnings:
        add("Warnings", "; ".join(map(str, result.warnings)))
    return rows


def _listed(value: Any) -> Any:
    """A list as 'a, b, c'; anything else as it is."""
    return ", ".join(map(str, value)) if isinstance(value, list) else value


def evidence_markdown(result: Optional[Result]) -> str:
    rows = evidence(result)
    if not rows:
        return ""
    lines = ["**Evidence**", "", "| | |", "| --- | --- |"]
    lines += [f"| {r['label']} | {r['value'].replace('|', '/')} |" for r in rows]
    return "\n".join(lines)
