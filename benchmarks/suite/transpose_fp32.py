"""Out-of-place transpose of an fp32 matrix: square 16x16 tiles, one program per
tile on a 2D grid. Loads are coalesced along rows, stores stride across rows of the
output, so the tile shape (and warps) decide how many bytes each store moves."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)
    tl.store(y_ptr + offs_n[None, :] * stride_ym + offs_m[:, None], x, mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((N, M), device=x.device, dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=16, BLOCK_N=16)
    return y


def make_inputs():
    # 8192 x 8192 fp32: 268 MB in, 268 MB out.
    M, N = (8192, 8192) if DEVICE == "cuda" else (70, 45)
    return torch.randn(M, N, device=DEVICE, dtype=torch.float32)


def harness_transpose():
    x = make_inputs()
    return transpose(x)


def reference_transpose():
    x = make_inputs()
    return x.t().contiguous()
