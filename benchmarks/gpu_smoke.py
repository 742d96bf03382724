"""A quick end-to-end check of the trust layer on a GPU: sandbox (network namespace and
CUDA inside it), then one original and two variants of examples/add_scale.py through
the judge (one correct, one wrong). Prints one line per step."""
from __future__ import annotations

import subprocess
import sys
import time

from common import ROOT as REPO


def main() -> int:
    probe = ("from kernelband.worker.sandbox import enter; print('sandbox:', enter().summary()); import torch; "
             "print('cuda in sandbox:', (torch.ones(4, device='cuda') * 2).sum().item(), torch.cuda.get_device_name())")
    print(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip())
    from kernelband.evaluate import Evaluator
    from kernelband.model import Task, Variant

    path = REPO / "examples" / "add_scale.py"
    src = path.read_text()
    task = Task(module_path=str(path), source=src, kernel="axpy_kernel", harness="harness_axpy", device="cuda")
    t0 = time.perf_counter()
    with Evaluator(task) as ev:
        base = ev.prepare()
        print(f"prepare: ok={base.ok} {base.timing.median_ms if base.timing else None} ms  {time.perf_counter() - t0:.1f}s  "
              f"{base.message}")
        for label, v in (("block 1024", src.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")),
                         ("wrong", src.replace("alpha * x + y", "alpha * x - y"))):
            t1 = time.perf_counter()
            r = ev.evaluate(Variant(v))
            print(f"{label}: {r.status.value} {r.time_ms} ms {time.perf_counter() - t1:.1f}s {r.message[:160]}")
            print("   phases:", {k: round(x, 2) for k, x in r.phases.items()})
        p = ev.paired_timing(Variant(src.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")), rounds=6)
        print(f"paired: {p.speedup:.3f} [{p.ci_low:.3f}, {p.ci_high:.3f}] {p.baseline_ms:.4f} -> {p.variant_ms:.4f} ms")
        print("sandbox network:", ev.client.request("sandbox", 10))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
