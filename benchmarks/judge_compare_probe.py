"""What the judge's checks of one outputs frame cost on the GPU, alone and beside other
GPU work: the comparison with the reference, the consistency deviations, the precision
check against a float64 rerun, a fingerprint and a change mask, each on a production-size
output read through CUDA IPC from another process (as the judge reads a candidate's
outputs), by the torch path and by the fused kernels (``kernelband/worker/fused_checks``).
On a GPU:

    python benchmarks/judge_compare_probe.py OUT.json
    python benchmarks/judge_compare_probe.py --report OUT.json DIR   # DIR/judge_compare.md, .png

"4 threads" runs each check in four threads of the probe at once (the judge's threads,
one per candidate in flight, share one Python process). "busy" runs each check while
another process keeps the GPU busy with a stream of elementwise kernels (a candidate's
harness run beside the judge): the seconds a check loses to the GPU's time slicing
between processes. "first call" is a fused check's first call in the process: its
kernels' compile. Prints a table; the rows go to OUT.json.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from kernelband.worker import checks, compare, cuda_ipc, observe  # noqa: E402

REPEATS = 5

_CHILD = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[1])
from kernelband.worker import cuda_ipc
mode, numel, dtype = sys.argv[2], int(sys.argv[3]), getattr(torch, sys.argv[4])
if mode == "share":  # a tensor the parent reads through IPC, as the judge reads a variant's
    torch.manual_seed(1)
    t = torch.randn(numel, device="cuda").to(dtype)
    torch.cuda.synchronize()
    e = cuda_ipc.export(t)
    print(e.handle, e.offset, flush=True)
    sys.stdin.readline()
else:  # keep the GPU busy until stdin closes (another candidate's runs)
    import os, threading
    x = torch.ones(1 << 27, device="cuda")
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print("busy", flush=True)
    while not stop.is_set():
        for _ in range(50):
            x.mul_(1.0000001)
        torch.cuda.synchronize()
"""


def _child(mode: str, numel: int = 0, dtype: str = "float16") -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", _CHILD, str(REPO), mode, str(numel), dtype],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    return p, p.stdout.readline().strip()


def _timed(fn: Callable[[], Any]) -> float:
    fn()  # warm (allocator, kernels' first launch)
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _timed_threads(fn: Callable[[], Any], threads: int = 4) -> float:
    """The median wall time of ``fn`` while ``threads`` threads of this process run it at
    once (the judge checks several candidates' frames in threads of one process)."""
    fn()
    torch.cuda.synchronize()
    times: list[float] = []

    def worker() -> None:
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return statistics.median(times)


def _checks(ref: torch.Tensor, out: torch.Tensor, high: torch.Tensor) -> dict[str, Callable[[], Any]]:
    ref_tree = {"returned": ref, "written": {"k.y": [ref]}}
    out_tree = {"returned": out, "written": {"k.y": [out]}}
    gib = ref.numel() * ref.element_size() / 2**30
    return {
        "read once (sum)": lambda: out.sum(dtype=torch.float32).item(),
        "compare_outputs": lambda: compare.compare_outputs(ref_tree, out_tree),
        "deviations": lambda: checks.deviations(ref_tree, out_tree),
        "error_against (float64 high)": lambda: checks.error_against(high, out),
        "fingerprint": lambda: observe.fingerprint(out),
        "change_mask": lambda: checks.change_masks(ref_tree, out_tree),
        "clone (snapshot)": lambda: out.clone(),
        "_gib": lambda: gib,
    }


def _first_calls(ref: torch.Tensor, out: torch.Tensor, high: torch.Tensor) -> list[dict[str, Any]]:
    """Seconds of each fused check's first call in this process: its kernels' compile into
    the judge's own (empty) cache, once per judge process and dtype."""
    rows = []
    for name, fn in _checks(ref, out, high).items():
        if name.startswith("_") or name in PLAIN:
            continue
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        rows.append({"dtype": str(ref.dtype).removeprefix("torch.float"), "mib": ref.numel() * ref.element_size() >> 20, "memory": "ipc",
                     "load": "first call", "path": "fused", "check": name,
                     "seconds": round(time.perf_counter() - t0, 5)})
    return rows


PLAIN = ("read once (sum)", "clone (snapshot)", "change_mask")  # no fused path: timed once


def report(src: Path, out: Path) -> None:
    """judge_compare.md (every row) and judge_compare.png (torch against fused, per check
    and load) from a probe's JSON."""
    data = json.loads(src.read_text())
    rows = data["rows"]
    lines = [f"Device: {data['device']}, torch {data['torch']}, commit {data.get('commit')}; median of {REPEATS} "
             "calls (first call: one).", "", "| output | load | path | check | ms |", "|---|---|---|---|---|"]
    lines += [f"| {r['mib']} MiB {r['dtype']} | {r['load']} | {r.get('path', '-')} | {r['check']} | "
              f"{1e3 * r['seconds']:.2f} |" for r in rows]
    (out / "judge_compare.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fused = [r for r in rows if r.get("path") == "fused" and r["load"] != "first call"]
    labels = [f"{r['check'].split(' ')[0]}\n{r['mib']} MiB {r['load']}" for r in fused]
    torch_ms = [1e3 * next(t["seconds"] for t in rows if t.get("path") == "torch" and t["check"] == r["check"]
                           and t["load"] == r["load"] and t["mib"] == r["mib"]) for r in fused]
    fig, ax = plt.subplots(figsize=(13, 4.5))
    xs = range(len(fused))
    ax.bar([x - 0.2 for x in xs], torch_ms, 0.4, label="torch operations")
    ax.bar([x + 0.2 for x in xs], [1e3 * r["seconds"] for r in fused], 0.4, label="one fused Triton kernel")
    ax.set_yscale("log")
    ax.set_ylabel("ms per check (log)")
    ax.set_xticks(list(xs), labels, rotation=70, fontsize=7)
    ax.set_title(f"The judge's checks of one output ({data['device']}, {data.get('commit')})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "judge_compare.png", dpi=90)


def main() -> int:
    if sys.argv[1:2] == ["--report"]:
        report(Path(sys.argv[2]), Path(sys.argv[3]))
        return 0
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    rows: list[dict[str, Any]] = []
    for numel, dtype in ((128 << 20, "float16"), (256 << 20, "float32")):
        torch.manual_seed(0)
        ref = torch.randn(numel, device="cuda").to(getattr(torch, dtype))
        high = ref.to(torch.float64)
        sharer, line = _child("share", numel, dtype)
        handle, offset = line.split()
        alloc = cuda_ipc.ImportedAllocation(handle, 0)
        nbytes = numel * ref.element_size()
        out = alloc.view(int(offset), nbytes).view(ref.dtype)
        os.environ["KERNELBAND_FUSED_CHECKS"] = "1"
        for row in _first_calls(ref, out, high):
            rows.append(row)
            print(json.dumps(row), flush=True)
        for load in ("idle", "busy", "4 threads"):
            busy = _child("busy")[0] if load == "busy" else None
            try:
                for path in ("torch", "fused"):
                    os.environ["KERNELBAND_FUSED_CHECKS"] = "1" if path == "fused" else "0"
                    for name, fn in _checks(ref, out, high).items():
                        if name.startswith("_") or (name in PLAIN and path == "fused"):
                            continue
                        s = _timed_threads(fn) if load == "4 threads" else _timed(fn)
                        row = {"dtype": dtype[5:], "mib": nbytes >> 20, "memory": "ipc", "load": load,
                               "path": path if name not in PLAIN else "-", "check": name, "seconds": round(s, 5)}
                        rows.append(row)
                        print(json.dumps(row), flush=True)
            finally:
                if busy is not None:
                    busy.communicate("\n", timeout=30)
        alloc.close()
        sharer.communicate("\n", timeout=30)
        del ref, high, out
        torch.cuda.empty_cache()
    print(f"\n{'output':>12} {'load':>10} {'path':>5} {'check':>30} {'ms':>9}")
    for r in rows:
        print(f"{r['mib']:>6} MiB {r['dtype']:>3} {r['load']:>10} {r['path']:>5} {r['check']:>30} "
              f"{1e3 * r['seconds']:9.2f}")
    if dest is not None:
        dest.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                    "commit": os.environ.get("KERNELBAND_BENCH_COMMIT"), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
