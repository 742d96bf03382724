"""Each of the judge's checks beyond "outputs match", with the cheat that would fool a
plain comparison (DESIGN section 6). Real Triton under the interpreter, through the
whole evaluation path (screen, judge, sandboxed variant process)."""
from __future__ import annotations

import pytest
from helpers.kernels import AXPY, AXPY_LAUNCH, axpy_task, edited

from kernelband.evaluate import Evaluator
from kernelband.model import Status, Variant

# The tests marked slow run in the slow tier (scripts/test.sh --slow); the others keep
# this file in the default tier.


@pytest.fixture(scope="module")
def axpy(tmp_path_factory):
    ev = Evaluator(axpy_task(tmp_path_factory.mktemp("trust"), timeout_s=30.0))
    assert ev.prepare(time_it=False).ok
    yield ev
    ev.close()


@pytest.mark.slow
def test_torch_result_with_a_token_launch_is_rejected(axpy):
    """The result comes from torch; the kernel runs on one element to look launched."""
    cheat = edited(AXPY_LAUNCH, "scratch = torch.empty(1)\n"
                                "    axpy_kernel[(1,)](x, y, scratch, alpha, 1, BLOCK_SIZE=128)\n"
                                "    out = alpha * x + y")
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status in (Status.REJECTED, Status.MISMATCH) and not ev.ok, ev.message


@pytest.mark.slow
def test_torch_copy_into_the_written_buffer_is_rejected(axpy):
    """The kernel writes the real output buffer, then torch overwrites it with its own result:
    with the launches neutralised the outputs do not change, so Triton did not produce them."""
    cheat = edited(AXPY_LAUNCH, AXPY_LAUNCH.replace("out, alpha", "out, 0.0") + "\n    out.copy_(alpha * x + y)")
    ev = axpy.evaluate(cheat, time_it=False)
    # caught by whichever Triton-production check runs first: the replay of the launches
    # alone, or the launches neutralised
    assert ev.status == Status.REJECTED and ("do not depend on the variant's launches" in ev.message
                                             or "replay of the timed launches" in ev.message), ev.message


@pytest.mark.slow
def test_grid_closure_that_drops_to_zero_after_the_first_launch_fails(axpy):
    """Replays (timing) would launch nothing; the second seed's run launches nothing too."""
    cheat = edited("def axpy(alpha, x, y):",
                   "_calls = [0]\n\n\ndef _grid(n):\n"
                   "    def g(meta):\n        _calls[0] += 1\n"
                   "        return (triton.cdiv(n, meta['BLOCK_SIZE']) if _calls[0] <= 1 else 0,)\n"
                   "    return g\n\n\ndef axpy(alpha, x, y):")
    cheat = Variant(cheat.source.replace(AXPY_LAUNCH, AXPY_LAUNCH.replace("(triton.cdiv(n, 128),)", "_grid(n)")))
    ev = axpy.evaluate(cheat)
    assert not ev.ok and ev.timing is None, ev.message


def test_kernel_that_zeroes_an_input_is_rejected(axpy):
    cheat = edited("    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)",
                   "    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n"
                   "    tl.store(x_ptr + offsets, x * 0, mask=mask)")
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status == Status.REJECTED and "tensor x was modified" in ev.message, ev.message


@pytest.mark.slow
def test_wrapper_that_modifies_an_input_with_torch_is_rejected(axpy):
    cheat = edited("    return out\n", "    y.zero_()\n    return out\n")
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status == Status.REJECTED and "modified" in ev.message, ev.message


@pytest.mark.slow
def test_result_cached_across_calls_fails_on_the_next_seed(axpy):
    cheat = edited("def axpy(alpha, x, y):\n", "_memo = {}\n\n\ndef axpy(alpha, x, y):\n"
                   "    if 'out' in _memo:\n        return _memo['out']\n")
    cheat = Variant(cheat.source.replace("    return out\n", "    _memo['out'] = out\n    return out\n"))
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status != Status.OK and "seed 1" in ev.message or "never launches" in ev.message, ev.message


@pytest.mark.slow
def test_rounding_fp32_outputs_through_fp16_fails_the_precision_check(axpy):
    """fp16 keeps 11 bits: rounding an fp32 output through it (relative error ~2.4e-4)
    passes the fp32 tolerance (rtol 1e-3), yet its error against a float64 rerun of the
    original is thousands of times the original's own."""
    cheat = edited("alpha * x + y", "(alpha * x + y).to(tl.float16).to(tl.float32)")
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status == Status.MISMATCH and "precision" in ev.message, ev.message


@pytest.mark.slow
def test_a_correct_rewrite_passes_every_check(axpy):
    ev = axpy.evaluate(edited(AXPY_LAUNCH, AXPY_LAUNCH.replace("128", "512")))
    assert ev.status == Status.OK, ev.message
    assert ev.timing is not None


ASSERTING = AXPY.replace('''def harness_axpy():
    x = torch.randn(3001)
    y = torch.randn(3001)
    return axpy(0.5, x, y)''', '''def test_axpy():
    x = torch.randn(3001)
    y = torch.randn(3001)
    torch.testing.assert_close(axpy(0.5, x, y), 0.5 * x + y)


def bench_axpy():
    x = torch.randn(4096)
    y = torch.randn(4096)
    return axpy(0.5, x, y)''')


@pytest.fixture(scope="module")
def two_harnesses(tmp_path_factory):
    path = tmp_path_factory.mktemp("roles") / "axpy.py"
    path.write_text(ASSERTING, encoding="utf-8")
    from kernelband.model import Task

    task = Task(module_path=str(path), source=ASSERTING, kernel="axpy_kernel", harness="bench_axpy",
                check_harnesses=["test_axpy"], device="cpu", timeout_s=30.0)
    ev = Evaluator(task)
    base = ev.prepare(time_it=False)
    assert base.ok and not base.weak_harness, base.message
    yield ev
    ev.close()


@pytest.mark.slow
def test_a_pytest_style_harness_failing_its_assert_is_a_mismatch(tmp_path):
    # the asserting harness alone, so its run is the one that fails
    from kernelband.model import Task

    path = tmp_path / "axpy.py"
    path.write_text(ASSERTING, encoding="utf-8")
    task = Task(module_path=str(path), source=ASSERTING, kernel="axpy_kernel", harness="test_axpy", device="cpu",
                seeds=[0], timeout_s=30.0)
    with Evaluator(task) as asserting:
        assert asserting.prepare(time_it=False).ok
        ev = asserting.evaluate(Variant(ASSERTING.replace("alpha * x + y", "alpha * x - y")), time_it=False)
    assert ev.status == Status.MISMATCH and "own check failed" in ev.message, ev.message


@pytest.mark.slow
def test_wrong_only_at_sizes_the_timing_harness_does_not_use_is_caught(two_harnesses):
    """bench_axpy uses 4096 = 32 blocks exactly; test_axpy uses 3001: dropping the mask
    breaks only the latter, which is a correctness harness too."""
    v = Variant(ASSERTING.replace("alpha * x + y, mask=mask)",
                                  "tl.where(offsets < n_elements - n_elements % 128, alpha * x + y, 0.0), mask=mask)"))
    ev = two_harnesses.evaluate(v, time_it=False)
    assert not ev.ok and "test_axpy" in ev.message, ev.message


@pytest.mark.slow
def test_torch_result_passing_the_harness_asserts_is_rejected(two_harnesses):
    """With its launches neutralised the original fails test_axpy's assert; a variant whose
    result comes from torch still passes it: Triton does not produce its result."""
    cheat = ASSERTING.replace("    return out\n", "    out.copy_(alpha * x + y)\n    return out\n")
    ev = two_harnesses.evaluate(Variant(cheat), time_it=False)
    assert ev.status == Status.REJECTED and ("Triton does not produce" in ev.message
                                             or "do not depend on the variant's launches" in ev.message), ev.message


def test_memcheck_is_said_to_be_unavailable_under_the_interpreter(axpy):
    report = axpy.sanitize(edited(AXPY_LAUNCH, AXPY_LAUNCH.replace("128", "256")))
    assert report.ran is False and report.ok is True and "interpreter" in report.reason


@pytest.mark.slow
def test_large_inputs_cross_as_fingerprints_and_a_changed_one_is_caught(tmp_path, monkeypatch):
    """Harness-local tensors that are no output travel as content hashes above a size
    (64 MiB by default; 1 KiB here): memory stays bounded, an input changed still shows."""
    monkeypatch.setenv("KERNELBAND_LOCAL_DATA_MAX_BYTES", "1024")
    with Evaluator(axpy_task(tmp_path, timeout_s=30.0)) as ev:
        assert ev.prepare(time_it=False).ok
        ok = ev.evaluate(edited(AXPY_LAUNCH, AXPY_LAUNCH.replace("128", "256")), time_it=False)
        assert ok.status == Status.OK, ok.message
        # changes x after the launch and restores nothing; the launch-level check would
        # also see a write by the kernel, so the change happens in the wrapper's torch code
        bad = ev.evaluate(edited("    return out\n", "    x.mul_(1.0000001)\n    return out\n"), time_it=False)
        assert not bad.ok and ("x" in bad.message), bad.message


# compute-sanitizer's logs as it writes them (memcheck and racecheck, CUDA 12-13)
_CLEAN_RACECHECK = """========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""
_CLEAN_MEMCHECK = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
_RACE = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at out_kernel+0x1a0
=========     and Read access at out_kernel+0x1c0 [128 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
_OOB = """========= Invalid __global__ read of size 8 bytes
=========     at bias_relu_kernel+0x2d0
=========     Access to 0x7f80ea806458 is out of bounds
========= ERROR SUMMARY: 3 errors
"""


def test_a_clean_sanitizer_report_refuses_nothing() -> None:
    """The false rejection this replaces: "0 hazards displayed" was read as a hazard, so
    racecheck refused every candidate on every path that runs it (seen on an H200)."""
    from kernelband.worker.judge_memcheck import read_report

    assert read_report(_CLEAN_RACECHECK) == (False, [])
    assert read_report(_CLEAN_MEMCHECK) == (False, [])
    assert read_report("") == (False, [])


def test_a_race_or_an_out_of_bounds_access_is_a_finding() -> None:
    from kernelband.worker.judge_memcheck import read_report

    failed, findings = read_report(_RACE)
    assert failed and any("Race reported" in f for f in findings)
    assert any(f.startswith("RACECHECK SUMMARY: 1 hazard") for f in findings)
    failed, findings = read_report(_OOB)
    assert failed and findings[0].startswith("Invalid __global__ read")
    assert "ERROR SUMMARY: 3 errors" in findings
    # a summary alone (the detail lines cut by --print-limit) still counts
    assert read_report("========= ERROR SUMMARY: 12 errors\n")[0]
