"""Embedding lookup: out[i, :] = weight[ids[i], :] for integer ids into a table of any
vocabulary size (int64 row offsets)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def embedding_kernel(ids_ptr, w_ptr, out_ptr, stride_w, stride_out, dim, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    token = tl.load(ids_ptr + i).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < dim
    row = tl.load(w_ptr + token * stride_w + cols, mask=mask)
    tl.store(out_ptr + i * stride_out + cols, row, mask=mask)


def embedding(ids, weight):
    assert ids.dim() == 1 and weight.dim() == 2 and weight.stride(1) == 1
    n, dim = ids.numel(), weight.shape[1]
    out = torch.empty((n, dim), dtype=weight.dtype, device=weight.device)
    embedding_kernel[(n,)](ids, weight, out, weight.stride(0), out.stride(0), dim,
                           BLOCK_D=triton.next_power_of_2(dim))
    return out


def test_embedding():
    weight = torch.randn(1000, 96, device=DEVICE)
    ids = torch.randint(0, 1000, (257,), device=DEVICE)
    return embedding(ids, weight)


def bench_embedding():
    vocab, dim, n = (32000, 4096, 8192) if DEVICE == "cuda" else (4000, 128, 256)
    weight = torch.randn(vocab, dim, device=DEVICE)
    ids = torch.randint(0, vocab, (n,), device=DEVICE)
    return embedding(ids, weight)
