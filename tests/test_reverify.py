"""The original behind an applied variant, rebuilt from a stored Result (its variant and
diff, checked by hash), and the one-line verdict of `kernelband check --json` (what
re-verifying an applied variant from the lens runs)."""
from __future__ import annotations

import pytest

from helpers.check_outcomes import outcome
from kernelband.model import Result, sha256_text
from kernelband.result_builder import unified_diff
from kernelband.reverify import original_of, unapply, verdict_line

BASE = "".join(f"line {i}\n" for i in range(40))


def _result(old: str, new: str, **kw) -> Result:
    return Result(status=kw.pop("status", "improved"), original_hash=sha256_text(old), best_source=new,
                  diff=unified_diff(old, new, "/ws/k.py"), **kw)


CASES = {
    "one changed line": (BASE, BASE.replace("line 7\n", "line seven\n")),
    "two hunks far apart": (BASE, BASE.replace("line 2\n", "two\n").replace("line 35\n", "x\ny\n")),
    "lines added at the start": (BASE, "import os\n" + BASE),
    "lines removed at the end": (BASE, BASE.replace("line 38\nline 39\n", "")),
    "the old text has no final line break": (BASE + "last", BASE + "LAST\nmore\n"),
    "neither has a final line break": (BASE + "last", BASE + "LAST"),
    "only the new text lacks it": (BASE + "last\n", BASE + "LAST"),
    "a removed line holds a plus sign": (BASE + "a+b", BASE + "a-b\n"),
    "the whole text changes": ("a\nb\n", "c\n"),
    "from an empty file": ("", "a\nb\n"),
    "crlf line breaks": (BASE.replace("\n", "\r\n"), BASE.replace("\n", "\r\n").replace("line 9", "nine")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_original_comes_back_from_the_variant_and_its_diff(name):
    old, new = CASES[name]
    assert old != new
    assert original_of(_result(old, new)) == old


def test_no_original_without_a_diff_a_hash_that_fits_or_a_found_variant():
    old, new = CASES["one changed line"]
    assert original_of(_result(old, new, status="no_improvement")) is None
    r = _result(old, new)
    r.original_hash = sha256_text("something else")
    assert original_of(r) is None  # never a guess
    r = _result(old, new)
    r.diff = ""
    assert original_of(r) is None
    r = _result(old, new)
    r.best_source = new.replace("line 20", "line twenty")  # the diff no longer fits
    assert original_of(r) is None
    assert original_of(None) is None
    assert list(unapply(new, "not a diff")) == []


def test_an_interpreted_verified_correct_result_has_its_original_too():
    old, new = CASES["two hunks far apart"]
    assert original_of(_result(old, new, status="verified_correct", interpreted=True)) == old


def test_verdict_lines():
    gpu = {"interpreted": False, "speed_claim": True, "paired": True}
    assert verdict_line(outcome(**gpu, verdict="improved", speedup=1.412, speedup_ci=[1.3, 1.52])) == \
        (True, "re-verified: correct, 1.41x faster, 95% CI 1.30–1.52")
    assert verdict_line(outcome(verdict="verified_correct", interpreted=True)) == \
        (True, "re-verified: correct; speed needs a GPU")
    ok, line = verdict_line(outcome(**gpu, verdict="no_improvement", speedup=1.01, speedup_ci=[0.98, 1.04]))
    assert ok and line == "re-verified: correct, but not measurably faster now (1.01x, 95% CI 0.98–1.04)"
    assert verdict_line(outcome(**gpu, verdict=None)) == (True, "re-verified: correct")
    assert verdict_line(outcome(status="mismatch", verdict=None, message="max abs error 2.0 > atol 1e-05\nmore")) == \
        (False, "re-verification failed (mismatch): max abs error 2.0 > atol 1e-05")
    assert verdict_line(outcome(status="rejected", message="")) == (False, "re-verification failed (rejected)")
    assert verdict_line(None) == (False, "re-verification failed: no verdict")
