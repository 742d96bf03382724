"""Answer right after a keystroke from the last analysis, moved by the edit.

Re-detecting a 2,000-line module takes 100 ms or more on a busy laptop core, and the
editor asks for code lenses right after each change. Most keystrokes land inside a
kernel's body or on a comment line, where the set of kernels, their functions, calls
and launches cannot change: only the lines below the edit move. For those the last
analysis is shifted by the edit (``shift``). A keystroke in the body of a module-level
function (a wrapper's launch line: its grid, its BLOCK_SIZE) re-detects that function
alone, from its own lines (``kernelband.detect.redetect_function``), and moves the
rest. Any other edit (a header, a decorator, a new definition, an import, module-level
code) returns None and the caller analyses the text. The debounced analysis still runs
and, if the result differs, the server asks the client to refresh its lenses.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence

from kernelband.detect import DetectionResult, redetect_function
from lsprotocol import types

from kernelband.model import FunctionInfo, KernelInfo, LaunchSite, SourceRange

from .positions import LineIndex

# text whose insertion or removal can change what detection finds (definitions,
# decorators, imports, launches k[grid](...), calls f(...), strings that swallow lines)
_STRUCTURAL = re.compile(r"""def|class|import|triton|@|[\[\]()"'\\:]""")
_BLANK_OR_COMMENT = re.compile(r"^[ \t]*(#.*)?$")


@dataclasses.dataclass
class Change:
    """One content change, in the coordinates of the text it applies to (0-based)."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int
    text: str


def _header_end(index: LineIndex, def_line0: int) -> int:
    """0-based line where a def's signature ends (the line holding its ':')."""
    depth = 0
    for ln in range(def_line0, min(def_line0 + 60, len(index.lines))):
        code = index.line_text(ln).split("#", 1)[0]
        depth += code.count("(") - code.count(")")
        if depth <= 0 and code.rstrip().endswith(":"):
            return ln
    return def_line0 + 60


def _safe_lines(
    k_ranges: list[tuple[int, int]], a_lines: int, index: LineIndex, c: Change, removed: str, new_lines: list[str]
) -> bool:
    """The change touches only one kernel's body, or only comment/blank module lines."""
    if _STRUCTURAL.search(c.text) or _STRUCTURAL.search(removed):
        return False
    for body_start, body_end in k_ranges:
        if body_start <= c.start_line and c.end_line < body_end:
            # (not the last line: blanking or commenting it out would move the kernel's end)
            if "#" in c.text or "#" in removed:
                return False  # commenting code in or out can move where the body ends
            # inside a kernel body: an edited line must stay indented (or blank/comment),
            # or it would end the kernel
            return all(ln == "" or ln[0] in " \t" or _BLANK_OR_COMMENT.match(ln) for ln in new_lines)
    # module level: only comment or blank lines, before and after
    old = [index.line_text(ln) for ln in range(c.start_line, min(c.end_line, a_lines - 1) + 1)]
    return all(_BLANK_OR_COMMENT.match(ln) for ln in old) and all(_BLANK_OR_COMMENT.match(ln) for ln in new_lines)


def _move(r: SourceRange, end_line0: int, delta: int) -> SourceRange:
    # a start on the changed lines stays (changes never touch a header); an end on the
    # change's last line moves with the text after the change
    start = r.start_line + delta if r.start_line - 1 > end_line0 else r.start_line
    end = r.end_line + delta if r.end_line - 1 >= end_line0 else r.end_line
    return SourceRange(start, r.start_col, max(end, start), r.end_col)


def _move_kernel(k: KernelInfo, e: int, d: int) -> KernelInfo:
    return dataclasses.replace(
        k,
        range=_move(k.range, e, d),
        def_range=_move(k.def_range, e, d),
        name_range=_move(k.name_range, e, d),
        launch_sites=[dataclasses.replace(ls, range=_move(ls.range, e, d)) for ls in k.launch_sites],
    )


def shift(
    detection: DetectionResult, index: LineIndex, changes: Sequence[Change]
) -> Optional[tuple[DetectionResult, LineIndex]]:
    """The detection (and line table) of the text after ``changes``, if they cannot
    change what is detected; else None. ``index`` is the line table of the text the
    detection is of."""
    if detection.error is not None:
        return None
    det = detection
    text = index.text
    for c in changes:
        if c.start_line < 0 or c.end_line >= max(len(index.lines), 1) + 1:
            return None
        # kernels' bodies: from the line after the signature to the last line
        ranges = [(_header_end(index, k.def_range.start_line - 1) + 1, k.range.end_line - 1) for k in det.kernels]
        start = index.position_to_offset(types.Position(line=c.start_line, character=c.start_char))
        end = index.position_to_offset(types.Position(line=c.end_line, character=c.end_char))
        if end < start:
            return None
        removed = text[start:end]
        new_text = text[:start] + c.text + text[end:]
        new_index = LineIndex(new_text, index.encoding)
        delta = c.text.count("\n") - removed.count("\n")
        if "\r" in c.text or "\r" in removed:
            return None  # keep line counting simple: \r\n and \r edits take the slow path
        touched = [new_index.line_text(ln) for ln in range(c.start_line, c.end_line + delta + 1)]
        e = c.end_line
        if _safe_lines(ranges, len(index.lines), index, c, removed, touched):
            det = DetectionResult(
                kernels=[_move_kernel(k, e, delta) for k in det.kernels],
                functions=[dataclasses.replace(f, range=_move(f.range, e, delta)) for f in det.functions],
                error=None,
                module_defs=det.module_defs,
            )
        else:
            moved = _redetect_function(det, index, new_index, c, delta)
            if moved is None:
                return None
            det = moved
        text, index = new_text, new_index
    return det, index


def _function_around(det: DetectionResult, index: LineIndex, c: Change) -> Optional[FunctionInfo]:
    """The module-level, undecorated plain function whose body (not its signature) holds
    the whole change, if it is the only definition of its name."""
    for f in det.functions:
        start0, end0 = f.range.start_line - 1, f.range.end_line - 1
        if not (f.kind == "function" and f.range.start_col == 0 and start0 <= c.start_line and c.end_line <= end0):
            continue
        if _header_end(index, start0) >= c.start_line:
            return None  # its signature: the parameters, the name
        # decorated (the decorators' calls are its own): the slow path
        if start0 > 0 and not _BLANK_OR_COMMENT.match(index.line_text(start0 - 1)):
            return None
        same_name = [g for g in det.functions if g.name == f.name] + [k for k in det.kernels if k.name == f.name]
        return f if len(same_name) == 1 else None
    return None


def _redetect_function(
    det: DetectionResult, index: LineIndex, new_index: LineIndex, c: Change, delta: int
) -> Optional[DetectionResult]:
    """The detection after an edit inside one plain function's body: that function and
    its launch sites detected again from its lines alone, everything else moved."""
    f = _function_around(det, index, c)
    if f is None:
        return None
    start0, end0 = f.range.start_line - 1, f.range.end_line - 1 + delta
    if end0 < start0 or end0 >= len(new_index.lines):
        return None
    # the module's text with only this function's lines: positions stay the module's
    block = "\n" * start0 + "".join(new_index.lines[start0 : end0 + 1])
    got = redetect_function(det, block, f.name, end0 + 1)
    if got is None:
        return None
    info, sites = got
    e = c.end_line
    by_kernel: dict[str, list[LaunchSite]] = {}
    for site in sites:
        by_kernel.setdefault(site.kernel, []).append(site)
    kernels = []
    for k in det.kernels:
        k = _move_kernel(k, e, delta)
        mine = by_kernel.get(k.name, [])
        others = [ls for ls in k.launch_sites if ls.enclosing_function != f.name]
        if mine or len(others) != len(k.launch_sites):
            merged = sorted(others + mine, key=lambda ls: (ls.range.start_line, ls.range.start_col))
            k = dataclasses.replace(k, launch_sites=merged)
        kernels.append(k)
    functions = [info if g is f else dataclasses.replace(g, range=_move(g.range, e, delta)) for g in det.functions]
    return DetectionResult(kernels=kernels, functions=functions, error=None, module_defs=det.module_defs)
