"""Run every round-3 case against the code of this checkout and print the results table
(markdown) that README.md records; ``--json PATH`` also writes the raw results.

    python tests/redteam/round3/baseline.py [--only SUBSTRING] [--json PATH] [--device cuda]

On the CPU (Triton's interpreter) GPU-only cases are listed, not run; ``--device cuda``
runs them too. Each WRONG / TIMING case goes through the evaluation
path (screen, then the worker); a case whose carrier is a screen escape also goes
straight to the judge. Each escape goes through both paths, and its marker file is
looked for after each.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: `redteam`, `helpers`

from kernelband.model import Variant  # noqa: E402
from redteam.round3.corpus import Case, escapes, timing_cases, wrong_cases  # noqa: E402
from redteam.round3.running import Evaluators, evaluate_unscreened, run_case, run_witnesses  # noqa: E402


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def run_cases(evs: Evaluators, cases: list[Case], only: str) -> list[dict[str, object]]:
    rows = []
    witnesses = run_witnesses([c for c in cases if c.cpu_visible and only in c.id])
    gpu = evs.device != "cpu"
    for c in cases:
        if only not in c.id:
            continue
        row: dict[str, object] = {"id": c.id, "class": c.spec.issue_class, "defence": c.spec.defence,
                                  "unscreened_defence": c.spec.unscreened, "cpu": c.cpu_visible,
                                  "witness": witnesses.get(c.id, {}).get("detail", "")}
        if not c.cpu_visible and not gpu:
            row.update(screened="gpu only", unscreened="")
            rows.append(row)
            continue
        t0 = time.perf_counter()
        got = run_case(evs, c, screened=True)
        row["screened"], row["screened_message"], row["screened_ok"] = got.row(), got.message, got.ok
        if c.spec.unscreened:
            raw = run_case(evs, c, screened=False)
            row["unscreened"], row["unscreened_message"], row["unscreened_ok"] = raw.row(), raw.message, raw.ok
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"{c.id:60} {row['screened']:28} {row.get('unscreened', ''):20} {got.message[:90]}", flush=True)
        rows.append(row)
    return rows


def run_escapes(evs: Evaluators, root: Path, only: str) -> list[dict[str, object]]:
    rows = []
    for e in escapes():
        if only not in e.name:
            continue
        row: dict[str, object] = {"id": e.name, "class": e.issue_class, "defence": e.defence}
        ev = evs.for_escape(e)
        for path, label in ((True, "screened"), (False, "unscreened")):
            marker = root / "markers" / label / e.name
            marker.parent.mkdir(parents=True, exist_ok=True)
            source = e.payload(marker)
            evaluation = ev.evaluate(Variant(source=source)) if path else evaluate_unscreened(ev, source)
            row[label] = f"{evaluation.status.value}; marker {'CREATED' if marker.exists() else 'absent'}"
            row[f"{label}_message"] = " ".join(evaluation.message.split())[:300]
            row[f"{label}_escaped"] = marker.exists()
        print(f"{e.name:45} {row['screened']:40} {row['unscreened']}", flush=True)
        rows.append(row)
    return rows


def markdown(wrong: list[dict[str, object]], timing: list[dict[str, object]], esc: list[dict[str, object]]) -> str:
    out = ["| case | class | defence | CPU? | through the screen | screen skipped |", "| --- | --- | --- | --- | --- | --- |"]
    for r in wrong + timing:
        defence = str(r["defence"]) + (f" / {r['unscreened_defence']}" if r.get("unscreened_defence") else "")
        out.append(f"| {r['id']} | {r['class']} | {defence} | {'yes' if r['cpu'] else 'GPU only'} | "
                   f"{_cell(str(r.get('screened', '')))} | {_cell(str(r.get('unscreened', '')))} |")
    out += ["", "| escape | class | through the screen | screen skipped |", "| --- | --- | --- | --- |"]
    for r in esc:
        out.append(f"| {r['id']} | {r['class']} | {_cell(str(r['screened']))} | {_cell(str(r['unscreened']))} |")
    return "\n".join(out)


def summary(wrong: list[dict[str, object]], timing: list[dict[str, object]], esc: list[dict[str, object]]) -> str:
    cpu_wrong = [r for r in wrong if r["cpu"]]
    passed = [r for r in cpu_wrong if r.get("screened_ok")]
    cheats = [r for r in timing if r["cpu"]]
    cheats_ok = [r for r in cheats if r.get("screened_ok")]
    escaped = [r for r in esc if r.get("screened_escaped")]
    escaped_raw = [r for r in esc if r.get("unscreened_escaped")]
    return (f"wrong, CPU-visible: {len(passed)} of {len(cpu_wrong)} judged correct\n"
            f"timing cheats, CPU-visible: {len(cheats_ok)} of {len(cheats)} judged correct (no speed claim on the CPU)\n"
            f"escapes: {len(escaped)} of {len(esc)} left their marker through the screen, "
            f"{len(escaped_raw)} of {len(esc)} with the screen skipped")


def main(argv: list[str]) -> int:
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    dump = argv[argv.index("--json") + 1] if "--json" in argv else None
    device = argv[argv.index("--device") + 1] if "--device" in argv else "cpu"
    # an ancestor's secret for r3e17 to find (the variant's own environment drops it)
    os.environ.setdefault("KERNELBAND_R3_CANARY_SECRET", "canary-not-a-real-secret")
    root = Path(tempfile.mkdtemp(prefix="kb-round3-"))
    evs = Evaluators(root, device)
    try:
        wrong = run_cases(evs, wrong_cases(), only)
        timing = run_cases(evs, timing_cases(), only)
        esc = run_escapes(evs, root, only)
    finally:
        evs.close()
        shutil.rmtree(root, ignore_errors=True)
    print(markdown(wrong, timing, esc))
    print(summary(wrong, timing, esc))
    if dump:
        Path(dump).write_text(json.dumps({"wrong": wrong, "timing": timing, "escapes": esc}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
