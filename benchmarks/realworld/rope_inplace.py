"""Rotary embedding applied in place to query and key (vLLM `rotary_embedding`, neox
style): one program per (token, head), cos/sin gathered from a cache by position.
The kernel is launched twice per call (query heads, then key heads); the wrapper
returns nothing, so the written q/k are the outputs."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


@triton.jit
def rotary_embedding_kernel(x_ptr, pos_ptr, cos_sin_ptr, stride_tok, stride_head, cache_stride,
                            HALF: tl.constexpr, BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    head = tl.program_id(1)
    pos = tl.load(pos_ptr + tok)
    offs = tl.arange(0, BLOCK)
    mask = offs < HALF
    cos = tl.load(cos_sin_ptr + pos * cache_stride + offs, mask=mask, other=0.0)
    sin = tl.load(cos_sin_ptr + pos * cache_stride + HALF + offs, mask=mask, other=0.0)
    base = x_ptr + tok * stride_tok + head * stride_head
    x1 = tl.load(base + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(base + HALF + offs, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    tl.store(base + offs, o1.to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(base + HALF + offs, o2.to(x_ptr.dtype.element_ty), mask=mask)


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                     cos_sin_cache: torch.Tensor) -> None:
    """query: (tokens, heads, head_dim), key: (tokens, kv_heads, head_dim); modified in place."""
    num_tokens, head_dim = query.shape[0], query.shape[-1]
    half = head_dim // 2
    block = triton.next_power_of_2(half)
    for x in (query, key):
        rotary_embedding_kernel[(num_tokens, x.shape[1])](
            x, positions, cos_sin_cache, x.stride(0), x.stride(1), cos_sin_cache.stride(0),
            HALF=half, BLOCK=block, num_warps=1)


def make_cache(max_pos: int, head_dim: int) -> torch.Tensor:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=DEVICE, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(max_pos, device=DEVICE, dtype=torch.float32), inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).contiguous()


def reference(positions, query, key, cache):
    half = query.shape[-1] // 2
    cos = cache[positions, :half][:, None, :]
    sin = cache[positions, half:][:, None, :]
    out = []
    for x in (query, key):
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        out.append(torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype))
    return out


def make_inputs(tokens: int, heads: int, kv_heads: int, head_dim: int, max_pos: int):
    positions = torch.randint(0, max_pos, (tokens,), device=DEVICE)
    q = torch.randn(tokens, heads, head_dim, device=DEVICE, dtype=DTYPE)
    k = torch.randn(tokens, kv_heads, head_dim, device=DEVICE, dtype=DTYPE)
    return positions, q, k, make_cache(max_pos, head_dim)


def test_rotary_embedding():
    # pytest style: asserts, returns None; odd token count and heads
    positions, q, k, cache = make_inputs(7, 3, 1, 32, 97)
    ref_q, ref_k = reference(positions, q, k, cache)
    rotary_embedding(positions, q, k, cache)
    tol = 2e-2 if DTYPE == torch.bfloat16 else 1e-5
    torch.testing.assert_close(q, ref_q, atol=tol, rtol=tol)
    torch.testing.assert_close(k, ref_k, atol=tol, rtol=tol)


def bench_rotary_embedding():
    # a prefill batch of 16k tokens, Llama-3-8B heads (32 q, 8 kv, dim 128)
    shape = (16384, 32, 8, 128, 8192) if DEVICE == "cuda" else (9, 2, 1, 16, 33)
    positions, q, k, cache = make_inputs(*shape)
    rotary_embedding(positions, q, k, cache)
