"""Rotary position embedding (rotate-half / NeoX layout) applied to fp16 queries
of shape (batch, seq, heads, head_dim), with fp32 cos/sin tables of shape
(seq, head_dim // 2). One program per (token, block of 2 heads)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def rotary_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, seq_len, n_heads, stride_tok, stride_head,
                  HALF_DIM: tl.constexpr, BLOCK_H: tl.constexpr):
    tok = tl.program_id(0)
    head_block = tl.program_id(1)
    pos = tok % seq_len
    heads = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    dims = tl.arange(0, HALF_DIM)
    mask = heads[:, None] < n_heads
    offs = tok * stride_tok + heads[:, None] * stride_head + dims[None, :]
    x1 = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + offs + HALF_DIM, mask=mask, other=0.0).to(tl.float32)
    cos = tl.load(cos_ptr + pos * HALF_DIM + dims)[None, :]
    sin = tl.load(sin_ptr + pos * HALF_DIM + dims)[None, :]
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    tl.store(out_ptr + offs, out1.to(tl.float16), mask=mask)
    tl.store(out_ptr + offs + HALF_DIM, out2.to(tl.float16), mask=mask)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    B, S, H, D = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    grid = lambda meta: (B * S, triton.cdiv(H, meta["BLOCK_H"]))
    rotary_kernel[grid](x, cos, sin, out, S, H, x.stride(1), x.stride(2), HALF_DIM=D // 2, BLOCK_H=2)
    return out


def rotary_tables(seq_len: int, head_dim: int, base: float = 10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=DEVICE, dtype=torch.float32) / head_dim))
    angles = torch.arange(seq_len, device=DEVICE, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return torch.cos(angles), torch.sin(angles)


def make_inputs():
    # 8 x 2048 tokens x 32 heads x 128: 134 MB in, 134 MB out.
    B, S, H, D = (8, 2048, 32, 128) if DEVICE == "cuda" else (2, 7, 5, 16)
    x = torch.randn(B, S, H, D, device=DEVICE, dtype=torch.float16)
    cos, sin = rotary_tables(S, D)
    return x, cos, sin


def harness_rotary():
    x, cos, sin = make_inputs()
    return apply_rotary(x, cos, sin)


def reference_rotary():
    x, cos, sin = make_inputs()
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(torch.float16)
