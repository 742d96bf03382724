"""The wrong-variant half of the red-team suite: every WRONG variant in
tests/redteam/wrong/ must not evaluate as ok, every CORRECT one in
tests/redteam/correct_eval/ must (no false rejections). Real worker, Triton interpreter.

Cases the worker of today gets wrong are listed in redteam.corpus.KNOWN_GAPS and
marked xfail(strict=False). `python tests/test_redteam_wrong.py [--only kernel/...]`
prints the whole table (category, variant, expected, got, message) and the rates.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Iterator, Optional, Union

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `redteam` for script mode too

from redteam.corpus import CORRECT, KERNELS, KNOWN_GAPS, WRONG, Case, as_expected, load_cases, make_task  # noqa: E402

from kernelband.evaluate import Evaluator, SetupError  # noqa: E402
from kernelband.model import Evaluation, Variant  # noqa: E402

CASES = load_cases()
Prepared = Union[Evaluator, SetupError]


class Evaluators:
    """One prepared Evaluator per kernel module, made on first use (preparing costs seconds)."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.prepared: dict[str, Prepared] = {}

    def get(self, kernel: str) -> Prepared:
        if kernel not in self.prepared:
            ev = Evaluator(make_task(KERNELS[kernel], self.device))
            try:
                ev.prepare()
                self.prepared[kernel] = ev
            except SetupError as e:
                ev.close()
                self.prepared[kernel] = e
        return self.prepared[kernel]

    def evaluate(self, case: Case) -> Evaluation:
        """The case's evaluation; SetupError (the original cannot be judged) propagates."""
        ev = self.get(case.kernel)
        if isinstance(ev, SetupError):
            raise ev
        return ev.evaluate(Variant(source=case.source, description=case.why))

    def close(self) -> None:
        for ev in self.prepared.values():
            if isinstance(ev, Evaluator):
                ev.close()


@pytest.fixture(scope="module")
def evaluators() -> Iterator[Evaluators]:
    evs = Evaluators()
    yield evs
    evs.close()


def _param(case: Case):  # type: ignore[no-untyped-def]
    marks = [pytest.mark.slow]
    if case.gpu_only:
        marks.append(pytest.mark.skip(reason="gpu_only: the interpreter cannot show it (benchmarks/redteam_gpu.py)"))
    elif case.id in KNOWN_GAPS:
        marks.append(pytest.mark.xfail(strict=False, reason="needs the hardened worker"))
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.expected == WRONG])
def test_wrong_variant_is_rejected(evaluators: Evaluators, case: Case) -> None:
    evaluation = evaluators.evaluate(case)
    assert not evaluation.ok, f"{case.category}: {case.why} -- judged ok: {evaluation.message}"


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.expected == CORRECT])
def test_correct_variant_passes(evaluators: Evaluators, case: Case) -> None:
    evaluation = evaluators.evaluate(case)
    assert evaluation.ok, f"{case.why} -- {evaluation.status.value}: {evaluation.message}"


def test_corpus_is_complete() -> None:
    """The suite's floor, so that it cannot shrink unnoticed: >= 40 wrong variants over >= 4
    kernels, >= 20 correct ones."""
    wrong = [c for c in CASES if c.expected == WRONG]
    assert len(wrong) >= 40 and len({c.kernel for c in wrong}) >= 4
    assert len([c for c in CASES if c.expected == CORRECT]) >= 20
    assert KNOWN_GAPS <= {c.id for c in CASES}, "KNOWN_GAPS names a case that does not exist"


# --------------------------------------------------------------------------- script mode


def _run_one(evs: Evaluators, case: Case) -> tuple[str, str, Optional[bool], float]:
    """(status, message, as expected?, wall seconds); None when the case was not run."""
    t0 = time.perf_counter()
    try:
        ev = evs.evaluate(case)
        status, message, ok = ev.status.value, ev.message, ev.ok
    except SetupError as e:  # the original cannot be judged: nothing about the variant is shown
        return "setup_error", str(e), False, time.perf_counter() - t0
    return status, message, as_expected(case, ok), time.perf_counter() - t0


def main(argv: list[str]) -> int:
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    evs = Evaluators()
    gaps: list[str] = []
    rows = []
    try:
        for case in CASES:
            if not case.id.startswith(only):
                continue
            if case.gpu_only:
                rows.append((case, "skipped", "gpu_only", None, 0.0))
                continue
            status, message, good, wall = _run_one(evs, case)
            rows.append((case, status, message, good, wall))
            if not good:
                gaps.append(case.id)
            print(f"{case.category:18} {case.id:42} {case.expected:8} {status:14} "
                  f"{'as expected' if good else 'GAP':12} {wall:5.1f}s {message[:100]}", flush=True)
    finally:
        evs.close()
    for kind in (WRONG, CORRECT):
        run = [r for r in rows if r[0].expected == kind and r[3] is not None]
        good = sum(1 for r in run if r[3])
        print(f"{kind}: {good}/{len(run)} as expected ({kind == WRONG and 'caught' or 'passed'})")
    print("gaps (KNOWN_GAPS candidates):")
    for g in gaps:
        print(f'    "{g}",')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
