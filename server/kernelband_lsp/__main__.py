"""``kernelband-lsp`` / ``python -m kernelband_lsp``: run the language server on stdio.

stdout carries the protocol only; logs go to stderr and to window/logMessage.
"""

from __future__ import annotations

import argparse
import importlib.abc
import logging
import os
import sys
from typing import Optional, Sequence

from . import __version__

_BLOCKED = ("torch", "triton")
_REQUIRED = ("pygls", "lsprotocol", "watchdog")  # the server's own dependencies (pyproject.toml)


class _NoGpuImports(importlib.abc.MetaPathFinder):
    """The server must stay light and responsive: torch/triton belong to job processes."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102
        if fullname.split(".", 1)[0] in _BLOCKED:
            raise ImportError(f"kernelband-lsp does not import {fullname}: GPU work runs in job subprocesses")
        return None


def block_gpu_imports() -> None:
    if not any(isinstance(f, _NoGpuImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoGpuImports())


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # records already sent as window/logMessage stay off stderr (the client would show both)
    handler.addFilter(lambda r: not getattr(r, "kb_delivered", False))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("kernelband_lsp").setLevel(getattr(logging, level.upper(), logging.INFO))
    # pygls logs every message body at INFO: far too much for stderr, and slow
    logging.getLogger("pygls").setLevel(logging.WARNING)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelband-lsp", description="KernelBand language server (LSP over stdio)")
    parser.add_argument("--stdio", action="store_true", help="communicate over stdin/stdout (the default)")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("KERNELBAND_LSP_LOG_LEVEL", "INFO"),
        help="level of the server's own log (stderr and window/logMessage)",
    )
    parser.add_argument("--version", action="version", version=f"kernelband-lsp {__version__}")
    args = parser.parse_args(argv)

    setup_logging(args.log_level)
    block_gpu_imports()

    try:
        from .server import LspLogHandler, create_server
    except ImportError as e:
        if e.name is None or e.name.split(".")[0] not in _REQUIRED:
            raise
        # stdout is the protocol's: the reason goes to stderr, on one line
        print(
            f"kernelband-lsp: the language server needs the {e.name.split('.')[0]} package, which is not "
            f"installed: pip install kernelband (or: pip install {' '.join(_REQUIRED)})",
            file=sys.stderr,
        )
        return 2

    server = create_server()
    lsp_handler = LspLogHandler(server, logging.INFO)
    lsp_handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("kernelband_lsp").addHandler(lsp_handler)
    try:
        server.start_io()
    finally:
        server.service.kill_now()
    return 0


if __name__ == "__main__":
    sys.exit(main())
