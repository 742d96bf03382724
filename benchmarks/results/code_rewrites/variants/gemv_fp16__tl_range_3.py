"""Matrix-vector product y = A @ x on fp16 with fp32 accumulation: each program
owns 16 rows and walks K in blocks of 64."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def gemv_kernel(a_ptr, x_ptr, y_ptr, M, K, stride_am, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=3):
        cols = k + tl.arange(0, BLOCK_K)
        col_mask = cols < K
        a = tl.load(a_ptr + rows[:, None] * stride_am + cols[None, :],
                    mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        x = tl.load(x_ptr + cols, mask=col_mask, other=0.0)
        acc += tl.sum(a.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
    tl.store(y_ptr + rows, acc.to(tl.float16), mask=row_mask)


def gemv(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    y = torch.empty(M, device=a.device, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)
    gemv_kernel[grid](a, x, y, M, K, a.stride(0), BLOCK_M=16, BLOCK_K=64)
    return y


def make_inputs():
    # 16384 x 8192 fp16 weight: 268 MB read.
    M, K = (16384, 8192) if DEVICE == "cuda" else (37, 150)
    a = torch.randn(M, K, device=DEVICE, dtype=torch.float16)
    x = torch.randn(K, device=DEVICE, dtype=torch.float16)
    return a, x


def harness_gemv():
    a, x = make_inputs()
    return gemv(a, x)


def reference_gemv():
    a, x = make_inputs()
    return (a.float() @ x.float()).to(torch.float16)
