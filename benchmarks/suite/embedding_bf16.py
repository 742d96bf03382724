"""Embedding lookup (row gather) from a bf16 table: out[t] = weight[ids[t]]. One
program per (token, block of 128 columns)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def embedding_kernel(ids_ptr, weight_ptr, out_ptr, dim, weight_stride, out_stride, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < dim
    idx = tl.load(ids_ptr + tok)
    row = tl.load(weight_ptr + idx * weight_stride + cols, mask=mask)
    tl.store(out_ptr + tok * out_stride + cols, row, mask=mask)


def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n_tokens = ids.numel()
    dim = weight.shape[1]
    out = torch.empty((n_tokens, dim), device=weight.device, dtype=weight.dtype)
    grid = lambda meta: (n_tokens, triton.cdiv(dim, meta["BLOCK_D"]))
    embedding_kernel[grid](ids, weight, out, dim, weight.stride(0), out.stride(0), BLOCK_D=128)
    return out


def make_inputs():
    # 32000 x 4096 bf16 table (262 MB); 16384 tokens gather 134 MB.
    vocab, dim, tokens = (32000, 4096, 16384) if DEVICE == "cuda" else (50, 300, 9)
    weight = torch.randn(vocab, dim, device=DEVICE, dtype=torch.bfloat16)
    ids = torch.randint(0, vocab, (tokens,), device=DEVICE, dtype=torch.int64)
    return ids, weight


def harness_embedding():
    ids, weight = make_inputs()
    return embedding(ids, weight)


def reference_embedding():
    ids, weight = make_inputs()
    return torch.nn.functional.embedding(ids, weight)
