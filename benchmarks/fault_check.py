"""The trust layer under real faults on the GPU: one Evaluator (one warm worker) is handed,
in order, a variant that raises, one that reads far out of bounds (an illegal address
corrupts the CUDA context), one that hangs, and the illegal address again, with a correct
variant after each. Every bad variant must come back with a clear status, the worker must
be restarted where needed, and the good variant after it must pass.

    python benchmarks/fault_check.py --out benchmarks/results      # on the GPU machine

Writes fault_check.json and fault_check.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT as REPO

from kernelband.evaluate import Evaluator  # noqa: E402
from kernelband.model import Status, Task, Variant  # noqa: E402

SOURCE = (REPO / "examples" / "add_scale.py").read_text()
LOAD = "x = tl.load(x_ptr + offsets, mask=mask)"
ALLOC = "out = torch.empty_like(x)"


def edit(old: str, new: str) -> str:
    assert old in SOURCE, old
    return SOURCE.replace(old, new, 1)


# (label, variant source, statuses that count as a clear verdict)
FAULTY = [
    ("raises in the wrapper", edit(ALLOC, "raise RuntimeError('variant bug')"), {Status.RUNTIME_ERROR}),
    ("illegal address (reads ~1e11 elements past the buffer)",
     edit(LOAD, "x = tl.load(x_ptr + offsets.to(tl.int64) * 100000000000)"), {Status.CRASHED, Status.RUNTIME_ERROR}),
    ("hangs in the wrapper", edit(ALLOC, ALLOC + "\n    while True:\n        pass"), {Status.TIMEOUT}),
    ("illegal address again", edit(LOAD, "x = tl.load(x_ptr + offsets.to(tl.int64) * 100000000000)"),
     {Status.CRASHED, Status.RUNTIME_ERROR}),
]
GOOD = SOURCE.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "add_scale.py"
        path.write_text(SOURCE)
        task = Task(module_path=str(path), source=SOURCE, kernel="axpy_kernel", harness="harness_axpy",
                    device=args.device, timeout_s=args.timeout)
        ev = Evaluator(task)
        base = ev.prepare()
        rows = []
        for label, source, expect in FAULTY:
            for name, src, ok in ((label, source, expect), (f"correct variant after: {label}", GOOD, {Status.OK})):
                t0 = time.perf_counter()
                res = ev.evaluate(Variant(src))
                rows.append({"variant": name, "status": res.status.value, "expected": sorted(s.value for s in ok),
                             "passed": res.status in ok, "message": (res.message or "").split("\n", 1)[0][:200],
                             "seconds": round(time.perf_counter() - t0, 2), "worker_restarts": ev.worker_restarts})
                print(f"{name}: {res.status.value} ({rows[-1]['seconds']} s) {rows[-1]['message'][:100]}", flush=True)
        ev.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {"gpu": base.device_name or args.device,
               "interpreted": base.interpreted, "rows": rows}
    (out / "fault_check.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    lines = [f"# Faulty variants, one warm worker (`python benchmarks/fault_check.py --timeout {args.timeout:g}`)", "",
             f"{payload['gpu']}, interpreted: {base.interpreted}. Each bad variant is followed by a correct one on the "
             "same Evaluator.", "",
             "| variant | status | expected | ok | seconds | worker restarts so far | message |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['status']} | {', '.join(r['expected'])} | {'yes' if r['passed'] else 'NO'} "
                     f"| {r['seconds']} | {r['worker_restarts']} | {r['message'].replace('|', '/')[:120]} |")
    (out / "fault_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
