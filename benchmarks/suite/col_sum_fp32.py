"""Column sums of a tall fp32 matrix: each program owns 16 columns and walks down the
rows in chunks of 64. Narrow column blocks make every row read a short, strided
segment; wider blocks (and the row chunk, warps, stages) change that."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def col_sum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < N)


def col_sum(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty(N, device=x.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]),)
    col_sum_kernel[grid](x, out, M, N, x.stride(0), BLOCK_M=64, BLOCK_N=16)
    return out


def make_inputs():
    # 32768 x 4096 fp32: 537 MB read.
    M, N = (32768, 4096) if DEVICE == "cuda" else (150, 70)
    return torch.randn(M, N, device=DEVICE, dtype=torch.float32)


def harness_col_sum():
    x = make_inputs()
    return col_sum(x)


def reference_col_sum():
    x = make_inputs()
    return x.sum(dim=0)
