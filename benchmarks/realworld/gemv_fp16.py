"""Matrix-vector product y = A x in fp16 with fp32 accumulation (FlagGems `mv`): one
program per BLOCK_M rows looping over K. A first version: 4 rows per program, 64-wide K
steps, one warp."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def gemv_kernel(A, X, Y, M, K, stride_am, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < K
        a = tl.load(A + rows[:, None].to(tl.int64) * stride_am + ks[None, :],
                    mask=row_mask[:, None] & k_mask[None, :], other=0.0).to(tl.float32)
        x = tl.load(X + ks, mask=k_mask, other=0.0).to(tl.float32)
        acc += a * x[None, :]
    y = tl.sum(acc, axis=1)
    tl.store(Y + rows, y.to(Y.dtype.element_ty), mask=row_mask)


def gemv(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    y = torch.empty(M, device=a.device, dtype=a.dtype)
    gemv_kernel[(triton.cdiv(M, 4),)](a, x, y, M, K, a.stride(0), BLOCK_M=4, BLOCK_K=64, num_warps=1)
    return y


def test_gemv():
    a = torch.randn(37, 333, device=DEVICE, dtype=torch.float16)
    x = torch.randn(333, device=DEVICE, dtype=torch.float16)
    y = gemv(a, x)
    torch.testing.assert_close(y.float(), a.float() @ x.float(), atol=5e-2, rtol=1e-2)
    return y


def bench_gemv():
    # a decode-step projection: 28672 x 8192 fp16 weight (448 MiB)
    M, K = (28672, 8192) if DEVICE == "cuda" else (21, 150)
    a = torch.randn(M, K, device=DEVICE, dtype=torch.float16)
    x = torch.randn(K, device=DEVICE, dtype=torch.float16)
    return gemv(a, x)
