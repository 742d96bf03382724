"""Run the red-team evaluation corpus (tests/redteam: every WRONG variant, gpu_only ones
included, and every CORRECT one) through the Evaluator on a GPU, one command:

    python benchmarks/redteam_gpu.py --out DIR                 # device cuda
    python benchmarks/redteam_gpu.py --out DIR --device cpu    # quick local check (interpreter)

Writes DIR/redteam_gpu.json (rewritten after every case, so a run cut short keeps what
it did) and DIR/redteam_gpu.md: kernel, variant, category, expected, status, message,
wall seconds; totals: caught rate (all wrong / wrong not gpu_only / gpu_only) and
false-rejection rate. One variant failing (crash, hang, corrupted CUDA context, an
exception in the harness of this script) never stops the run: the worker is replaced and
the next case goes on. Each evaluation request has a timeout (--timeout per seed).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from common import ROOT as REPO
from common import bench_commit
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from kernelband.evaluate import Evaluator  # noqa: E402
from kernelband.model import Variant  # noqa: E402
from redteam.corpus import CORRECT, KERNELS, KNOWN_GAPS, WRONG, Case, as_expected, load_cases, make_task  # noqa: E402

MESSAGE_CHARS = 300  # per row in the tables: keep the JSON and markdown readable


@dataclass
class Row:
    kernel: str
    variant: str
    category: str
    expected: str
    gpu_only: bool
    known_gap: bool  # listed in KNOWN_GAPS (today's worker gets it wrong on the CPU)
    status: str
    ok: bool
    as_expected: bool
    message: str
    wall_s: float


class Judges:
    """One prepared Evaluator per kernel; a kernel whose original cannot be prepared is
    remembered with its reason (every case of it then reports setup_error)."""

    def __init__(self, device: str, timeout_s: float, seeds: list[int], memcheck: bool = False) -> None:
        self.device, self.timeout_s, self.seeds, self.memcheck = device, timeout_s, seeds, memcheck
        self.ready: dict[str, Evaluator] = {}
        self.failed: dict[str, str] = {}
        self.device_name = ""

    def get(self, kernel: str) -> Optional[Evaluator]:
        if kernel in self.ready or kernel in self.failed:
            return self.ready.get(kernel)
        ev = Evaluator(make_task(KERNELS[kernel], self.device, self.timeout_s, tuple(self.seeds)))
        try:
            base = ev.prepare()
            self.device_name = self.device_name or base.device_name
            self.ready[kernel] = ev
        except Exception as e:  # noqa: BLE001 - SetupError or a broken worker: report, go on
            self.failed[kernel] = f"{type(e).__name__}: {e}"
            ev.close()
        return self.ready.get(kernel)

    def drop(self, kernel: str) -> None:
        """Forget a kernel's evaluator after an unexpected exception (the next case re-prepares)."""
        ev = self.ready.pop(kernel, None)
        if ev is not None:
            try:
                ev.close()
            except Exception:  # noqa: BLE001
                pass

    def close(self) -> None:
        for k in list(self.ready):
            self.drop(k)


def run_case(judges: Judges, case: Case) -> Row:
    t0 = time.perf_counter()
    status, message, ok = "setup_error", "", False
    ev = judges.get(case.kernel)
    if ev is None:
        message = judges.failed.get(case.kernel, "not prepared")
    else:
        try:
            variant = Variant(source=case.source, description=case.why)
            evaluation = ev.evaluate(variant)
            status, message, ok = evaluation.status.value, evaluation.message, evaluation.ok
            if ok and judges.memcheck:
                # what a session does with its finalist: one run under compute-sanitizer memcheck
                report = ev.sanitize(variant)
                if report.ran and not report.ok:
                    status, ok = "memcheck", False
                    message = f"compute-sanitizer {report.tool}: " + "; ".join(report.findings)
                elif report.ran:
                    message += " | memcheck clean"
                else:
                    message += f" | memcheck not run: {report.reason}"
        except Exception as e:  # noqa: BLE001 - e.g. SetupError: worker cannot restart
            status, message = "harness_error", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=2)[-200:]}"
            judges.drop(case.kernel)
    good = as_expected(case, ok) if status != "setup_error" else False
    return Row(case.kernel, case.name, case.category, case.expected, case.gpu_only, case.id in KNOWN_GAPS,
               status, ok, good, " ".join(message.split())[:MESSAGE_CHARS], round(time.perf_counter() - t0, 2))


def rate(num: int, den: int) -> str:
    return f"{num}/{den} ({100.0 * num / den:.1f}%)" if den else "0/0"


def totals(rows: list[Row]) -> dict[str, Any]:
    wrong = [r for r in rows if r.expected == WRONG]
    correct = [r for r in rows if r.expected == CORRECT]
    caught = lambda rs: sum(1 for r in rs if r.as_expected)  # noqa: E731
    return {
        "caught_all": rate(caught(wrong), len(wrong)),
        "caught_not_gpu_only": rate(caught([r for r in wrong if not r.gpu_only]), len([r for r in wrong if not r.gpu_only])),
        "caught_gpu_only": rate(caught([r for r in wrong if r.gpu_only]), len([r for r in wrong if r.gpu_only])),
        "false_rejections": rate(sum(1 for r in correct if not r.as_expected), len(correct)),
        "setup_errors": sorted({r.kernel for r in rows if r.status == "setup_error"}),
        "not_as_expected": [f"{r.kernel}/{r.variant}" for r in rows if not r.as_expected],
    }


def write_outputs(out: Path, meta: dict[str, Any], rows: list[Row]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = totals(rows)
    doc = {"meta": meta, "totals": summary, "rows": [asdict(r) for r in rows]}
    tmp = out / "redteam_gpu.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    tmp.replace(out / "redteam_gpu.json")
    lines = [f"# Red-team corpus on {meta.get('device_name') or meta['device']}", "",
             f"{meta['started']} · commit {meta.get('commit', '?')} · device `{meta['device']}` · seeds {meta['seeds']} · "
             f"{len(rows)} cases · {meta.get('wall_s', 0):.0f} s", "",
             f"- caught, all wrong variants: {summary['caught_all']}",
             f"- caught, wrong variants the interpreter can show: {summary['caught_not_gpu_only']}",
             f"- caught, gpu_only wrong variants: {summary['caught_gpu_only']}",
             f"- false rejections (correct variants not ok): {summary['false_rejections']}",
             f"- kernels whose original could not be prepared: {', '.join(summary['setup_errors']) or 'none'}", "",
             "| kernel | variant | category | expected | gpu_only | status | as expected | message | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        msg = r.message.replace("|", "\\|")
        lines.append(f"| {r.kernel} | {r.variant} | {r.category} | {r.expected} | {'yes' if r.gpu_only else ''} | "
                     f"{r.status} | {'yes' if r.as_expected else '**NO**'} | {msg} | {r.wall_s:.1f} |")
    (out / "redteam_gpu.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (Triton interpreter)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per seed of one evaluation request")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--only", default="", help="run cases whose kernel/variant id starts with one of these (comma-separated)")
    p.add_argument("--gpu-only", action="store_true", help="only the cases the interpreter cannot show")
    p.add_argument("--expected", choices=[WRONG, CORRECT], default=None)
    p.add_argument("--memcheck", action="store_true",
                   help="run each variant that passes under compute-sanitizer memcheck, as a session does its finalist")
    p.add_argument("--budget-s", type=float, default=0.0, help="stop starting new cases after this many seconds")
    args = p.parse_args(argv)

    prefixes = tuple(p for p in args.only.split(",") if p) or ("",)
    cases = [c for c in load_cases(args.expected) if c.id.startswith(prefixes) and (c.gpu_only or not args.gpu_only)]
    seeds = [int(s) for s in args.seeds.split(",")]
    meta: dict[str, Any] = {"commit": bench_commit(), "device": args.device, "seeds": seeds, "host": platform.node(),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    judges = Judges(args.device, args.timeout, seeds, memcheck=args.memcheck)
    rows: list[Row] = []
    t0 = time.perf_counter()
    try:
        for i, case in enumerate(cases, 1):
            if args.budget_s and time.perf_counter() - t0 > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: {len(cases) - i + 1} cases not run", flush=True)
                break
            row = run_case(judges, case)
            rows.append(row)
            print(f"[{i}/{len(cases)}] {row.kernel}/{row.variant} {row.expected} -> {row.status} "
                  f"{'ok' if row.as_expected else 'NOT AS EXPECTED'} ({row.wall_s:.1f}s) {row.message[:120]}",
                  flush=True)
            meta.update(device_name=judges.device_name, wall_s=time.perf_counter() - t0)
            write_outputs(args.out, meta, rows)
    finally:
        judges.close()
    meta.update(device_name=judges.device_name, wall_s=time.perf_counter() - t0)
    write_outputs(args.out, meta, rows)
    print(json.dumps(totals(rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
