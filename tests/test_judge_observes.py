"""Checks whose facts the judge takes itself, each with the variant that would abuse the
gap it closes (DESIGN section 6; kernelband/worker/judge_candidate.py, capture.py).
Real Triton under the interpreter, through the whole path (screen, judge, sandboxed
variant process)."""
from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest
from helpers.kernels import AXPY_LAUNCH, axpy_task, edited

from kernelband.evaluate import Evaluator
from kernelband.model import Status, Variant

# The tests marked slow run in the slow tier (scripts/test.sh --slow); the others keep
# this file in the default tier.


@pytest.fixture(scope="module")
def axpy(tmp_path_factory):
    ev = Evaluator(axpy_task(tmp_path_factory.mktemp("observes"), timeout_s=30.0))
    assert ev.prepare(time_it=False).ok
    yield ev
    ev.close()


@pytest.mark.slow
def test_torch_doing_the_work_behind_an_identity_launch_is_rejected(axpy):
    """The wrapper computes the result with torch; the kernel only copies it into ``out``.
    Every output check passes (neutralised launches change the output, the replay
    reproduces it): what gives it away is a launch reading a tensor the original never had."""
    cheat = edited(AXPY_LAUNCH, "ready = alpha * x + y\n"
                                "    axpy_kernel[(triton.cdiv(n, 128),)](ready, y, out, 1.0, n, BLOCK_SIZE=128)")
    cheat = Variant(cheat.source.replace("tl.store(out_ptr + offsets, alpha * x + y, mask=mask)",
                                         "tl.store(out_ptr + offsets, alpha * x + y * 0.0, mask=mask)"))
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status == Status.REJECTED and "the timed launches are not all the work" in ev.message, ev.message


@pytest.mark.slow
def test_a_rewrite_that_only_reshapes_its_inputs_is_accepted(axpy):
    """A view of a harness input is the same content: not work moved outside the launch."""
    ok = edited(AXPY_LAUNCH, "x = x.view(-1)\n    " + AXPY_LAUNCH)
    ev = axpy.evaluate(ok, time_it=False)
    assert ev.ok, ev.message


@pytest.mark.slow
def test_a_pre_run_hook_is_refused_in_the_replay_also_past_the_screen(axpy):
    """A JIT pre-run hook runs Python beside every launch, the timed replays included. The
    screen refuses it; sent straight to the judge, the replay refuses it."""
    from redteam.round3.running import evaluate_unscreened

    cheat = edited("    return out\n", "    axpy_kernel.add_pre_run_hook(lambda *a, **k: None)\n    return out\n")
    screened = axpy.evaluate(cheat, time_it=False)
    assert screened.status == Status.REJECTED and "add_pre_run_hook" in screened.message, screened.message
    ev = evaluate_unscreened(axpy, cheat.source, time_it=False)
    assert ev.status == Status.REJECTED and "pre-run hook" in ev.message, ev.message


@pytest.mark.slow
def test_bits_that_differ_between_two_runs_of_one_seed_are_refused(axpy):
    """Within tolerance each time, but not reproducible where the original is: a race or an
    unordered atomic looks like this."""
    cheat = edited("def axpy(alpha, x, y):\n", "_calls = [0]\n\n\ndef axpy(alpha, x, y):\n    _calls[0] += 1\n")
    cheat = Variant(cheat.source.replace(AXPY_LAUNCH,
                                         "axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha * (1.0 + 1e-7 * _calls[0]),"
                                         " n, BLOCK_SIZE=128)"))
    ev = axpy.evaluate(cheat, time_it=False)
    assert ev.status == Status.MISMATCH and "different bits" in ev.message, ev.message


ROTATE = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def twice_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=mask)


    def twice_(x):
        n = x.numel()
        twice_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256)


    def harness_twice():
        x = torch.randn(5000)
        twice_(x)
        return x
''')


@pytest.fixture(scope="module")
def in_place(tmp_path_factory):
    path = tmp_path_factory.mktemp("inplace") / "twice.py"
    path.write_text(ROTATE, encoding="utf-8")
    from kernelband.model import Task

    ev = Evaluator(Task(module_path=str(path), source=ROTATE, kernel="twice_kernel", harness="harness_twice",
                        device="cpu", timeout_s=30.0))
    base = ev.prepare(time_it=False)
    assert base.ok, base.message
    assert "replays of the original do not reproduce" not in base.message, base.message  # restored, then replayed
    yield ev
    ev.close()


@pytest.mark.slow
def test_an_in_place_kernel_gets_a_replay_check(in_place):
    ok = Variant(ROTATE.replace("BLOCK=256)", "BLOCK=512)").replace("cdiv(n, 256)", "cdiv(n, 512)"))
    assert in_place.evaluate(ok, time_it=False).ok


@pytest.mark.slow
def test_an_in_place_kernel_whose_work_torch_did_first_is_rejected(in_place):
    """Torch updates the buffer in place; the kernel then runs over it with nothing to do
    (every element masked off). The restored replay reproduces the result (the kernel
    found it already there): the launch read a buffer no launch of the original found."""
    cheat = Variant(ROTATE.replace("        twice_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256)",
                                   "        x.mul_(2.0).add_(1.0)\n        twice_kernel[(triton.cdiv(n, 256),)](x, 0, BLOCK=256)")
                    .replace("    twice_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256)",
                             "    x.mul_(2.0).add_(1.0)\n    twice_kernel[(triton.cdiv(n, 256),)](x, 0, BLOCK=256)"))
    assert cheat.source != ROTATE
    ev = in_place.evaluate(cheat, time_it=False)
    assert ev.status == Status.REJECTED, ev.message


def test_the_roofline_refuses_a_time_no_kernel_can_have():
    from kernelband.model import Evaluation, Timing
    from kernelband.profile.schema import DeviceFacts
    from kernelband.worker.judge_candidate import Refusal, _check_roofline

    ev = Evaluation(Status.OK, timing=Timing(0.001, 0.001, 0.001, "cuda-events", 1), interpreted=False)
    facts = DeviceFacts(copy_gbs=3000.0)
    _check_roofline(ev, facts, output_floor_bytes=1 << 20)  # 1 MiB in 1 us: 1 TB/s, possible
    with pytest.raises(Refusal) as refused:
        _check_roofline(ev, facts, output_floor_bytes=64 << 20)  # 64 MiB written in 1 us: 67 TB/s
    assert "above the GPU's measured copy bandwidth" in str(refused.value)
    # outputs that fit in the L2 cache can be written faster than memory takes them: the
    # floor is what exceeds it (an embedding's 32 MiB in 6 us on an H200 is real)
    l2 = replace(facts, l2_bytes=60 << 20)
    _check_roofline(ev, l2, output_floor_bytes=32 << 20)
    with pytest.raises(Refusal):
        _check_roofline(ev, l2, output_floor_bytes=256 << 20)  # 196 MiB past the L2 in 1 us


def test_the_roofline_refuses_on_the_judges_floor_not_on_the_profiles_convention():
    """The profile counts every argument whole (the roofline convention): a scatter that
    writes two rows of a 1 GiB cache 'moves' 1 GiB by it. Only the judge's floor (the bytes
    the original's launches changed) refuses."""
    from kernelband.model import Evaluation, Timing
    from kernelband.profile.schema import DeviceFacts, Profile, TimingTier
    from kernelband.worker.judge_candidate import _check_roofline

    ev = Evaluation(Status.OK, timing=Timing(0.01, 0.01, 0.01, "cuda-events", 1), interpreted=False)
    ev.profile = Profile()
    ev.profile.tiers.timing = TimingTier(bandwidth_gbs=107374.0, copy_peak_gbs=4000.0)  # 1 GiB in 10 us
    _check_roofline(ev, DeviceFacts(copy_gbs=4000.0), output_floor_bytes=2 * 64 * 4)


def test_the_roofline_floor_counts_the_elements_the_originals_launches_changed():
    """A scatter into a large cache writes a few of its rows: the floor is those rows'
    bytes, not the cache's (a kv-cache scatter's faster rewrites were refused at an implied
    12 TB/s). Elements whose bits did not change count nothing, NaNs compared as bits; a
    written tensor with no copy of what the launches found, or of another shape, counts
    whole (the floor never drops below what can be shown)."""
    import torch

    from kernelband.worker.judge_original import changed_bytes

    cache = torch.zeros(1024, 64)
    after = cache.clone()
    after[[3, 700]] = 1.0  # two rows of 64 fp32 changed
    after[5, 0] = float("nan")
    before_nan = cache.clone()
    before_nan[5, 0] = float("nan")  # the same NaN before and after: unchanged
    assert changed_bytes({"k.cache": [after]}, ["k.cache"], [before_nan]) == 2 * 64 * 4
    assert changed_bytes({"k.cache": [after]}, ["k.cache"], [cache]) == (2 * 64 + 1) * 4
    whole = after.numel() * 4
    assert changed_bytes({"k.cache": [after]}, [], []) == whole  # no copy of what was found
    assert changed_bytes({"k.cache": [after]}, ["k.cache"], [cache[:10]]) == whole  # another shape
    assert changed_bytes({"k.cache": [after]}, ["other.arg"], [cache]) == whole
    # a tensor written by two kernels counts once; -0.0 over +0.0 is a change of bits
    signed = cache.clone()
    signed[0, 0] = -0.0
    assert changed_bytes({"a.x": [signed], "b.y": [signed]}, ["a.x", "b.y"], [cache, cache]) == 4


@pytest.mark.slow
def test_the_floor_is_measured_on_the_originals_kept_run():
    """Through the whole path: prepare of an in-place scatter into a paged cache (the
    real-world kv_cache_scatter) reports as its floor the bytes of the rows its launch
    wrote, not the caches'. The function above was right while prepare never called it:
    the kept run is an upcast run, and only check runs were looked at."""
    from pathlib import Path

    from kernelband.model import Task

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "realworld" / "kv_cache_scatter.py"
    ev = Evaluator(Task(module_path=str(path), source=path.read_text(encoding="utf-8"),
                        kernel="reshape_and_cache_kernel", harness="bench_reshape_and_cache", device="cpu",
                        timeout_s=60.0))
    try:
        base = ev.prepare(time_it=False)
    finally:
        ev.close()
    assert base.ok, base.message
    tokens, heads, head_size, blocks, block_size = 13, 2, 16, 6, 4  # the harness's CPU sizes
    live = tokens - 1  # the last token is padding: nothing written for it
    assert base.floor_bytes == 2 * live * heads * head_size * 4  # key and value rows, fp32
    assert base.floor_bytes < 2 * blocks * block_size * heads * head_size * 4  # not the whole caches
