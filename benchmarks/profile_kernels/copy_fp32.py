"""A clearly memory-bound kernel for the profiler's suite: a large fp32 copy with
wide blocks (no arithmetic; every byte is read once and written once)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK_SIZE=4096, num_warps=8)
    return out


def harness_copy():
    n = (1 << 28) if DEVICE == "cuda" else 40_000  # 1 GiB each way on a GPU
    x = torch.randn(n, device=DEVICE)
    return copy(x)
