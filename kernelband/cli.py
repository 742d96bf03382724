"""``kernelband`` command line: one subcommand per module in kernelband/commands/.

Exit codes: 0 ok, 1 a verdict of failure (variant wrong, no speedup found...),
2 bad usage or unreadable input (one-line reason on stderr), 130 interrupted,
141 the reader of stdout went away (``kernelband list --json f | head``): quietly, as a
killed-by-SIGPIPE tool would.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from . import __version__
from . import commands
from .deps import MissingDependency
from .commands.common import EXIT_USAGE, UsageError
from .redact import one_line

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what `yes | head` reports


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of ``command`` alone (``main`` parses a known
    command's line with just its own module loaded)."""
    parser = argparse.ArgumentParser(
        prog="kernelband",
        description="Find, profile and optimize the Triton kernels in a Python file.",
        epilog="Exit codes: 0 ok or improved; 1 a verdict of failure (a wrong variant, no verified speedup); "
        "2 bad usage or an input that cannot be used (one line on stderr). `kernelband COMMAND -h` for each.",
    )
    parser.add_argument("--version", action="version", version=f"kernelband {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in commands.load(command):
        module.add_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed a usage line
        return EXIT_USAGE if e.code not in (0, None) else 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("kernelband: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if not isinstance(e, _usage_errors()):
            raise
        # bad input, or an original/harness/device that cannot be used: one line, exit 2
        print(f"kernelband: {one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE


def _usage_errors() -> tuple[type, ...]:
    """UsageError, MissingDependency, and the evaluator's SetupError when a command loaded
    it (``list`` does not: importing it is a tenth of its start-up)."""
    evaluate = sys.modules.get(f"{__package__}.evaluate")
    return (UsageError, MissingDependency) + ((evaluate.SetupError,) if evaluate is not None else ())


def _silence_stdout() -> None:
    """The pipe's reader is gone: point stdout at /dev/null so the interpreter's final
    flush does not print a second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
