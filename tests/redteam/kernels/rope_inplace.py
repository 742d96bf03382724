"""Rotary position embedding (GPT-NeoX layout) applied in place to q of shape
(seq, heads, head_dim); the wrapper returns None, like the in-place RoPE of LLM servers."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, stride_xs, stride_xh, stride_cs, n_heads,
                HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pos = tl.program_id(0)
    pid_h = tl.program_id(1)
    heads = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    dims = tl.arange(0, HALF)
    mask = heads[:, None] < n_heads
    cos = tl.load(cos_ptr + pos * stride_cs + dims)[None, :]
    sin = tl.load(sin_ptr + pos * stride_cs + dims)[None, :]
    base = x_ptr + pos * stride_xs + heads[:, None] * stride_xh + dims[None, :]
    x1 = tl.load(base, mask=mask)
    x2 = tl.load(base + HALF, mask=mask)
    tl.store(base, x1 * cos - x2 * sin, mask=mask)
    tl.store(base + HALF, x2 * cos + x1 * sin, mask=mask)


def apply_rotary_(x, cos, sin):
    seq, n_heads, head_dim = x.shape
    assert x.stride(2) == 1 and head_dim % 2 == 0 and cos.shape == (seq, head_dim // 2)
    BLOCK_H = 4
    grid = (seq, triton.cdiv(n_heads, BLOCK_H))
    rope_kernel[grid](x, cos, sin, x.stride(0), x.stride(1), cos.stride(0), n_heads,
                      HALF=head_dim // 2, BLOCK_H=BLOCK_H)


def _cos_sin(seq, head_dim, device):
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.arange(seq, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def test_rope():
    # pytest style: returns nothing; q is a view over 3 of 5 heads (strided), heads not a multiple of BLOCK_H
    seq, head_dim = 13, 32
    qkv = torch.randn(seq, 5, head_dim, device=DEVICE)
    q = qkv[:, 1:4]
    cos, sin = _cos_sin(seq, head_dim, DEVICE)
    apply_rotary_(q, cos, sin)


def bench_rope():
    seq, heads, head_dim = (4096, 32, 128) if DEVICE == "cuda" else (16, 8, 32)
    q = torch.randn(seq, heads, head_dim, device=DEVICE)
    cos, sin = _cos_sin(seq, head_dim, DEVICE)
    apply_rotary_(q, cos, sin)
