"""The trust layer end to end: a real worker process running real Triton (interpreter).

Correct variants pass; wrong ones fail with the right status; a variant that raises,
crashes the process or hangs yields a clear result and the worker survives for the
next request."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers.kernels import AXPY, AXPY_LAUNCH, axpy_task

from kernelband.evaluate import Evaluator, SetupError
from kernelband.model import Status, Task, Variant

LAUNCH = AXPY_LAUNCH


def task_for(tmp_path: Path, source: str, timeout_s: float = 60.0) -> Task:
    return axpy_task(tmp_path, source, timeout_s)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    ev = Evaluator(task_for(tmp_path_factory.mktemp("eval"), AXPY, timeout_s=4.0))
    base = ev.prepare()
    assert base.ok and base.interpreted and base.deterministic and not base.weak_harness
    assert base.timing is not None and base.timing.clock == "cpu-interpreter" and base.timing.launches == 1
    assert [launch.kernel for launch in base.launches] == ["axpy_kernel"] and base.launches[0].grid == [24]
    yield ev
    ev.close()


def variant(old: str, new: str, base: str = AXPY) -> Variant:
    assert old in base, old
    return Variant(base.replace(old, new))


def test_faster_variant_passes_and_is_timed(evaluator):
    v = variant(LAUNCH, LAUNCH.replace("128", "1024"))
    ev = evaluator.evaluate(v)
    assert ev.status == Status.OK, ev.message
    assert ev.errors is not None and ev.errors.max_abs == 0.0
    assert ev.timing is not None and ev.timing.clock == "cpu-interpreter"
    assert ev.launches[0].grid == [3] and ev.launches[0].constexprs["BLOCK_SIZE"] == 1024
    # fewer interpreted programs: really faster, and the paired re-measurement agrees
    paired = evaluator.paired_timing(v, rounds=4)
    assert paired.speedup > 1.5 and paired.ci_low > 1.0 and paired.rounds == 4


@pytest.mark.parametrize("old,new,needle", [
    # off-by-one mask: the last element is never written (the worker fills fresh memory with NaN)
    ("mask = offsets < n_elements", "mask = offsets < n_elements - 1", "left unwritten"),
    ("alpha * x + y", "alpha * x * 1.01 + y", "relative L2"),  # scaled output
    ("out = torch.empty_like(x)", "out = torch.empty_like(x, dtype=torch.float16)", "dtype"),  # wrong dtype
    ("alpha * x + y", "tl.where(offsets == 7, float('nan'), alpha * x + y)", "NaN positions"),
])
def test_wrong_variants_fail_as_mismatch(evaluator, old, new, needle):
    ev = evaluator.evaluate(variant(old, new))
    assert ev.status == Status.MISMATCH, ev.message
    assert needle in ev.message
    assert ev.timing is None  # wrong variants are never timed


def test_torch_fallback_is_rejected(evaluator):
    # statically: the launch is gone (the screen)
    ev = evaluator.evaluate(variant(LAUNCH, "out = alpha * x + y"))
    assert ev.status == Status.REJECTED and "axpy_kernel" in ev.message
    # dynamically: the launch is still written but never taken (the worker's launch capture)
    ev = evaluator.evaluate(variant(LAUNCH, f"if n < 0:\n        {LAUNCH}\n    else:\n        out = alpha * x + y"))
    assert ev.status == Status.REJECTED
    assert "never launches axpy_kernel" in ev.message


def test_raise_import_error_and_syntax(evaluator):
    ev = evaluator.evaluate(variant("out = torch.empty_like(x)", "out = torch.empty_like(x)\n    raise RuntimeError('boom')"))
    assert ev.status == Status.RUNTIME_ERROR and "boom" in ev.message
    ev = evaluator.evaluate(Variant(AXPY + "\nSCALE = 1 // 0\n"))
    assert ev.status == Status.COMPILE_ERROR and "does not import" in ev.message
    ev = evaluator.evaluate(Variant(AXPY + "\nSCALE = undefined_name\n"))
    assert ev.status == Status.REJECTED and "not defined in the module" in ev.message
    ev = evaluator.evaluate(Variant(AXPY + "\ndef broken(:\n"))
    assert ev.status == Status.REJECTED and "parse" in ev.message


def test_out_of_bounds_crash_then_worker_survives(evaluator):
    pid_before = evaluator.client.info.pid
    # reads ~1e11 elements past the buffer: the interpreter segfaults the variant process
    crash = variant("x = tl.load(x_ptr + offsets, mask=mask)",
                    "x = tl.load(x_ptr + offsets.to(tl.int64) * 100000000000)")
    ev = evaluator.evaluate(crash)
    assert ev.status == Status.CRASHED, ev.message
    assert "signal" in ev.message and "variant process died" in ev.message
    # the judge never ran the variant: it lives on, the next candidate gets a fresh process
    assert evaluator.client.info.pid == pid_before and evaluator.client.alive
    ok = evaluator.evaluate(variant(LAUNCH, LAUNCH.replace("128", "256")))
    assert ok.status == Status.OK, ok.message


@pytest.mark.slow
def test_hang_times_out_then_worker_survives(evaluator):
    hang = variant("out = torch.empty_like(x)", "out = torch.empty_like(x)\n    while True:\n        pass")
    ev = evaluator.evaluate(hang)
    assert ev.status == Status.TIMEOUT and "no result within" in ev.message
    ok = evaluator.evaluate(variant(LAUNCH, LAUNCH.replace("128", "512")))
    assert ok.status == Status.OK, ok.message


@pytest.mark.slow
def test_harness_returning_torch_result_still_checks_the_kernel(tmp_path):
    """This harness ignores the kernel's result (it returns a torch computation): once
    weak, now the buffer the kernel wrote is an output, so a wrong kernel is caught."""
    weak = AXPY.replace("    return axpy(0.5, x, y)", "    axpy(0.5, x, y)\n    return 0.5 * x + y")
    with Evaluator(task_for(tmp_path, weak)) as ev:
        base = ev.prepare(time_it=False)
        assert base.ok and not base.weak_harness, base.message
        wrong = ev.evaluate(variant("alpha * x + y", "alpha * x + 2 * y", weak), time_it=False)
        assert wrong.status == Status.MISMATCH and "written" in wrong.message, wrong.message


def test_unusable_originals_are_setup_errors(tmp_path):
    cases = {
        "returns no tensors": AXPY.replace("    return axpy(0.5, x, y)", "    axpy(0.5, x, y)\n    return None").replace(
            "tl.store(out_ptr + offsets, alpha * x + y, mask=mask)", "pass"),
        "never launches": AXPY.replace("    return axpy(0.5, x, y)", "    return 0.5 * x + y"),
        "not deterministic": AXPY.replace("    return axpy(0.5, x, y)",
                                          "    import random\n    return axpy(random.SystemRandom().random(), x, y)"),
        "fails on the original": AXPY.replace("    return axpy(0.5, x, y)", "    return axpy(0.5, x, 'not a tensor')"),
    }
    with Evaluator(task_for(tmp_path, AXPY)) as ev:
        for needle, source in cases.items():
            ev.task = task_for(tmp_path, source)
            with pytest.raises(SetupError, match=needle):
                ev.prepare(time_it=False)


@pytest.mark.slow
def test_corrupted_context_ends_only_the_variant_process(tmp_path):
    """An illegal-address style error corrupts the variant process's CUDA context only:
    the judge reports it and the next good variant runs in a fresh process."""
    with Evaluator(task_for(tmp_path, AXPY, timeout_s=20.0)) as ev:
        ev.prepare(time_it=False)
        pid_before = ev.client.info.pid
        bad = variant("out = torch.empty_like(x)", "out = torch.empty_like(x)\n"
                      "    raise RuntimeError('an illegal memory access was encountered KB_SIMULATED_FATAL')")
        res = ev.evaluate(bad, time_it=False)
        assert res.status == Status.RUNTIME_ERROR and "context corrupted" in res.message, res.message
        assert ev.worker_restarts == 0 and ev.client.alive and ev.client.info.pid == pid_before
        ok = ev.evaluate(variant(LAUNCH, LAUNCH.replace("128", "256")), time_it=False)
        assert ok.status == Status.OK, ok.message


@pytest.mark.slow
def test_in_place_harness_returning_none_is_checked_on_what_the_kernel_wrote(tmp_path):
    """A harness that returns nothing: the tensors the kernel's launches wrote are its outputs."""
    in_place = AXPY.replace("    return axpy(0.5, x, y)", "    axpy(0.5, x, y)")
    with Evaluator(task_for(tmp_path, in_place)) as ev:
        base = ev.prepare(time_it=False)
        assert base.ok and not base.weak_harness, base.message
        ok = ev.evaluate(variant(LAUNCH, LAUNCH.replace("128", "256"), in_place), time_it=False)
        assert ok.status == Status.OK, ok.message
        wrong = ev.evaluate(variant("alpha * x + y", "alpha * x - y", in_place), time_it=False)
        assert wrong.status == Status.MISMATCH and "written" in wrong.message, wrong.message


def test_paired_timing_deadline_grows_with_rounds(tmp_path):
    ev = Evaluator(task_for(tmp_path, AXPY, timeout_s=3.0))
    try:
        assert ev.paired_timeout_s(40) > ev.paired_timeout_s(10) >= 3.0 * 10
    finally:
        ev.close()


# a search's candidate confidently slower than the original ends after its timing
SLOW_LAUNCH = LAUNCH.replace("128", "16")  # eight times the interpreted programs
WRONG_ELSEWHERE = ("    n = out.numel()\n", "    n = out.numel()\n    if n != 3001:\n        alpha = alpha * 1.01\n")


def test_slower_search_candidate_ends_after_timing_and_is_never_ok(evaluator):
    """Wrong only beyond the harness (other sizes) and slower: the search's screen ends it
    as SLOWER (never OK, never a parent, no speedup); the full check of the same variant
    finds it wrong. Being slow buys a variant nothing: it is discarded either way."""
    slow_wrong = variant(*WRONG_ELSEWHERE, base=AXPY.replace(LAUNCH, SLOW_LAUNCH))
    screened = evaluator.evaluate(slow_wrong, search=True, rounds=3)
    assert screened.status == Status.SLOWER and not screened.ok, screened.message
    assert screened.speedup_ci is not None and screened.speedup_ci[1] < 1.0
    assert screened.timing is not None and "not checked on other inputs" in screened.message
    full = evaluator.evaluate(slow_wrong, rounds=3)
    assert full.status == Status.MISMATCH and "beyond the harness" in full.message, full.message


@pytest.mark.slow
def test_far_slower_search_candidate_stops_timing_after_two_rounds(evaluator):
    """Many times slower in each of its first two rounds: the timing stops there (a very
    slow candidate would otherwise hold a lane for every round) and the candidate ends as
    SLOWER, never OK; the same variant's full check still finds it wrong elsewhere."""
    far = AXPY.replace(LAUNCH, LAUNCH.replace("128", "4"))  # 32 times the interpreted programs
    slow_wrong = variant(*WRONG_ELSEWHERE, base=far)
    ev = evaluator.evaluate(slow_wrong, search=True, rounds=4)
    assert ev.status == Status.SLOWER and not ev.ok, ev.message
    assert "timed no further" in ev.message and ev.speedup_ci is not None, ev.message
    assert evaluator.evaluate(slow_wrong, rounds=4).status == Status.MISMATCH


def test_slow_variant_wrong_on_the_timing_run_is_still_a_mismatch(evaluator):
    """The kept run (seed 0 of the timing harness) is judged before the timing: a slow
    variant cannot skip it."""
    ev = evaluator.evaluate(variant("alpha * x + y", "alpha * x * 1.01 + y", AXPY.replace(LAUNCH, SLOW_LAUNCH)),
                            search=True, rounds=3)
    assert ev.status == Status.MISMATCH and ev.timing is None, ev.message


def test_search_candidate_that_could_be_faster_gets_every_check(evaluator):
    """Not slower at 95% confidence: every check runs, including the calls beyond the harness."""
    wrong_fast = variant(*WRONG_ELSEWHERE, base=AXPY.replace(LAUNCH, LAUNCH.replace("128", "1024")))
    ev = evaluator.evaluate(wrong_fast, search=True, rounds=3)
    assert ev.status == Status.MISMATCH and "beyond the harness" in ev.message, ev.message
