"""Every lint quick fix keeps what the kernel computes: each fix is applied by the server's
own lint code to real kernels, and the kernels are RUN before and after it under Triton's
interpreter (tests/helpers/run_kernels.py, one subprocess for all cases). Each lint with a
fix has an in-place and an out-of-place kernel whose outputs must not change; each attack
(an offset reused with another stride, a stride or an arange in a helper, a reduction, a
missing or inline mask, a data mask, a padded array, a second size, a 2-D grid...) must
get no fix, and for most of them the edit the fix would have made (the old quick fix) is
run too, to show that it would have changed the results.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelband_lsp.documents import analyse
from kernelband_lsp.lints import lint

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "helpers" / "run_kernels.py"

HEAD = """\
import torch
import triton
import triton.language as tl
"""


def module(body: str, run: str, any_arange: bool = False) -> str:
    flag = "ALLOW_ANY_ARANGE = True\n" if any_arange else ""
    return HEAD + flag + "\n" + textwrap.dedent(body).strip() + "\n\n\n" + textwrap.dedent(run).strip() + "\n"


# ------------------------------------------------------------------------- KB101 kernels
K101_INPLACE = """
@triton.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=mask)
"""
RUN_INPLACE_1000 = """
def run():
    x = torch.arange(1000, dtype=torch.float32)
    k[(triton.cdiv(1000, 100),)](x, 1000)
    return [x]
"""
K101_OUT = """
@triton.jit
def k(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.exp(x) * 3.0, mask=mask)
"""
RUN_OUT_1000 = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1000)
    out = torch.full((1000,), -7.0)
    k[(triton.cdiv(1000, 100),)](x, out, 1000)
    return [out]
"""
# the offsets reused for another array with another stride, and the lanes compared elementwise
K101_REUSED = """
@triton.jit
def k(x_ptr, y_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, tl.where(offs % 2 == 0, x + 1.0, x - 1.0), mask=mask)
    tl.store(y_ptr + offs * 2, x, mask=mask)
"""
RUN_REUSED = """
def run():
    x = torch.arange(1000, dtype=torch.float32)
    y = torch.zeros(2000)
    k[(triton.cdiv(1000, 100),)](x, y, 1000)
    return [x, y]
"""
K101_HELPER_STRIDE = """
@triton.jit
def base(pid):
    return pid * 100


@triton.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    offs = base(pid) + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=mask)
"""
K101_HELPER_ARANGE = """
@triton.jit
def lanes():
    return tl.arange(0, 100)


@triton.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100) + lanes() * 0
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=mask)
"""
K101_REDUCTION = """
@triton.jit
def k(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + pid, tl.sum(x, axis=0))
"""
RUN_REDUCTION = """
def run():
    x = torch.arange(1000, dtype=torch.float32)
    out = torch.zeros(10)
    k[(10,)](x, out, 1000)
    return [out]
"""
K101_NO_MASK = """
@triton.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x * 2.0 + 1.0)
"""
RUN_NO_MASK = """
def run():
    x = torch.arange(1100, dtype=torch.float32)  # room for the last program's extra lanes
    k[(10,)](x, 1000)
    return [x[:1000]]
"""
K101_INLINE_MASK = """
@triton.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=offs < n)
"""
K101_ZEROS = """
@triton.jit
def k(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    acc = tl.zeros([100], dtype=tl.float32)
    acc += tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, acc, mask=mask)
"""
K101_2D = """
@triton.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    rows = pid * 100 + tl.arange(0, 100)
    offs = rows[:, None] * 2 + tl.arange(0, 2)[None, :]
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=mask)
"""

# ------------------------------------------------------------------------- KB104 kernels
K104_OUT = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 0.5 + 2.0, mask=mask)


def launch(x, out, n):
    BLOCK = 128
    k[(n // BLOCK,)](x, out, n, BLOCK=BLOCK)
"""
RUN_104_OUT = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1000)
    out = torch.full((1000,), -7.0)
    launch(x, out, 1000)
    return [out, x * 0.5 + 2.0]
"""
K104_INPLACE = """
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * x + 1.0, mask=mask)


def launch(x, n):
    BLOCK = 128
    k[(n // BLOCK,)](x, n, BLOCK=BLOCK)
"""
RUN_104_INPLACE = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1000)
    ref = x * x + 1.0
    launch(x, 1000)
    return [x, ref]
"""
# a second size: the mask bounds by m, the grid counts n (the new program would reach past n)
K104_OTHER_SIZE = """
@triton.jit
def k(x_ptr, n, m, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < m
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + 1.0, mask=mask)


def launch(x, n):
    BLOCK = 128
    k[(n // BLOCK,)](x, n, 2 * n, BLOCK=BLOCK)
"""
RUN_104_OTHER = """
def run():
    x = torch.zeros(2000)
    launch(x, 1000)
    return [x]
"""
K104_NO_MASK = """
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x + 1.0)


def launch(x, n):
    BLOCK = 128
    k[(n // BLOCK,)](x, n, BLOCK=BLOCK)
"""
RUN_104_NO_MASK = """
def run():
    x = torch.zeros(1024)
    launch(x, 1000)
    return [x]
"""
K104_ATOMIC = """
@triton.jit
def k(x_ptr, hist_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.atomic_add(hist_ptr + offs % 4, x, mask=mask)


def launch(x, hist, n):
    BLOCK = 128
    k[(n // BLOCK,)](x, hist, n, BLOCK=BLOCK)
"""
RUN_104_ATOMIC = """
def run():
    x = torch.ones(1000)
    hist = torch.zeros(4)
    launch(x, hist, 1000)
    return [hist]
"""
K104_2D = """
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + 1.0, mask=mask)


def launch(x, n):
    BLOCK = 128
    k[(n // BLOCK, 2)](x, n, BLOCK=BLOCK)
"""

# ------------------------------------------------------------------------- KB105 kernels
K105_OUT = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * 3.0 - 1.0, mask=mask)
"""
RUN_105_OUT = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1024)  # the unmasked load stays inside the buffer
    out = torch.full((1000,), -7.0)
    k[(triton.cdiv(1000, 128),)](x, out, 1000, BLOCK=128)
    return [out]
"""
K105_INPLACE = """
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x * 2.0, mask=mask)
"""
RUN_105_INPLACE = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1024)
    k[(triton.cdiv(1000, 128),)](x, 1000, BLOCK=128)
    return [x]
"""
# an unmasked store that writes a padded array's padding on purpose
K105_PADDED_STORE = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x + 1.0)
"""
RUN_105_PADDED = """
def run():
    x = torch.arange(1000, dtype=torch.float32)
    out = torch.zeros(1024)
    k[(8,)](x, out, 1000, BLOCK=128)
    return [out]
"""
# a data mask, not a bound
K105_DATA_MASK = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    mask = x > 0.0
    tl.store(out_ptr + offs, tl.where(mask, x, 0.0))
"""
RUN_105_DATA = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1024)
    out = torch.full((1024,), -7.0)
    k[(8,)](x, out, 1024, BLOCK=128)
    return [out]
"""
# the load reads another offset than the one the mask bounds: still correct, since the
# lanes the mask turns off are never stored
K105_OTHER_OFFSET = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    shifted = offs + 24
    mask = offs < n
    x = tl.load(x_ptr + shifted)
    tl.store(out_ptr + offs, x, mask=mask)
"""
RUN_105_OTHER = """
def run():
    x = torch.arange(1048, dtype=torch.float32)
    out = torch.zeros(1000)
    k[(8,)](x, out, 1000, BLOCK=128)
    return [out]
"""
# a reduction of the loaded block: lanes past n reach the sum
K105_REDUCTION = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + pid, tl.sum(x, axis=0))
"""

# ------------------------------------------------------------------------- KB107 / KB103
K107_OUT = """
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0, mask=mask)


def launch(x, out, n):
    k[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128, num_warps=6)
"""
RUN_107_OUT = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1000)
    out = torch.zeros(1000)
    launch(x, out, 1000)
    return [out]
"""
K107_INPLACE = """
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + 3.0, mask=mask)


def launch(x, n):
    k[(triton.cdiv(n, 128),)](x, n, BLOCK=128, num_warps=3)
"""
RUN_107_INPLACE = """
def run():
    torch.manual_seed(0)
    x = torch.randn(1000)
    launch(x, 1000)
    return [x]
"""
K103_DOT = """
@triton.jit
def k(a_ptr, b_ptr, c_ptr, BK: tl.constexpr):
    rm = tl.arange(0, 16)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * 16 + rm[None, :])
    tl.store(c_ptr + rm[:, None] * 16 + rm[None, :], tl.dot(a, b))


def launch(a, b, c):
    k[(1,)](a, b, c, BK=8)
"""
RUN_103 = """
def run():
    torch.manual_seed(0)
    a = torch.randn(256)
    b = torch.randn(256)
    c = torch.zeros(256)
    launch(a, b, c)
    return [c]
"""


# (name, kernel, run, code, our fix expected, the old fix's text edit (old, new) or None)
CASES = [
    ("k101_inplace", K101_INPLACE, RUN_INPLACE_1000, "KB101", True, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_out_of_place", K101_OUT, RUN_OUT_1000, "KB101", True, None),
    ("k101_offsets_reused", K101_REUSED, RUN_REUSED, "KB101", True, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_stride_in_helper", K101_HELPER_STRIDE, RUN_INPLACE_1000, "KB101", False, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_arange_in_helper", K101_HELPER_ARANGE, RUN_INPLACE_1000, "KB101", False, ("tl.arange(0, 100) +", "tl.arange(0, 128) +")),
    ("k101_reduction", K101_REDUCTION, RUN_REDUCTION, "KB101", False, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_no_mask", K101_NO_MASK, RUN_NO_MASK, "KB101", False, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_inline_mask", K101_INLINE_MASK, RUN_INPLACE_1000, "KB101", False, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_zeros_accumulator", K101_ZEROS, RUN_OUT_1000, "KB101", False, ("tl.arange(0, 100)", "tl.arange(0, 128)")),
    ("k101_2d", K101_2D, RUN_INPLACE_1000, "KB101", False, None),
    ("k104_out_of_place", K104_OUT, RUN_104_OUT, "KB104", True, None),
    ("k104_inplace", K104_INPLACE, RUN_104_INPLACE, "KB104", True, None),
    ("k104_other_size", K104_OTHER_SIZE, RUN_104_OTHER, "KB104", False, ("n // BLOCK", "triton.cdiv(n, BLOCK)")),
    ("k104_no_mask", K104_NO_MASK, RUN_104_NO_MASK, "KB104", False, None),
    ("k104_atomics", K104_ATOMIC, RUN_104_ATOMIC, "KB104", False, ("n // BLOCK", "triton.cdiv(n, BLOCK)")),
    ("k104_2d_grid", K104_2D, RUN_104_INPLACE, "KB104", False, None),
    ("k105_out_of_place", K105_OUT, RUN_105_OUT, "KB105", True, None),
    ("k105_inplace", K105_INPLACE, RUN_105_INPLACE, "KB105", True, None),
    ("k105_padded_store", K105_PADDED_STORE, RUN_105_PADDED, "KB105", False, ("tl.store(out_ptr + offs, x + 1.0)", "tl.store(out_ptr + offs, x + 1.0, mask=mask)")),
    ("k105_data_mask", K105_DATA_MASK, RUN_105_DATA, "KB105", False, ("tl.where(mask, x, 0.0))", "tl.where(mask, x, 0.0), mask=mask)")),
    ("k105_other_offset", K105_OTHER_OFFSET, RUN_105_OTHER, "KB105", True, None),
    ("k105_reduction", K105_REDUCTION, RUN_REDUCTION.replace("k[(10,)](x, out, 1000)", "k[(8,)](x, out, 1000, BLOCK=128)").replace("torch.arange(1000,", "torch.arange(1024,"), "KB105", False, None),
    ("k107_out_of_place", K107_OUT, RUN_107_OUT, "KB107", True, None),
    ("k107_inplace", K107_INPLACE, RUN_107_INPLACE, "KB107", True, None),
    ("k103_dot", K103_DOT, RUN_103, "KB103", False, ("BK=8", "BK=16")),
]


def _edits_of(f) -> tuple:
    """The finding's fix as (line, col, end_line, end_col, text) replacements. (Read the
    same way from an older Finding, one replacement or an insertion before the call's
    closing parenthesis, so that these tests judge the fixes it offered too.)"""
    if getattr(f, "fix_edits", None):
        return tuple(f.fix_edits)
    if getattr(f, "fix_text", None) is not None:
        return ((f.line, f.col, f.end_line, f.end_col, f.fix_text),)
    if getattr(f, "fix_title", None) and f.extra.get("insert_before_end"):
        return ((f.end_line, f.end_col - 1, f.end_line, f.end_col - 1, f.extra["insert_before_end"]),)
    return ()


def fixed_text(text: str, code: str) -> tuple[object, str | None]:
    """(the finding, the text with its quick fix applied, or None without a fix) as the server makes it."""
    a = analyse("file:///case.py", "/tmp/case.py", text, 1)
    findings = [f for f in lint(a) if f.code == code]
    assert findings, f"{code} not found"
    f = findings[0]
    edits = _edits_of(f)
    if not edits:
        return f, None
    spans = sorted(((a.index.ast_to_offset(l0, c0), a.index.ast_to_offset(l1, c1), new) for l0, c0, l1, c1, new in edits),
                   reverse=True)
    out = text
    for s, e, new in spans:
        out = out[:s] + new + out[e:]
    return f, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Every case's versions, run in one interpreter process: {case: {version: result}}."""
    folder = tmp_path_factory.mktemp("kernels")
    texts: dict[str, dict[str, str]] = {}
    for name, kernel, run, code, _, old in CASES:
        before = module(kernel, run, any_arange=code == "KB101")
        versions = {"before": before}
        _, after = fixed_text(before, code)
        if after is not None:
            versions["after"] = after
        if old is not None:
            assert old[0] in before, (name, old[0])
            versions["old_fix"] = before.replace(old[0], old[1], 1)
        texts[name] = versions
        for v, t in versions.items():
            (folder / f"{name}__{v}.py").write_text(t)
    out = folder / "results.json"
    p = subprocess.run([sys.executable, str(RUNNER), str(folder), str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    raw = json.loads(out.read_text())
    res: dict[str, dict] = {}
    for key, value in raw.items():
        name, version = key.split("__")
        res.setdefault(name, {})[version] = value
    return {"results": res, "texts": texts}


def outputs(r: dict) -> list:
    assert "outputs" in r, r.get("trace") or r
    return r["outputs"]


@pytest.mark.parametrize("case", [c for c in CASES if c[4]], ids=[c[0] for c in CASES if c[4]])
def test_the_fix_is_offered_and_keeps_what_the_kernel_computes(runs, case):
    name, _, _, code, _, _ = case
    versions = runs["results"][name]
    assert "after" in versions, f"{code}: no fix offered for {name}"
    before, after = outputs(versions["before"]), outputs(versions["after"])
    if code == "KB104":
        # the floor grid never ran the tail: the fix computes it, and changes nothing the original computed
        got, ref = after[0], after[1]
        assert got == ref, "the fixed kernel computes every element"
        done = (1000 // 128) * 128
        assert before[0][:done] == got[:done]
        assert before[0][done:] != got[done:], "the original really dropped the tail"
    else:
        assert before == after, name
    text = runs["texts"][name]["after"]
    assert text != runs["texts"][name]["before"]


@pytest.mark.parametrize("case", [c for c in CASES if not c[4]], ids=[c[0] for c in CASES if not c[4]])
def test_no_fix_where_it_could_change_the_results(runs, case):
    name, kernel, run, code, _, old = case
    f, after = fixed_text(module(kernel, run, any_arange=code == "KB101"), code)
    assert after is None and f.fix_title is None, f"{code} offered a fix for {name}"
    assert "no quick fix" in f.message, f.message  # the diagnostic says why
    versions = runs["results"][name]
    if old is not None and name not in ("k104_no_mask",):
        # the edit the fix would have made changes what the kernel computes (or breaks it)
        b, o = versions["before"], versions["old_fix"]
        assert "outputs" in b, b.get("trace")
        assert o.get("outputs") != b["outputs"], f"{name}: the old fix kept the results; the attack shows nothing"


def test_the_issue_s_example_double_writes_with_the_old_fix(runs):
    """`offs = pid * 100 + tl.arange(0, 100)`, grid cdiv(n, 100), rounded to 128 alone:
    programs overlap by 28 elements and an in-place kernel applies itself twice there."""
    v = runs["results"]["k101_inplace"]
    before, old = outputs(v["before"])[0], outputs(v["old_fix"])[0]
    twice = sum(1 for b, o in zip(before, old) if b != o)
    assert twice == 9 * 28  # the 252 of 1,000 elements the issue counted
    assert outputs(v["after"])[0] == before


def test_the_fix_edits_are_the_arange_and_the_mask():
    text = module(K101_INPLACE, RUN_INPLACE_1000, any_arange=True)
    f, after = fixed_text(text, "KB101")
    assert f.fix_title == "Round the tl.arange end up to 128 and mask the extra lanes"
    assert "offs = pid * 100 + tl.arange(0, 128)" in after
    assert "mask = (offs < n) & (tl.arange(0, 128) < 100)" in after
