"""Subcommands. Each module exposes ``add_parser(subparsers)`` which sets ``func``."""
from . import list_cmd

COMMANDS = [list_cmd]

# Optional commands register themselves only when their module is present, so a
# partial checkout still has a working CLI.
for _name in ("check_cmd", "optimize_cmd", "profile_cmd", "optimize_all_cmd"):
    try:
        COMMANDS.append(__import__(f"{__name__}.{_name}", fromlist=["add_parser"]))
    except ModuleNotFoundError as _e:  # pragma: no cover
        if _e.name != f"{__name__}.{_name}":
            raise
