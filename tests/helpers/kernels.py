"""Small real Triton modules used by several test files (tiny sizes: the interpreter)."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from kernelband.model import Task, Variant

if TYPE_CHECKING:
    from types import ModuleType

    from kernelband.evaluate import Evaluator

AXPY = '''
import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(alpha, x, y):
    out = torch.empty_like(x)
    n = out.numel()
    axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK_SIZE=128)
    return out


def harness_axpy():
    x = torch.randn(3001)
    y = torch.randn(3001)
    return axpy(0.5, x, y)
'''

AXPY_LAUNCH = "axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK_SIZE=128)"


def axpy_task(tmp_path: Path, source: str = AXPY, timeout_s: float = 60.0, **extra: object) -> Task:
    path = tmp_path / "axpy.py"
    path.write_text(source, encoding="utf-8")
    return Task(module_path=str(path), source=source, kernel="axpy_kernel", harness="harness_axpy",
                device="cpu", timeout_s=timeout_s, **extra)  # type: ignore[arg-type]


def prepared_evaluator(tmp: Path, name: str, source: str, kernel: str, harness: str,
                       seeds: tuple[int, ...] = (0, 1), timeout_s: float = 60.0) -> "Evaluator":
    """An Evaluator of ``source`` (written to ``tmp/name.py``) on the CPU, prepared without
    timing; its preparation must succeed."""
    from kernelband.evaluate import Evaluator

    path = tmp / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    ev = Evaluator(Task(module_path=str(path), source=source, kernel=kernel, harness=harness, device="cpu",
                        seeds=list(seeds), timeout_s=timeout_s))
    base = ev.prepare(time_it=False)
    assert base.ok, base.message
    return ev


def edited(old: str, new: str, base: str = AXPY) -> Variant:
    assert old in base, old
    return Variant(base.replace(old, new))


# autotuned over blocks of 1 or 2 rows; a block holding an infinity is stored as NaN (the way
# a per-block amax turns NaN): on the special-values call (row 0 all -inf, row 1 constant)
# row 1 is NaN with blocks of two rows and finite with blocks of one, so the original's own
# configs disagree there, and which one a process's autotuner picks is timing noise
BLOCKWISE = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.autotune(configs=[triton.Config({"BLOCK_M": 1}), triton.Config({"BLOCK_M": 2})], key=["n_rows", "n_cols"])
    @triton.jit
    def flag_kernel(x_ptr, out_ptr, n_rows, n_cols, sx0, sx1, so0, extra, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * sx0 + cols[None, :] * sx1, mask=mask, other=0.0)
        flag = tl.max(tl.max(tl.abs(x), axis=1), axis=0) == float("inf")
        tl.store(out_ptr + rows[:, None] * so0 + cols[None, :], tl.where(flag, float("nan"), x * 2.0 + extra), mask=mask)


    def flagged(x):
        x2 = x.reshape(-1, x.shape[-1])
        out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        flag_kernel[lambda m: (triton.cdiv(n_rows, m["BLOCK_M"]),)](
            x2, out, n_rows, n_cols, x2.stride(0), x2.stride(1), out.stride(0), 0.0, BLOCK_N=triton.next_power_of_2(n_cols))
        return out.view(x.shape)


    def harness_flagged():
        return flagged(torch.randn(8, 64, device=DEVICE))
''')
BLOCKWISE_TUNED = ('@triton.autotune(configs=[triton.Config({"BLOCK_M": 1}), triton.Config({"BLOCK_M": 2})], '
                   'key=["n_rows", "n_cols"])\n')
BLOCKWISE_GRID = 'flag_kernel[lambda m: (triton.cdiv(n_rows, m["BLOCK_M"]),)]('


# the harness's size is a multiple of the block: a kernel without its mask passes it
SCALE = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * factor, mask=mask)


    def scale(x, factor):
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 128),)](x, out, n, factor, BLOCK=128)
        return out


    def harness_scale():
        x = torch.randn(4096, device=DEVICE)
        return scale(x, 1.5)
''')


AUTOTUNED = SCALE.replace("@triton.jit\n", """@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128}),
                          triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
""").replace("scale_kernel[(triton.cdiv(n, 128),)](x, out, n, factor, BLOCK=128)",
             'scale_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, out, n, factor)')


# every call beyond the harness (another size than its 4096) sleeps: the derivation is
# still running when the first candidate reaches its checks beyond the harness
def sleeping_beyond(seconds: float) -> str:
    """SCALE, whose wrapper sleeps on every size but its harness's."""
    return SCALE.replace("import torch\n", "import time\nimport torch\n", 1).replace(
        "    out = torch.empty_like(x)\n",
        f"    out = torch.empty_like(x)\n    if x.numel() != 4096:\n        time.sleep({seconds})\n", 1)


SLOW_BEYOND = sleeping_beyond(0.3)
WRONG_BEYOND = SLOW_BEYOND.replace("x * factor, mask=mask)", "x * factor + (n != 4096), mask=mask)")
CORRECT_BEYOND = SLOW_BEYOND.replace("x * factor, mask=mask)", "factor * x, mask=mask)")


def judges_beyond_the_harness(ev: "Evaluator") -> None:
    """On ``ev`` prepared with SLOW_BEYOND: a candidate wrong only beyond the harness is
    refused there and a correct one passes (the same verdicts whatever compiles ahead)."""
    wrong = ev.evaluate(Variant(WRONG_BEYOND), time_it=False)
    assert wrong.status.value == "mismatch" and "beyond the harness" in wrong.message, wrong.message
    right = ev.evaluate(Variant(CORRECT_BEYOND), time_it=False)
    assert right.ok and "calls beyond the harness" in right.message, right.message


def load_module(folder: Path, source: str, name: str) -> "ModuleType":
    """``source`` written to ``folder/name.py`` and imported (not put in sys.modules)."""
    import importlib.util

    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
