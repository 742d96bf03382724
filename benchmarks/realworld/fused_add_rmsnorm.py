"""Fused residual add + RMSNorm, in place (vLLM `fused_add_rms_norm`, unsloth-style
launch): residual += x, then x = rmsnorm(residual) * weight. Both buffers are updated
in place; the wrapper returns nothing. One program per row, one warp."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


@triton.jit
def fused_add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(res_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = r + x
    tl.store(res_ptr + row * stride + cols, r.to(res_ptr.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(r * r, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * stride + cols, (r * rstd * w).to(x_ptr.dtype.element_ty), mask=mask)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    n_rows, n_cols = x.shape
    fused_add_rmsnorm_kernel[(n_rows,)](x, residual, weight, x.stride(0), n_cols, eps,
                                        BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=1)


def make_inputs(rows: int, cols: int):
    x = torch.randn(rows, cols, device=DEVICE, dtype=DTYPE)
    res = torch.randn(rows, cols, device=DEVICE, dtype=DTYPE)
    w = torch.rand(cols, device=DEVICE, dtype=DTYPE) + 0.5
    return x, res, w


def test_fused_add_rms_norm():
    x, res, w = make_inputs(5, 197)
    r_ref = res.float() + x.float()
    x_ref = r_ref * torch.rsqrt(r_ref.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    fused_add_rms_norm(x, res, w)
    tol = 2e-2 if DTYPE == torch.bfloat16 else 1e-5
    torch.testing.assert_close(res.float(), r_ref, atol=tol, rtol=tol)
    torch.testing.assert_close(x.float(), x_ref, atol=tol, rtol=tol)


def bench_fused_add_rms_norm():
    # 32k tokens, hidden 8192, bf16
    rows, cols = (32768, 8192) if DEVICE == "cuda" else (4, 130)
    fused_add_rms_norm(*make_inputs(rows, cols))
