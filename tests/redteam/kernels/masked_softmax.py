"""Row softmax of fp32 attention scores in which masked positions are -inf. A fully
masked row gives zeros (not NaN). ``out=`` may be any row-major buffer, ``x`` itself
included (an in-place softmax)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def masked_softmax_kernel(x_ptr, out_ptr, stride_x, stride_out, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=0)
    # every score of a fully masked row is -inf: subtracting -inf would give NaN
    row_max = tl.where(row_max == -float("inf"), 0.0, row_max)
    num = tl.exp(x - row_max)
    den = tl.sum(num, axis=0)
    den = tl.where(den == 0.0, 1.0, den)
    tl.store(out_ptr + row * stride_out + cols, num / den, mask=mask)


def masked_softmax(x, out=None):
    n_rows, n_cols = x.shape
    assert x.stride(1) == 1
    if out is None:
        out = torch.empty_like(x)
    assert out.shape == x.shape and out.stride(1) == 1
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    masked_softmax_kernel[(n_rows,)](x, out, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return out


def test_masked_softmax():
    # odd sizes, about a third of the positions masked
    scores = torch.randn(29, 100, device=DEVICE) * 3.0
    keep = torch.rand(29, 100, device=DEVICE) > 0.3
    return masked_softmax(scores.masked_fill(~keep, -float("inf")))


def bench_masked_softmax():
    # causal attention scores: row i sees positions 0..i
    n = 2048 if DEVICE == "cuda" else 64
    scores = torch.randn(n, n, device=DEVICE)
    causal = torch.ones(n, n, device=DEVICE).tril().bool()
    return masked_softmax(scores.masked_fill(~causal, -float("inf")))
