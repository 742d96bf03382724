"""@triton.autotune with configs from a helper function (the Triton tutorials' style)."""
import torch
import triton
import triton.language as tl


def get_autotune_config():
    return [
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2),
    ]


@triton.autotune(configs=get_autotune_config(), key=["M", "N"])
@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[None, :] * M + rm[:, None], x, mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    transpose_kernel[grid](x, y, M, N)
    return y


def harness_transpose():
    torch.manual_seed(0)
    return transpose(torch.randn(40, 70))
