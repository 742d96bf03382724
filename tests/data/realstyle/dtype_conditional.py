"""Block chosen by the dtype in a conditional expression."""
import torch
import triton
import triton.language as tl


@triton.jit
def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(y_ptr.dtype.element_ty), mask=m)


def cast_half(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=torch.float16)
    n = x.numel()
    BLOCK = 1024 if x.dtype == torch.float32 else 2048
    cast_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, BLOCK=BLOCK)
    return y


def harness_cast():
    torch.manual_seed(0)
    return cast_half(torch.randn(2600))
