"""No false rejections: every correct variant we know of passes the screen.

The correct variants: every rewrite the rules generator can make of every kernel module
(examples/, benchmarks/suite/, benchmarks/realworld/: its code rewrites, unfiltered, and
its enumerated launch configurations), the hand-written rewrites of
tests/redteam/correct_rewrites.py, the correct half of the evaluation corpus
(tests/redteam/correct_eval/) and the LLM-style rewrites of tests/redteam/llm_rewrites.py.
The LLM-style ones without autotune are also run against their base (the Triton
interpreter, a throwaway process): they are really correct.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `redteam`

from redteam.corpus import CORRECT, KERNELS, load_cases  # noqa: E402
from redteam.correct_rewrites import REWRITES as HAND_REWRITES  # noqa: E402
from redteam.llm_rewrites import REWRITES as LLM_REWRITES  # noqa: E402

from common import kernel_modules  # noqa: E402
from helpers.paths import REPO  # noqa: E402
from kernelband.detect import detect  # noqa: E402
from kernelband.generators.rules import RulesGenerator  # noqa: E402
from kernelband.model import Variant  # noqa: E402
from kernelband.screen import screen_variant  # noqa: E402


def _harnesses(source: str) -> list[str]:
    return [f.name for f in detect(source).functions if f.name.startswith(("harness_", "test_", "bench_"))]


def _screened(original: str, variant: str, kernel: str, harnesses: list[str]) -> str | None:
    """The first reason any of the module's harnesses gives (each is checked unchanged)."""
    for h in harnesses or [None]:  # type: ignore[list-item]
        reason = screen_variant(original, variant, kernel, h)
        if reason:
            return reason
    return None


MODULES = kernel_modules()


def _module_param(path: Path, kernel: str) -> object:
    """examples/ in the default tier; the benchmark modules (a whole-corpus sweep, about a
    minute of CPU) in the slow tier."""
    marks = [] if path.parent.name == "examples" else [pytest.mark.slow]
    return pytest.param(path, kernel, id=path.relative_to(REPO).as_posix(), marks=marks)


@pytest.mark.parametrize("path, kernel", [_module_param(p, k) for p, k in MODULES])
def test_every_rules_rewrite_of_every_kernel_module_passes(path: Path, kernel: str):
    """The generator's whole rewrite space (not the subset its own screen call lets out),
    and its enumerated launch configurations."""
    source = path.read_text(encoding="utf-8")
    harnesses = _harnesses(source)
    assert _screened(source, source, kernel, harnesses) is None
    gen = RulesGenerator(seed=0, enumerate_limit=6)
    variants = [(f"{family}/{key}", text) for family, key, text in gen.every_rewrite(Variant(source), kernel)]
    assert variants
    variants += [(v.description, v.source) for v in gen.enumerate_space(Variant(source), kernel)]
    rejected = [(name, reason) for name, src in variants
                if (reason := _screened(source, src, kernel, harnesses)) is not None]
    assert rejected == []


def _hand_variants() -> list[tuple[str, str, str, str, list[str]]]:
    """(name, original, variant, kernel, harnesses) of the hand-written correct variants."""
    out = [(r.name, r.original(), r.build(), r.kernel, [r.harness]) for r in (*HAND_REWRITES, *LLM_REWRITES)]
    for case in load_cases(CORRECT):
        spec = KERNELS[case.kernel]
        out.append((f"correct_eval/{case.id}", spec.source, case.source, spec.kernel,
                    [spec.harness, *spec.check_harnesses]))
    return out


HAND = _hand_variants()


def test_at_least_50_correct_variants_and_none_rejected():
    assert len(LLM_REWRITES) >= 15
    assert len(HAND) >= 50
    rejected = {name: reason for name, original, variant, kernel, hs in HAND
                if (reason := _screened(original, variant, kernel, hs)) is not None}
    assert rejected == {}


RUN_CHILD = textwrap.dedent(
    """
    import importlib.util, json, sys, tempfile
    import torch

    def load(text, name, folder):
        path = f"{folder}/{name}.py"
        open(path, "w", encoding="utf-8").write(text)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def flat(x):
        if isinstance(x, torch.Tensor):
            return [x]
        if isinstance(x, (tuple, list)):
            return [t for v in x for t in flat(v)]
        return []

    out = {}
    folder = tempfile.mkdtemp()
    for i, item in enumerate(json.load(sys.stdin)):
        try:
            results = []
            for tag in ("base", "rewrite"):
                mod = load(item[tag], f"{tag}_{i}", folder)
                torch.manual_seed(0)
                results.append(flat(getattr(mod, item["harness"])()))
            same = len(results[0]) == len(results[1]) and all(
                a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a.float(), b.float(), rtol=2e-3, atol=2e-3)
                for a, b in zip(*results))
            out[item["name"]] = "same" if same else "differs"
        except Exception as e:
            out[item["name"]] = f"{type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_llm_rewrites_compute_what_their_base_computes():
    """Each LLM-style rewrite without autotune or libdevice (the interpreter has no
    benchmark clock and no extern device library) gives its base's outputs on the base's own harness (an in-place harness returns
    nothing but checks itself: it must not raise)."""
    items = [{"name": r.name, "base": r.original(), "rewrite": r.build(),
              "harness": next((h for h in _harnesses(r.original()) if h.startswith("test_")), r.harness)}
             for r in LLM_REWRITES if "autotune" not in r.name and "libdevice" not in r.name]
    proc = subprocess.run([sys.executable, "-c", RUN_CHILD], input=json.dumps(items), capture_output=True, text=True,
                          timeout=900, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) >= 12 and all(v == "same" for v in results.values()), results
