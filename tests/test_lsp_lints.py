"""GPU-free Triton lints and their quick fixes, over real LSP (pytest-lsp)."""
from __future__ import annotations

from lsprotocol import types

from helpers.lsp import start_session, wait_until

LINTY = '''import torch
import triton
import triton.language as tl


@triton.jit
def bad_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs)
    y = tl.libdevice.exp(x)
    tl.store(out_ptr + offs, y, mask=mask)


@triton.autotune(configs=[triton.Config({"BM": 16}, num_warps=3)], key=[])
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a.to(tl.float16), b.to(tl.float32))
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


def run(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    bad_kernel[(n // BLOCK,)](x, out, n, BLOCK=BLOCK, num_warps=6)
    return out


def run_dot(a, b, c):
    dot_kernel[(1,)](a, b, c, BN=16, BK=8)
'''


def lint_diags(client, uri):
    return [d for d in client.diagnostics.get(uri, []) if d.source == "kernelband-lint"]


async def fixes_at(client, uri, d):
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=d.range,
        context=types.CodeActionContext(diagnostics=[d], only=[types.CodeActionKind.QuickFix])))
    return [a for a in acts or [] if isinstance(a, types.CodeAction) and "KernelBand KB" in a.title]


async def test_lints_are_published_and_fixed(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    f = ws / "linty.py"
    f.write_text(LINTY)
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(f)
        diags = await wait_until(lambda: lint_diags(client, uri), 20, what="lint diagnostics")
        by_code: dict[str, list] = {}
        for d in diags:
            by_code.setdefault(d.code, []).append(d)
        assert set(by_code) == {"KB101", "KB102", "KB103", "KB104", "KB105", "KB106", "KB107"}, by_code.keys()
        text = editor.text(uri)
        (d101,) = by_code["KB101"]
        assert d101.severity == types.DiagnosticSeverity.Error and "100" in d101.message
        assert len(by_code["KB107"]) == 2  # the launch's num_warps=6 and the Config's num_warps=3

        # this kernel calls tl.libdevice (a call the fixes cannot see through): no fix may
        # change what it computes, so only num_warps (a launch option) gets one
        for code in ("KB101", "KB103", "KB104", "KB105"):
            d = next(x for x in lint_diags(client, uri) if x.code == code)
            assert "no quick fix" in d.message, d.message
            assert not [x for x in await fixes_at(client, uri, d) if code in x.title], code
        warps = [x for x in lint_diags(client, uri) if x.code == "KB107"]
        for d in warps:
            (fix,) = [x for x in await fixes_at(client, uri, d) if "KB107" in x.title]
            ok, why = editor.apply_workspace_edit(fix.edit)
            assert ok, why
            await wait_until(lambda: len([x for x in lint_diags(client, uri) if x.code == "KB107"]) < len(warps), 20,
                             what="KB107 to clear")
            break
        assert "num_warps=4" in editor.text(uri) or "num_warps=2" in editor.text(uri)
        # no fix offered where none is certain
        d102 = next(x for x in lint_diags(client, uri) if x.code == "KB102")
        assert not [x for x in await fixes_at(client, uri, d102) if "KB102" in x.title]
        assert text != editor.text(uri)


FIXABLE = '''import torch
import triton
import triton.language as tl


@triton.jit
def ragged_kernel(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0, mask=mask)


@triton.jit
def tail_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + 1.0, mask=mask)


def run(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    tail_kernel[(n // BLOCK,)](x, out, n, BLOCK=BLOCK)
    return out
'''


async def test_fixes_that_keep_the_kernel_are_offered_and_applied(tmp_path):
    """(tests/test_lint_fixes_run.py runs these fixes' kernels before and after.)"""
    ws = tmp_path / "ws"
    ws.mkdir()
    f = ws / "fixable.py"
    f.write_text(FIXABLE)
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(f)
        await wait_until(lambda: {d.code for d in lint_diags(client, uri)} >= {"KB101", "KB104", "KB105"}, 20,
                         what="lint diagnostics")
        expected = {
            "KB101": ["offs = pid * 100 + tl.arange(0, 128)", "mask = (offs < n) & (tl.arange(0, 128) < 100)"],
            "KB105": ["x = tl.load(x_ptr + offs, mask=mask)\n    tl.store(out_ptr + offs, x + 1.0"],
            # offered once every access of the kernel is masked (the new program must stop at n)
            "KB104": ["tail_kernel[(triton.cdiv(n, BLOCK),)]"],
        }
        d104 = next(x for x in lint_diags(client, uri) if x.code == "KB104")
        assert "no quick fix: a tl.load is not masked" in d104.message
        for code, wants in expected.items():
            d = await wait_until(lambda: next((x for x in lint_diags(client, uri) if x.code == code
                                               and "no quick fix" not in x.message), None), 20, what=code)
            (fix,) = [x for x in await fixes_at(client, uri, d) if code in x.title]
            assert fix.diagnostics and fix.diagnostics[0].code == code
            ok, why = editor.apply_workspace_edit(fix.edit)
            assert ok, why
            for want in wants:
                assert want in editor.text(uri), (code, editor.text(uri))
            await wait_until(lambda: not [x for x in lint_diags(client, uri) if x.code == code], 20,
                             what=f"{code} to clear")


async def test_clean_examples_have_no_lints(tmp_path):
    from helpers.lsp import copy_examples

    ws = copy_examples(tmp_path)
    async with start_session(ws) as (client, editor, rec):
        for name in ("add_scale.py", "softmax.py", "matmul.py"):
            uri = editor.open(ws / name)
            await wait_until(lambda: uri in client.diagnostics, 20, what="diagnostics")
            assert not lint_diags(client, uri), [(d.code, d.message) for d in lint_diags(client, uri)]
