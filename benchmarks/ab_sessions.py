"""Two trees of KernelBand on one machine, session against session: is one faster?

One session of a kernel varies by 20% and more from run to run on the same GPU (bmm_bf16:
76.8 and 49.3 evaluations a minute at one commit, benchmarks/results/eval_speed/
h200_ab_e4b0655_2ecaa38), so a single session a side settles nothing. This runs
``benchmarks/eval_speed.py`` for each kernel in each tree, ``--rounds`` times, the order of
the two trees alternating from round to round (drift of the machine cancels), and reports
the geometric mean of the paired ratios (new / old, one pair a kernel and round) with a
95% bootstrap interval, for evaluations a minute and for the first verdict.

    git archive OLD | tar -x -C /tmp/old; git archive NEW | tar -x -C /tmp/new
    python benchmarks/ab_sessions.py --old /tmp/old --new /tmp/new --rounds 3 \\
        --kernels col_sum_fp32 bmm_bf16 --out DIR [-- extra eval_speed.py arguments]

Writes DIR/ab.json and DIR/ab.md. One session at a time on the GPU.

Each session gets a machine cache of its own (``KERNELBAND_CACHE_DIR``): the device facts
and the bytecode of the machine's cache, but none of its compiled Triton kernels. The
machine cache keeps a Triton cache of each original's source for every session on the
machine, so in a shared one the arm that reaches a kernel second loads the original's
kernels the first arm compiled: its setup and first verdict come out seconds shorter
(benchmarks/results/eval_speed/SESSION8.md). ``--shared-caches`` keeps the machine's
cache for every session instead.

``--gpus A B`` runs the two trees side by side, one on each GPU of a two-GPU host (still one
session at a time on each GPU), so both arms share the host's CPUs alike. The GPUs swap
every round, so that neither tree keeps the faster one. The sessions are pairs of
(kernel, round) as before, and each still gets a machine cache of its own. The two-GPU A/Bs
of SESSION10.md and SESSION11.md shared one cache, and the arm that ran ahead compiled the
originals for the other.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelband.machine_cache import cache_dir  # noqa: E402

METRICS = ("evals_per_min", "first_verdict_s")


def paired_summary(pairs: list[tuple[float, float]], draws: int = 2000, seed: int = 0) -> Optional[dict[str, float]]:
    """(old, new) measurements, one pair a kernel and round: the geometric mean of new/old
    and its 95% bootstrap interval (pairs resampled); None without a pair of positive values."""
    logs = [math.log(new / old) for old, new in pairs if old and new and old > 0 and new > 0]
    if not logs:
        return None
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(draws))
    lo, hi = means[int(0.025 * draws)], means[min(draws - 1, int(0.975 * draws))]
    return {"ratio": round(math.exp(statistics.fmean(logs)), 4), "ci_low": round(math.exp(lo), 4),
            "ci_high": round(math.exp(hi), 4), "pairs": len(logs)}


def fresh_cache(template: Path, where: Path) -> Path:
    """A machine cache at ``where`` with ``template``'s device facts and bytecode (linked:
    it is keyed by source path, so two trees never share an entry) and no compiled kernels."""
    where.mkdir(parents=True, exist_ok=True)
    facts = template / "device_facts.json"
    if facts.is_file():
        shutil.copy2(facts, where / facts.name)
    if (template / "pycache").is_dir() and not (where / "pycache").exists():
        (where / "pycache").symlink_to(template / "pycache", target_is_directory=True)
    return where


def _session(tree: Path, kernel: str, out: Path, extra: list[str], cache: Optional[Path] = None,
             gpu: Optional[str] = None) -> dict[str, Any]:
    cmd = [sys.executable, "benchmarks/eval_speed.py", "--out", str(out), "--skip-timeline", "--skip-parallel",
           "--skip-add-scale", "--only", kernel, *extra, *(["--gpus", gpu] if gpu is not None else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    if cache is not None:
        env["KERNELBAND_CACHE_DIR"] = str(cache)
    proc = subprocess.run(cmd, cwd=str(tree), env=env, capture_output=True, text=True)
    (out.parent / f"{out.name}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:], encoding="utf-8")
    try:
        rows = json.loads((out / "eval_speed.json").read_text(encoding="utf-8"))["rows"]
    except (OSError, ValueError, KeyError):
        return {"error": f"eval_speed.py exited {proc.returncode} without a row"}
    row = next((r for r in rows if r.get("kernel") == kernel), {})
    return {m: row.get(m) for m in (*METRICS, "status", "session_s")}


def run(old: Path, new: Path, kernels: list[str], rounds: int, out: Path, extra: list[str],
        shared_caches: bool = False, gpus: Optional[tuple[str, str]] = None) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    template = cache_dir()  # the machine cache every session would use otherwise

    def one(r: int, kernel: str, arm: str, tree: Path, gpu: Optional[str]) -> None:
        name = f"{arm}_{kernel}_{r}"
        cache = None if shared_caches else fresh_cache(template, out / "caches" / name)
        res = _session(tree, kernel, out / name, extra, cache, gpu)
        runs.append({"round": r, "kernel": kernel, "arm": arm, **({"gpu": gpu} if gpu is not None else {}), **res})
        print(json.dumps(runs[-1]), flush=True)

    for r in range(rounds):
        for kernel in kernels:
            order = (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))
            if gpus is None:
                for arm, tree in order:
                    one(r, kernel, arm, tree, None)
                continue
            # side by side: the first of the order on gpus[0]; the order alternates, so the GPUs swap
            threads = [threading.Thread(target=one, args=(r, kernel, arm, tree, gpu))
                       for (arm, tree), gpu in zip(order, gpus)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    return {"old": str(old), "new": str(new), "rounds": rounds, "kernels": kernels, "runs": runs,
            "caches": "shared" if shared_caches else "a fresh one a session",
            "gpus": list(gpus) if gpus else None, "summary": summarize(runs)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per metric, the paired summary over every (kernel, round) both arms measured."""
    by_key: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for run_ in runs:
        by_key.setdefault((run_["kernel"], run_["round"]), {})[run_["arm"]] = run_
    out: dict[str, Any] = {}
    for metric in METRICS:
        pairs = [(arms["old"].get(metric), arms["new"].get(metric)) for arms in by_key.values()
                 if "old" in arms and "new" in arms]
        out[metric] = paired_summary([(a, b) for a, b in pairs if a is not None and b is not None])
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# A/B: {report['new']} against {report['old']}", "",
             f"{report['rounds']} rounds of {', '.join(report['kernels'])}; "
             + (f"the two trees side by side on GPUs {' and '.join(report['gpus'])}, swapped by round"
                if report.get("gpus") else "one session at a time, the order of the two trees alternating by round")
             + f"; machine caches: {report.get('caches', 'shared')}.", "", "| metric | new / old (geometric mean) | 95% CI | pairs |",
             "|---|---|---|---|"]
    for metric, s in report["summary"].items():
        lines.append(f"| {metric} | {s['ratio']} | [{s['ci_low']}, {s['ci_high']}] | {s['pairs']} |" if s
                     else f"| {metric} | no pairs | | 0 |")
    lines += ["", "| round | kernel | arm | evals/min | first verdict s | status |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['kernel']} | {r['arm']} | {r.get('evals_per_min')} | {r.get('first_verdict_s')} | "
              f"{r.get('status', r.get('error'))} |" for r in report["runs"]]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="a tree of the baseline (git archive REV | tar -x)")
    ap.add_argument("--new", type=Path, required=True, help="a tree of the change")
    ap.add_argument("--kernels", nargs="+", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shared-caches", action="store_true",
                    help="every session uses the machine's cache (compiled originals included), not a fresh one")
    ap.add_argument("--gpus", nargs=2, metavar=("A", "B"), default=None,
                    help="run the two trees side by side, one on each of these GPUs, swapped every round")
    args = ap.parse_args(argv)
    if args.gpus and args.gpus[0] == args.gpus[1]:
        ap.error("--gpus takes two different GPUs (one session at a time on each)")
    for tree in (args.old, args.new):
        if not (tree / "benchmarks" / "eval_speed.py").is_file():
            ap.error(f"{tree} is not a tree of KernelBand (no benchmarks/eval_speed.py)")
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args.old.resolve(), args.new.resolve(), args.kernels, max(1, args.rounds), args.out, extra,
                 args.shared_caches, (args.gpus[0], args.gpus[1]) if args.gpus else None)
    (args.out / "ab.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (args.out / "ab.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
