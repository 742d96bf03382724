"""Causal attention forward on fp16 (head dim 128) with an online softmax and a
loop over key/value blocks up to the diagonal: one program per (64 queries,
batch*head), key blocks of 32, default warps and stages. Tiles, warps, stages and a
pipelined K/V loop all matter."""
import math

import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def attention_causal_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale, stride_bh, stride_s,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = bh * stride_bh
    q = tl.load(q_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :],
                mask=offs_m[:, None] < seq_len, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = cols[:, None] < seq_len
        k = tl.load(k_ptr + base + cols[:, None] * stride_s + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * stride_s + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        s = tl.where((cols[None, :] <= offs_m[:, None]) & (cols[None, :] < seq_len), s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], acc.to(tl.float16),
             mask=offs_m[:, None] < seq_len)


def attention_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    B, H, S, D = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    sm_scale = 1.0 / math.sqrt(D)
    grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), B * H)
    attention_causal_kernel[grid](q, k, v, o, S, sm_scale, S * D, D, HEAD_DIM=D, BLOCK_M=64, BLOCK_N=32)
    return o


def make_inputs():
    # batch 4, 16 heads, 2048 tokens, head dim 128: 69 GFLOP (causal: half of it).
    B, H, S, D = (4, 16, 2048, 128) if DEVICE == "cuda" else (1, 2, 45, 128)
    q = torch.randn(B, H, S, D, device=DEVICE, dtype=torch.float16)
    k = torch.randn(B, H, S, D, device=DEVICE, dtype=torch.float16)
    v = torch.randn(B, H, S, D, device=DEVICE, dtype=torch.float16)
    return q, k, v


def harness_attention_causal():
    q, k, v = make_inputs()
    return attention_causal(q, k, v)


def reference_attention_causal():
    q, k, v = make_inputs()
    q, k, v = q.float(), k.float(), v.float()
    S = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    causal = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).to(torch.float16)
