"""@triton.autotune with configs from a list comprehension (not followed: a hard case)."""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in [256, 512] for w in [2, 4]],
    key=["n"],
)
@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)


def relu(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    relu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    return y


def harness_relu():
    torch.manual_seed(0)
    return relu(torch.randn(1500))
