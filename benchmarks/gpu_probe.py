"""What the evaluation pipeline's building blocks cost on this GPU, and whether CUDA IPC
through kernelband/worker/cuda_ipc.py works here. One JSON line per probe, a table last.

    python benchmarks/gpu_probe.py [--out FILE]

Probes: a CUDA context in a fresh process and in a child forked from a process that
imported torch (the fork server's case); a Triton compile of a small kernel with an empty
and with a warm cache; a 1.5 GiB tensor exported by a child and snapshotted by the parent
(open, copy, close), the values checked, and a write by the child after hand-over seen.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
from kernelband.worker import cuda_ipc
n = (3 << 29) // 4
x = torch.randn(n, device="cuda")
y = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)[17:]
torch.cuda.synchronize()
t3 = time.perf_counter()
ex, ey = cuda_ipc.export(x), cuda_ipc.export(y)
t4 = time.perf_counter()
print(json.dumps({"import_torch_s": t1 - t0, "cuda_context_s": t2 - t1, "export_s": t4 - t3,
                  "x": ex.to_dict(), "y": ey.to_dict(), "x_sum": float(x.double().sum()),
                  "y_sum": float(y.double().sum()), "y_numel": y.numel()}), flush=True)
sys.stdin.readline()
x.fill_(1.0); torch.cuda.synchronize()
print(json.dumps({"modified": True}), flush=True)
sys.stdin.readline()
"""

FORKED_CONTEXT = r"""
import os, time, json
import torch, triton
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    t0 = time.perf_counter(); torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
    os.write(w, json.dumps({"forked_cuda_context_s": time.perf_counter() - t0}).encode()); os._exit(0)
os.waitpid(pid, 0)
print(os.read(r, 1000).decode())
"""

COMPILE = r"""
import time, json, torch, triton, triton.language as tl
@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m) * 2 + 1, mask=m)
x = torch.randn(1 << 20, device="cuda"); y = torch.empty_like(x)
t0 = time.perf_counter(); k[(1024,)](x, y, x.numel(), BLOCK=1024); torch.cuda.synchronize()
t1 = time.perf_counter(); k[(1024,)](x, y, x.numel(), BLOCK=1024); torch.cuda.synchronize()
t2 = time.perf_counter()
print(json.dumps({"first_launch_s": t1 - t0, "second_launch_s": t2 - t1}))
"""


def probe_ipc() -> dict:
    import torch

    from kernelband.worker import cuda_ipc

    env = dict(os.environ, PYTHONPATH=f"{REPO}:{os.environ.get('PYTHONPATH', '')}")
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=env)
    assert child.stdin and child.stdout
    info = json.loads(child.stdout.readline())
    torch.cuda.init()
    out = {k: info[k] for k in ("import_torch_s", "cuda_context_s", "export_s")}
    t0 = time.perf_counter()
    ex = cuda_ipc.Export.from_dict(info["x"])
    alloc = cuda_ipc.ImportedAllocation(ex.handle, 0)
    t1 = time.perf_counter()
    nbytes = (3 << 29)
    snap = alloc.view(ex.offset, nbytes).clone().view(torch.float32)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    out.update(open_s=t1 - t0, snapshot_1p5gib_s=t2 - t1, x_sum_ok=abs(float(snap.double().sum()) - info["x_sum"]) < 1e-3)
    ey = cuda_ipc.Export.from_dict(info["y"])
    alloc_y = cuda_ipc.ImportedAllocation(ey.handle, 0)
    y = alloc_y.view(ey.offset, info["y_numel"] * 2).clone().view(torch.bfloat16)
    out["y_sum_ok"] = abs(float(y.double().sum()) - info["y_sum"]) < 1e-2
    try:
        alloc.view(ex.offset, alloc.size + 1)
        out["extent_refused"] = False
    except cuda_ipc.IpcError:
        out["extent_refused"] = True
    child.stdin.write("go\n")
    child.stdin.flush()
    json.loads(child.stdout.readline())
    live = alloc.view(ex.offset, nbytes).view(torch.float32)
    out["write_after_handover_seen_live"] = bool((live[:10] == 1.0).all())
    out["snapshot_unchanged"] = abs(float(snap.double().sum()) - info["x_sum"]) < 1e-3
    t3 = time.perf_counter()
    alloc.close()
    alloc_y.close()
    out["close_s"] = time.perf_counter() - t3
    try:
        cuda_ipc.ImportedAllocation("00" * 64, 0)
        out["forged_handle_refused"] = False
    except cuda_ipc.IpcError as e:
        out["forged_handle_refused"] = str(e)
    child.stdin.write("end\n")
    child.stdin.flush()
    child.wait(timeout=60)
    return out


def run_py(code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{os.environ.get('PYTHONPATH', '')}")
    with tempfile.TemporaryDirectory() as d:
        env["TRITON_CACHE_DIR"] = d
        script = Path(d) / "probe_script.py"  # Triton reads a kernel's source from its file
        script.write_text(code)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
        wall = time.perf_counter() - t0
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res = {"error": p.stderr[-500:]}
        res["process_wall_s"] = wall
        if "first_launch_s" in res:  # again with the cache warm
            p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
            try:
                res["warm_cache_first_launch_s"] = json.loads(p.stdout.strip().splitlines()[-1])["first_launch_s"]
            except (ValueError, IndexError, KeyError):
                res["warm_cache_error"] = p.stderr[-300:]
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    results = {}
    for name, fn in (("ipc", probe_ipc), ("forked_context", lambda: run_py(FORKED_CONTEXT)),
                     ("compile", lambda: run_py(COMPILE))):
        try:
            results[name] = fn()
        except Exception as e:  # noqa: BLE001 - one failing probe never hides the others
            results[name] = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps({name: results[name]}, default=str), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
