"""No false rejections, through the whole evaluation: the rules generator's rewrites of every
kernel module (examples/, benchmarks/suite/, benchmarks/realworld/) judged by the real
Evaluator, every check on (the harnesses at session-random seeds, the replay, the calls
beyond the harness). A rewrite of ours computes what the original computes, so each one
the judge refuses is a false rejection or a rewrite that changes a kernel's results:
either is a bug. ``tests/test_screen_false_rejections.py`` holds the screen alone to all
of these rewrites; this runs some of them.

    python benchmarks/false_rejections.py --device cpu --per-kernel 2 --out DIR
    python benchmarks/false_rejections.py --device cuda --per-kernel 4 --out $OUT/fr

Writes DIR/false_rejections.json ({"commit", "device", "rows": [{"module", "kernel",
"rewrite", "status", "message", "seconds"}]}, saved after each module) and
DIR/false_rejections.md. A module's rewrites are taken one family after another (``rewrites``).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import ROOT, kernel_modules, write_markdown


def rewrites(source: str, kernel: str, limit: int) -> list[tuple[str, str]]:
    """(name, source) of ``limit`` rewrites the rules generator makes, one family after
    another (a block size, the warps, an autotune wrap...), within a family the largest
    value first (a small block is thousands of programs under the interpreter)."""
    from kernelband.generators.rules import RulesGenerator
    from kernelband.model import Variant

    families: dict[str, list[tuple[str, str]]] = {}
    for family, key, text in RulesGenerator(seed=0).every_rewrite(Variant(source), kernel):
        if text != source:
            families.setdefault(family, []).append((f"{family}/{key}", text))
    for rows in families.values():
        rows.sort(key=lambda r: -int(r[0].rsplit(":", 1)[-1]) if r[0].rsplit(":", 1)[-1].isdigit() else 0)
    picked: list[tuple[str, str]] = []
    while len(picked) < limit and any(families.values()):
        for rows in families.values():
            if rows and len(picked) < limit:
                picked.append(rows.pop(0))
    return picked


def task_of(path: Path, kernel: str, device: str, timeout_s: float) -> Any:
    from kernelband.commands.common import session_seeds
    from kernelband.harness import find_harness
    from kernelband.model import Task

    source = path.read_text(encoding="utf-8")
    choice = find_harness(str(path), source, kernel)
    if not choice.found:
        raise ValueError(f"{path.name}: no harness for {kernel}: {choice.reason}")
    return Task(module_path=str(path), source=source, kernel=kernel, harness=choice.name or "",
                harness_path=choice.path, device=device, seeds=session_seeds(3), timeout_s=timeout_s,
                check_harnesses=list(choice.checks))


ORIGINAL = "(the original)"  # the row of a module whose original could not be judged


def sweep(device: str, per_kernel: int, only: str, timeout_s: float, save: Any) -> list[dict[str, Any]]:
    """Every module's rows; ``save(rows)`` after each module (a long sweep keeps what it did)."""
    from kernelband.evaluate import Evaluator, SetupError
    from kernelband.model import Variant

    rows: list[dict[str, Any]] = []
    for path, kernel in kernel_modules():
        save(rows)
        name = path.relative_to(ROOT).as_posix()
        found = rewrites(path.read_text(encoding="utf-8"), kernel, per_kernel) if only in name else []
        if not found:
            continue

        def row(rewrite: str, status: str, message: str, since: float) -> None:
            rows.append({"module": name, "kernel": kernel, "rewrite": rewrite, "status": status,
                         "message": message[:400], "seconds": round(time.perf_counter() - since, 1)})

        t0 = time.perf_counter()
        ev = Evaluator(task_of(path, kernel, device, timeout_s))
        try:
            base = ev.prepare(time_it=False)
            if not base.ok:
                row(ORIGINAL, "setup_error", base.message, t0)
                continue
            for label, text in found:
                t1 = time.perf_counter()
                got = ev.evaluate(Variant(text, description=label), time_it=False)
                row(label, got.status.value, got.message, t1)
                print(f"{name} {label}: {got.status.value} ({rows[-1]['seconds']} s)", file=sys.stderr, flush=True)
        except SetupError as e:
            row(ORIGINAL, "setup_error", str(e), t0)
        finally:
            ev.close()
    return rows


def report(rows: list[dict[str, Any]], device: str, commit: str) -> list[str]:
    judged = [r for r in rows if r["rewrite"] != ORIGINAL]
    refused = [r for r in judged if r["status"] != "ok"]
    lines = [f"# False rejections through the whole evaluation ({device}, {commit})", "",
             f"{len(judged)} rewrites of {len({r['module'] for r in judged})} modules judged; "
             f"{len(refused)} not ok.", "",
             "| module | rewrite | status | seconds | message |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        msg = r["message"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['module']} | {r['rewrite']} | {r['status']} | {r['seconds']} | "
                     f"{msg[:160] if r['status'] != 'ok' else ''} |")
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--per-kernel", type=int, default=2)
    p.add_argument("--only", default="", help="modules whose path contains this")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"

    def save(rows: list[dict[str, Any]]) -> None:
        (args.out / "false_rejections.json").write_text(json.dumps(
            {"commit": commit, "device": args.device, "per_kernel": args.per_kernel, "rows": rows}, indent=1) + "\n")

    rows = sweep(args.device, args.per_kernel, args.only, args.timeout, save)
    save(rows)
    write_markdown(args.out / "false_rejections.md", report(rows, args.device, commit))
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
