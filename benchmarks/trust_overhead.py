"""The cost of the trust layer: evaluations per minute and seconds per check.

Evaluates the same launch-tuning variants of the example kernels through
``kernelband.evaluate.Evaluator`` (prepare once, then N variants) and reports
evaluations per minute, the median wall seconds of one evaluation, and, where the
engine reports them, the seconds spent in each phase (correctness runs, neutralised
runs, replay check, timing, re-check after timing, variant-process start, judging).

Run it once per engine to compare: the working tree's engine, and an older one put on
``PYTHONPATH`` (e.g. ``git archive <commit> kernelband | tar -x -C /tmp/old``):

    python benchmarks/trust_overhead.py --label new --out DIR [--device cuda|cpu]
    PYTHONPATH=/tmp/old python benchmarks/trust_overhead.py --label old --out DIR

Only APIs both engines have are used (Task, Variant, Evaluator.prepare/evaluate).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

from common import ROOT as REPO

# (example file, kernel, harness, the launch literal to vary, its alternatives)
CASES = [
    ("add_scale.py", "axpy_kernel", "harness_axpy", "BLOCK_SIZE=128", ["BLOCK_SIZE=256", "BLOCK_SIZE=512",
                                                                      "BLOCK_SIZE=1024", "BLOCK_SIZE=2048"]),
    ("softmax.py", "softmax_kernel", "harness_softmax", "num_warps=1", ["num_warps=2", "num_warps=4", "num_warps=8",
                                                                         "num_warps=16"]),
    ("matmul.py", "matmul_kernel", "harness_matmul", "BLOCK_M=32, BLOCK_N=32, BLOCK_K=32",
     ["BLOCK_M=64, BLOCK_N=32, BLOCK_K=32", "BLOCK_M=32, BLOCK_N=64, BLOCK_K=32", "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32",
      "BLOCK_M=32, BLOCK_N=32, BLOCK_K=64"]),
]


def measure(device: str, label: str, limit: int) -> dict[str, Any]:
    import kernelband
    from kernelband.evaluate import Evaluator
    from kernelband.model import Task, Variant

    rows = []
    for name, kernel, harness, literal, alternatives in CASES:
        path = REPO / "examples" / name
        source = path.read_text(encoding="utf-8")
        task = Task(module_path=str(path), source=source, kernel=kernel, harness=harness, device=device,
                    timeout_s=120.0)
        t0 = time.perf_counter()
        with Evaluator(task) as ev:
            base = ev.prepare()
            prepare_s = time.perf_counter() - t0
            evals = []
            for alt in alternatives[:limit]:
                variant = Variant(re.sub(re.escape(literal), alt, source, count=1))
                t1 = time.perf_counter()
                result = ev.evaluate(variant)
                evals.append({"variant": alt, "status": result.status.value, "wall_s": time.perf_counter() - t1,
                              "time_ms": result.time_ms, "phases": result.phases, "message": result.message[:200]})
        walls = [e["wall_s"] for e in evals]
        phases: dict[str, float] = {}
        for key in sorted({k for e in evals for k in e["phases"]}):
            phases[key] = statistics.median(e["phases"].get(key, 0.0) for e in evals)
        rows.append({"kernel": name, "prepare_s": prepare_s, "baseline_ok": base.ok,
                     "evals": evals, "median_eval_s": statistics.median(walls),
                     "evals_per_min": 60.0 * len(walls) / sum(walls), "median_phases_s": phases})
        print(f"{label:5s} {name:14s} prepare {prepare_s:6.1f}s  median eval {statistics.median(walls):6.2f}s  "
              f"{60.0 * len(walls) / sum(walls):5.1f} evals/min  " + " ".join(f"{k}={v:.2f}" for k, v in phases.items()),
              flush=True)
    return {"label": label, "device": device, "engine": str(Path(kernelband.__file__).parent), "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="auto", help="auto (cuda if visible), cuda or cpu")
    ap.add_argument("--limit", type=int, default=4, help="variants per kernel (default 4)")
    args = ap.parse_args()
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    result = measure(device, args.label, args.limit)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"trust_overhead_{args.label}_{device}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
