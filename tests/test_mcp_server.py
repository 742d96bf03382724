"""``kernelband mcp`` as a coding agent uses it: the server a subprocess, driven by the
MCP SDK's own client over stdio (real jobs, the Triton interpreter).

The workspace is a copy of the red-team corpus's axpy module (a timing harness and a
correctness one); the variants come from the corpus (tests/redteam/)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from helpers.mcp_client import cmdline, connect, server_env, server_pid, snapshot, still_alive
from helpers.paths import REPO
from kernelband_lsp.proctree import process_tree

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `redteam` as the corpus imports itself
from redteam.corpus import CORRECT, KERNELS, WRONG, load_cases  # noqa: E402

AXPY = KERNELS["axpy"]
TOOLS = {"list_kernels", "check_variant", "profile_kernel", "optimize_kernel"}
SECRET = "s3cr3t-agent-token-value-4242"


def case(kind: str, name: str):
    (c,) = [c for c in load_cases(kind) if c.kernel == "axpy" and c.name == name]
    return c


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(AXPY.path, root / "axpy.py")
    (root / "pyproject.toml").write_text("[project]\nname = 'ws'\n", encoding="utf-8")
    return root


def text(result) -> dict:
    """What a model reads: the compact JSON text block."""
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def error(result) -> str:
    assert result.is_error, result
    return result.content[0].text


async def test_tools_have_input_and_output_schemas_and_no_torch_in_the_server(ws: Path):
    async with connect(ws) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for t in tools.values():
            assert t.input_schema["type"] == "object" and t.output_schema and t.output_schema["type"] == "object"
            assert t.description
        assert tools["check_variant"].input_schema["required"] == ["file"]
        assert {"variant_source", "variant_path", "kernel"} <= set(tools["check_variant"].input_schema["properties"])
        assert {"correct", "reason", "checked", "speed_claim"} <= set(tools["check_variant"].output_schema["properties"])
        assert {"budget", "seconds"} <= set(tools["optimize_kernel"].input_schema["properties"])
        assert tools["list_kernels"].annotations.read_only_hint is True
        templates = (await s.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["kernelband://results/{kernel}{?file}"]
        # the server process never imports torch: jobs do
        maps = Path(f"/proc/{server_pid()}/maps").read_text()
        assert "libtorch" not in maps and "libtriton" not in maps


async def test_list_kernels_gives_launch_sites_and_harness_roles(ws: Path):
    async with connect(ws) as s:
        out = text(await s.call_tool("list_kernels", {"path": "axpy.py"}))
        (entry,) = out["files"]
        assert entry["file"] == "axpy.py"
        (k,) = entry["kernels"]
        assert k["name"] == "axpy_kernel" and k["constexpr"] == ["BLOCK_SIZE"]
        assert [site["function"] for site in k["launch_sites"]] == ["axpy"]
        assert k["harness"]["timing"] == "bench_axpy" and k["harness"]["checks"] == ["test_axpy"]
        folder = text(await s.call_tool("list_kernels", {"path": "."}))
        assert [f["file"] for f in folder["files"]] == ["axpy.py"]


async def test_paths_outside_the_root_are_refused_symlinks_resolved(ws: Path, tmp_path: Path):
    outside = tmp_path / "outside.py"
    outside.write_text(AXPY.source, encoding="utf-8")
    (ws / "link.py").symlink_to(outside)
    (ws / "linkdir").symlink_to(tmp_path)
    async with connect(ws) as s:
        for args in ({"file": "../outside.py", "variant_source": "x"}, {"file": str(outside), "variant_source": "x"},
                     {"file": "link.py", "variant_source": "x"}, {"file": "linkdir/outside.py", "variant_source": "x"},
                     {"file": "axpy.py", "variant_path": "link.py"}):
            msg = error(await s.call_tool("check_variant", args))
            assert "outside the workspace root" in msg and "refused" in msg, (args, msg)
        for tool in ("profile_kernel", "optimize_kernel"):
            assert "outside the workspace root" in error(await s.call_tool(tool, {"file": "link.py"}))
        assert "outside the workspace root" in error(await s.call_tool("list_kernels", {"path": "/etc"}))
        # a folder listing does not follow a link out of the root
        listed = text(await s.call_tool("list_kernels", {"path": "."}))
        assert [f["file"] for f in listed["files"]] == ["axpy.py"]
        assert any("link.py" in x and "outside" in x for x in listed["skipped"])
        with pytest.raises(Exception, match="failed|outside|Unknown"):
            await s.read_resource("kernelband://results/axpy_kernel?file=../outside.py")
    assert outside.read_text(encoding="utf-8") == AXPY.source


async def test_bad_input_is_one_line_and_secrets_are_redacted(ws: Path):
    async with connect(ws, env={"KERNELBAND_API_KEY": SECRET}) as s:
        msg = error(await s.call_tool("list_kernels", {"path": f"../{SECRET}.py"}))
        assert SECRET not in msg and "[redacted]" in msg
        msg = error(await s.call_tool("check_variant", {"file": "axpy.py", "kernel": "nope", "variant_source": "x"}))
        assert "no kernel named 'nope'" in msg and "\n" not in msg
        msg = error(await s.call_tool("check_variant", {"file": "axpy.py"}))
        assert "exactly one of variant_source" in msg
        msg = error(await s.call_tool("optimize_kernel", {"file": "axpy.py", "budget": 0, "seconds": 0}))
        assert "one limit" in msg


@pytest.mark.slow
async def test_check_variant_rejects_a_wrong_variant_with_its_reason_and_passes_a_correct_one(ws: Path):
    wrong, right = case(WRONG, "off_by_one_mask"), case(CORRECT, "block_1024")
    async with connect(ws) as s:
        got = []
        result = await s.call_tool("check_variant", {"file": "axpy.py", "variant_source": wrong.source},
                                   progress_callback=lambda p, t, m: _note(got, m))
        bad = text(result)
        assert bad["correct"] is False and bad["status"] == "mismatch" and bad["speed_claim"] is False
        assert "seed" in bad["reason"] and "output" in bad["reason"], bad["reason"]
        seeds = bad["checked"]["seeds"]  # 3 by default (fixed or drawn per job)
        assert len(seeds) == 3 and bad["checked"]["harnesses"] == ["bench_axpy", "test_axpy"]
        assert got, "a long check sends heartbeats"
        good = text(await s.call_tool("check_variant", {"file": "axpy.py", "variant_source": right.source}))
        assert good["correct"] is True and good["status"] == "ok" and good["verdict"] == "verified_correct"
        assert good["speed_claim"] is False and good["interpreted"] is True and "reason" not in good
        assert not {"speedup", "speedup_ci", "baseline_ms", "variant_ms"} & set(good)  # no speed claim, no numbers
        assert f"seeds {good['checked']['seeds']}" in good["message"]
        assert "cannot be measured without a GPU" in good["message"]
        memcheck = good["checked"]["memcheck"]
        assert memcheck["ran"] is False and "GPU only" in memcheck["reason"]
        assert len(good["checked"]["checks"]) >= 6
    assert (ws / "axpy.py").read_text(encoding="utf-8") == AXPY.source  # nothing written


async def _note(got: list, message) -> None:
    got.append(message)


async def test_an_escape_payload_is_rejected_by_the_screen_and_runs_nothing(ws: Path, tmp_path: Path):
    """The escape corpus's payloads are variants of examples/add_scale.py."""
    shutil.copy(REPO / "examples" / "add_scale.py", ws / "add_scale.py")
    marker = tmp_path / "marker"
    payload = (REPO / "tests" / "redteam" / "escapes" / "e78_os_system.py").read_text(encoding="utf-8")
    source = payload.replace("{MARKER}", str(marker))
    async with connect(ws) as s:
        out = text(await s.call_tool("check_variant", {"file": "add_scale.py", "variant_source": source}))
        assert out["status"] == "rejected" and out["correct"] is False and "os" in out["reason"], out
        assert "interpreted" not in out  # rejected before anything ran
    assert not marker.exists()


async def test_optimize_sends_progress_and_cancel_kills_the_job_tree(ws: Path):
    async with connect(ws) as s:
        messages: list[str] = []
        engine_event = anyio.Event()
        seen: dict = {}

        async def progress(value: float, total, message) -> None:
            messages.append(message or "")
            if message and "running for" not in message and "queued" not in message:
                engine_event.set()

        async def optimize() -> None:
            await s.call_tool("optimize_kernel", {"file": "axpy.py", "budget": 16}, progress_callback=progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(optimize)
            with anyio.fail_after(600):
                await engine_event.wait()
                await anyio.sleep(3)  # the judge and a variant process are up by now
            server = server_pid()
            seen = snapshot(process_tree(server))
            assert any("kernelband optimize" in cmdline(p) for p in seen), [cmdline(p) for p in seen]
            tg.cancel_scope.cancel()  # the client abandons the request: notifications/cancelled
        with anyio.fail_after(30):
            while still_alive(seen):
                await anyio.sleep(0.2)
        assert not still_alive(seen)
        assert any(m.startswith("started") or "evaluations" in m or "original" in m for m in messages), messages
        # the server lives on and answers
        assert text(await s.call_tool("list_kernels", {"path": "axpy.py"}))["files"]
    assert (ws / "axpy.py").read_text(encoding="utf-8") == AXPY.source


def test_a_client_that_goes_away_leaves_no_job_behind(ws: Path):
    """The agent quits mid-optimize without cancelling (its end of stdin closes): the
    server ends the job's tree, then itself. Raw JSON-RPC lines, so no cancel is sent."""
    server = subprocess.Popen([sys.executable, "-m", "kernelband", "mcp", "--root", str(ws)], cwd=ws,
                              env=server_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        def send(obj: dict) -> None:
            server.stdin.write(json.dumps(obj) + "\n")
            server.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        assert json.loads(server.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "optimize_kernel", "arguments": {"file": "axpy.py", "budget": 16}, "_meta": {"progressToken": 7}}})
        for line in server.stdout:  # until the engine itself reports (not a heartbeat)
            msg = json.loads(line)
            text_ = (msg.get("params") or {}).get("message") or ""
            if msg.get("method") == "notifications/progress" and "running for" not in text_:
                break
        time.sleep(3)  # the judge and a variant process are up by now
        seen = snapshot([server.pid, *process_tree(server.pid)])
        assert any("kernelband optimize" in cmdline(p) for p in seen)
        server.stdin.close()
        deadline = time.monotonic() + 30
        while still_alive(seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not still_alive(seen), still_alive(seen)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


@pytest.mark.slow
async def test_optimize_returns_the_diff_and_never_writes_the_file(ws: Path):
    before = (ws / "axpy.py").read_bytes()
    async with connect(ws) as s:
        out = text(await s.call_tool("optimize_kernel", {"file": "axpy.py", "budget": 2}))
        assert out["written"] is False and out["speed_claim"] is False
        assert out["status"] in ("verified_correct", "no_improvement"), out
        assert "speedup" not in out and "nothing was written" in out["note"]
        if out["status"] == "verified_correct":
            assert out["diff"].startswith("--- a/axpy.py")
        assert len(out["checked"]["seeds"]) == 3
        stored = await s.read_resource(out["results_uri"])
        last = json.loads(stored.contents[0].text)
        assert last["optimize"]["status"] == out["status"] and last["optimize"]["diff"] == out.get("diff", "")
    assert (ws / "axpy.py").read_bytes() == before


def test_missing_sdk_is_one_line(tmp_path: Path):
    fake = tmp_path / "nosdk"
    fake.mkdir()
    (fake / "mcp.py").write_text("raise ImportError(\"No module named 'mcp'\", name='mcp')\n", encoding="utf-8")
    env = server_env({"PYTHONPATH": os.pathsep.join([str(fake), str(REPO), str(REPO / "server")])})
    p = subprocess.run([sys.executable, "-m", "kernelband", "mcp"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == ["kernelband: kernelband mcp needs the mcp package, which is not "
                                             "installed: pip install 'kernelband[mcp]'"]


def test_the_sdk_log_level_comes_from_the_environment_and_a_bad_one_is_said(monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]):
    from kernelband.agent.server import _log_level

    monkeypatch.delenv("KERNELBAND_MCP_LOG_LEVEL", raising=False)
    assert _log_level() == "WARNING"
    monkeypatch.setenv("KERNELBAND_MCP_LOG_LEVEL", "debug")
    assert _log_level() == "DEBUG"
    monkeypatch.setenv("KERNELBAND_MCP_LOG_LEVEL", "LOUD")
    assert _log_level() == "WARNING"
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout is the protocol
    assert "'LOUD'" in captured.err and "WARNING" in captured.err
