"""The judge's ``sanitize`` op: a candidate's correctness harnesses once under
compute-sanitizer memcheck, for the out-of-bounds accesses comparisons cannot see."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

from .jobs import JobFailed, VariantJob
from .judge_core import JudgeCore, gpu


def sanitize(judge: JudgeCore, req: dict[str, Any]) -> dict[str, Any]:
    """Run a candidate's correctness harnesses once under compute-sanitizer memcheck
    (each tensor its own allocation, so an access past any tensor is reported): the
    out-of-bounds reads and writes that comparisons cannot see. GPU only."""
    task = judge.require_task()
    tool = find_compute_sanitizer()
    if not gpu():
        return {"ran": False, "ok": True, "reason": "no GPU: the interpreter has no memcheck"}
    if tool is None:
        return {"ran": False, "ok": True, "reason": "compute-sanitizer not found (CUDA's bin folder or PATH)"}
    harnesses = [h for h in task.check_harnesses if h != task.harness] or [task.harness]
    steps = [{"op": "run", "module": "v", "harness": h, "seed": task.seeds[0], "mode": "check"} for h in harnesses]
    assert judge.workdir is not None
    log = judge.workdir / f"memcheck-{os.getpid()}-{time.monotonic_ns()}.log"
    job = VariantJob(
        {"task": task.to_dict(), "modules": {"v": req["source"]}, "steps": steps, "interpreted": False,
         "writes": judge.ref.writes},
        timeout_s=float(req.get("run_timeout_s", 300.0)), trusted_cache=judge.workdir / "triton-cache-trusted",
        device=None, on_log=judge.on_log,
        # the sanitizer talks to its target over loopback: both run in one private network
        wrapper=[sys.executable, "-m", "kernelband.worker.sandbox",
                 tool, "--tool", "memcheck", "--error-exitcode", "86", "--print-limit", "8", "--log-file", str(log)],
        extra_env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    )
    job.start(None)
    ended = "ok"
    try:
        for frame in job.frames():
            if frame.kind == "error":
                ended = f"error: {frame.meta.get('message', '')[:300]}"
        code = job.proc.wait(timeout=60)
    except JobFailed as e:
        ended, code = f"{e.end.kind}: {e}", None
    finally:
        job.close()
    report = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    log.unlink(missing_ok=True)
    findings = [l.strip("= ").strip() for l in report.splitlines()
                if "Invalid" in l or "out of bounds" in l.lower() or "ERROR SUMMARY" in l][:6]
    failed = code == 86 or any(l.startswith("Invalid") for l in findings)
    return {"ran": True, "ok": not failed, "exit_code": code, "job": ended, "findings": findings,
            "harnesses": harnesses}


def find_compute_sanitizer() -> Optional[str]:
    import shutil

    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and os.path.exists(os.path.join(base, "bin", "compute-sanitizer")):
            return os.path.join(base, "bin", "compute-sanitizer")
    return None
