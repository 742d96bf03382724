"""`kernelband optimize` on each example with the rules generator and a fixed budget.

    python benchmarks/optimize_examples.py --budget 16 --out benchmarks/results

Writes optimize_examples.json (the full Result of each run, minus sources) and
optimize_examples.md (the table). Runs on whatever device is present; under the CPU
interpreter the times are labelled as CPU times.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT as REPO
from common import bench_commit
from common import write_markdown
EXAMPLES = ["add_scale.py", "softmax.py", "matmul.py"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--search", default="kernelband")
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="write one report of these runs' optimize_examples.json files (one per GPU) instead of running")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        runs = [r for part in parts for r in part["runs"]]
        commit = " + ".join(dict.fromkeys(part["commit"] for part in parts))
        write_report(out_dir, commit, parts[0]["gpu"], parts[0]["budget"], args.search, runs)
        return 0
    runs = []
    for ex in args.examples.split(","):
        cmd = [sys.executable, "-m", "kernelband", "optimize", f"examples/{ex}", "--budget", str(args.budget),
               "--search", args.search, "--json", "--no-store"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        wall = time.monotonic() - t0
        try:
            res = json.loads(proc.stdout)
        except json.JSONDecodeError:
            res = {"status": "error", "message": proc.stderr[-2000:]}
        res.pop("best_source", None)
        res.update(example=ex, exit_code=proc.returncode, wall_s=wall,
                   command="kernelband " + " ".join(cmd[3:]))
        runs.append(res)
        print(f"{ex}: {res.get('status')} {res.get('speedup')} ({wall:.0f} s)", flush=True)
    gpu = next((r.get("gpu") for r in runs if r.get("gpu")), "?")
    write_report(out_dir, bench_commit(), gpu, args.budget, args.search, runs)
    return 0


def write_report(out_dir: Path, commit: str, gpu: str, budget: int, search: str, runs: list[dict]) -> None:
    """optimize_examples.json (every run's Result) and the markdown table beside it."""
    (out_dir / "optimize_examples.json").write_text(json.dumps({"commit": commit, "gpu": gpu, "budget": budget, "runs": runs}, indent=2))
    lines = [f"# kernelband optimize on the examples ({gpu}, rules generator, {search}, budget {budget})", "",
             f"Commit {commit}; each example a cold workspace (`--no-store`), one session at a time on its GPU.", "",
             "| example | status | baseline ms | best ms | speedup (95% CI) | evaluations | search s | wall s | path |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if "baseline_ms" not in r:
            lines.append(f"| {r['example']} | {r.get('status')} | | | | | | {r.get('wall_s', 0):.0f} | {r.get('message', '')[:80]} |")
            continue
        lo, hi = r["speedup_ci"]
        lines.append(f"| {r['example']} | {r['status']} | {r['baseline_ms']:.4g} | {r['best_ms']:.4g} | "
                     f"{r['speedup']:.2f}x ({lo:.2f}-{hi:.2f}) | {r['evaluations']} | {r['seconds']:.0f} | "
                     f"{r['wall_s']:.0f} | {' -> '.join(r['strategy_path'])} |")
    warned = [(r["example"], w) for r in runs for w in r.get("warnings") or []]
    if warned:
        lines += ["", "Warnings:", ""] + [f"- {ex}: {w}" for ex, w in warned]
    write_markdown(out_dir / "optimize_examples.md", lines)

if __name__ == "__main__":
    sys.exit(main())
