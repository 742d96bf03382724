"""``kernelband list FILE [--json]``: the Triton kernels of a file, their launch sites, and
the harness found for each (or why none was). Nothing is run: no GPU, no worker.

Exit codes: 0 listed (also when the file has no kernels), 2 the file cannot be read or
does not parse (one line on stderr).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..harness import HarnessChoice, PyprojectHarnesses, find_harness
from ..json_types import JsonObject
from ..model import KernelInfo
from .common import EXIT_OK, detect_or_fail, print_json, read_module


@dataclass(frozen=True)
class KernelListing:
    """One kernel of a file and the harness found for it: a row of ``list``."""

    kernel: KernelInfo
    harness: HarnessChoice

    def to_dict(self) -> JsonObject:
        """The row of ``list --json``: ``{"kernel": KernelInfo dict, "harness": HarnessChoice dict}``."""
        return {"kernel": self.kernel.to_dict(), "harness": self.harness.to_dict()}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list the Triton kernels of a file, their launch sites and harnesses",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="Python file to scan for @triton.jit kernels")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--stdin-source", action="store_true", help="read the module text from stdin (unsaved buffer)")
    p.set_defaults(func=run)


def list_kernels(path: str, source: str, label: str, fork: bool = False) -> list[KernelListing]:
    """Each kernel of the module at ``path`` (text ``source``) with the harness found for it.
    Raises UsageError (naming ``label``) when the text does not parse. ``fork``: see detect."""
    result = detect_or_fail(label, source, fork=fork)
    pyproject = PyprojectHarnesses.of(path)  # one pyproject.toml for every kernel of the file
    # scoped: each look-up sees only that kernel's callers (linear in the file, not quadratic)
    return [
        KernelListing(k, find_harness(path, source, k.name, result=result.scoped_to(k.name), pyproject=pyproject))
        for k in result.kernels
    ]


def run(args: argparse.Namespace) -> int:
    path, source = read_module(args.file, args.stdin_source)
    rows = list_kernels(path, source, args.file, fork=True)  # the kernels' syntax check on the other core
    if args.json:
        print_json({"file": path, "kernels": [row.to_dict() for row in rows]}, one_line_each="kernels")
        return EXIT_OK
    if not rows:
        print(f"{args.file}: no @triton.jit kernels")
        return EXIT_OK
    for row in rows:
        _print_row(row)
    return EXIT_OK


def _print_row(row: KernelListing) -> None:
    k, h = row.kernel, row.harness
    tags = [t for t, on in (("autotuned", k.is_autotuned), ("heuristics", k.has_heuristics)) if on]
    print(f"{k.name}  (line {k.range.start_line}{', ' + ', '.join(tags) if tags else ''})")
    print(f"  constexpr: {', '.join(k.constexpr_params) or '-'}")
    if not k.launch_sites:
        print("  launches:  none in this file")
    for s in k.launch_sites:
        where = s.enclosing_function or "<module>"
        kw = ", ".join(f"{a}={b}" for a, b in s.kwargs.items())
        print(f"  launch:    line {s.range.start_line} in {where}: grid={s.grid}{'; ' + kw if kw else ''}")
    if h.name:
        loc = f" in {h.path}" if h.path else ""
        checks = f"; correctness: {', '.join(h.checks)}" if h.checks else ""
        print(f"  harness:   {h.name}{loc} ({h.how}; timing and correctness{checks})")
    else:
        print(f"  harness:   none: {h.reason}")
