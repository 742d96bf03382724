"""LayerNorm forward (Triton tutorial `_layer_norm_fwd_fused`, first version): one
program per row, three passes over the row in blocks of 512. Its bench harness is
production-sized on purpose: a 16 GiB fp32 input and a 16 GiB output, so the harness
alone needs 32 GiB of GPU memory (and fits an 80 GB H100 with one more copy of the
outputs)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # rows * stride exceeds 2**31 at the bench size
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    x_arg = x.reshape(-1, x.shape[-1])
    M, N = x_arg.shape
    y = torch.empty_like(x)
    mean = torch.empty((M,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    layer_norm_fwd_kernel[(M,)](x_arg, y, weight, bias, mean, rstd, x_arg.stride(0), N, eps,
                                BLOCK_SIZE=512, num_warps=4)
    return y, mean, rstd


def make_inputs(M: int, N: int):
    x = torch.randn(M, N, device=DEVICE, dtype=torch.float32)
    w = torch.rand(N, device=DEVICE, dtype=torch.float32) + 0.5
    b = torch.randn(N, device=DEVICE, dtype=torch.float32)
    return x, w, b


def test_layer_norm():
    x, w, b = make_inputs(9, 700)
    y, mean, rstd = layer_norm(x, w, b)
    ref = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)
    return y, mean, rstd


def bench_layer_norm():
    # 2**19 rows x 8192 fp32 = 16 GiB in + 16 GiB out: the harness alone needs 32 GiB
    M, N = (1 << 19, 8192) if DEVICE == "cuda" else (5, 1100)
    return layer_norm(*make_inputs(M, N))
