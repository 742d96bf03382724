"""Precision is judged at every seed: the original's launches are rerun in float64 under
each seed whose references fit the memory budget, and a candidate's written tensors are
held to the original's own error there. A candidate that rounds its result only for the
inputs of one seed past the first is refused by that check, and one as precise as the
original at every seed is not. Real Triton under the interpreter, through the whole
evaluation path (screen, judge, sandboxed variant process)."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers.kernels import AXPY, AXPY_LAUNCH, axpy_task, edited

from kernelband.evaluate import Evaluator
from kernelband.model import Status, Task, Variant

SEEDS = [0, 1, 2]
# the harness's x[0] under each seed (torch.manual_seed, then randn(3001)): -1.13, -1.53,
# -1.04. Below -1.3 only under seed 1: a data-keyed branch the first seed never takes
LOSSY_WHEN = "float(x[0]) < -1.3"


@pytest.fixture(scope="module")
def axpy(tmp_path_factory: pytest.TempPathFactory):
    ev = Evaluator(axpy_task(tmp_path_factory.mktemp("precision_seeds"), timeout_s=60.0, seeds=SEEDS))
    base = ev.prepare(time_it=False)
    assert base.ok, base.message
    yield ev
    ev.close()


def _lossy_on_seed_1() -> Variant:
    """The kernel rounds its fp32 result through fp16 (relative error ~2e-4, inside the
    fp32 tolerance) when the wrapper sees seed 1's inputs, and is exact otherwise."""
    source = AXPY.replace("BLOCK_SIZE: tl.constexpr):", "BLOCK_SIZE: tl.constexpr, LOSSY: tl.constexpr):")
    source = source.replace("    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n",
                            "    result = alpha * x + y\n"
                            "    if LOSSY:  # a cheaper half-precision epilogue for these inputs\n"
                            "        result = result.to(tl.float16).to(tl.float32)\n"
                            "    tl.store(out_ptr + offsets, result, mask=mask)\n")
    source = source.replace(AXPY_LAUNCH, AXPY_LAUNCH.replace("BLOCK_SIZE=128)", f"BLOCK_SIZE=128, LOSSY={LOSSY_WHEN})"))
    assert source.count("LOSSY") == 3, source
    return Variant(source)


@pytest.mark.slow
def test_precision_lost_only_on_a_later_seeds_inputs_is_refused(axpy):
    ev = axpy.evaluate(_lossy_on_seed_1(), time_it=False)
    assert ev.status == Status.MISMATCH, ev.message
    # refused by the float64 comparison of that seed, not by a tolerance or another rule
    assert ev.message.startswith("precision: harness_axpy, seed 1:") and "float64 run of the original" in ev.message, \
        ev.message


@pytest.mark.slow
def test_a_candidate_as_precise_at_every_seed_is_accepted(axpy):
    ev = axpy.evaluate(edited(AXPY_LAUNCH, AXPY_LAUNCH.replace("128", "512")), time_it=False)
    assert ev.status == Status.OK, ev.message


# Most of the original's checked runs are float64 reruns: they show the judge whether the
# original's own earlier results change (a shared output buffer) as its plain runs do. An
# original that hands every call the same buffer accepts itself; a candidate that does so
# where the original does not is refused.
SHARED_BUFFER = AXPY.replace('''def axpy(alpha, x, y):
    out = torch.empty_like(x)
''', '''_BUFFERS = {}


def axpy(alpha, x, y):
    out = _BUFFERS.get((tuple(x.shape), x.dtype))
    if out is None:
        out = _BUFFERS[(tuple(x.shape), x.dtype)] = torch.empty_like(x)
''')


@pytest.mark.slow
def test_a_result_copied_into_a_shared_buffer_is_refused(axpy):
    shared = AXPY.replace("def axpy(alpha, x, y):\n", "_BUFFERS = {}\n\n\ndef axpy(alpha, x, y):\n")
    shared = shared.replace("    return out\n", "    kept = _BUFFERS.get((tuple(x.shape), x.dtype))\n"
                                                  "    if kept is None:\n"
                                                  "        kept = _BUFFERS[(tuple(x.shape), x.dtype)] = torch.empty_like(x)\n"
                                                  "    kept.copy_(out)\n"
                                                  "    return kept\n")
    ev = axpy.evaluate(Variant(shared), time_it=False)
    assert ev.status == Status.REJECTED and "shared output buffer" in ev.message, ev.message


@pytest.mark.slow
def test_an_original_with_a_shared_output_buffer_still_accepts_itself(tmp_path: Path):
    assert SHARED_BUFFER != AXPY
    path = tmp_path / "axpy_shared.py"
    path.write_text(SHARED_BUFFER, encoding="utf-8")
    task = Task(module_path=str(path), source=SHARED_BUFFER, kernel="axpy_kernel", harness="harness_axpy",
                device="cpu", seeds=SEEDS, timeout_s=60.0)
    with Evaluator(task) as ev:
        base = ev.prepare(time_it=False)
        assert base.ok, base.message
        got = ev.evaluate(Variant(SHARED_BUFFER.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=256)")), time_it=False)
    assert got.status == Status.OK, got.message
