"""out = relu(x + bias) over the rows of a 2-D tensor (any row stride); relu maps NaN
and -inf to 0, as torch.where(x > 0, x, 0) does."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, out_ptr, stride_x, stride_out, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    h = x + b
    tl.store(out_ptr + row * stride_out + cols, tl.where(h > 0, h, 0.0), mask=mask)


def bias_relu(x, bias):
    n_rows, n_cols = x.shape
    assert x.stride(1) == 1 and bias.shape == (n_cols,)
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    bias_relu_kernel[(n_rows,)](x, bias, out, x.stride(0), out.stride(0), n_cols,
                                BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


def test_bias_relu():
    x = torch.randn(31, 200, device=DEVICE)[:, :150]
    b = torch.randn(150, device=DEVICE)
    return bias_relu(x, b)


def bench_bias_relu():
    rows, cols = (16384, 4096) if DEVICE == "cuda" else (64, 256)
    x = torch.randn(rows, cols, device=DEVICE)
    b = torch.randn(cols, device=DEVICE)
    return bias_relu(x, b)
