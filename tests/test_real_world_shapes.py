"""Kernels as real projects write them: an autotuned kernel with a META grid
and hooks, an ``out=`` buffer API whose harness returns nothing, and a wrapper that
returns an object wrapping a tensor. Each is prepared, a correct rewrite passes and a
wrong one is caught, under the interpreter through the whole judge."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.evaluate import Evaluator
from kernelband.model import Status, Task, Variant

# The tests marked slow run in the slow tier (scripts/test.sh --slow); the others keep
# this file in the default tier.

AUTOTUNED = '''
import torch
import triton
import triton.language as tl


def _zero_out(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(
    configs=[triton.Config({"BLOCK_N": 32}, num_warps=1, pre_hook=_zero_out),
             triton.Config({"BLOCK_N": 64}, num_warps=2, pre_hook=_zero_out)],
    key=["n_cols"],
    reset_to_zero=["out_ptr"],
)
@triton.jit
def row_scale_kernel(x_ptr, out_ptr, n_rows, n_cols, scale, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, x * scale, mask=mask)


def row_scale(x, scale):
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    grid = lambda META: (n_rows, triton.cdiv(n_cols, META["BLOCK_N"]))
    row_scale_kernel[grid](x, out, n_rows, n_cols, scale)
    return out


def test_row_scale():
    x = torch.randn(5, 77)
    return row_scale(x, 1.5)


def bench_row_scale():
    x = torch.randn(8, 256)
    return row_scale(x, 1.5)
'''

OUT_BUFFER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def relu(x, out):
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)


def test_relu():
    x = torch.randn(1001)
    out = torch.empty_like(x)
    relu(x, out=out)
'''

WRAPPED = '''
from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass
class Quantized:
    data: torch.Tensor
    scale: float


@triton.jit
def quant_kernel(x_ptr, q_ptr, inv_scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    q = tl.floor(x * inv_scale + 0.5)
    tl.store(q_ptr + offs, tl.clamp(q, -127.0, 127.0).to(tl.int8), mask=mask)


def quantize(x):
    scale = 0.05
    q = torch.empty(x.shape, dtype=torch.int8)
    n = x.numel()
    quant_kernel[(triton.cdiv(n, 128),)](x, q, 1.0 / scale, n, BLOCK=128)
    return Quantized(q, scale)


def test_quantize():
    return quantize(torch.randn(999))
'''


def prepared(tmp_path: Path, source: str, kernel: str, harness: str, checks: list[str]) -> Evaluator:
    path = tmp_path / f"{kernel}.py"
    path.write_text(source, encoding="utf-8")
    task = Task(module_path=str(path), source=source, kernel=kernel, harness=harness, check_harnesses=checks,
                device="cpu", timeout_s=60.0)
    ev = Evaluator(task)
    base = ev.prepare(time_it=False)
    assert base.ok and not base.weak_harness, base.message
    return ev


@pytest.mark.slow
def test_autotuned_kernel_with_a_meta_grid_and_hooks(tmp_path):
    with prepared(tmp_path, AUTOTUNED, "row_scale_kernel", "bench_row_scale", ["test_row_scale"]) as ev:
        assert ev.baseline is not None and ev.baseline.launches[0].kernel == "row_scale_kernel"
        assert ev.baseline.launches[0].constexprs.get("BLOCK_N") in (32, 64)
        retuned = AUTOTUNED.replace('triton.Config({"BLOCK_N": 64}, num_warps=2, pre_hook=_zero_out)',
                                    'triton.Config({"BLOCK_N": 128}, num_warps=4, pre_hook=_zero_out)')
        ok = ev.evaluate(Variant(retuned))
        assert ok.status == Status.OK and ok.timing is not None, ok.message
        wrong = ev.evaluate(Variant(AUTOTUNED.replace("x * scale", "x * scale + 1e-3")), time_it=False)
        assert wrong.status == Status.MISMATCH, wrong.message


@pytest.mark.slow
def test_out_buffer_api_whose_harness_returns_nothing(tmp_path):
    with prepared(tmp_path, OUT_BUFFER, "relu_kernel", "test_relu", []) as ev:
        ok = ev.evaluate(Variant(OUT_BUFFER.replace("BLOCK=64)", "BLOCK=256)").replace("cdiv(n, 64)", "cdiv(n, 256)")))
        assert ok.status == Status.OK, ok.message
        wrong = ev.evaluate(Variant(OUT_BUFFER.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.01)")), time_it=False)
        assert wrong.status == Status.MISMATCH and "out" in wrong.message, wrong.message


@pytest.mark.slow
def test_wrapper_returning_an_object_that_wraps_a_tensor(tmp_path):
    with prepared(tmp_path, WRAPPED, "quant_kernel", "test_quantize", []) as ev:
        ok = ev.evaluate(Variant(WRAPPED.replace("BLOCK=128)", "BLOCK=512)").replace("cdiv(n, 128)", "cdiv(n, 512)")))
        assert ok.status == Status.OK, ok.message
        off = ev.evaluate(Variant(WRAPPED.replace("x * inv_scale + 0.5", "x * inv_scale + 0.25")), time_it=False)
        assert off.status == Status.MISMATCH and "integer elements differ" in off.message, off.message
        scale = ev.evaluate(Variant(WRAPPED.replace("return Quantized(q, scale)", "return Quantized(q, scale * 2)")),
                            time_it=False)
        assert scale.status == Status.MISMATCH and "scale" in scale.message, scale.message
