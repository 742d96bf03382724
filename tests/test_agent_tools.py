"""The agent tools' pieces without a server process: which paths a call may name, what
the compact reports may say (never a speedup without a GPU), secrets, progress values,
and the VS Code contributions against the server's schemas."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from helpers.check_outcomes import CHECK_OK_INTERPRETED
from helpers.paths import REPO
from kernelband.agent import reports as R
from kernelband.agent.jobs import AgentJobs, Progress, _Reporter
from kernelband.agent.server import build_server
from kernelband.agent.tools import AgentTools
from kernelband.agent.workspace import PathRefused, Workspace
from kernelband.check_outcome import CheckOutcome
from kernelband.model import Result
from kernelband.redact import register_secret

LM_TOOL_OF = {"list_kernels": "kernelband_list_kernels", "check_variant": "kernelband_check_variant",
              "profile_kernel": "kernelband_profile_kernel", "optimize_kernel": "kernelband_optimize_kernel"}


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Workspace, Path]:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "k.py").write_text("x = 1\n")
    (tmp_path / "ws-evil").mkdir()  # shares the root's name as a prefix
    (tmp_path / "ws-evil" / "k.py").write_text("x = 2\n")
    (tmp_path / "secret.py").write_text("KEY = 1\n")
    (root / "out.py").symlink_to(tmp_path / "secret.py")
    (root / "outdir").symlink_to(tmp_path)
    (root / "in.py").symlink_to(root / "pkg" / "k.py")
    return Workspace.at(root), tmp_path


def test_paths_resolve_inside_the_root_only(tree):
    ws, outside = tree
    assert ws.python_file("pkg/k.py") == ws.root / "pkg" / "k.py"
    assert ws.python_file(str(ws.root / "pkg" / "k.py")) == ws.root / "pkg" / "k.py"
    assert ws.python_file("in.py") == ws.root / "pkg" / "k.py"  # a link inside the root is fine
    assert ws.relative(ws.root / "pkg" / "k.py") == "pkg/k.py"
    for bad in ("../secret.py", str(outside / "secret.py"), "out.py", "outdir/secret.py", "pkg/../../secret.py",
                "../ws-evil/k.py", str(outside / "ws-evil" / "k.py"), "/etc/passwd", "~/x.py"):
        with pytest.raises(PathRefused, match="outside the workspace root"):
            ws.python_file(bad)
    for bad, why in (("", "expected a path"), ("a\0.py", "NUL"), ("pkg", "not a regular file"),
                     ("nope.py", "no such file")):
        with pytest.raises(PathRefused, match=why):
            ws.python_file(bad)


def test_a_root_given_through_a_symlink_is_the_real_folder(tree):
    ws, outside = tree
    (outside / "alias").symlink_to(ws.root)
    via = Workspace.at(outside / "alias")
    assert via.root == ws.root and via.python_file("pkg/k.py") == ws.root / "pkg" / "k.py"
    with pytest.raises(PathRefused, match="outside"):
        via.python_file("out.py")


def check_report(raw: dict) -> R.CheckReport:
    return R.check_report(CheckOutcome.from_dict(raw), "k.py")


def test_a_check_under_the_interpreter_never_carries_a_speedup():
    # even a CPU-tuning style answer (paired CPU times) is no speed claim for an agent
    cpu_paired = {**CHECK_OK_INTERPRETED, "paired": True, "speedup": 1.7, "speedup_ci": [1.6, 1.8],
                  "baseline_ms": 3.0, "variant_ms": 1.8, "verdict": "improved"}
    for raw in (CHECK_OK_INTERPRETED, cpu_paired):
        report = check_report(raw)
        assert report.correct and report.speed_claim is False and report.reason is None
        assert report.speedup is None and report.speedup_ci is None and report.baseline_ms is None
        text = json.loads(R.compact_json(dataclasses.asdict(report)))
        assert "speedup" not in text and "variant_ms" not in text
    assert check_report(CHECK_OK_INTERPRETED).checked.harnesses == ["bench_k", "test_k"]


def test_a_gpu_check_reports_the_paired_numbers_and_a_wrong_one_its_reason():
    gpu = {**CHECK_OK_INTERPRETED, "interpreted": False, "speed_claim": True, "paired": True, "speedup": 1.4,
           "speedup_ci": [1.35, 1.45], "baseline_ms": 1.0, "variant_ms": 0.714, "verdict": "improved"}
    report = check_report(gpu)
    assert report.speed_claim and report.speedup == 1.4 and report.speedup_ci == [1.35, 1.45]
    wrong = check_report({**CHECK_OK_INTERPRETED, "status": "mismatch", "verdict": None,
                          "message": "test_k, seed 1: output: 3 of 1003 elements differ"})
    assert not wrong.correct and wrong.verdict is None and "seed 1" in wrong.reason


def test_an_interpreted_optimize_result_drops_its_ratios_and_keeps_the_diff():
    result = Result(status="verified_correct", kernel="k", file="/ws/k.py", interpreted=True, speed_claim=False,
                    speedup=1.9, speedup_ci=[1.8, 2.0], baseline_ms=5.0, best_ms=2.6, paired_rounds=4,
                    diff="--- a/k.py\n+++ b/k.py\n", evaluations=3, seconds=12.0,
                    warnings=[f"w{i}" for i in range(9)], history=[{"big": "x" * 1000}])
    result.extra["checked"] = CHECK_OK_INTERPRETED["checked"]
    report = R.optimize_report(result, "k.py", "kernelband://results/k?file=k.py")
    assert report.speedup is None and report.baseline_ms is None and report.speed_claim is False
    assert report.diff.startswith("--- a/k.py") and report.written is False
    assert len(report.warnings) == R.MAX_WARNINGS and report.checked.seeds == [0, 1, 2]
    text = json.loads(R.compact_json(dataclasses.asdict(report)))
    assert "history" not in text and "best_source" not in text and "speedup" not in text


def test_reports_redact_secrets(monkeypatch):
    secret = "tok-verysecretvalue-91827364"
    register_secret(secret)
    report = check_report({**CHECK_OK_INTERPRETED, "status": "runtime_error", "message": f"boom {secret}"})
    assert secret not in report.reason and "[redacted]" in report.reason


def test_compact_json_drops_only_empty_fields():
    assert json.loads(R.compact_json({"a": None, "b": "", "c": [], "d": {}, "e": 0, "f": False, "g": {"h": None}})) \
        == {"e": 0, "f": False}


async def test_progress_values_only_grow():
    class FakeManager:
        def queue_position(self, job):
            return None

    class FakeJob:
        class spec:
            kind = "optimize"

    sent: list[Progress] = []

    async def sink(p: Progress) -> None:
        sent.append(p)

    from kernelband.agent.tools import describe_event
    from kernelband.events import Event, Started
    from kernelband.events import Progress as ProgressEvent

    r = _Reporter(FakeJob(), FakeManager(), sink, describe_event)
    await r.event(Event(Started(kernel='k', budget={'evaluations': 4})))
    await r.heartbeat()
    await r.event(Event(ProgressEvent(done=1, total=4, best_speedup=1.5, speed_claim=False)))
    await r.heartbeat()
    await r.event(Event(ProgressEvent(done=1, total=4)))
    await r.event(Event(ProgressEvent(done=3, total=4, best_speedup=1.2, speed_claim=True)))
    values = [p.progress for p in sent]
    assert values == sorted(values) and len(set(values)) == len(values), values
    assert all(p.total == 4 for p in sent)
    assert "x" not in sent[2].message.split("evaluations")[1]  # no ratio under the interpreter
    assert "1.20x" in sent[-1].message


def test_vscode_tool_contributions_match_the_server_schemas():
    """package.json's languageModelTools inputSchema is the MCP tool's (titles aside)."""
    pkg = json.loads((REPO / "vscode-client" / "package.json").read_text(encoding="utf-8"))
    contributed = {t["name"]: t for t in pkg["contributes"]["languageModelTools"]}
    schemas = _tool_schemas()
    assert set(contributed) == {LM_TOOL_OF[name] for name in schemas}
    for name, schema in schemas.items():
        assert contributed[LM_TOOL_OF[name]]["inputSchema"] == _untitled(schema), name


def _tool_schemas() -> dict[str, dict[str, Any]]:
    """Each tool's input schema, as clients see it."""
    import anyio

    async def listed() -> dict[str, dict[str, Any]]:
        tools = AgentTools(Workspace.at("."), AgentJobs())
        try:
            return {t.name: t.input_schema for t in await build_server(tools).list_tools()}
        finally:
            tools.close()

    return anyio.run(listed)


def _untitled(o):
    if isinstance(o, dict):
        return {k: _untitled(v) for k, v in o.items() if k != "title"}
    if isinstance(o, list):
        return [_untitled(x) for x in o]
    return o


def test_the_server_module_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, kernelband.agent.server; assert 'torch' not in sys.modules and 'triton' not in sys.modules"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr



def test_the_reference_is_flagged_when_it_is_the_variant_or_an_uncommitted_edit(tmp_path: Path):
    import subprocess

    from kernelband.agent.tools import reference_warnings

    k = tmp_path / "k.py"
    k.write_text("x = 1\n")
    assert reference_warnings(k, "x = 1\n", "x = 2\n") == []  # not a repository: nothing to say
    assert reference_warnings(k, "x = 1\n", "x = 1\n") == ["the variant is the original itself: this checks nothing"]
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "k.py"], ["commit", "-qm", "k"]):
        subprocess.run(git + args, cwd=tmp_path, check=True, capture_output=True)
    assert reference_warnings(k, "x = 1\n", "x = 2\n") == []
    k.write_text("x = 3\n")  # an agent edited the original in place
    (warning,) = reference_warnings(k, "x = 3\n", "x = 2\n")
    assert "differs from its last commit" in warning


# A job that does not go quietly: it ignores SIGINT and SIGTERM, and its child lives in
# its own session (as the evaluation worker does) and ignores them too.
STUBBORN = """
import os, signal, subprocess, sys, time
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time\\n"
                          "signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
                          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
                          "time.sleep(600)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def _stubborn_jobs():
    import sys

    from kernelband.agent.jobs import AgentJobs

    return AgentJobs(command_prefix=[sys.executable, "-c", STUBBORN], kill_grace_s=0.5, heartbeat_s=0.2)


async def _started(jobs, task_group):
    """Runs a stubborn job in ``task_group``; returns the job once its child is up."""
    import asyncio

    from kernelband_lsp.jobs import PROFILE, JobSpec
    from kernelband_lsp.proctree import process_tree

    heartbeats: list[Progress] = []

    async def sink(p: Progress) -> None:
        heartbeats.append(p)

    task_group.start_soon(lambda: jobs.run(JobSpec(kind=PROFILE, path=__file__, kernel="k", source=""), sink))
    for _ in range(200):
        job = jobs.manager.running
        if job is not None and job.pid and len(process_tree(job.pid)) >= 1 and heartbeats:
            return job, heartbeats
        await asyncio.sleep(0.05)
    raise AssertionError("the stubborn job did not start")


async def test_cancelling_a_tool_call_kills_a_job_tree_that_ignores_signals():
    import anyio

    from helpers.mcp_client import snapshot, still_alive
    from kernelband_lsp.proctree import process_tree

    jobs = _stubborn_jobs()
    async with anyio.create_task_group() as tg:
        job, heartbeats = await _started(jobs, tg)
        tree = snapshot([job.pid, *process_tree(job.pid)])
        assert len(tree) >= 2 and heartbeats[0].message.startswith("profile: running for")
        tg.cancel_scope.cancel()  # what the SDK does on notifications/cancelled
    # the call returned only once the whole tree was gone
    assert still_alive(tree) == [] and job.state == "cancelled"


async def test_shutdown_kills_a_running_job_tree_that_ignores_signals():
    import anyio

    from helpers.mcp_client import snapshot, still_alive
    from kernelband_lsp.proctree import process_tree

    jobs = _stubborn_jobs()
    async with anyio.create_task_group() as tg:
        job, _ = await _started(jobs, tg)
        tree = snapshot([job.pid, *process_tree(job.pid)])
        assert len(tree) >= 2
        await jobs.shutdown()  # the client went away
        with anyio.fail_after(10):
            while still_alive(tree):
                await anyio.sleep(0.05)
