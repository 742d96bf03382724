"""Turn a found variant into a versioned, minimal workspace edit.

A job starts from the editor's text at some version (``base``) and ends with a complete
module (``variant``). The edit given to the editor is the minimal set of hunks
(difflib on lines, trimmed to the characters that differ), in a ``TextDocumentEdit``
carrying the version it applies to, so the editor rejects it if the text moved on
after we built it.

If the document changed while the job ran, the edit is rebuilt on the current text:
each hunk is carried over to where its lines now are, provided the kernel's own code is
unchanged (a comment or a blank line added inside it is not a change of code) and none
of the user's changes touch a hunk. Otherwise it is refused with a message: the user's
unsaved work is never overwritten.
"""

from __future__ import annotations

import ast
import difflib
import functools
import itertools
from dataclasses import dataclass, field
from typing import Optional

from lsprotocol import types

from kernelband.detect import DetectionResult, detect

from .positions import UTF16, LineIndex, split_lines


@dataclass(frozen=True)
class Hunk:
    """Replace text[start:end] (character offsets) with new."""

    start: int
    end: int
    new: str


@dataclass
class EditPlan:
    ok: bool
    message: str = ""
    hunks: list[Hunk] = field(default_factory=list)
    new_text: str = ""  # the current text with the hunks applied
    rebuilt: bool = False  # the text had moved on and the hunks were carried over


def _offsets(lines: list[str]) -> list[int]:
    return list(itertools.accumulate(map(len, lines), initial=0))


def _trim(old: str, new: str) -> tuple[int, int, str]:
    """Common prefix/suffix trimming: (skip at start, skip at end, replacement)."""
    p = 0
    n = min(len(old), len(new))
    while p < n and old[p] == new[p]:
        p += 1
    s = 0
    while s < n - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    return p, s, new[p : len(new) - s]


def _line_opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    return list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())


def minimal_hunks(old: str, new: str) -> list[Hunk]:
    """Hunks (offsets in old) that turn old into new: changed lines, trimmed to characters."""
    a, b = split_lines(old), split_lines(new)
    ao, bo = _offsets(a), _offsets(b)
    hunks: list[Hunk] = []
    for tag, i1, i2, j1, j2 in _line_opcodes(a, b):
        if tag == "equal":
            continue
        o_start, o_end = ao[i1], ao[i2]
        seg_old, seg_new = old[o_start:o_end], new[bo[j1] : bo[j2]]
        p, s, rep = _trim(seg_old, seg_new)
        hunks.append(Hunk(o_start + p, o_end - s, rep))
    return hunks


def apply_hunks(text: str, hunks: list[Hunk]) -> str:
    out = []
    pos = 0
    for h in sorted(hunks, key=lambda h: (h.start, h.end)):
        if h.start < pos:
            raise ValueError("overlapping hunks")
        out.append(text[pos : h.start])
        out.append(h.new)
        pos = h.end
    out.append(text[pos:])
    return "".join(out)


@functools.lru_cache(maxsize=8)
def _detect(text: str) -> DetectionResult:
    """Plans are made for Apply, its undo and the re-verification, on every lens request
    after an edit: the same few texts (the original, the variant, the text as it stands)
    are detected once each, not once per plan."""
    return detect(text)


def _kernel_segment(text: str, kernel: str) -> Optional[str]:
    det = _detect(text)
    if det.error is not None:
        return None
    k = det.kernel(kernel)
    if k is None:
        return None
    idx = LineIndex(text)
    r = k.range
    return idx.segment(r.start_line, 0, r.end_line, r.end_col)


def _kernel_code(text: str, kernel: str) -> Optional[str]:
    """The kernel's code without its comments and layout (its AST): a comment or a blank
    line added inside the kernel leaves the verified code, and so the variant, valid."""
    seg = _kernel_segment(text, kernel)
    if seg is None:
        return None
    try:
        return ast.dump(ast.parse(seg))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return seg


def _map_point(p: int, equal_blocks: list[tuple[int, int, int, int]], as_start: bool) -> Optional[int]:
    """Map a line boundary p of the base text to the current text through equal blocks.

    A start point lands after any lines the user inserted exactly there, an end point
    before them, so a carried-over hunk never covers the user's new lines."""
    best: Optional[int] = None
    for a1, a2, c1, c2 in equal_blocks:
        if as_start:
            if a1 <= p < a2 or (a1 == a2 == p):
                return c1 + (p - a1)
            if p == a2:
                best = c2  # fallback: end of the block before p
        else:
            if a1 < p <= a2 or (a1 == a2 == p):
                return c1 + (p - a1)
            if p == a1 and best is None:
                best = c1
    return best


def plan_edit(base: str, variant: str, current: str, kernel: str) -> EditPlan:
    """Hunks turning `current` into (current + the variant's changes), or a refusal."""
    if variant == base:
        return EditPlan(False, "the variant is identical to the original")
    if current == base:
        hunks = minimal_hunks(base, variant)
        return EditPlan(True, "", hunks, variant, rebuilt=False)

    base_kernel = _kernel_segment(base, kernel)
    cur_det = _detect(current)
    if cur_det.error is not None:
        return EditPlan(
            False,
            f"the file does not parse now (line {cur_det.error.line}: {cur_det.error.message}); "
            "fix it, then apply the variant",
        )
    cur_kernel = _kernel_segment(current, kernel)
    if cur_kernel is None:
        return EditPlan(False, f"{kernel} is no longer in the file; the variant was not applied")
    if base_kernel is None or (
        cur_kernel != base_kernel and _kernel_code(current, kernel) != _kernel_code(base, kernel)
    ):
        return EditPlan(
            False,
            f"{kernel} was edited after the job started, so its result no longer "
            "applies; your changes were kept. Run Optimize again on the new code.",
        )

    a, b, c = split_lines(base), split_lines(variant), split_lines(current)
    user_ops = _line_opcodes(a, c)
    equal_blocks = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in user_ops if tag == "equal"]
    user_changes = [(i1, i2) for tag, i1, i2, _, _ in user_ops if tag != "equal"]
    co, bo = _offsets(c), _offsets(b)

    line_hunks: list[tuple[int, int, str]] = []  # (start line, end line) in current, new text
    for tag, i1, i2, j1, j2 in _line_opcodes(a, b):
        if tag == "equal":
            continue
        for u1, u2 in user_changes:
            if i1 < i2 and u1 < u2:
                clash = u1 < i2 and i1 < u2
            elif i1 == i2 and u1 == u2:
                clash = i1 == u1
            elif i1 == i2:  # the variant inserts at a point inside a user change
                clash = u1 < i1 < u2
            else:  # the user inserted inside a changed region
                clash = i1 < u1 < i2
            if clash:
                return EditPlan(
                    False,
                    f"your edits since the job started touch lines the variant changes "
                    f"(line {i1 + 1}); the variant was not applied. Run Optimize again.",
                )
        s = _map_point(i1, equal_blocks, as_start=True)
        e = _map_point(i2, equal_blocks, as_start=False) if i2 > i1 else s
        if s is None or e is None or e < s:
            return EditPlan(False, "could not place the variant's changes in the current text; run Optimize again")
        line_hunks.append((s, e, variant[bo[j1] : bo[j2]]))

    hunks = []
    for s, e, new in line_hunks:
        seg = current[co[s] : co[e]]
        p, q, rep = _trim(seg, new)
        hunks.append(Hunk(co[s] + p, co[e] - q, rep))
    try:
        new_text = apply_hunks(current, hunks)
    except ValueError:
        return EditPlan(False, "the variant's changes overlap after your edits; run Optimize again")
    if _kernel_code(new_text, kernel) != _kernel_code(variant, kernel):
        return EditPlan(False, "the variant could not be carried over to the current text cleanly; run Optimize again")
    return EditPlan(True, "", hunks, new_text, rebuilt=True)


def to_text_edits(text: str, hunks: list[Hunk], encoding: str = UTF16) -> list[types.TextEdit]:
    idx = LineIndex(text, encoding)
    return [
        types.TextEdit(
            range=types.Range(start=idx.offset_to_position(h.start), end=idx.offset_to_position(h.end)), new_text=h.new
        )
        for h in sorted(hunks, key=lambda h: h.start)
    ]


def workspace_edit(
    uri: str, version: Optional[int], text: str, hunks: list[Hunk], encoding: str = UTF16, document_changes: bool = True
) -> types.WorkspaceEdit:
    """A versioned TextDocumentEdit (or plain `changes` for clients without documentChanges)."""
    edits = to_text_edits(text, hunks, encoding)
    if not document_changes:
        return types.WorkspaceEdit(changes={uri: edits})
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits,
            )
        ]
    )


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(split_lines(old), split_lines(new), f"a/{path}", f"b/{path}"))


def write_review_file(kernel: str, text: str) -> str:
    """A diff to read before applying, outside the workspace (never in the user's tree)."""
    import os
    import re
    import tempfile

    d = os.path.join(tempfile.gettempdir(), f"kernelband-review-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, re.sub(r"[^A-Za-z0-9_]", "_", kernel) + ".diff")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
