"""GeGLU forward with the tanh approximation of GELU (Liger `geglu`): one program per
row looping over the columns; `@triton.heuristics` drops the mask when the row length
is a multiple of the block (EVEN_N)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


@triton.heuristics({"EVEN_N": lambda args: args["n_cols"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def geglu_tanh_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr, EVEN_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    a_ptr += row * stride
    b_ptr += row * stride
    c_ptr += row * stride
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        if EVEN_N:
            a = tl.load(a_ptr + cols).to(tl.float32)
            b = tl.load(b_ptr + cols)
        else:
            mask = cols < n_cols
            a = tl.load(a_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        # gelu(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))), tanh(z) = 2 sigmoid(2z) - 1
        inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        gelu = 0.5 * a * (2.0 * tl.sigmoid(2.0 * inner))
        c = gelu.to(b.dtype) * b
        if EVEN_N:
            tl.store(c_ptr + cols, c)
        else:
            tl.store(c_ptr + cols, c, mask=cols < n_cols)


def geglu_forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    shape = a.shape
    a2, b2 = a.reshape(-1, shape[-1]), b.reshape(-1, shape[-1])
    c = torch.empty_like(a2)
    n_rows, n_cols = a2.shape
    geglu_tanh_kernel[(n_rows,)](a2, b2, c, a2.stride(0), n_cols, BLOCK_SIZE=256, num_warps=2)
    return c.view(shape)


def test_geglu():
    a = torch.randn(2, 5, 333, device=DEVICE, dtype=DTYPE)
    b = torch.randn(2, 5, 333, device=DEVICE, dtype=DTYPE)
    c = geglu_forward(a, b)
    ref = torch.nn.functional.gelu(a.float(), approximate="tanh") * b.float()
    torch.testing.assert_close(c.float(), ref, atol=3e-2, rtol=3e-2)
    return c


def bench_geglu():
    # batch 8 x 2048 tokens, Gemma-style intermediate 16384 (a multiple of the block: EVEN_N)
    shape = (8, 2048, 16384) if DEVICE == "cuda" else (1, 3, 512)
    a = torch.randn(*shape, device=DEVICE, dtype=DTYPE)
    b = torch.randn(*shape, device=DEVICE, dtype=DTYPE)
    return geglu_forward(a, b)
