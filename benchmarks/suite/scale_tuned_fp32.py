"""y = a * x + b on fp32, already tuned: 4096-element blocks, eight warps. Launch
tuning has little headroom here (the kernel streams at close to copy bandwidth); only
memory-side rewrites (cache modifiers, a persistent grid) may still move it."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, b, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a * x + b, mask=mask)


def scale(x: torch.Tensor, a: float, b: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    scale_kernel[grid](x, y, a, b, n, BLOCK_SIZE=4096, num_warps=8)
    return y


def make_inputs():
    # 64M fp32: 256 MB in, 256 MB out.
    n = 64 * 1024 * 1024 if DEVICE == "cuda" else 5000
    return torch.randn(n, device=DEVICE, dtype=torch.float32)


def harness_scale():
    x = make_inputs()
    return scale(x, 1.5, -0.25)


def reference_scale():
    x = make_inputs()
    return 1.5 * x - 0.25
