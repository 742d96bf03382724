"""Per-row int8 dequantization to bf16: out = q * scale[row]. One program per
(row, block of 256 columns)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def dequantize_kernel(q_ptr, scale_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    q = tl.load(q_ptr + row * row_stride + cols, mask=mask, other=0)
    scale = tl.load(scale_ptr + row)
    out = q.to(tl.float32) * scale
    tl.store(out_ptr + row * row_stride + cols, out.to(tl.bfloat16), mask=mask)


def dequantize_per_row(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = q.shape
    out = torch.empty((n_rows, n_cols), device=q.device, dtype=torch.bfloat16)
    grid = lambda meta: (n_rows, triton.cdiv(n_cols, meta["BLOCK_SIZE"]))
    dequantize_kernel[grid](q, scale, out, q.stride(0), n_cols, BLOCK_SIZE=256)
    return out


def make_inputs():
    # 16384 x 8192 int8 weights: 134 MB read, 268 MB of bf16 written.
    rows, cols = (16384, 8192) if DEVICE == "cuda" else (6, 700)
    q = torch.randint(-127, 128, (rows, cols), device=DEVICE, dtype=torch.int8)
    scale = torch.rand(rows, device=DEVICE, dtype=torch.float32) * 0.02 + 0.001
    return q, scale


def harness_dequantize():
    q, scale = make_inputs()
    return dequantize_per_row(q, scale)


def reference_dequantize():
    q, scale = make_inputs()
    return (q.float() * scale[:, None]).to(torch.bfloat16)
