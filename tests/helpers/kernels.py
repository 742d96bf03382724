"""Small real Triton modules used by several test files (tiny sizes: the interpreter)."""
from __future__ import annotations

from pathlib import Path

from kernelband.model import Task, Variant

AXPY = '''
import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(alpha, x, y):
    out = torch.empty_like(x)
    n = out.numel()
    axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK_SIZE=128)
    return out


def harness_axpy():
    x = torch.randn(3001)
    y = torch.randn(3001)
    return axpy(0.5, x, y)
'''

AXPY_LAUNCH = "axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK_SIZE=128)"


def axpy_task(tmp_path: Path, source: str = AXPY, timeout_s: float = 60.0, **extra: object) -> Task:
    path = tmp_path / "axpy.py"
    path.write_text(source, encoding="utf-8")
    return Task(module_path=str(path), source=source, kernel="axpy_kernel", harness="harness_axpy",
                device="cpu", timeout_s=timeout_s, **extra)  # type: ignore[arg-type]


def edited(old: str, new: str, base: str = AXPY) -> Variant:
    assert old in base, old
    return Variant(base.replace(old, new))
