"""``kernelband mcp``: the agent tools over the Model Context Protocol (stdio), on the
official MCP Python SDK. A thin layer: each tool checks nothing itself and calls
``tools.AgentTools``; the SDK turns the typed arguments and the report dataclasses into
the tools' input and output schemas.

Progress: a job's events become ``notifications/progress`` on the request's token.
Cancellation: ``notifications/cancelled`` cancels the handler, which cancels the job and
returns once its process tree is gone (``jobs.AgentJobs``). Closing stdin or SIGTERM
ends every job first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
from contextlib import asynccontextmanager
from typing import Annotated, Any, AsyncIterator, Awaitable, Callable, Literal, Optional

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from kernelband_lsp.settings import Settings

from .. import __version__
from .. import options as O
from ..commands.common import UsageError
from ..deps import MissingDependency
from ..redact import one_line
from . import reports as R
from .jobs import AgentJobs, Progress
from .tools import RESULTS_URI, AgentTools, ToolRefusal
from .workspace import PathRefused, Workspace

log = logging.getLogger(__name__)

INSTRUCTIONS = """KernelBand checks Triton kernels with a verdict an agent cannot game.
Call check_variant before claiming that a kernel you changed is correct or faster: it
runs the original and your variant on every harness under several seeds, with
anti-cheat checks, and says why a variant is wrong. A speedup is only claimed when
speed_claim is true (a paired GPU re-measurement with a 95% CI); under the Triton
interpreter (no GPU) a correct variant is verified_correct with no speed claim.
Paths are relative to the workspace root. Nothing is written to the user's files:
optimize_kernel returns a diff for the user to review."""

FILE = Annotated[str, Field(description="the Python file with the kernel, relative to the workspace root")]
KERNEL = Annotated[str, Field(description="the @triton.jit kernel's name (may be left empty when the file has one)")]
HARNESS = Annotated[
    str,
    Field(
        description="one harness function (or path/to/file.py:function) for timing and "
        "correctness; empty: the discovered ones"
    ),
]
JOB = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
REFUSALS = (ToolRefusal, PathRefused, UsageError, MissingDependency)


async def _answer(call: Awaitable[Any]) -> CallToolResult:
    """The tool's report as structured content (the full record, for typed clients) and
    as compact JSON text (what a model reads: empty fields left out), or a one-line tool
    error (secrets redacted) for a refusal."""
    try:
        report = await call
    except REFUSALS as e:
        raise ToolError(_line(e)) from None
    data = dataclasses.asdict(report)
    return CallToolResult(content=[TextContent(type="text", text=R.compact_json(data))], structured_content=data)


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LOG_LEVELS: tuple[LogLevel, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level() -> LogLevel:
    """The MCP SDK's log level from ``KERNELBAND_MCP_LOG_LEVEL`` (default WARNING); an
    unknown name is said on stderr (stdout is the protocol) and WARNING used."""
    asked = os.environ.get("KERNELBAND_MCP_LOG_LEVEL", "WARNING").strip().upper()
    for level in LOG_LEVELS:
        if level == asked:
            return level
    print(
        f"kernelband mcp: KERNELBAND_MCP_LOG_LEVEL={asked!r} is not one of {', '.join(LOG_LEVELS)}; using WARNING",
        file=sys.stderr,
    )
    return "WARNING"


def _line(e: BaseException) -> str:
    return one_line(str(e)) or type(e).__name__


def _progress(ctx: Context) -> Callable[[Progress], Awaitable[None]]:
    async def sink(p: Progress) -> None:
        await ctx.report_progress(p.progress, p.total, p.message)

    return sink


def build_server(tools: AgentTools) -> MCPServer:
    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[None]:
        _on_sigterm(tools)
        try:
            yield None
        finally:
            await tools.jobs.shutdown()
            tools.close()

    mcp = MCPServer(
        "kernelband",
        title="KernelBand",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=_log_level(),
    )

    @mcp.tool(title="List Triton kernels", annotations=READ)
    async def list_kernels(
        path: Annotated[str, Field(description="a Python file or a folder, relative to the workspace root")] = ".",
    ) -> Annotated[CallToolResult, R.KernelList]:
        """The Triton kernels of a file (or of every Python file under a folder): launch sites and
        the harnesses that time and check each. Runs nothing."""
        return await _answer(tools.list_kernels(path))

    @mcp.tool(title="Check a kernel variant", annotations=JOB)
    async def check_variant(
        ctx: Context,
        file: FILE,
        kernel: KERNEL = "",
        variant_source: Annotated[
            str, Field(description="the whole variant module's text: a copy of the file with the kernel changed")
        ] = "",
        variant_path: Annotated[
            str,
            Field(
                description="instead of variant_source: a file holding the variant module, relative to the workspace "
                "root"
            ),
        ] = "",
        harness: HARNESS = "",
    ) -> Annotated[CallToolResult, R.CheckReport]:
        """Is a variant correct (and, on a GPU, faster)? The exact checks of `kernelband check`:
        a static screen, every harness under every seed against the original, anti-cheat checks,
        memcheck on a GPU, then a paired re-measurement with a 95% CI. A wrong variant comes back
        with the precise reason. Under the interpreter (no GPU): verified_correct, no speed claim."""
        return await _answer(
            tools.check_variant(
                file, kernel, variant_source or None, variant_path or None, harness, progress=_progress(ctx)
            )
        )

    @mcp.tool(title="Profile a kernel", annotations=JOB)
    async def profile_kernel(
        ctx: Context,
        file: FILE,
        kernel: KERNEL = "",
        tier: Annotated[
            int, Field(ge=1, le=3, description="1 static, 2 + time/bytes/FLOPs (default), 3 + Nsight Compute counters")
        ] = 2,
        harness: HARNESS = "",
    ) -> Annotated[CallToolResult, R.ProfileReport]:
        """Where the kernel's time goes: the profile card and the bottleneck diagnosis, with the
        optimization strategies it suggests."""
        return await _answer(tools.profile_kernel(file, kernel, tier, harness, progress=_progress(ctx)))

    @mcp.tool(title="Optimize a kernel", annotations=JOB)
    async def optimize_kernel(
        ctx: Context,
        file: FILE,
        kernel: KERNEL = "",
        budget: Annotated[int, Field(ge=0, description="evaluations the session may run (0: no limit)")] = O.default(
            "budget"
        ),
        seconds: Annotated[float, Field(ge=0, description="wall-clock limit in seconds (0: no limit)")] = O.default(
            "seconds"
        ),
        harness: HARNESS = "",
    ) -> Annotated[CallToolResult, R.OptimizeReport]:
        """A budgeted KernelBand search for a faster verified variant. Sends progress; can be
        cancelled. Returns the diff of the best verified variant and never writes the file."""
        return await _answer(tools.optimize_kernel(file, kernel, budget, seconds, harness, progress=_progress(ctx)))

    @mcp.resource(
        RESULTS_URI, name="kernel_results", title="A kernel's last KernelBand results", mime_type="application/json"
    )
    def kernel_results(kernel: str, file: str = "") -> str:
        """The last optimize result and profile stored for a kernel (file relative to the root)."""
        try:
            return json.dumps(dataclasses.asdict(tools.stored_results(kernel, file or "")), indent=1)
        except REFUSALS as e:
            raise ResourceError(_line(e)) from None

    return mcp


def _on_sigterm(tools: AgentTools) -> None:
    """SIGTERM (a client closing the server): kill the running job's tree, then die of the
    signal as before."""
    loop = asyncio.get_running_loop()

    def handler() -> None:
        tools.jobs.kill_now()
        tools.close()
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        loop.add_signal_handler(signal.SIGTERM, handler)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform or thread
        pass


def serve(root: str, device: str = "auto", command_prefix: Optional[list[str]] = None) -> int:
    """Serve on stdio until the client closes stdin."""
    workspace = Workspace.at(root)
    jobs = AgentJobs(command_prefix)
    tools = AgentTools(workspace, jobs, Settings(device=device))
    build_server(tools).run("stdio")
    return 0
