"""Launch options from a small helper returning a dict, passed with ** (Liger style)."""
import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=m)


def _launch_config():
    return {"BLOCK": 1024, "num_warps": 4}


def gelu(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    cfg = _launch_config()
    gelu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, **cfg)
    return y


def harness_gelu():
    torch.manual_seed(0)
    return gelu(torch.randn(3000))
