"""Timing isolation: CI widths of `kernelband check` solo vs several
sessions in parallel on the same GPU, with and without the cross-process timing lock.

    python benchmarks/timing_isolation.py --out DIR [--device cuda|cpu] [--parallel 4]
                                          [--batches 2] [--kernels softmax_out gemv_fp16 ...]

For each kernel (default: three modules of benchmarks/realworld/), the variant is the same
module with a bigger block (written to a temp dir), checked with
``python -m kernelband check ORIG --variant VARIANT --device D --rounds 10 --json``:
  (a) solo: one check at a time;
  (b) locked: --parallel checks at once on the same GPU, default settings (the engine's
      cross-process lock around timed regions, KERNELBAND_TIMING_LOCK);
  (c) unlocked: the same with KERNELBAND_TIMING_LOCK=off.
In (b) and (c) each batch runs --parallel checks over the kernels in turn, so every kernel
gets samples in every mode. Reported per run: paired speedup, 95% CI low/high, CI width;
per mode: the median width. Writes DIR/timing_isolation.json and DIR/timing_isolation.md.
On --device cpu the checks use --cpu-tuning (interpreter CPU times, no speed claim) so the
script can be exercised without a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from common import ROOT as REPO
from realworld_gpu import kill_tree

RW = REPO / "benchmarks" / "realworld"

# module stem -> (launch-site text, the same with a bigger block): a correct variant. Only
# kernels whose bigger block keeps results bit-identical (copies, elementwise): a bigger
# block in a reduction (softmax, gemv) changes the summation order, and this engine's
# float64 precision bound refuses that when the original's own error is 0 (see the report).
VARIANTS: dict[str, tuple[str, str]] = {
    "kv_cache_scatter": ("BLOCK=128, num_warps=1)", "BLOCK=1024, num_warps=4)"),
    "geglu_heuristics": ("BLOCK_SIZE=256, num_warps=2)", "BLOCK_SIZE=1024, num_warps=4)"),
    "rope_inplace": ("HALF=half, BLOCK=block, num_warps=1)", "HALF=half, BLOCK=block * 2, num_warps=2)"),
    "softmax_out": ("BLOCK_SIZE=128, num_warps=1)", "BLOCK_SIZE=1024, num_warps=4)"),
    "gemv_fp16": ("BLOCK_M=4, BLOCK_K=64, num_warps=1)", "BLOCK_M=4, BLOCK_K=256, num_warps=1)"),
}
DEFAULT_KERNELS = ["kv_cache_scatter", "geglu_heuristics", "rope_inplace"]


@dataclass
class Run:
    mode: str          # solo | locked | unlocked
    batch: int         # which parallel batch (solo: the run's index)
    kernel: str
    status: str = "not_run"
    verdict: Optional[str] = None
    speedup: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    ci_width: Optional[float] = None
    seconds: Optional[float] = None
    message: str = ""


def prepare(work: Path, stem: str) -> Path:
    """A private dir per kernel holding orig.py and variant.py."""
    src = (RW / f"{stem}.py").read_text(encoding="utf-8")
    old, new = VARIANTS[stem]
    if src.count(old) != 1:
        raise SystemExit(f"{stem}: launch site text {old!r} not found exactly once")
    d = work / stem
    d.mkdir()
    (d / "orig.py").write_text(src, encoding="utf-8")
    (d / "variant.py").write_text(src.replace(old, new), encoding="utf-8")
    return d


def start(d: Path, device: str, rounds: int, lock: Optional[str]) -> subprocess.Popen:
    """lock: the KERNELBAND_TIMING_LOCK value, or None to leave the engine's default."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("KERNELBAND_TIMING_LOCK", None)
    if lock is not None:
        env["KERNELBAND_TIMING_LOCK"] = lock
    cmd = [sys.executable, "-m", "kernelband", "check", "orig.py", "--variant", "variant.py", "--device", device,
           "--rounds", str(rounds), "--json"]
    if device == "cpu":
        cmd.append("--cpu-tuning")  # the interpreter makes no speed claim otherwise: no CI to report
    return subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def finish(p: subprocess.Popen, run: Run, t0: float, timeout: float) -> None:
    try:
        out, err = p.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        kill_tree(p.pid)  # our own child and everything it started
        p.communicate()
        run.status, run.message = "timeout", "killed at the per-check cap"
        run.seconds = round(time.perf_counter() - t0, 1)
        return
    run.seconds = round(time.perf_counter() - t0, 1)
    try:
        res = json.loads(out)
    except json.JSONDecodeError:
        run.status, run.message = "error", ((err.strip().splitlines() or ["no JSON"])[-1])[:300]
        return
    run.status, run.verdict = res.get("status", "?"), res.get("verdict")
    run.speedup = res.get("speedup")
    ci = res.get("speedup_ci")
    if ci:
        run.ci_low, run.ci_high = ci[0], ci[1]
        run.ci_width = ci[1] - ci[0]
    if run.status != "ok" or ci is None:
        run.message = str(res.get("message", ""))[:300]


def fmt(x: Optional[float], nd: int = 3) -> str:
    return "" if x is None else f"{x:.{nd}f}"


def markdown(runs: list[Run], meta: dict) -> str:
    lines = ["# Timing isolation: CI widths solo vs parallel sessions", "",
             f"Device: {meta['device_name']}. `kernelband check ORIG --variant VARIANT --rounds {meta['rounds']}` "
             f"(variant: the same kernel with a bigger block). solo: one check at a time; locked: {meta['parallel']} "
             f"checks at once, KERNELBAND_TIMING_LOCK={meta['env']['locked'] or '(unset: engine default)'} "
             "(cross-process timing lock); unlocked: the same with "
             f"KERNELBAND_TIMING_LOCK=off. {meta['started']}, total {meta['total_seconds']:.0f} s.", "",
             "## Median CI width per mode", "", "| mode | runs with a CI | median CI width | median speedup |",
             "| --- | --- | --- | --- |"]
    for mode in ("solo", "locked", "unlocked"):
        w = [r.ci_width for r in runs if r.mode == mode and r.ci_width is not None]
        s = [r.speedup for r in runs if r.mode == mode and r.speedup is not None]
        lines.append(f"| {mode} | {len(w)} | {fmt(statistics.median(w) if w else None, 4)} | "
                     f"{fmt(statistics.median(s) if s else None)} |")
    lines += ["", "## Per kernel: median CI width", "", "| kernel | solo | locked | unlocked |", "| --- | --- | --- | --- |"]
    for k in meta["kernels"]:
        cells = []
        for mode in ("solo", "locked", "unlocked"):
            w = [r.ci_width for r in runs if r.mode == mode and r.kernel == k and r.ci_width is not None]
            cells.append(fmt(statistics.median(w) if w else None, 4))
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines += ["", "## Every run", "", "| mode | batch | kernel | status | verdict | speedup | CI low | CI high | "
              "CI width | s | message |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        lines.append(f"| {r.mode} | {r.batch} | {r.kernel} | {r.status} | {r.verdict or ''} | {fmt(r.speedup)} | "
                     f"{fmt(r.ci_low)} | {fmt(r.ci_high)} | {fmt(r.ci_width, 4)} | {fmt(r.seconds, 0)} | "
                     f"{r.message.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--kernels", nargs="*", default=DEFAULT_KERNELS, choices=sorted(VARIANTS))
    ap.add_argument("--parallel", type=int, default=4, help="checks at once in the parallel modes (default 4)")
    ap.add_argument("--batches", type=int, default=2, help="parallel batches per mode (default 2)")
    ap.add_argument("--solo-repeats", type=int, default=1, help="solo checks per kernel (default 1)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--total-seconds", type=float, default=330.0,
                    help="wall budget; work that would start after it is skipped (default 330)")
    ap.add_argument("--check-cap", type=float, default=150.0, help="max seconds per check (default 150)")
    ap.add_argument("--locked-env", choices=("file", "default"), default="file",
                    help="locked mode: 'file' sets KERNELBAND_TIMING_LOCK to one lock file shared by the batch "
                         "(works whether or not the engine locks by default); 'default' leaves it unset")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kb_isolation_"))
    dirs = {k: prepare(work, k) for k in args.kernels}
    # private copies per parallel slot: sessions never share a workspace directory
    slot_dirs: dict[tuple[str, int], Path] = {}

    def slot_dir(k: str, slot: int) -> Path:
        if (k, slot) not in slot_dirs:
            d = work / f"{k}_slot{slot}"
            shutil.copytree(dirs[k], d)
            slot_dirs[(k, slot)] = d
        return slot_dirs[(k, slot)]

    def left() -> float:
        return args.total_seconds - (time.perf_counter() - t_start)

    # an absolute path: the worker's processes run in private cwds
    locked_value = str(work / "gpu.lock") if args.locked_env == "file" else None
    runs: list[Run] = []
    # (a) solo, one after another
    i = 0
    for _ in range(args.solo_repeats):
        for k in args.kernels:
            run = Run("solo", i, k)
            runs.append(run)
            i += 1
            if left() < 20:
                run.status, run.message = "skipped", "out of the wall budget"
                continue
            t0 = time.perf_counter()
            finish(start(dirs[k], args.device, args.rounds, locked_value), run, t0, min(args.check_cap, left()))
            print(f"[solo] {k}: {run.status} {run.speedup} [{run.ci_low}, {run.ci_high}] {run.seconds}s", flush=True)
    # (b) locked and (c) unlocked: --parallel checks at once, kernels in turn
    n = 0
    for mode in ("locked", "unlocked"):
        for b in range(args.batches):
            batch = [Run(mode, b, args.kernels[(n + j) % len(args.kernels)]) for j in range(args.parallel)]
            n += args.parallel
            runs += batch
            if left() < 30:
                for r in batch:
                    r.status, r.message = "skipped", "out of the wall budget"
                continue
            t0 = time.perf_counter()
            procs = [start(slot_dir(r.kernel, j), args.device, args.rounds, "off" if mode == "unlocked" else locked_value)
                     for j, r in enumerate(batch)]
            for p, r in zip(procs, batch):
                finish(p, r, t0, min(args.check_cap, left() + 30) - (time.perf_counter() - t0))
            for r in batch:
                print(f"[{mode} {b}] {r.kernel}: {r.status} {r.speedup} [{r.ci_low}, {r.ci_high}] {r.seconds}s",
                      flush=True)
    shutil.rmtree(work, ignore_errors=True)
    name = "cpu (Triton interpreter, --cpu-tuning: CPU times, no speed claim)" if args.device == "cpu" else args.device
    if args.device != "cpu" and shutil.which("nvidia-smi"):
        p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        name = (p.stdout.strip().splitlines() or [name])[0]
    meta = {"device": args.device, "device_name": name, "rounds": args.rounds, "parallel": args.parallel,
            "batches": args.batches, "kernels": args.kernels,
            "env": {"solo": locked_value, "locked": locked_value, "unlocked": "off"},
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "total_seconds": time.perf_counter() - t_start}
    summary = {}
    for mode in ("solo", "locked", "unlocked"):
        w = [r.ci_width for r in runs if r.mode == mode and r.ci_width is not None]
        summary[mode] = {"runs_with_ci": len(w), "median_ci_width": statistics.median(w) if w else None}
    (args.out / "timing_isolation.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "runs": [asdict(r) for r in runs]}, indent=2), encoding="utf-8")
    (args.out / "timing_isolation.md").write_text(markdown(runs, meta), encoding="utf-8")
    print(f"wrote {args.out / 'timing_isolation.json'} and {args.out / 'timing_isolation.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
