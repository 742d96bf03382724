"""The round-3 corpus: WRONG variants and TIMING cheats (edits of a kernel module, as in
``redteam.corpus``) and ESCAPES (whole modules in ``escapes/``), each tagged with the
issue's class, where it shows (CPU or GPU only) and the defence that must close it.

Imported as ``redteam.round3.corpus`` with tests/ on sys.path (pytest, and the baseline
script ``python tests/redteam/round3/baseline.py``).
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from redteam.corpus import KERNELS as ROUND2_KERNELS
from redteam.corpus import Edit, KernelSpec, apply_edits

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
ESCAPES_DIR = HERE / "escapes"

WRONG, TIMING, ESCAPE = "wrong", "timing", "escape"

# What closes a case, and who builds it.
DEFENCES: dict[str, str] = {
    "screen": "the allow-list screen (kernelband/screen.py): trust branch",
    "judge": "judge-side observation: snapshots, fingerprints and launch coverage the judge takes itself, "
             "precision against the original's float64 rerun at every seed (lead)",
    "inputs": "inputs beyond the harness: derived calls, varied poison, seeds and call counts (lead)",
    "timing": "honest timing: replay checks for every kernel, no hooks in replays, helpers timed, "
              "separate processes for the paired re-measurement, roofline bound (lead)",
    "sandbox": "the OS sandbox: another uid, mount and pid namespaces (sandbox helper)",
    "gpu": "memcheck/racecheck and GPU sizes on every verdict path (lead, GPU run)",
}
OWNER = {"screen": "trust", "judge": "lead", "inputs": "lead", "timing": "lead", "sandbox": "sandbox", "gpu": "lead"}

ROUND3_KERNELS: dict[str, KernelSpec] = {
    s.module: s
    for s in (
        KernelSpec("rowsum_any", "rowsum_kernel", "rowsum", "bench_rowsum", ("test_rowsum",)),
        KernelSpec("masked_softmax", "masked_softmax_kernel", "masked_softmax", "bench_masked_softmax",
                   ("test_masked_softmax",)),
        KernelSpec("embedding", "embedding_kernel", "embedding", "bench_embedding", ("test_embedding",)),
        KernelSpec("layernorm", "layernorm_kernel", "layernorm", "bench_layernorm", ("test_layernorm",)),
        KernelSpec("bias_relu", "bias_relu_kernel", "bias_relu", "bench_bias_relu", ("test_bias_relu",)),
        KernelSpec("matmul_fp32", "matmul_fp32_kernel", "matmul_fp32", "bench_matmul_fp32", ("test_matmul_fp32",)),
    )
}
KERNELS: dict[str, KernelSpec] = {**ROUND2_KERNELS, **ROUND3_KERNELS}


@dataclass(frozen=True)
class Spec:
    """A WRONG or TIMING case as written in wrong.py / timing.py."""

    kernel: str  # KernelSpec.module
    name: str
    issue_class: int  # 5..10 of issue 26
    defence: str  # DEFENCES key: what closes it through the normal path (screen first)
    why: str
    edits: tuple[Edit, ...]
    gpu_only: bool = False
    # the case reaches the variant process's internals through a screen escape: with the
    # screen skipped, this defence must still close it
    unscreened: Optional[str] = None
    # Python run outside the judge (the module's names in scope) that sets ``result``;
    # the variant's differs from the original's: the case is really wrong
    witness: Optional[str] = None
    # the witness shows lost precision: compare against float32 rounding, not the judge's tolerance
    witness_strict: bool = False
    # TIMING: "evaluate" (refused by its evaluation), "paired" (no speedup in the re-measurement), or
    # "honest" (correct in every call, so not refused: every timed replay starts from the state the call
    # made and does the call's work, asserted replay by replay)
    measure: str = "evaluate"


def case(kernel: str, name: str, issue_class: int, defence: str, why: str, *edits: Edit, **kw) -> Spec:  # type: ignore[no-untyped-def]
    return Spec(kernel, name, issue_class, defence, why, tuple(edits), **kw)


@dataclass(frozen=True)
class Case:
    kind: str  # WRONG | TIMING
    spec: Spec
    source: str = field(repr=False)

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.spec.kernel}/{self.spec.name}"

    @property
    def kernel(self) -> KernelSpec:
        return KERNELS[self.spec.kernel]

    @property
    def cpu_visible(self) -> bool:
        return not self.spec.gpu_only


def _load(kind: str) -> list[Case]:
    mod = importlib.import_module(f"redteam.round3.{kind}")
    out = []
    for spec in mod.CASES:
        label = f"round3/{kind}/{spec.kernel}/{spec.name}"
        assert spec.defence in DEFENCES and (spec.unscreened is None or spec.unscreened in DEFENCES), label
        out.append(Case(kind, spec, apply_edits(KERNELS[spec.kernel].source, spec.edits, label)))
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)), "duplicate case names"
    return out


def wrong_cases() -> list[Case]:
    return _load(WRONG)


def timing_cases() -> list[Case]:
    return _load(TIMING)


# --------------------------------------------------------------------------- escapes
@dataclass(frozen=True)
class Escape:
    """A whole module in escapes/: if it ran, it would create the file ``{MARKER}``."""

    path: Path
    issue_class: int
    original_path: str  # relative to the repository
    defence: str  # the header's words
    expect: str  # what the screen's reason must contain

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def original(self) -> str:
        return (REPO / self.original_path).read_text(encoding="utf-8")

    @property
    def kernel(self) -> str:
        return "softmax_kernel" if "softmax" in self.original_path else "axpy_kernel"

    @property
    def harness(self) -> str:
        return "harness_softmax" if "softmax" in self.original_path else "harness_axpy"

    def payload(self, marker: Path | str) -> str:
        text = self.path.read_text(encoding="utf-8")
        assert "{MARKER}" in text, self.name
        return text.replace("{MARKER}", str(marker))


def _header(text: str, key: str, path: Path) -> str:
    m = re.search(rf"^# {key}: (.+)$", text, re.M)
    assert m, f"{path.name} has no '# {key}:' line"
    return m.group(1).strip()


def escapes() -> list[Escape]:
    out = []
    for path in sorted(ESCAPES_DIR.glob("r3e*.py")):
        text = path.read_text(encoding="utf-8")
        out.append(Escape(path, int(_header(text, "class", path)), _header(text, "original", path),
                          _header(text, "defence", path), _header(text, "expect", path)))
    return out
