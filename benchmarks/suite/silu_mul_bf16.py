"""SiLU-and-mul (the SwiGLU activation of an MLP) on bf16: the input row holds
[gate | up]; out = silu(gate) * up. One program per (row, column block)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def silu_mul_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    gate = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * x_row_stride + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * out_row_stride + cols, out.to(tl.bfloat16), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    n_rows, two_n = x.shape
    n_cols = two_n // 2
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    grid = lambda meta: (n_rows, triton.cdiv(n_cols, meta["BLOCK_SIZE"]))
    silu_mul_kernel[grid](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=128)
    return out


def make_inputs():
    # 4096 tokens x (2 x 11008) bf16: 180 MB in, 90 MB out.
    rows, cols = (4096, 11008) if DEVICE == "cuda" else (5, 300)
    return torch.randn(rows, 2 * cols, device=DEVICE, dtype=torch.bfloat16)


def harness_silu_mul():
    x = make_inputs()
    return silu_and_mul(x)


def reference_silu_mul():
    x = make_inputs().float()
    n = x.shape[1] // 2
    gate, up = x[:, :n], x[:, n:]
    return (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)
