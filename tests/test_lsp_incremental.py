"""The provisional analysis after a keystroke (incremental.py) is either refused or
exactly what detecting the new text finds (the latency under edits depends on it)."""
from __future__ import annotations

import random

from kernelband.detect import detect
from kernelband_lsp.incremental import Change, shift
from kernelband_lsp.positions import LineIndex

from helpers.lsp import EXAMPLES

ALPHABET = "abcxyz019 _+-*=\n\n\n#()[]:@'\"\t"


def random_change(rng: random.Random, text: str, index: LineIndex) -> Change:
    line = rng.randrange(len(index.lines))
    width = len(index.line_text(line))
    a = rng.randint(0, width)
    if rng.random() < 0.3:  # a deletion, possibly across lines
        l2 = min(line + rng.choice([0, 0, 1, 2]), len(index.lines) - 1)
        b = rng.randint(0, len(index.line_text(l2))) if l2 != line else rng.randint(a, width)
        return Change(line, a, l2, b, "")
    return Change(line, a, line, a, "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 4))))


def apply(text: str, index: LineIndex, c: Change) -> str:
    from lsprotocol import types

    s = index.position_to_offset(types.Position(line=c.start_line, character=c.start_char))
    e = index.position_to_offset(types.Position(line=c.end_line, character=c.end_char))
    return text[:s] + c.text + text[e:]


def redetected(det, index: LineIndex, c: Change) -> bool:
    """The change lies in a plain function's body (incremental.py re-detects it)."""
    from kernelband_lsp.incremental import _function_around

    return _function_around(det, index, c) is not None


def test_a_shifted_detection_is_refused_or_exact():
    rng = random.Random(14)
    accepted = 0
    for name in ("add_scale.py", "softmax.py", "matmul.py"):
        base = (EXAMPLES / name).read_text()
        for _ in range(600):
            index = LineIndex(base)
            det = detect(base)
            c = random_change(rng, base, index)
            new = apply(base, index, c)
            got = shift(det, index, [c])
            if got is None:
                continue
            want = detect(new)
            if want.error is not None:
                continue  # the server keeps showing the last good kernels either way
            accepted += 1
            sdet, sindex = got
            assert sindex.text == new
            assert [k.name for k in sdet.kernels] == [k.name for k in want.kernels]
            for k, w in zip(sdet.kernels, want.kernels):
                assert (k.range.start_line, k.range.end_line, k.name_range, k.def_range.start_line) == \
                       (w.range.start_line, w.range.end_line, w.name_range, w.def_range.start_line), (name, c)
                assert [s.range.start_line for s in k.launch_sites] == [s.range.start_line for s in w.launch_sites]
                assert k.params == w.params and k.decorators == w.decorators
            assert [(f.name, f.calls, f.launches, f.range.start_line) for f in sdet.functions] == \
                   [(f.name, f.calls, f.launches, f.range.start_line) for f in want.functions], (name, c)
            if redetected(det, index, c):
                assert sdet.to_dict() == want.to_dict(), (name, c)  # a function detected again: all of it
    assert accepted > 50  # many keystrokes take the fast path


def test_structural_edits_take_the_slow_path():
    text = (EXAMPLES / "add_scale.py").read_text()
    index = LineIndex(text)
    det = detect(text)
    k = det.kernels[0]
    header = k.def_range.start_line - 1
    assert shift(det, index, [Change(header, 4, header, 4, "x")]) is None  # the kernel's name
    body = k.range.end_line - 1
    assert shift(det, index, [Change(body, 0, body, 0, "@triton.jit\ndef k2(x):\n")]) is None
    assert shift(det, index, [Change(body - 1, 0, body - 1, 0, "x")]) is None  # unindents a line: ends the kernel
    assert shift(det, index, [Change(body, 4, body, 4, "  ")]) is None  # the last line: its end may move
    assert shift(det, index, [Change(body - 1, 4, body - 1, 4, "  ")]) is not None
    assert shift(det, index, [Change(body - 1, 4, body - 1, 4, "z = 1\n    ")]) is not None


def _find(text: str, needle: str, index: LineIndex) -> tuple[int, int]:
    off = text.index(needle)
    pos = index.offset_to_position(off)
    return pos.line, pos.character


def test_an_edit_in_a_functions_body_re_detects_that_function_alone():
    """A keystroke in a wrapper's launch line (its grid, its BLOCK_SIZE, a second launch,
    a call) gives exactly what detecting the whole text gives, without parsing it."""
    base = (EXAMPLES / "add_scale.py").read_text()
    edits = [  # (a unique piece of the text, what replaces it)
        ("BLOCK_SIZE=128)", "BLOCK_SIZE=256)"),
        ("[grid](x, y", "[(triton.cdiv(n, 256),)](x, y"),
        ("    return out", "    axpy_kernel[(1,)](x, y, out, alpha, n, BLOCK_SIZE=64)\n    return out"),
        ("    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=128)\n", ""),
        ("    return out", "    harness_axpy()\n    return out"),
        ("    n = out.numel()", "\n    n = out.numel()"),
    ]
    for old, new in edits:
        assert base.count(old) == 1, old
        index = LineIndex(base)
        det = detect(base)
        start_off = base.index(old)
        start, end = index.offset_to_position(start_off), index.offset_to_position(start_off + len(old))
        c = Change(start.line, start.character, end.line, end.character, new)
        text = apply(base, index, c)
        got = shift(det, index, [c])
        assert got is not None, (old, new)
        assert got[1].text == text
        assert got[0].to_dict() == detect(text).to_dict(), (old, new)


def test_edits_a_function_alone_cannot_answer_take_the_slow_path():
    base = (EXAMPLES / "add_scale.py").read_text()
    index = LineIndex(base)
    det = detect(base)
    line, _ = _find(base, "    n = out.numel()", index)
    assert shift(det, index, [Change(line, 0, line, 0, "    import math\n")]) is None  # imports name Triton
    assert shift(det, index, [Change(line, 0, line, 0, "    x = (\n")]) is None  # an open bracket
    assert shift(det, index, [Change(line, 0, line, 0, "    s = '''\n")]) is None  # an open string
    assert shift(det, index, [Change(line, 0, line, 0, "y = 1\n")]) is None  # ends the function early
    sig, col = _find(base, "alpha: float", index)
    assert shift(det, index, [Change(sig, col, sig, col, "beta, ")]) is None  # its signature
    decorated = base.replace("def axpy(", "@functools.cache\ndef axpy(")
    index, det = LineIndex(decorated), detect(decorated)
    line, _ = _find(decorated, "    n = out.numel()", index)
    assert shift(det, index, [Change(line, 0, line, 0, "    m = 1\n")]) is None  # its decorators call too
