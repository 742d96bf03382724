"""Row sums of a 2-D tensor of any float dtype and any strides (fp32 accumulation, the
result in the input's dtype), with an optional ``out=`` vector of any stride."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, n_cols, stride_xr, stride_xc, stride_out, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_xr + cols * stride_xc, mask=mask, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row * stride_out, total.to(out_ptr.dtype.element_ty))


def rowsum(x, out=None):
    assert x.dim() == 2 and x.is_floating_point()
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    assert out.shape == (n_rows,) and out.dtype == x.dtype
    BLOCK_SIZE = min(triton.next_power_of_2(n_cols), 1024)
    rowsum_kernel[(n_rows,)](x, out, n_cols, x.stride(0), x.stride(1), out.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


def test_rowsum():
    x = torch.randn(37, 301, device=DEVICE)
    return rowsum(x)


def bench_rowsum():
    rows, cols = (8192, 8192) if DEVICE == "cuda" else (64, 512)
    x = torch.randn(rows, cols, device=DEVICE)
    return rowsum(x)
