"""Merge the per-shard results of benchmarks/gpu_batch.sh into one results file, the
report (markdown, summary JSON, plots) and a throughput table.

    python benchmarks/merge_shards.py benchmarks/results/gpu --out benchmarks/results
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import run as bench  # noqa: E402  (benchmarks/run.py)


def throughput(runs: list[dict]) -> list[dict]:
    """Evaluations per minute and where a session's time goes, per kernel (search runs only)."""
    rows = []
    for kernel in sorted({r["kernel"] for r in runs}):
        mine = [r for r in runs if r["kernel"] == kernel and r["method"] != bench.ORACLE and r.get("evaluations")]
        if not mine:
            continue
        evals = sum(r["evaluations"] for r in mine)
        secs = sum(r["seconds"] for r in mine)
        phases: dict[str, float] = {}
        for r in mine:
            for k, v in (r.get("phase_seconds") or {}).items():
                k = {"compile_and_first_run": "compile"}.get(k, k)  # the worker's name for it
                phases[k] = phases.get(k, 0.0) + v
        in_evals = sum(phases.values())
        rows.append({
            "kernel": kernel,
            "sessions": len(mine),
            "evaluations": evals,
            "evaluations_per_minute": 60.0 * evals / secs if secs else None,
            "session_seconds_median": statistics.median(r["seconds"] for r in mine),
            "phase_share": {k: v / secs for k, v in sorted(phases.items())},
            "setup_and_final_remeasure_share": max(secs - in_evals, 0.0) / secs if secs else None,
            "baseline_ms": statistics.median(r["baseline_ms"] for r in mine if r.get("baseline_ms")),
        })
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("shards", help="folder holding shard*/results.json")
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    runs = bench.load_shard_rows(Path(args.shards), "shard*/results.json")
    out = Path(args.out)
    bench.save_results(out / bench.RESULTS_FILE, {"schema": bench.SCHEMA, "runs": runs})
    written = bench.write_report(out, runs)
    rows = throughput(runs)
    (out / "throughput.json").write_text(json.dumps({"note": "from the search sessions of results.json, run 6 to 8 "
                                                     "sessions in parallel on one GPU (timed regions exclusive)",
                                                     "rows": rows}, indent=1) + "\n")
    phases = sorted({k for r in rows for k in r["phase_share"]})
    lines = ["# Evaluation throughput (from the benchmark sessions)", "",
             "Six to eight sessions shared one GPU in parallel; timed regions were exclusive (KERNELBAND_TIMING_LOCK). "
             "Shares are of session wall time; the rest is worker start, the original's checks and the final "
             "interleaved re-measurement.", "",
             "| kernel | original ms | evaluations/min | " + " | ".join(phases) + " | setup + final |",
             "|---|---|---|" + "---|" * len(phases) + "---|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['baseline_ms']:.4g} | {r['evaluations_per_minute']:.1f} | "
                     + " | ".join(f"{100 * r['phase_share'].get(p, 0):.0f}%" for p in phases)
                     + f" | {100 * r['setup_and_final_remeasure_share']:.0f}% |")
    (out / "throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(str(w) for w in written + [out / "throughput.md"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
