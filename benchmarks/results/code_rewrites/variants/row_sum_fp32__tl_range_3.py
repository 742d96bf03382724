"""Sum of each row of an fp32 matrix: one program per row, a loop over the columns
in blocks of 512."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in tl.range(0, n_cols, BLOCK_SIZE, num_stages=3):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
        acc += x
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    row_sum_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=512)
    return out


def make_inputs():
    # 16384 x 6000 fp32: 393 MB read.
    rows, cols = (16384, 6000) if DEVICE == "cuda" else (9, 1100)
    return torch.randn(rows, cols, device=DEVICE, dtype=torch.float32)


def harness_row_sum():
    x = make_inputs()
    return row_sum(x)


def reference_row_sum():
    x = make_inputs()
    return x.sum(dim=1)
