"""axpy with a debug switch read from the environment in the wrapper (an original that
legitimately uses os.environ)."""
import os

import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    if os.environ.get("KB_DEBUG"):
        print(f"axpy: {n} elements")
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=128)
    return out


def harness_axpy():
    # Large on a GPU so the launch is not dominated by overhead; small under the
    # CPU interpreter so a search finishes in seconds.
    n = (1 << 24) + 3 if DEVICE == "cuda" else 50_003
    x = torch.randn(n, device=DEVICE)
    y = torch.randn(n, device=DEVICE)
    return axpy(0.5, x, y)
