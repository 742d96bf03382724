"""z = x + y on fp16 in blocks of 128 elements: a million tiny programs, each
loading 256 bytes per operand. Larger blocks or a persistent grid (fewer, longer
programs) both pay."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def add_small_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, x + y, mask=mask)


def add_small(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    add_small_kernel[grid](x, y, z, n, BLOCK_SIZE=128)
    return z


def make_inputs():
    # 128M fp16 per operand: 805 MB moved; 1M programs of 128 elements.
    n = 128 * 1024 * 1024 if DEVICE == "cuda" else 3000
    x = torch.randn(n, device=DEVICE, dtype=torch.float16)
    y = torch.randn(n, device=DEVICE, dtype=torch.float16)
    return x, y


def harness_add_small():
    x, y = make_inputs()
    return add_small(x, y)


def reference_add_small():
    x, y = make_inputs()
    return x + y
