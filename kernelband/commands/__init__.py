"""Subcommands. Each module exposes ``add_parser(subparsers)`` which sets ``func``.

Loaded on demand (``load``): ``kernelband list`` imports only list_cmd, not the session,
evaluator and worker client the job commands need (a third of its start-up on a big
file, where it must stay under a second).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Optional

# subcommand -> its module, in the order ``--help`` lists them
MODULES = {
    "list": "list_cmd",
    "check": "check_cmd",
    "optimize": "optimize_cmd",
    "profile": "profile_cmd",
    "optimize-all": "optimize_all_cmd",
    "mcp": "mcp_cmd",
}


def load(command: Optional[str] = None) -> list[ModuleType]:
    """The module of ``command``, or every module (an unknown command, ``--help``).
    Optional commands whose module is absent are left out, so a partial checkout still
    has a working CLI."""
    names = [MODULES[command]] if command in MODULES else list(MODULES.values())
    out = []
    for name in names:
        try:
            out.append(importlib.import_module(f"{__name__}.{name}"))
        except ModuleNotFoundError as e:  # pragma: no cover
            if e.name != f"{__name__}.{name}" or name == "list_cmd":
                raise
    return out
