"""What does each profiling tier cost, and does the diagnosis name the right bottleneck?

Profiles the three examples plus a clearly memory-bound kernel (a 1 GiB fp32 copy)
and a clearly compute-bound one (an 8192^3 fp16 matmul with tensor-core tiles) at
tiers 1, 2 and 3 through the real path (Evaluator -> worker -> collect_profile, then
ncu for tier 3), and reports per kernel and tier:

- collect_ms: the profiler's own work in the worker (metadata, write detection
  replays, accounting) for tiers 1-2, and the whole ncu run for tier 3;
- request_ms: the worker request as a whole (it re-times the launches with do_bench
  every time, which is the same for every tier);
- the bottleneck and its evidence.

Tier 3 is run twice: the second call hits the counters cache. Device facts are
measured once at the start (their cost is reported too). Meant for the GPU machine;
under the interpreter tiers 1 and 3 report why they are unavailable.

    python benchmarks/profile_suite.py [OUT_DIR]      (default benchmarks/results/)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT as REPO

from kernelband.evaluate import Evaluator  # noqa: E402
from kernelband.harness import find_harness  # noqa: E402
from kernelband.model import Task  # noqa: E402
from kernelband.worker.counters import add_counters  # noqa: E402
from kernelband.store import Store  # noqa: E402

KERNELS: list[tuple[str, str, str, str]] = [
    # (label, file, kernel, expected bottleneck on a GPU; "" = no expectation)
    ("axpy (example)", "examples/add_scale.py", "axpy_kernel", ""),
    ("matmul 4096 small tiles (example)", "examples/matmul.py", "matmul_kernel", ""),
    ("softmax (example)", "examples/softmax.py", "softmax_kernel", ""),
    ("copy 1 GiB fp32", "benchmarks/profile_kernels/copy_fp32.py", "copy_kernel", "memory-bound"),
    ("matmul 8192 fp16 128x256x64", "benchmarks/profile_kernels/matmul_big_fp16.py", "big_matmul_kernel", "compute-bound"),
]


def _task(rel: str, kernel: str, device: str) -> Task:
    path = str(REPO / rel)
    source = Path(path).read_text(encoding="utf-8")
    h = find_harness(path, source, kernel)
    if not h.found:
        raise SystemExit(f"{rel}: no harness for {kernel}: {h.reason}")
    return Task(path, source, kernel, h.name or "", h.path, device=device, seeds=[0, 1, 2], timeout_s=300)


def profile_kernel(label: str, rel: str, kernel: str, expected: str, device: str, store: Store,
                   facts: dict[str, Any] | None, tiers: list[int], keep_dir: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    task = _task(rel, kernel, device)
    rows: list[dict[str, Any]] = []
    with Evaluator(task) as ev:
        info = ev.start()
        if not info.interpreted:
            if facts is None:
                t0 = time.perf_counter()
                facts = ev.device_facts()
                facts["suite_measure_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
            ev.facts = facts
        ev.prepare(time_it=False)
        for tier in tiers:
            for repeat in ((0, 1) if tier == 3 else (0,)):
                t0 = time.perf_counter()
                typed = ev.profile(None, min(tier, 3))
                request_ms = (time.perf_counter() - t0) * 1e3
                assert typed is not None, f"{label}: the worker returned no profile"
                collect_ms = (typed.collect_s or 0.0) * 1e3
                if tier == 3:
                    t1 = time.perf_counter()
                    typed = add_counters(typed, task, store=store, gpu=info.device_name,
                                         triton_version=info.triton_version, keep_dir=keep_dir)
                    collect_ms += (time.perf_counter() - t1) * 1e3
                prof = typed.to_dict()
                counters = (prof["tiers"].get("counters") or {})
                diag = prof["diagnosis"]
                tm = prof["tiers"].get("timing") or {}
                rows.append({
                    "kernel": label, "file": rel, "name": kernel, "tier": tier,
                    "cached": bool(counters.get("cached")) if tier == 3 else None,
                    "collect_ms": round(collect_ms, 1), "request_ms": round(request_ms, 1),
                    "time_per_launch_ms": tm.get("time_per_launch_ms") or (prof.get("time_ms")),
                    "bandwidth_frac": tm.get("bandwidth_frac"), "compute_frac": tm.get("compute_frac"),
                    "bottleneck": diag["bottleneck"], "evidence": diag["evidence"], "strategies": diag["strategies"],
                    "expected": expected,
                    "matches": (diag["bottleneck"] == expected) if expected and not info.interpreted and tier >= 2 else None,
                    "unavailable": prof.get("unavailable"), "device": info.device_name, "profile": prof,
                })
                print(f"  {label:36s} tier {tier}{' (cached)' if rows[-1]['cached'] else '':9s} "
                      f"{rows[-1]['collect_ms']:9.1f} ms  {diag['evidence']}", flush=True)
    return rows, facts


def markdown(rows: list[dict[str, Any]], facts: dict[str, Any] | None) -> str:
    dev = rows[0]["device"] if rows else "?"
    lines = [f"# Profiling tiers: cost and diagnosis ({dev})", ""]
    if facts and not facts.get("placeholder"):
        tf = facts.get("matmul_tflops") or {}
        lines.append(f"Device facts: copy {facts.get('copy_gbs')} GB/s (read + write), bf16 {tf.get('bf16')} / tf32 "
                     f"{tf.get('tf32')} / fp32 {tf.get('fp32')} TFLOP/s, {facts.get('sm_count')} SMs; measured in "
                     f"{facts.get('measure_s')} s (once per device, then cached).")
        lines.append("")
    lines += ["| kernel | tier | cost ms | time/launch ms | DRAM frac | compute frac | bottleneck | expected | evidence |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        tier = f"{r['tier']}{' (cached)' if r['cached'] else ''}"
        frac = lambda x: "" if x is None else f"{x:.2f}"  # noqa: E731
        tpl = "" if r["time_per_launch_ms"] is None else f"{r['time_per_launch_ms']:.4g}"
        ok = "" if r["matches"] is None else (" ✓" if r["matches"] else " ✗")
        lines.append(f"| {r['kernel']} | {tier} | {r['collect_ms']:.1f} | {tpl} | {frac(r['bandwidth_frac'])} | "
                     f"{frac(r['compute_frac'])} | {r['bottleneck']} | {r['expected']}{ok} | {r['evidence'].replace('|', '/')} |")
    lines += vector_table(rows)
    lines += ["", "cost = the profiler's own work, cumulative over the tiers below it: collect_profile in the worker "
              "(tier 2 includes the write-detection replays), plus for tier 3 the whole ncu run (the cached line "
              "is a store hit). "
              "request_ms in the JSON adds the worker's do_bench re-timing, the same for every tier. The rows of a "
              "kernel are requested in order, tier 1 first, so its tier-1 row also pays one-time work and tier 2 can "
              "read lower; costs are rounded to 1 ms."]
    return "\n".join(lines) + "\n"


PHI_SHORT = {"l2_hit_rate": "L2 hit %", "dram_throughput": "DRAM %", "sm_throughput": "SM %",
             "warp_efficiency": "warp eff %", "achieved_occupancy": "achieved occ %", "registers_per_thread": "regs",
             "shared_bank_conflicts": "bank conflicts", "sectors_per_request": "sectors/req",
             "tensor_core_utilisation": "tensor %"}


def vector_table(rows: list[dict[str, Any]]) -> list[str]:
    """The ncu vector (tier 3) beside what tiers 1-2 said of the same kernel, one line per kernel."""
    by_kernel: dict[str, dict[Any, dict[str, Any]]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], {})[(r["tier"], bool(r["cached"]))] = r
    out: list[str] = []
    for kernel, tiers in by_kernel.items():
        t3 = tiers.get((3, False)) or tiers.get((3, True))
        phi = ((t3 or {}).get("profile") or {}).get("phi")
        if not phi:
            continue
        if not out:
            names = t3["profile"].get("phi_names") or list(PHI_SHORT)
            out = ["", "## Tier 3 vector beside tiers 1-2", "",
                   "Tier 1 (compile metadata): registers and theoretical occupancy; tier 2 (timing): fractions of the "
                   "measured copy bandwidth and matrix rate; then the 9-dim ncu vector the bandit's compatibility "
                   "model reads.", "",
                   "| kernel | regs (t1) | occupancy (t1) | DRAM frac (t2) | compute frac (t2) | "
                   + " | ".join(PHI_SHORT.get(n, n) for n in names) + " |",
                   "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in names) + " |"]
        static = ((t3["profile"].get("tiers") or {}).get("static") or {})
        occ = (static.get("occupancy") or {}).get("theoretical") if isinstance(static.get("occupancy"), dict) else None
        t2 = tiers.get((2, False)) or t3
        frac = lambda x: "" if x is None else f"{x:.2f}"  # noqa: E731
        out.append(f"| {kernel} | {static.get('n_regs', '')} | {frac(occ)} | {frac(t2.get('bandwidth_frac'))} | "
                   f"{frac(t2.get('compute_frac'))} | " + " | ".join(f"{v:.3g}" for v in phi) + " |")
    return out


def rewrite_markdown(out: Path) -> str:
    """Rebuild profile_suite.md from profile_suite.json (no GPU needed)."""
    data = json.loads((out / "profile_suite.json").read_text())
    md = markdown(data["rows"], data.get("facts"))
    (out / "profile_suite.md").write_text(md)
    return md


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=str(REPO / "benchmarks" / "results"), help="output folder")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--tiers", default="1,2,3")
    ap.add_argument("--keep-ncu", action="store_true", help="keep ncu's raw CSV and log under OUT_DIR/ncu/")
    ap.add_argument("--only", help="comma-separated substrings of kernel labels to run")
    ap.add_argument("--markdown-only", action="store_true", help="rebuild profile_suite.md from the JSON and exit")
    args = ap.parse_args()
    tiers = [int(t) for t in args.tiers.split(",")]
    out = Path(args.out)
    if args.markdown_only:
        print(rewrite_markdown(out))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    facts = None
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "kb.db")  # fresh: tier 3's first call is a real ncu run
        for label, rel, kernel, expected in KERNELS:
            if args.only and not any(s in label for s in args.only.split(",")):
                continue
            print(f"{label}:", flush=True)
            got, facts = profile_kernel(label, rel, kernel, expected, args.device, store, facts, tiers,
                                        keep_dir=str(out / "ncu") if args.keep_ncu else None)
            rows += got
        store.close()
    (out / "profile_suite.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=2, default=str))
    md = markdown(rows, facts)
    (out / "profile_suite.md").write_text(md)
    print()
    print(md)
    bad = [r for r in rows if r["matches"] is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
