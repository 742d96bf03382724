"""A stand-in for a launch the worker captured (a compiled kernel's metadata, a plain
PyTorch body): what collect_profile reads, on the CPU."""
from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import torch

from kernelband.profile.schema import DeviceFacts
from kernelband.worker.capture import CapturedLaunch

AXPY = """
import triton
import triton.language as tl

@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK_SIZE: tl.constexpr):
    o = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + o, alpha * tl.load(x_ptr + o) + tl.load(y_ptr + o))
"""
FACTS = DeviceFacts(name="Test GPU", compute_capability="9.0", sm_count=132, copy_gbs=4000.0,
                    matmul_tflops={"bf16": 800.0, "tf32": 400.0, "fp32": 50.0}, triton="3.9.0")
Md = namedtuple("KernelMetadata", "name shared num_warps num_stages num_ctas warp_size")


class FakeKernel:
    arg_names = ["x_ptr", "y_ptr", "out_ptr", "alpha", "n", "BLOCK_SIZE"]

    def run(self, x, y, out, alpha, n, *, grid, warmup, BLOCK_SIZE):
        out.copy_(alpha * x + y)


def fake_launch(n=1 << 20, name="axpy_kernel", compiled=True):
    x, y = torch.randn(n), torch.randn(n)
    out = 0.5 * x + y
    ck = SimpleNamespace(metadata=Md(name, 0, 4, 3, 1, 32), n_regs=16, n_spills=0, hash="abc") if compiled else None
    grid = lambda meta: ((n + meta["BLOCK_SIZE"] - 1) // meta["BLOCK_SIZE"],)  # noqa: E731
    launch = CapturedLaunch(FakeKernel(), (x, y, out, 0.5, n), {"grid": grid, "warmup": False, "BLOCK_SIZE": 1024}, name)
    launch.result = ck
    return launch
