"""Re-verifying an applied variant: which text is the original, and the verdict in a line.

Once a found variant is applied (in the editor, or by ``optimize --apply``) the file holds
the variant, and the original it replaced is no longer on disk. A stored Result keeps it
all the same: ``best_source`` is the variant's module and ``diff`` the unified diff from
the original to it, so reversing the diff on ``best_source`` gives the original back, and
``original_hash`` (sha256 of the text the session started from) says whether it is
exactly that text. ``original_of`` returns it only then: never a guess.

``verdict_line`` reads what ``kernelband check --json`` prints, decoded (the hardened
check of a variant against the original, then the interleaved re-measurement) and says
it in one line, with the same words as the rest of the product: a speedup only with its
confidence interval, and "correct; speed needs a GPU" under the interpreter.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from .check_outcome import CheckOutcome
from .model import FOUND_STATUSES, Result, ResultStatus, sha256_text

# what an interpreted result may claim (the editor says the same)
INTERPRETED_NOTE = "correct; speed needs a GPU"
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@[^\n]*\n")


def original_of(result: Optional[Result]) -> Optional[str]:
    """The module text the Result's session started from, rebuilt from its variant and
    diff, when its sha256 is the Result's ``original_hash``; else None."""
    if result is None or result.status not in FOUND_STATUSES or not result.best_source:
        return None
    if not result.diff or not result.original_hash:
        return None
    for text in unapply(result.best_source, result.diff):
        if sha256_text(text) == result.original_hash:
            return text
    return None


def unapply(new: str, diff: str) -> Iterator[str]:
    """Texts that ``diff`` (a unified diff from some old text to ``new``) may have been
    made from: the one reading, and when the old text's last line had no line break
    (difflib then runs it into the next line of the diff) the other. The caller tells
    them apart by hash. Nothing when the diff does not fit ``new``."""
    new_lines = new.splitlines(keepends=True)
    hunks = list(_HUNK.finditer(diff))
    if not hunks:
        return
    for glued in (False, True):
        old = _old_text(new_lines, diff, hunks, glued)
        if old is not None:
            yield old


def _old_text(new_lines: list[str], diff: str, hunks: list[re.Match], glued: bool) -> Optional[str]:
    out: list[str] = []
    at = 0  # next line of new_lines not yet copied
    for i, h in enumerate(hunks):
        n_old = int(h.group(2)) if h.group(2) is not None else 1
        start = int(h.group(3))
        n_new = int(h.group(4)) if h.group(4) is not None else 1
        first = start if n_new == 0 else start - 1  # 0-based index of the hunk's first new line
        if first < at or first + n_new > len(new_lines):
            return None
        out.extend(new_lines[at:first])
        body = diff[h.end() : hunks[i + 1].start() if i + 1 < len(hunks) else len(diff)]
        got = _hunk_old(body, new_lines[first : first + n_new], n_old, glued and i == len(hunks) - 1)
        if got is None:
            return None
        out.extend(got)
        at = first + n_new
    out.extend(new_lines[at:])
    return "".join(out)


def _hunk_old(body: str, new: list[str], n_old: int, glued: bool) -> Optional[list[str]]:
    """The old lines of one hunk. Context and added lines are the new text's own (known),
    so they are matched exactly; a removed line runs to its line break, or (``glued``, the
    file's last old line without one) to where the remaining added lines begin."""
    old: list[str] = []
    pos = j = 0  # position in body, index in new
    while len(old) < n_old or j < len(new):
        if pos >= len(body):
            return None
        tag = body[pos]
        if tag in " +":
            if j >= len(new) or not body.startswith(new[j], pos + 1):
                return None
            if tag == " ":
                old.append(new[j])
            pos += 1 + len(new[j])
            j += 1
        elif tag == "-":
            if glued and len(old) == n_old - 1:
                rest = "".join("+" + line for line in new[j:])
                end = len(body) - len(rest) if body.endswith(rest) else -1
                if end <= pos or body[end - 1 : end] == "\n":
                    return None
                old.append(body[pos + 1 : end])
                pos = end
                continue
            nl = body.find("\n", pos)
            if nl < 0:
                nl = len(body) - 1
            old.append(body[pos + 1 : nl + 1])
            pos = nl + 1
        elif tag == "\\":  # "\ No newline at end of file" (GNU diff): the line before has none
            nl = body.find("\n", pos)
            pos = len(body) if nl < 0 else nl + 1
            if old and old[-1].endswith("\n"):
                old[-1] = old[-1][:-1]
        else:
            return None
    return old if len(old) == n_old else None


def verdict_line(check: Optional[CheckOutcome]) -> tuple[bool, str]:
    """(passed, one line) for what ``kernelband check --json`` printed. Passed means the
    variant is still correct against the original (faster or not: the line says which)."""
    if check is None:
        return False, "re-verification failed: no verdict"
    message = check.message.strip().splitlines()
    why = f": {message[0]}" if message else ""
    if not check.ok:
        return False, f"re-verification failed ({check.status}){why}"
    if check.verdict == ResultStatus.VERIFIED_CORRECT or (check.interpreted and not check.speed_claim):
        return True, f"re-verified: {INTERPRETED_NOTE}"
    sp, ci = check.speedup, check.speedup_ci
    if sp is None:
        return True, "re-verified: correct"
    ci_txt = f", 95% CI {ci[0]:.2f}–{ci[1]:.2f}" if ci is not None else ""
    if check.verdict == ResultStatus.IMPROVED:
        return True, f"re-verified: correct, {sp:.2f}x faster{ci_txt}"
    return True, f"re-verified: correct, but not measurably faster now ({sp:.2f}x{ci_txt})"
