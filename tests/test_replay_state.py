"""State a replay does not reproduce (issue 26, round 3: the class of
rope_inplace/helper_flags_skip_replays). Every timed replay starts from what the kept
run's launches found, storage by storage (``worker/prestate.py``); what no replay can
reproduce is refused (``worker/carryover.py``): memory past every copy budget that the
launches change, a buffer reached by its address, a launch whose only effect is state
for a later run. Look-alikes that keep real state (atomics into a zeroed buffer, a
semaphore, a reset, a pipeline, state read back by torch or kept by the module) pass.

In this process under Triton's interpreter (tiny sizes); the end-to-end cases are in
tests/test_redteam_round3.py (cheats) and tests/redteam/correct_eval/matmul.py (look-alikes,
run by tests/test_redteam_wrong.py).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `redteam`

from kernelband.screen import screen_variant  # noqa: E402

MODULE = '''
import torch
import triton
import triton.language as tl

N = 300
BLOCK = 64
PROGRAMS = triton.cdiv(N, BLOCK)


@triton.jit
def work(x_ptr, flags_ptr, n, BLOCK: tl.constexpr):
    """x = 2x + 1 in place, for each program whose flag is 0."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if tl.load(flags_ptr + pid) == 0:
        v = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, v * 2.0 + 1.0, mask=offs < n)


@triton.jit
def mark(flags_ptr, n, VALUE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(flags_ptr + offs, tl.full((BLOCK,), VALUE, tl.int32), mask=offs < n)


@triton.jit
def mark_atomic(flags_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_xchg(flags_ptr + offs, tl.full((BLOCK,), 1, tl.int32), mask=offs < n)


@triton.jit
def mark_and_copy(flags_ptr, x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(flags_ptr + offs, tl.full((BLOCK,), 1, tl.int32), mask=offs < 5)
    for start in range(0, n, BLOCK):
        tl.store(out_ptr + start + offs, tl.load(x_ptr + start + offs, mask=start + offs < n), mask=start + offs < n)


@triton.jit
def work_far(x_ptr, state_ptr, n, BLOCK: tl.constexpr):
    """work, with its flags past the one element of the state it is given (state_ptr + 1 + pid)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if tl.load(state_ptr + 1 + pid) == 0:
        v = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, v * 2.0 + 1.0, mask=offs < n)
        tl.store(state_ptr + 1 + pid, 1)


@triton.jit
def work_at(x_ptr, addr, n, BLOCK: tl.constexpr):
    flags = addr.to(tl.pointer_type(tl.int32))
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if tl.load(flags + pid) == 0:
        v = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, v * 2.0 + 1.0, mask=offs < n)
        tl.store(flags + pid, 1)


@triton.jit
def touch(p_ptr):
    tl.store(p_ptr, tl.load(p_ptr))


_HELD = {}


def _keep(t, _kept=[]):
    _kept.append(t)


def run(x, how):
    flags = torch.zeros(PROGRAMS, dtype=torch.int32)
    work[(PROGRAMS,)](x, flags, N, BLOCK=BLOCK)
    if how == "mark":  # the rope cheat: a later launch only sets what the first one read
        mark[(1,)](flags, PROGRAMS, VALUE=1, BLOCK=8)
    elif how == "reset":  # zeroes them again: the call leaves them as it found them
        mark[(1,)](flags, PROGRAMS, VALUE=0, BLOCK=8)
    elif how == "atomic":  # a read-modify-write: may be read back within the launch
        mark_atomic[(1,)](flags, PROGRAMS, BLOCK=8)
    elif how == "held":  # the module keeps the buffer: a later call sees it
        _HELD[0] = flags
        mark[(1,)](flags, PROGRAMS, VALUE=1, BLOCK=8)
    elif how == "held_default":  # kept by a function's default argument
        _keep(flags)
        mark[(1,)](flags, PROGRAMS, VALUE=1, BLOCK=8)
    elif how == "torch_reads":  # torch reads what the launch wrote
        mark[(1,)](flags, PROGRAMS, VALUE=1, BLOCK=8)
        return x, flags.sum()
    elif how == "output_too":  # the launch also writes an output
        out = torch.empty_like(x)
        mark_and_copy[(1,)](flags, x, out, N, BLOCK=64)
        return out
    return x


def harness_mark():
    return run(torch.randn(N), "mark")


def harness_reset():
    return run(torch.randn(N), "reset")


def harness_atomic():
    return run(torch.randn(N), "atomic")


def harness_held():
    return run(torch.randn(N), "held")


def harness_held_default():
    return run(torch.randn(N), "held_default")


def harness_torch_reads():
    return run(torch.randn(N), "torch_reads")


def harness_output_too():
    return run(torch.randn(N), "output_too")


def harness_far():
    x = torch.randn(N)
    state = torch.zeros(1 + PROGRAMS, dtype=torch.int32)
    work_far[(PROGRAMS,)](x, state[:1], N, BLOCK=BLOCK)
    return x


def harness_far_view():
    """The flags in a buffer a later launch gets as another view (another dtype, a slice):
    keyed by view, that copy would be taken after the first launch set the flags."""
    x = torch.randn(N)
    state = torch.zeros(1 + PROGRAMS, dtype=torch.int32)
    work_far[(PROGRAMS,)](x, state, N, BLOCK=BLOCK)
    touch[(1,)](state.view(torch.float32)[1:])
    return x


def harness_address():
    x = torch.randn(N)
    flags = torch.zeros(PROGRAMS, dtype=torch.int32)
    _HELD[1] = flags
    work_at[(PROGRAMS,)](x, flags.data_ptr(), N, BLOCK=BLOCK)
    return x


'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # read by triton.jit when the module loads; its kernels call Triton builtins only (no
    # tl.cdiv or tl.sum: helpers interpreted only when the variable was set before Triton's
    # import), so they run in this process whatever imported Triton first
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from redteam.round3.replaying import _load

    return _load(MODULE, tmp_path, f"replay_state_{tmp_path.name}")


def _kept_run(module: Any, harness: str, budget: int = 1 << 30) -> tuple[Any, Any, Any, Optional[str]]:
    """A candidate's kept run of ``harness`` as the variant process makes it: (returned,
    recorder, what torch did beside the launches, the replay refusal or None)."""
    from kernelband.worker import carryover
    from kernelband.worker.runner import ModuleVersion, run_harness

    version = ModuleVersion(module, module, harness)
    with carryover.TorchAccess() as watch:
        out, rec = run_harness(version, 0, snapshot_bytes=budget)
    why = carryover.replay_refusal(rec, watch, MODULE, carryover.reachable(version, out, rec.harness_locals, {}))
    return out, rec, watch, why


def _storage_is_zero(t: Any) -> bool:
    from kernelband.worker.prestate import storage_bytes

    return bool((storage_bytes(t) == 0).all())


# --------------------------------------------------------------------------- every replay starts from the call's state
@pytest.mark.parametrize("harness", ["harness_far", "harness_far_view"])
def test_restore_puts_back_the_whole_storage_as_the_first_launch_found_it(module: Any, harness: str):
    """Flags past the view a launch was given, or first given to a later launch as another
    view, are one state with the rest of their buffer: restored to the zeros the call made."""
    from kernelband.worker.capture import replay_all, restore_pre_state

    _, rec, _, why = _kept_run(module, harness)
    assert why is None
    state = rec.launches[0].named_args()["state_ptr"]
    assert not _storage_is_zero(state)  # the run set its flags
    for _ in range(2):
        assert restore_pre_state(rec) and _storage_is_zero(state)
        replay_all(rec.launches)
        assert not _storage_is_zero(state)  # each replay computed (and marked) every block


def test_restore_is_refused_when_memory_the_launches_change_cannot_be_copied(module: Any):
    from kernelband.worker.variant import _restorer

    _, rec, _, why = _kept_run(module, "harness_mark", budget=64)  # x (1200 bytes) does not fit; the flags do
    assert not rec.prestate.restorable and _restorer(rec) is None
    assert why is not None and why.startswith("the launches change memory the judge cannot copy") and \
        "work.x_ptr" in why and "\n" not in why


def test_memory_that_ends_as_the_call_found_it_needs_no_copy(module: Any):
    """Past the budget, a storage the call leaves as it found it (here flags zeroed again by
    a later launch) is fingerprinted, not copied, and the state stays restorable."""
    from kernelband.worker.capture import restore_pre_state

    x_bytes = 4 * 300  # the first storage the launches touch; the flags come second
    _, rec, _, why = _kept_run(module, "harness_reset", budget=x_bytes)
    kept = list(rec.prestate.storages.values())
    assert [k.copy is not None for k in kept] == [True, False]
    assert why is None and rec.prestate.restorable and restore_pre_state(rec)


# --------------------------------------------------------------------------- what no replay can reproduce
def test_a_launch_that_only_leaves_state_for_a_later_run_is_refused(module: Any):
    _, _, _, why = _kept_run(module, "harness_mark")
    assert why is not None and "\n" not in why
    assert why.startswith("mark.flags_ptr writes only a buffer the call drops") and "work.flags_ptr reads" in why


@pytest.mark.parametrize("harness", ["harness_reset", "harness_atomic", "harness_held", "harness_held_default",
                                     "harness_torch_reads", "harness_output_too"])
def test_state_the_call_itself_uses_is_not_refused(module: Any, harness: str):
    """A reset to the state the call found, a read-modify-write, a buffer the module keeps,
    one torch reads afterwards, a launch that also writes an output: work for the call."""
    _, rec, _, why = _kept_run(module, harness)
    assert why is None, why
    assert rec.prestate.restorable


def test_a_buffer_reached_by_its_address_is_refused(module: Any):
    _, _, _, why = _kept_run(module, "harness_address")
    assert why is not None and why.startswith("work_at.addr is the address of a tensor, passed as an integer")


def test_torch_access_keeps_torch_manual_seed(module: Any):
    """A dispatch mode's first op imports torch._dynamo, which replaces torch.manual_seed
    (the variant process's integrity check would refuse every candidate): a function mode
    does not."""
    import torch

    from kernelband.worker import carryover

    seed = torch.manual_seed
    with carryover.TorchAccess():
        torch.zeros(3).sum()
    assert torch.manual_seed is seed


def test_the_screen_refuses_addresses_in_changed_code():
    from helpers.kernels import AXPY, AXPY_LAUNCH

    variant = AXPY.replace(AXPY_LAUNCH, "assert x.data_ptr() % 16 == 0\n    " + AXPY_LAUNCH)
    reason = screen_variant(AXPY, variant, "axpy_kernel", "harness_axpy")
    assert reason is not None and "data_ptr" in reason
    # the original's own use, unchanged, is the original's
    original = AXPY.replace("    out = torch.empty_like(x)\n", "    assert x.data_ptr() % 4 == 0\n    out = torch.empty_like(x)\n")
    assert screen_variant(original, original.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=256)"), "axpy_kernel",
                          "harness_axpy") is None


# --------------------------------------------------------------------------- the look-alikes, replay by replay
def _state_lookalikes() -> list[Any]:
    from redteam.corpus import CORRECT, load_cases

    return [c for c in load_cases(CORRECT) if c.category == "state"]


@pytest.mark.slow
@pytest.mark.parametrize("case", _state_lookalikes(), ids=lambda c: c.id)
def test_lookalikes_are_timed_doing_their_work(case: Any, tmp_path: Path):
    from redteam.corpus import KERNELS
    from redteam.round3.replaying import replay_problems_apart

    assert replay_problems_apart(case.source, KERNELS[case.kernel].harness, tmp_path) == []


def test_the_lookalikes_cover_the_patterns():
    assert len(_state_lookalikes()) >= 4
