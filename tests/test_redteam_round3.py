"""Red team, round 3 (issue 26): the targets the corpus in tests/redteam/round3/ must meet.

- every escape is rejected by the screen (for its primitive), leaves no side effect through
  the evaluation path, and none with the screen skipped either (the sandbox's layers);
- at least 95% of the CPU-visible WRONG variants are rejected, each one individually too;
- every TIMING cheat is refused (on the CPU: not judged correct; the paired one: no
  inflated speedup); of the class that keeps state for a later run, what is correct in
  every call and not refused is timed from the call's state, replay by replay;
- the corpus is really wrong: each CPU-visible WRONG variant's witness, run outside the
  judge, differs from the original's result.

Every case the screen, the judge, the sandbox and honest timing close is asserted one by
one. The cases closed by inputs beyond the harness are caught or not by the session's
random draw of derived calls: they are asserted together, as a floor under what was
measured (``CAUGHT_FLOOR``). The few no defence closes yet (``STILL_OPEN``, measured) are
marked xfail(strict=False) with the defence that would close them;
tests/redteam/round3/README.md says which defence closes each case. GPU-only cases are
skipped here (the GPU run is in README.md).
"""
from __future__ import annotations

import ast
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `redteam`

from redteam.round3.corpus import DEFENCES, OWNER, Case, Escape, escapes, timing_cases, wrong_cases  # noqa: E402
from redteam.round3.running import Evaluators, Outcome, evaluate_unscreened, run_case, run_witnesses  # noqa: E402

from kernelband.model import Status, Variant  # noqa: E402
from kernelband.screen import policy_violations, screen_variant  # noqa: E402

WRONG = wrong_cases()
TIMING = timing_cases()
ESCAPES = escapes()
CANARY = ("KERNELBAND_R3_CANARY_SECRET", "canary-not-a-real-secret")


# The cases the landed defences do not close yet (measured; tests/redteam/round3/README.md
# says why): every other case is asserted. Empty since the state kept for a later run
# (rope_inplace/helper_flags_skip_replays and its class) is refused or timed from the call's state.
STILL_OPEN: dict[str, str] = {}


def _still_open(case: Case, defence: str) -> list[pytest.MarkDecorator]:
    open_for = STILL_OPEN.get(case.id)
    if open_for is not None:
        return [pytest.mark.xfail(strict=False, reason=f"needs {DEFENCES[open_for]} ({OWNER[open_for]})")]
    if defence == "inputs":  # drawn per judge session: asserted together, below (a floor, not each one)
        return [pytest.mark.xfail(strict=False, reason="inputs beyond the harness are drawn per session")]
    return []


def _case_param(case: Case, screened: bool = True):  # type: ignore[no-untyped-def]
    defence = case.spec.defence if screened else case.spec.unscreened
    assert defence is not None
    # the module's fixtures run every case once, in the setup of the first test that uses
    # them: 26 evaluations, past pytest-timeout's 600 s on 2 cores loaded by the slow tier
    marks = [pytest.mark.slow, pytest.mark.timeout(1800), *_still_open(case, defence)]
    if case.spec.gpu_only:
        marks = [pytest.mark.skip(reason="GPU only: see tests/redteam/round3/README.md for the GPU run")]
    return pytest.param(case, id=case.id, marks=marks)


# --------------------------------------------------------------------------- the corpus
def test_corpus_counts_and_classes():
    cpu_wrong = [c for c in WRONG if c.cpu_visible]
    assert len(WRONG) >= 30 and len({c.spec.kernel for c in WRONG}) >= 4
    assert {c.spec.issue_class for c in WRONG} >= {5, 7, 8, 9}
    assert len(cpu_wrong) >= 25 and len(WRONG) - len(cpu_wrong) >= 3  # GPU-only: OOB, race, TF32...
    assert len(TIMING) >= 5 and {c.spec.issue_class for c in TIMING} >= {5, 6, 7}
    assert len(ESCAPES) >= 20 and {e.issue_class for e in ESCAPES} == {1, 2, 3, 4}
    assert all(c.spec.witness for c in cpu_wrong), "every CPU-visible WRONG case shows how it is wrong"


@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.name)
def test_escape_is_well_formed(escape: Escape):
    text = escape.payload("/nonexistent/marker")
    compile(text.encode("utf-8"), escape.name, "exec")  # as the importer reads it: its cookie honoured
    assert escape.path.stem.split("_", 1)[1] not in {e.path.stem.split("_", 1)[1] for e in ESCAPES if e is not escape}


@pytest.mark.slow
def test_cpu_visible_wrong_variants_are_really_wrong():
    """Outside the judge (plain process, interpreter), each witness's result differs from
    the original's: the corpus is not vacuous."""
    results = run_witnesses([c for c in WRONG if c.cpu_visible])
    same = {k: v["detail"] for k, v in results.items() if not v["differs"]}
    assert len(results) == len([c for c in WRONG if c.cpu_visible]) and not same, same


# --------------------------------------------------------------------------- escapes
@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.name)
def test_screen_rejects_escape_for_its_primitive(escape: Escape, tmp_path: Path):
    source = escape.payload(tmp_path / "marker")
    reason = screen_variant(escape.original, source, escape.kernel, escape.harness)
    assert reason and "\n" not in reason
    reasons = [reason, *policy_violations(escape.original, source)]
    assert any(escape.expect in r for r in reasons), reasons


@pytest.fixture(scope="module")
def evaluators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluators]:
    had = os.environ.get(CANARY[0])
    os.environ[CANARY[0]] = CANARY[1]  # an ancestor's secret for r3e17 to look for
    evs = Evaluators(tmp_path_factory.mktemp("round3"))
    yield evs
    evs.close()
    if had is None:
        os.environ.pop(CANARY[0], None)


def _side_effects(evs: Evaluators) -> list[str]:
    """Files the class-4 payloads plant (beside the user's module, in a trusted cache) and
    user modules they rewrote."""
    found = [str(p) for name in ("kernelband_r3_planted.py", "r3_poison.txt") for p in evs.workdir.rglob(name)]
    for e in ESCAPES:
        module = evs.workdir / "modules" / Path(e.original_path).stem / Path(e.original_path).name
        if module.exists() and module.read_text(encoding="utf-8") != e.original:
            found.append(f"{module} was rewritten")
    return found


@pytest.mark.slow
def test_escapes_end_to_end_leave_no_marker(evaluators: Evaluators, tmp_path: Path):
    markers = tmp_path / "markers"
    markers.mkdir()
    for e in ESCAPES:
        marker = markers / e.name
        ev = evaluators.for_escape(e).evaluate(Variant(source=e.payload(marker)))
        assert ev.status == Status.REJECTED and ev.message, (e.name, ev.status, ev.message)
        assert not marker.exists(), f"{e.name} created its marker"
    assert list(markers.iterdir()) == []
    assert _side_effects(evaluators) == []


@pytest.mark.slow
@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.name)
def test_escape_with_the_screen_skipped_leaves_no_marker(evaluators: Evaluators, escape: Escape, tmp_path: Path):
    marker = tmp_path / "marker"
    ev = evaluate_unscreened(evaluators.for_escape(escape), escape.payload(marker))
    assert not marker.exists(), f"{escape.name} created its marker ({ev.status.value}: {ev.message[:200]})"
    assert _side_effects(evaluators) == []


# --------------------------------------------------------------------------- wrong variants
@pytest.fixture(scope="module")
def wrong_outcomes(evaluators: Evaluators) -> dict[str, Outcome]:
    """Every CPU-visible WRONG case through the evaluation path, once."""
    return {c.id: run_case(evaluators, c) for c in WRONG if c.cpu_visible}


@pytest.mark.parametrize("case", [_case_param(c) for c in WRONG], ids=lambda c: c.id)
def test_wrong_variant_is_rejected(wrong_outcomes: dict[str, Outcome], case: Case):
    got = wrong_outcomes[case.id]
    assert not got.ok, f"{case.spec.why} -- judged correct: {got.message}"


@pytest.mark.parametrize("case", [_case_param(c, screened=False) for c in WRONG if c.spec.unscreened],
                         ids=lambda c: c.id)
def test_wrong_variant_is_rejected_with_the_screen_skipped(evaluators: Evaluators, case: Case):
    got = run_case(evaluators, case, screened=False)
    assert not got.ok, f"{case.spec.why} -- judged correct with the screen skipped: {got.message}"


# Every session's draw holds a call of each class these cases need (kernelband/worker/derived.py,
# FLAVOURS): measured 26, 26 and 26 of the 26 caught in three sessions on the final code
# (tests/redteam/round3/README.md). The floor is the 95% target: it leaves one for a case
# that a class catches only with some of the values drawn within it.
CAUGHT_FLOOR = 25


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_cpu_visible_wrong_variants_caught_at_least_the_measured_floor(wrong_outcomes: dict[str, Outcome]):
    passed = sorted(k for k, v in wrong_outcomes.items() if v.ok)
    assert len(wrong_outcomes) - len(passed) >= CAUGHT_FLOOR, passed


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_at_least_95_percent_of_cpu_visible_wrong_variants_rejected(wrong_outcomes: dict[str, Outcome]):
    passed = sorted(k for k, v in wrong_outcomes.items() if v.ok)
    assert len(passed) <= 0.05 * len(wrong_outcomes), passed


# --------------------------------------------------------------------------- timing cheats
def _refused(got: Outcome) -> bool:
    """Not judged correct; for a paired re-measurement, no speedup claimed: the verdict
    rule's (the CI's lower bound above the floor) or a point estimate beyond noise. Under a
    loaded CI machine the CPU times' point can reach 1.37x with a CI of [0.79, 2.37]: no
    claim is made of that."""
    if got.message.startswith("paired:") and got.ok:
        from kernelband.verdict import is_improvement

        return got.speedup is not None and (got.speedup < 1.15 or not is_improvement(got.ci_low))
    return not got.ok


@pytest.mark.parametrize("case", [_case_param(c) for c in TIMING if c.spec.measure != "honest"], ids=lambda c: c.id)
def test_timing_cheat_is_refused(evaluators: Evaluators, case: Case):
    got = run_case(evaluators, case)
    assert _refused(got), f"{case.spec.why} -- {got.row()}: {got.message}"


# The class of helper_flags_skip_replays (tests/redteam/round3/README.md, "State kept for a
# later run"): whatever of it is not refused is correct in every call and timed doing the
# call's work. Its cases whose state lives in the launches' arguments are checked replay by
# replay (the refused helper flags too: were the refusal evaded, its timing would be honest).
HONEST = [c for c in TIMING if c.spec.measure == "honest"]
IN_ARGUMENTS = HONEST + [c for c in TIMING if c.id == "timing/rope_inplace/helper_flags_skip_replays"]


@pytest.mark.parametrize("case", [_case_param(c) for c in HONEST], ids=lambda c: c.id)
def test_state_kept_for_a_later_run_is_judged_as_the_correct_kernel_it_is(evaluators: Evaluators, case: Case):
    got = run_case(evaluators, case)
    assert got.ok, f"{case.spec.why} -- {got.row()}: {got.message}"


@pytest.mark.parametrize("case", IN_ARGUMENTS, ids=lambda c: c.id)
def test_state_kept_for_a_later_run_is_timed_from_the_calls_state(case: Case, tmp_path: Path):
    """Each timed replay (the worker's own timing loop) starts with every storage the
    launches touch as the call made it, and leaves what they wrote as the call's did."""
    from redteam.round3.replaying import replay_problems_apart

    assert replay_problems_apart(case.source, case.kernel.harness, tmp_path) == []


@pytest.mark.parametrize("case", [_case_param(c, screened=False) for c in TIMING if c.spec.unscreened],
                         ids=lambda c: c.id)
def test_timing_cheat_is_refused_with_the_screen_skipped(evaluators: Evaluators, case: Case):
    got = run_case(evaluators, case, screened=False)
    assert _refused(got), f"{case.spec.why} -- {got.row()}: {got.message}"


def test_round3_sources_parse():
    for c in WRONG + TIMING:
        ast.parse(c.source)
