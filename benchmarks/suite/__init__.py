"""The benchmark kernel suite: Triton kernels written the way a first version usually
is (correct, plausible, untuned), each with a harness and a pure-torch reference.

Every module follows one layout (like ``examples/*.py``):

- ``DEVICE = "cuda" if torch.cuda.is_available() else "cpu"``;
- one ``@triton.jit`` kernel, launched by one wrapper with literal constexpr block
  sizes at the launch site and default (or mediocre) ``num_warps``/``num_stages``;
- ``make_inputs()``: builds the inputs with torch's global generator. Sizes are large
  on a GPU (hundreds of MB of traffic or tens of GFLOP) and tiny on the CPU, where the
  Triton interpreter runs them in well under a second; the CPU sizes are not
  multiples of the blocks, so the masks are exercised;
- ``harness_<name>()``: zero-argument KernelBand harness, ``make_inputs()`` and a
  launch, returning the outputs;
- ``reference_<name>()``: the same result in plain torch from the same inputs.
  Seed torch identically before the harness and the reference to compare them
  (``torch.manual_seed(s); out = harness(); torch.manual_seed(s); ref = reference()``).

This file is plain data plus a comparison helper that imports torch lazily, so that
listing the suite never imports torch or triton.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUITE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class SuiteEntry:
    module: str  # file name without .py, in this folder
    kernel: str  # the @triton.jit function
    harness: str  # zero-argument harness function
    category: str
    dtype: str  # the data type the kernel computes on
    reference: str  # pure-torch reference function

    @property
    def path(self) -> Path:
        return SUITE_DIR / f"{self.module}.py"

    def to_dict(self) -> dict[str, str]:
        return {
            "module": self.module,
            "kernel": self.kernel,
            "harness": self.harness,
            "category": self.category,
            "dtype": self.dtype,
            "reference": self.reference,
        }


def _e(module: str, kernel: str, name: str, category: str, dtype: str) -> SuiteEntry:
    return SuiteEntry(module, kernel, f"harness_{name}", category, dtype, f"reference_{name}")


CATEGORIES = ("elementwise", "reduction", "matmul", "attention", "quantization", "rotary", "gather-scatter")

SUITE: tuple[SuiteEntry, ...] = (
    # elementwise and activations
    _e("gelu_fp32", "gelu_kernel", "gelu", "elementwise", "fp32"),
    _e("silu_mul_bf16", "silu_mul_kernel", "silu_mul", "elementwise", "bf16"),
    _e("add_relu_fp16", "add_relu_kernel", "add_relu", "elementwise", "fp16"),
    # reductions and norms
    _e("softmax_fp16", "softmax_kernel", "softmax", "reduction", "fp16"),
    _e("layernorm_fp32", "layernorm_kernel", "layernorm", "reduction", "fp32"),
    _e("rmsnorm_bf16", "rmsnorm_kernel", "rmsnorm", "reduction", "bf16"),
    _e("cross_entropy_fp32", "cross_entropy_kernel", "cross_entropy", "reduction", "fp32"),
    _e("row_sum_fp32", "row_sum_kernel", "row_sum", "reduction", "fp32"),
    # matmul, batched matmul, GEMV
    _e("matmul_fp16", "matmul_kernel", "matmul", "matmul", "fp16"),
    _e("bmm_bf16", "bmm_kernel", "bmm", "matmul", "bf16"),
    _e("gemv_fp16", "gemv_kernel", "gemv", "matmul", "fp16"),
    # attention
    _e("attention_fp16", "attention_kernel", "attention", "attention", "fp16"),
    # quantize / dequantize
    _e("quantize_int8", "quantize_kernel", "quantize", "quantization", "fp16->int8"),
    _e("dequantize_int8", "dequantize_kernel", "dequantize", "quantization", "int8->bf16"),
    # rotary embedding
    _e("rotary_fp16", "rotary_kernel", "rotary", "rotary", "fp16"),
    # gather / scatter
    _e("embedding_bf16", "embedding_kernel", "embedding", "gather-scatter", "bf16"),
    _e("scatter_add_fp32", "scatter_add_kernel", "scatter_add", "gather-scatter", "fp32"),
    # kernels where more than one strategy pays off
    _e("scale_tuned_fp32", "scale_kernel", "scale", "elementwise", "fp32"),  # already tuned
    _e("add_small_blocks_fp16", "add_small_kernel", "add_small", "elementwise", "fp16"),  # persistent candidate
    _e("matmul_rowmajor_fp16", "matmul_rm_kernel", "matmul_rm", "matmul", "fp16"),  # pipelining + swizzle
    _e("transpose_fp32", "transpose_kernel", "transpose", "gather-scatter", "fp32"),  # strided stores
    _e("col_sum_fp32", "col_sum_kernel", "col_sum", "reduction", "fp32"),  # strided column reduction
    _e("softmax_short_fp32", "softmax_short_kernel", "softmax_short", "reduction", "fp32"),  # rows of 128
    _e("rmsnorm_short_bf16", "rmsnorm_short_kernel", "rmsnorm_short", "reduction", "bf16"),  # rows of 256
    _e("attention_causal_fp16", "attention_causal_kernel", "attention_causal", "attention", "fp16"),  # K/V loop
)

BY_MODULE: dict[str, SuiteEntry] = {e.module: e for e in SUITE}


def entry(name: str) -> SuiteEntry:
    """Look an entry up by module name (``gelu_fp32``) or kernel name (``gelu_kernel``)."""
    if name in BY_MODULE:
        return BY_MODULE[name]
    for e in SUITE:
        if e.kernel == name:
            return e
    raise KeyError(f"no suite kernel {name!r}; known: {', '.join(BY_MODULE)}")


# --------------------------------------------------------------------------- checking

# (rtol, atol) by output dtype, for harness output vs torch reference.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
INT_ATOL = 1  # integer outputs (int8 quantization may round one step apart at .5)


def _leaves(obj: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, (list, tuple)):
        return [leaf for i, x in enumerate(obj) for leaf in _leaves(x, f"{path}[{i}]")]
    if isinstance(obj, dict):
        return [leaf for k in sorted(obj) for leaf in _leaves(obj[k], f"{path}[{k!r}]")]
    return [(path or "<out>", obj)]


def compare(out: Any, ref: Any) -> list[str]:
    """Problems found comparing a harness's output with its reference (empty = match).

    Structure, shapes and dtypes must agree; floats within TOLERANCES (after a
    cast to fp32, relative to the reference), integers within INT_ATOL."""
    import torch

    problems: list[str] = []
    lo, lr = _leaves(out), _leaves(ref)
    if [p for p, _ in lo] != [p for p, _ in lr]:
        return [f"structure differs: {[p for p, _ in lo]} vs {[p for p, _ in lr]}"]
    for (path, a), (_, b) in zip(lo, lr, strict=True):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if a != b:
                problems.append(f"{path}: {a!r} != {b!r}")
            continue
        if a.shape != b.shape:
            problems.append(f"{path}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
            continue
        if a.dtype != b.dtype:
            problems.append(f"{path}: dtype {a.dtype} vs {b.dtype}")
            continue
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.dtype.is_floating_point:
            rtol, atol = TOLERANCES.get(str(a.dtype).replace("torch.", ""), (1e-2, 1e-2))
            af, bf = a.float(), b.float()
            if not torch.equal(torch.isnan(af), torch.isnan(bf)):
                problems.append(f"{path}: NaN positions differ")
                continue
            bad = ~torch.isclose(af, bf, rtol=rtol, atol=atol, equal_nan=True)
            if bad.any():
                err = (af - bf).abs()[bad]
                problems.append(
                    f"{path}: {int(bad.sum())}/{a.numel()} elements outside rtol={rtol} atol={atol} "
                    f"(max abs err {float(err.max()):.3g})"
                )
        else:
            diff = (a.long() - b.long()).abs()
            if diff.numel() and int(diff.max()) > INT_ATOL:
                problems.append(f"{path}: integer outputs differ by up to {int(diff.max())}")
    return problems
