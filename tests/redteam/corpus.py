"""The evaluation corpus: kernels, WRONG variants that must be rejected, and CORRECT
variants that must pass (DESIGN section 6, issue 10 "Done means").

A variant is written as edits of its kernel module (``edit(old, new)``: each ``old``
must occur exactly once, so a variant cannot silently stop applying when the kernel
file changes); ``Case.source`` is the full module text the evaluator receives.

Used by tests/test_redteam_wrong.py (CPU interpreter) and benchmarks/redteam_gpu.py;
both import it as ``redteam.corpus`` with tests/ on sys.path.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
KERNELS_DIR = HERE / "kernels"

WRONG = "wrong"
CORRECT = "correct"


@dataclass(frozen=True)
class KernelSpec:
    """One kernel module and how to judge it: time on bench_*, check test_* too."""

    module: str  # file stem in kernels/
    kernel: str  # the @triton.jit function being optimised
    wrapper: str
    harness: str  # timing harness (bench_*)
    check_harnesses: tuple[str, ...]  # correctness-only harnesses (test_*)

    @property
    def path(self) -> Path:
        return KERNELS_DIR / f"{self.module}.py"

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


KERNELS: dict[str, KernelSpec] = {
    s.module: s
    for s in (
        KernelSpec("axpy", "axpy_kernel", "axpy", "bench_axpy", ("test_axpy",)),
        KernelSpec("softmax", "softmax_kernel", "softmax", "bench_softmax", ("test_softmax",)),
        KernelSpec("matmul", "matmul_kernel", "matmul", "bench_matmul", ("test_matmul",)),
        KernelSpec("rope_inplace", "rope_kernel", "apply_rotary_", "bench_rope", ("test_rope",)),
        KernelSpec("rmsnorm", "rmsnorm_kernel", "rmsnorm", "bench_rmsnorm", ("test_rmsnorm",)),
    )
}


Edit = tuple[str, str]


def edit(old: str, new: str) -> Edit:
    return (old, new)


@dataclass(frozen=True)
class Spec:
    """A variant as written in wrong/*.py or correct_eval/*.py (kernel module = file stem)."""

    name: str
    category: str
    why: str  # WRONG: why it is wrong and which check must catch it; CORRECT: what changed
    edits: tuple[Edit, ...]
    gpu_only: bool = False  # only a GPU can show it (out-of-bounds access, races, streams)


def wrong(name: str, category: str, why: str, *edits: Edit, gpu_only: bool = False) -> Spec:
    return Spec(name, category, why, tuple(edits), gpu_only)


def correct(name: str, category: str, why: str, *edits: Edit) -> Spec:
    return Spec(name, category, why, tuple(edits))


@dataclass(frozen=True)
class Case:
    kernel: str  # KernelSpec.module
    name: str
    expected: str  # WRONG (must not be ok) or CORRECT (must be ok)
    category: str
    why: str
    gpu_only: bool
    source: str = field(repr=False)

    @property
    def id(self) -> str:
        return f"{self.kernel}/{self.name}"


def apply_edits(source: str, edits: tuple[Edit, ...], label: str) -> str:
    for old, new in edits:
        count = source.count(old)
        if count != 1:
            raise ValueError(f"{label}: edit target occurs {count} times (must be once): {old[:60]!r}")
        source = source.replace(old, new)
    return source


def _specs(package: str, module: str) -> list[Spec]:
    try:
        mod = importlib.import_module(f"redteam.{package}.{module}")
    except ModuleNotFoundError as e:
        if e.name and e.name.endswith(f"{package}.{module}"):
            return []
        raise
    return list(mod.VARIANTS)


def load_cases(expected: Optional[str] = None) -> list[Case]:
    """Every case of the corpus, WRONG then CORRECT, in file order."""
    cases: list[Case] = []
    for kind, package in ((WRONG, "wrong"), (CORRECT, "correct_eval")):
        if expected not in (None, kind):
            continue
        for spec in KERNELS.values():
            for v in _specs(package, spec.module):
                label = f"{package}/{spec.module}/{v.name}"
                cases.append(Case(spec.module, v.name, kind, v.category, v.why, v.gpu_only,
                                  apply_edits(spec.source, v.edits, label)))
    ids = [c.id + c.expected for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"duplicate variant names: {sorted(dupes)}")
    return cases


# Cases the evaluation gets wrong (wrong variants it lets through, correct ones it
# refuses). The tests mark these xfail(strict=False). Empty since the judge/variant
# split landed; regenerate with `python tests/test_redteam_wrong.py` (it prints gaps).
KNOWN_GAPS: frozenset[str] = frozenset()


# --------------------------------------------------------------------------- running


def make_task(spec: KernelSpec, device: str = "cpu", timeout_s: float = 60.0,
              seeds: tuple[int, ...] = (0, 1, 2)) -> "Task":
    """The Task a user would run: time on bench_*, check correctness on test_* too."""
    from kernelband.model import Task

    return Task(module_path=str(spec.path), source=spec.source, kernel=spec.kernel, harness=spec.harness,
                check_harnesses=list(spec.check_harnesses), device=device, seeds=list(seeds),
                timeout_s=timeout_s)


def as_expected(case: Case, ok: bool) -> bool:
    """A WRONG case must not evaluate as ok; a CORRECT one must."""
    return ok if case.expected == CORRECT else not ok
