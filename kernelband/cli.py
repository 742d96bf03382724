"""``kernelband`` command line: one subcommand per module in kernelband/commands/.

Exit codes: 0 ok, 1 a verdict of failure (variant wrong, no speedup found...),
2 bad usage or unreadable input (one-line reason on stderr).
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .commands import COMMANDS
from .evaluate import SetupError
from .commands.common import EXIT_USAGE, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelband",
        description="Find, profile and optimize the Triton kernels in a Python file.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed a usage line
        return EXIT_USAGE if e.code not in (0, None) else 0
    try:
        return int(args.func(args) or 0)
    except (UsageError, SetupError) as e:
        # bad input, or an original/harness/device that cannot be used: one line, exit 2
        print(f"kernelband: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kernelband: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
