"""Which config does an autotuned candidate pick inside a KernelBand process?

The autotune wrap of examples/add_scale.py (five configs, the search's usual winner) is
run in fresh processes: each config timed alone by ``timing.bench_gpu``; then the first
call (where Triton's autotuner times every config and picks one) made plainly, inside
KernelBand's launch recorder and harness-locals trace as a checked run makes it, and the
same with ``worker.autotune_clock`` installed (the judge's clock). ``_busy`` modes run
beside another process that keeps the GPU busy. GPU only (run it on the device).

    python benchmarks/autotune_pick.py --out DIR --repeats 3
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT as REPO

MODES = ("plain", "recorded", "recorded_clock", "plain_busy", "recorded_busy", "recorded_clock_busy")
AUTOTUNE = '''@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 128}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 128}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=4),
    ],
    key=["n_elements"],
)
@triton.jit
'''


def wrapped_source() -> str:
    src = (REPO / "examples" / "add_scale.py").read_text(encoding="utf-8")
    out = src.replace("@triton.jit\n", AUTOTUNE, 1).replace(", BLOCK_SIZE=128)", ")")
    assert out != src and "BLOCK_SIZE=128)" not in out
    return out


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("autotune_wrap", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def config_times(path: str) -> dict[str, float]:
    import torch
    import triton

    from kernelband.worker import timing

    tuner = _load(path).axpy_kernel
    n = (1 << 24) + 3
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    times = {}
    for c in tuner.configs:
        b = c.kwargs["BLOCK_SIZE"]
        fn = lambda: tuner.fn[(triton.cdiv(n, b),)](x, y, out, 0.5, n, BLOCK_SIZE=b, num_warps=c.num_warps)  # noqa: E731
        fn()
        samples = sorted(timing.bench_gpu(fn, None, 5, 25))
        times[f"BLOCK_SIZE={b} num_warps={c.num_warps}"] = round(samples[len(samples) // 2] * 1e3, 1)
    return times


def first_call(path: str, mode: str) -> dict[str, Any]:
    import torch

    mod = _load(path)
    tuner = mod.axpy_kernel
    t0 = time.perf_counter()
    if mode.startswith("recorded"):
        from kernelband.worker.capture import install, recording
        from kernelband.worker.gpu_lock import gpu_lock
        from kernelband.worker.runner import _LocalsAtReturn

        if "clock" in mode:
            from kernelband.worker import autotune_clock

            autotune_clock.install()
        install()
        with gpu_lock(exclusive=False), recording(), _LocalsAtReturn(mod.harness_axpy):
            mod.harness_axpy()
            torch.cuda.synchronize()
    else:
        mod.harness_axpy()
        torch.cuda.synchronize()
    c = tuner.best_config
    return {"mode": mode, "picked": f"BLOCK_SIZE={c.kwargs['BLOCK_SIZE']} num_warps={c.num_warps}",
            "first_call_s": round(time.perf_counter() - t0, 2)}


def busy() -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    while True:
        for _ in range(20):
            a = (a @ a).tanh_()
        torch.cuda.synchronize()


def _child(*args: str) -> str:
    env = dict(os.environ, KERNELBAND_TIMING_LOCK=str(Path(tempfile.gettempdir()) / "kb-autotune-pick.lock"))
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return p.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--busy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.busy:
        busy()
    if args.child:
        path, mode = args.child
        print(json.dumps(config_times(path) if mode == "configs" else first_call(path, mode)))
        return 0
    if args.out is None:
        ap.error("--out is required")
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "autotune_wrap.py")
        Path(path).write_text(wrapped_source(), encoding="utf-8")
        report: dict[str, Any] = {"config_us": json.loads(_child("--child", path, "configs")), "runs": []}
        print(report["config_us"], flush=True)
        for mode in MODES:
            for _ in range(args.repeats):
                hog = subprocess.Popen([sys.executable, __file__, "--busy"]) if mode.endswith("busy") else None
                try:
                    time.sleep(2.0 if hog else 0.0)
                    row = json.loads(_child("--child", path, mode))
                finally:
                    if hog is not None:
                        hog.kill()
                        hog.wait()
                report["runs"].append(row)
                print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "autotune_pick.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
