"""The evidence behind a proposed edit, read from an optimize Result.

Lists only what the Result says (never a number made up here): what was checked
(harness, shapes, seeds, error vs tolerance, trust checks) when the engine reports it,
the paired re-measurement with its CI, and the GPU. Keys the engine may add later are
read when present; a missing one is left out rather than guessed.
"""
from __future__ import annotations

from typing import Any, Optional

from . import summary as S


def _ms(v: Any) -> Optional[str]:
    f = S.num(v)
    return S.fmt_ms(f) if f is not None else None


def evidence(result: Optional[dict]) -> list[dict[str, str]]:
    """[{label, value}] rows, in reading order."""
    if not isinstance(result, dict):
        return []
    rows: list[dict[str, str]] = []

    def add(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            rows.append({"label": label, "value": str(value)})

    if result.get("interpreted") is True:
        add("Verdict", "correct; speed needs a GPU (timed under the CPU interpreter: no speed claim)")
    ver = result.get("verification") if isinstance(result.get("verification"), dict) else {}
    add("Harness", ver.get("harness") or result.get("harness"))
    shapes = ver.get("shapes") or result.get("shapes")
    if isinstance(shapes, list):
        shapes = ", ".join(map(str, shapes))
    add("Shapes checked", shapes)
    seeds = ver.get("seeds") or result.get("seeds")
    if isinstance(seeds, list):
        seeds = ", ".join(map(str, seeds))
    add("Seeds", seeds)
    err = ver.get("max_error") if ver.get("max_error") is not None else ver.get("error")
    tol = ver.get("tolerance")
    if err is not None:
        add("Error vs tolerance", f"{err} (tolerance {tol})" if tol is not None else err)
    checks = ver.get("checks") or result.get("trust_checks") or result.get("checks")
    if isinstance(checks, list):
        checks = ", ".join(map(str, checks))
    elif isinstance(checks, dict):
        checks = ", ".join(f"{k}: {v}" for k, v in checks.items())
    add("Trust checks", checks)
    base, best = _ms(result.get("baseline_ms")), _ms(result.get("best_ms"))
    rounds = result.get("paired_rounds")
    if base and best:
        what = "paired re-measurement" if rounds else "measured"
        add(f"Timing ({what})", f"{base} → {best}" + (f", {rounds} interleaved rounds" if rounds else ""))
    sp = S.num(result.get("speedup"))
    ci = result.get("speedup_ci")
    if sp is not None and result.get("interpreted") is not True:
        ci_txt = ""
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(S.num(x) is not None for x in ci):
            ci_txt = f" (95% CI {S.num(ci[0]):.2f}–{S.num(ci[1]):.2f})"
        add("Speedup", f"{sp:.2f}x{ci_txt}")
    sb, ss = _ms(result.get("search_baseline_ms")), _ms(result.get("search_best_ms"))
    if sb and ss:
        add("During the search", f"{sb} → {ss} (single measurements, not the claim)")
    add("Clock", result.get("clock"))
    add("GPU", result.get("gpu"))
    add("Triton", result.get("triton_version"))
    ev = result.get("evaluations")
    path = result.get("strategy_path") or []
    if ev is not None:
        add("Search", f"{ev} evaluations" + (f", via {' → '.join(map(str, path))}" if path else ""))
    warnings = result.get("warnings") or []
    if isinstance(warnings, list) and warnings:
        add("Warnings", "; ".join(map(str, warnings)))
    return rows


def evidence_markdown(result: Optional[dict]) -> str:
    rows = evidence(result)
    if not rows:
        return ""
    lines = ["**Evidence**", "", "| | |", "| --- | --- |"]
    lines += [f"| {r['label']} | {r['value'].replace('|', '/')} |" for r in rows]
    return "\n".join(lines)
