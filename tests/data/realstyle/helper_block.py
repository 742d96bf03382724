"""Block size from a helper function returning a constant; grid from a variable."""
import torch
import triton
import triton.language as tl


def get_block_size():
    return 512


@triton.jit
def silu_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(y_ptr + offs, x * tl.sigmoid(x), mask=m)


def silu(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    block = get_block_size()
    silu_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK_SIZE=block)
    return y


def harness_silu():
    torch.manual_seed(0)
    return silu(torch.randn(2000))
