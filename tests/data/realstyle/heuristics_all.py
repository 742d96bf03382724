"""Every launch value from @triton.heuristics and the data: launch-side space is small."""
import torch
import triton
import triton.language as tl


@triton.heuristics({"BLOCK_SIZE": lambda args: triton.next_power_of_2(args["n_cols"])})
@triton.jit
def rowmax_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


def rowmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=x.dtype)
    rowmax_kernel[(n_rows,)](x, out, n_cols)
    return out


def harness_rowmax():
    torch.manual_seed(0)
    return rowmax(torch.randn(6, 50))
