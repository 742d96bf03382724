"""``kernelband mcp [--root DIR]``: serve KernelBand's tools to coding agents over the
Model Context Protocol (stdio): list_kernels, check_variant, profile_kernel,
optimize_kernel, and the resource kernelband://results/{kernel}?file=... (a kernel's
last stored results).

Tool calls may name files under the workspace root only (--root, default the current
folder; symlinks resolved). Checks, profiles and optimizations run as
``python -m kernelband ...`` jobs, one at a time, the same commands as on the command
line; nothing is written to your files (optimize returns a diff).

Needs the MCP SDK: pip install 'kernelband[mcp]'. Exit codes: 0 when the client closes
the connection, 2 bad usage or a missing SDK (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
from importlib import metadata

from ..deps import require
from ..options import option
from .common import UsageError

SDK_RANGE = (2, 3)  # the mcp SDK major versions this server is written for: >=2.3,<3
INSTALL = "pip install 'kernelband[mcp]'"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve KernelBand's tools to coding agents (Model Context Protocol, stdio)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--root", help="workspace root: tool calls may name files under it only (default: the current folder)"
    )
    option("device").add_to(p)
    p.set_defaults(func=run)


def require_sdk() -> None:
    """The MCP SDK, of a major version this server speaks, or one line saying how to get it."""
    require("mcp", "kernelband mcp", INSTALL)
    version = metadata.version("mcp")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if not SDK_RANGE[0] <= major < SDK_RANGE[1]:
        raise UsageError(f"kernelband mcp needs the mcp package 2.x ({version} is installed): pip install -U {INSTALL}")


def run(args: argparse.Namespace) -> int:
    require_sdk()
    root = args.root or os.getcwd()
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    from ..agent.server import serve  # the SDK is imported only now

    return serve(root, device=args.device)
