"""Driving ``kernelband mcp`` as an agent's client does: the MCP SDK's own stdio client
and ClientSession, the server a subprocess of the test."""
from __future__ import annotations

import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from kernelband.proc import start_time
from kernelband_lsp.proctree import alive, process_tree

from .paths import REPO


def server_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The test's environment (the SDK's client passes only a safe subset by default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "server"), env.get("PYTHONPATH", "")])
    env.update(extra or {})
    return env


@asynccontextmanager
async def connect(root: Path, env: Optional[dict[str, str]] = None) -> AsyncIterator[ClientSession]:
    """An initialized session with ``kernelband mcp --root ROOT`` (cwd: the root)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelband", "mcp", "--root", str(root)],
                                   env=server_env(env), cwd=str(root))
    with open(os.devnull, "w") as quiet:  # the server's log lines
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def server_pid() -> int:
    """The ``kernelband mcp`` process started by this test process."""
    for pid in process_tree(os.getpid()):
        if "kernelband mcp" in cmdline(pid):
            return pid
    raise AssertionError("no kernelband mcp process under the test")


def snapshot(pids: list[int]) -> dict[int, Any]:
    return {p: start_time(p) for p in pids}


def still_alive(seen: dict[int, Any]) -> list[str]:
    """Which of the processes seen (pid, start time) still run: pid and command line."""
    return [f"{p}: {cmdline(p)[:120]}" for p, t in seen.items() if alive(p) and start_time(p) == t]


def cli_check(root: Path, file: str, variant: Path, timeout: float = 900) -> dict[str, Any]:
    """``kernelband check FILE --variant V --json`` run directly, as a user would."""
    import json

    p = subprocess.run([sys.executable, "-m", "kernelband", "check", file, "--variant", str(variant), "--json"],
                       cwd=root, env=server_env(), capture_output=True, text=True, timeout=timeout)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)
