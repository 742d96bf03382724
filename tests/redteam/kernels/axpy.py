"""axpy: out = alpha * x + y over 1-D tensors of any stride (a BLAS-1 style elementwise kernel)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, stride_x, stride_y, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets * stride_x, mask=mask)
    y = tl.load(y_ptr + offsets * stride_y, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(alpha, x, y):
    assert x.dim() == 1 and x.shape == y.shape
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)
    return out


def test_axpy():
    n = 1000 + 3  # not a multiple of the block
    x = torch.randn(2 * n, device=DEVICE)[::2]  # strided input
    y = torch.randn(n, device=DEVICE)
    return axpy(0.5, x, y)


def bench_axpy():
    n = (1 << 24) if DEVICE == "cuda" else 4096
    x = torch.randn(n, device=DEVICE)
    y = torch.randn(n, device=DEVICE)
    return axpy(0.5, x, y)
