"""The judge's ``sanitize`` op: a candidate's correctness harnesses under compute-sanitizer
memcheck and racecheck (side by side where the GPU has the memory), for the out-of-bounds
accesses and shared-memory races comparisons cannot see."""

from __future__ import annotations

import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Optional

import torch

from ..model import NO_GPU_SANITIZER, SanitizerReport
from ..trace import mark
from .deadlines import RACECHECK_RUN_S, SANITIZE_EXIT_S
from .jobs import JobEndKind, JobFailed, VariantJob
from .judge_core import GPU_MARGIN_BYTES, JudgeCore, gpu
from .messages import ErrorFrame, Job, Run
from .requests import Sanitize
from .sandbox import WHOLE


TOOLS = ("memcheck", "racecheck")
LOG_NAME = "compute-sanitizer.log"


def sanitize(judge: JudgeCore, req: Sanitize) -> dict[str, Any]:
    """Run a candidate's correctness harnesses under compute-sanitizer, once per tool:
    memcheck (each tensor its own allocation, so an access past any tensor is reported:
    the out-of-bounds reads and writes that comparisons cannot see), then racecheck
    (shared-memory hazards between a program's threads). GPU only. The first tool that
    fails decides; the report names it. The reply is the report's ``to_dict()``."""
    return _sanitize(judge, req).to_dict()


def _sanitize(judge: JudgeCore, req: Sanitize) -> SanitizerReport:
    tool = find_compute_sanitizer()
    if not gpu():
        return SanitizerReport.not_run(NO_GPU_SANITIZER)
    if tool is None:
        return SanitizerReport.not_run("compute-sanitizer not found (CUDA's bin folder or PATH)")
    runs: Iterable[SanitizerReport]
    if tools_fit_together(judge):
        # each tool is its own process (start-up, compilation, instrumented runs): side by
        # side they take the longer one's time, not the sum. The verdict is read in TOOLS
        # order as if they had run one after the other
        with ThreadPoolExecutor(len(TOOLS), thread_name_prefix="kb-sanitize") as pool:
            runs = list(pool.map(lambda name: _run_tool(judge, req, tool, name), TOOLS))
    else:
        runs = (_run_tool(judge, req, tool, name) for name in TOOLS)
    reports: list[SanitizerReport] = []
    unfinished = ""
    for name, report in zip(TOOLS, runs):
        if not report.ran:
            if name == "racecheck" and report.job.startswith(JobEndKind.TIMEOUT.value):
                # past its time after a clean memcheck: memcheck's verdict stands, the
                # races are said to be unchecked (a warning), never clean
                unfinished = f"shared-memory races not checked: racecheck did not finish in {RACECHECK_RUN_S:.0f} s"
                break
            return report
        reports.append(report)
        if not report.ok:
            break
    return replace(
        reports[-1],
        tools=tuple(r.tool for r in reports),
        findings=tuple(f for r in reports for f in r.findings)[:8],
        unfinished=unfinished,
    )


def tools_fit_together(judge: JudgeCore) -> bool:
    """Whether every tool's run of the harnesses fits on the GPU at once: the original's
    measured peak for each (each tensor its own allocation, as the tools run it) and a
    margin. An unknown peak runs them one at a time."""
    peak = judge.ref.cuda_peak
    if peak <= 0:
        return False
    free, _ = torch.cuda.mem_get_info()
    return len(TOOLS) * peak + GPU_MARGIN_BYTES <= free


def _run_tool(judge: JudgeCore, req: Sanitize, tool: str, name: str) -> SanitizerReport:
    task = judge.require_task()
    harnesses = [h for h in task.check_harnesses if h != task.harness] or [task.harness]
    assert judge.workdir is not None
    job = VariantJob(
        Job(
            task,
            {"v": req.source},
            [Run("v", h, task.seeds[0], "sanitize") for h in harnesses],
            writes=judge.ref.writes,
        ),
        timeout_s=min(req.run_timeout_s, RACECHECK_RUN_S) if name == "racecheck" else req.run_timeout_s,
        trusted_cache=judge.workdir / "triton-cache-trusted",
        device=None,
        on_log=judge.on_log,
        wrapper=tool_command(tool, name),
        extra_env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    )
    started = time.monotonic()
    job.start(None)
    ended, code = "ok", None
    try:
        for frame in job.frames():
            if isinstance(frame.meta, ErrorFrame):
                ended = f"error: {frame.meta.message[:300]}"
        code = job.proc.wait(timeout=SANITIZE_EXIT_S)
    except JobFailed as e:
        ended, code = f"{e.end.kind.value}: {e}", None
    finally:
        log = Path(job.dir) / LOG_NAME
        report = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        job.close()
        mark("sanitize.tool", tool=name, seconds=round(time.monotonic() - started, 3), ended=ended[:80], code=code)
    failed, findings = read_report(report)
    failed = failed or code == 86
    trouble = tool_errors(report)
    if not failed and trouble:  # the tool's own error: it did not check the harnesses
        return SanitizerReport.not_run(f"compute-sanitizer {name} did not check the harnesses: {trouble[0][:200]}")
    summary = _SUMMARY.search(report)
    if not failed and not (ended == "ok" and code == 0 and summary):
        # a clean report needs the tool's own summary of a finished run: a tool that could
        # not write its log, or whose target never ran instrumented, says nothing was wrong
        # only because it checked nothing
        lines = log_lines(report)
        not_run = SanitizerReport.not_run(
            f"compute-sanitizer {name} did not finish a run of the harnesses (job: {ended[:120]}; exit code {code}; "
            f"{'its summary' if summary else 'no summary'} in its log"
            + (f"; its log ends: {lines[-1][:160]!r})" if lines else ")")
        )
        return replace(not_run, tool=name, job=ended)
    return SanitizerReport(
        ran=True,
        ok=not failed,
        tool=name,
        exit_code=code,
        job=ended,
        findings=tuple(findings),
        harnesses=tuple(harnesses),
    )


def tool_command(tool: str, name: str) -> list[str]:
    """compute-sanitizer ``name`` (memcheck, racecheck) inside the sandbox, beside the
    variant process it starts (``sandbox.exec_sandboxed``): outside, the target's own pid,
    IPC and mount namespaces hid it from the tool. Its log goes to ``LOG_NAME`` in the
    job's directory, its cwd (the one place the sandbox lets it write); exit code 86 on a
    finding."""
    return [
        sys.executable,
        "-m",
        "kernelband.worker.sandbox",
        WHOLE,
        tool,
        "--tool",
        name,
        "--error-exitcode",
        "86",
        "--print-limit",
        "8",
        "--log-file",
        LOG_NAME,
    ]


_SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (errors?|hazards?)")


def log_lines(text: str) -> list[str]:
    """compute-sanitizer's log, a line each, without its ``=========`` margin; blank lines dropped."""
    return [line for line in (raw.strip("= ").strip() for raw in text.splitlines()) if line]


def read_report(text: str) -> tuple[bool, list[str]]:
    """(whether compute-sanitizer found anything, the lines that say what) from its log: an
    invalid access, a reported race, or a summary with a count above zero. A summary of
    zero ("RACECHECK SUMMARY: 0 hazards displayed") is no finding: it was once read as one,
    and racecheck refused every candidate."""
    findings: list[str] = []
    failed = False
    for line in log_lines(text):
        summary = _SUMMARY.search(line)
        if summary:
            if int(summary.group(2)) > 0:
                failed = True
                findings.append(line)
            continue
        lower = line.lower()
        if line.startswith("Invalid") or "out of bounds" in lower or "race reported" in lower or "hazard" in lower:
            failed = True
            findings.append(line)
    return failed, findings[:6]


def tool_errors(text: str) -> list[str]:
    """compute-sanitizer's errors about itself rather than the target ("Error: No
    attachable process found", "Error: Target application terminated before first
    instrumented API call"): its run checked nothing. A race it reports also starts with
    "Error:" and is a finding, not one of these."""
    return [
        line
        for line in log_lines(text)
        if line.startswith("Error:") and "race reported" not in line.lower() and "hazard" not in line.lower()
    ]


def find_compute_sanitizer() -> Optional[str]:
    import shutil

    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and os.path.exists(os.path.join(base, "bin", "compute-sanitizer")):
            return os.path.join(base, "bin", "compute-sanitizer")
    return None
