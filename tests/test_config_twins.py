"""Config twins (kernelband/worker/derived_run.py ``run_config_twins``, judge_derived.py
``config_masks``): an autotuned original runs its special-values calls once per autotune
config, and the elements where its own configs disagree are left undefined in its
reference, so a candidate whose autotuner picked another config than the original's is not
refused for a difference the original has itself. At the judge's functions: the frames are
built as a variant process builds them (canary-padded buffers, padded allocations).

The kernel here, in torch: a block of ``rows`` rows whose max |x| is inf is stored as NaN
(the way a per-block amax turns NaN). On the special-values call row 0 is all -inf and row
1 constant, so row 1 is NaN with blocks of two rows and 5.0 with blocks of one."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Optional

import torch
from helpers.kernels import BLOCKWISE

from kernelband.model import Status
from kernelband.worker import derived_run
from kernelband.worker.call_spec import DerivedCall, TensorArg
from kernelband.worker.jobs import Frame
from kernelband.worker.judge_derived import UNDEFINED, absorb_original, plain_deviations, twin_key, verdict_of
from kernelband.worker.messages import DerivedOutputs

CALL = DerivedCall(fn="flagged", args=(TensorArg(shape=(9, 5), dtype="float32", device="cpu", contiguous=True, id=0,
                                                  floating=True, values="special"),),
                   kwargs={}, flavour="special", seed=11, sizes={})


def flagged(rows: int, extra: float = 0.0) -> Callable[[torch.Tensor], torch.Tensor]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for r in range(0, x.shape[0], rows):
            block = x[r:r + rows]
            out[r:r + rows] = float("nan") if bool(torch.isinf(block).any()) else block * 2.0 + extra
        return out
    return fn


def frame(fn: Callable[[torch.Tensor], torch.Tensor], which: str = "a", config: Optional[int] = None,
          stray: bool = False) -> Frame[DerivedOutputs]:
    """A derived call's frame as ``derived_run._run_calls`` sends it; ``stray``: a write
    into the canaries after the output."""
    args, kwargs, placed = derived_run.build(CALL, which)
    with derived_run.padded_allocations(which, derived_run.PAD_ELEMENTS) as made:
        out = fn(*args, **kwargs)
    if stray:
        made[0][0][-1] = 0.0
    meta = DerivedOutputs(0, which, allocs=[[before, n] for _, before, n in made], config=config)
    return Frame(meta, {"returned": out, "buffers": [p.buffer for p in placed], "allocs": [b for b, _, _ in made]})


def judge_of(frames: dict[tuple[str, int], Frame[DerivedOutputs]]) -> tuple[Any, list[str]]:
    judge = SimpleNamespace(ref=SimpleNamespace(derived=[]), ref_device="cpu", refs_on_gpu=False)
    judge.ref.derived, dropped = absorb_original(judge, [CALL], frames)
    return judge, dropped


def original(picked: int = 2, *twins: Frame[DerivedOutputs]) -> dict[tuple[str, int], Frame[DerivedOutputs]]:
    frames = {("a", 0): frame(flagged(picked), "a"), ("b", 0): frame(flagged(picked), "b")}
    for k, twin in enumerate(twins):
        frames[(twin_key(k), 0)] = twin
    return frames


def both_configs() -> tuple[Frame[DerivedOutputs], Frame[DerivedOutputs]]:
    return frame(flagged(1), config=0), frame(flagged(2), config=1)


def test_the_special_values_call_depends_on_the_block_here() -> None:
    one, two = frame(flagged(1)).tree["returned"], frame(flagged(2)).tree["returned"]
    assert bool(torch.isnan(two[1]).all()) and not bool(torch.isnan(one[1]).any())


def test_a_candidate_on_another_config_of_the_original_passes_with_its_twins() -> None:
    judge, dropped = judge_of(original(2))  # no twins: as before
    assert not dropped
    refused = verdict_of(judge, frame(flagged(1)))
    assert refused is not None and "NaN positions differ" in refused[1], refused
    judge, dropped = judge_of(original(2, *both_configs()))
    assert not dropped and UNDEFINED in judge.ref.derived[0][1]
    assert verdict_of(judge, frame(flagged(1))) is None
    assert verdict_of(judge, frame(flagged(2))) is None


def test_a_candidate_wrong_where_every_config_agrees_is_still_refused() -> None:
    judge, _ = judge_of(original(2, *both_configs()))
    mask = next(iter(judge.ref.derived[0][1][UNDEFINED].values()))
    assert bool(mask[1].all()) and not bool(mask[2:].any())  # row 1 only: where the configs differ
    off = verdict_of(judge, frame(flagged(1, extra=1.0)))
    assert off is not None and off[0] == Status.MISMATCH, off

    def nan_in_row(x: torch.Tensor) -> torch.Tensor:
        out = flagged(1)(x)
        out[-1, 0] = float("nan")
        return out

    assert not bool(torch.isinf(derived_run.build(CALL, "a")[0][0][-1]).any())  # a row no config makes NaN
    off = verdict_of(judge, frame(nan_in_row))
    assert off is not None and "NaN positions differ" in off[1], off


def test_a_candidates_config_frame_is_refused() -> None:
    judge, _ = judge_of(original(2, *both_configs()))
    forged = frame(flagged(1), config=0)
    refused = verdict_of(judge, forged)
    assert refused is not None and refused[0] == Status.REJECTED and refused[1].startswith("trust:"), refused
    assert plain_deviations(judge, forged) == {}


def test_twins_that_write_outside_their_tensors_widen_nothing() -> None:
    one, two = both_configs()
    judge, dropped = judge_of(original(2, frame(flagged(1), config=0, stray=True), two))
    assert not dropped  # the call is kept as it was
    assert UNDEFINED not in judge.ref.derived[0][1]
    assert verdict_of(judge, frame(flagged(1))) is not None


def test_a_twin_that_raises_is_skipped_and_the_others_count() -> None:
    one, _ = both_configs()
    failed = Frame(DerivedOutputs(0, "a", error="OutOfResources: shared memory", config=1), None)
    judge, dropped = judge_of(original(2, one, failed))
    assert not dropped
    assert verdict_of(judge, frame(flagged(1))) is None


def test_canary_runs_on_different_configs_keep_the_call_with_twins() -> None:
    """Runs "a" and "b" of the original may pick different configs too: without twins the
    call is dropped (its result seems to depend on memory); with them it is kept, and only
    where the configs differ is undefined."""
    split = {("a", 0): frame(flagged(2), "a"), ("b", 0): frame(flagged(1), "b")}
    _, dropped = judge_of(dict(split))
    assert dropped
    judge, dropped = judge_of({**split, (twin_key(0), 0): both_configs()[0], (twin_key(1), 0): both_configs()[1]})
    assert not dropped
    assert verdict_of(judge, frame(flagged(1))) is None
    assert verdict_of(judge, frame(flagged(1, extra=1.0))) is not None


def test_twins_run_once_per_config_only_for_an_autotuned_original(tmp_path) -> None:
    """In the variant process (real Triton, interpreted): an autotuned module's
    special-values call runs once per config, pinned, and nothing else; the autotuner gets
    its configs and choices back after. A module without an autotuner runs no twin (no
    frame), and a plain step sends no config frame. In a process of its own: the
    interpreter must be chosen before Triton starts."""
    import os
    import subprocess
    import sys
    import textwrap

    (tmp_path / "tuned.py").write_text(BLOCKWISE, encoding="utf-8")
    plain = BLOCKWISE.replace('@triton.autotune(configs=[triton.Config({"BLOCK_M": 1}), triton.Config({"BLOCK_M": 2})], '
                              'key=["n_rows", "n_cols"])\n', "")
    plain = plain.replace('flag_kernel[lambda m: (triton.cdiv(n_rows, m["BLOCK_M"]),)](', "flag_kernel[(n_rows,)](")
    plain = plain.replace("BLOCK_N=triton.next_power_of_2(n_cols))", "BLOCK_M=1, BLOCK_N=triton.next_power_of_2(n_cols))")
    assert "autotune" not in plain and "BLOCK_M=1," in plain
    (tmp_path / "plain.py").write_text(plain, encoding="utf-8")
    script = textwrap.dedent("""
        import types
        import torch
        import plain, tuned
        from kernelband.worker import autotune_clock, derived, derived_run
        from kernelband.worker.call_spec import RecordedCall
        from kernelband.worker.messages import Derived

        class Steps:
            def __init__(self):
                self.sent = []
            def await_judge(self):
                pass
            def check_runtime(self):
                pass
            def send(self, meta, tree=None):
                self.sent.append(meta)

        rc = RecordedCall.from_dict({"fn": "flagged", "args": [{"t": "tensor", "shape": [8, 64], "dtype": "float32",
                                     "device": "cpu", "contiguous": True, "floating": True, "id": 0}], "kwargs": {}})
        drawn = derived.derive([rc], 0, max_bytes=1 << 20, interpreted=True)
        calls = [c for c in drawn if c.flavour in ("sizes", "special")]
        special = [i for i, c in enumerate(calls) if c.flavour == "special"]
        tuner = tuned.flag_kernel
        with autotune_clock.one_config_per_call(lambda: None):
            tuned.flagged(torch.randn(8, 64))  # a choice in its cache, as the harness leaves it
        configs, cache = tuner.configs, dict(tuner.cache)
        for module in (tuned, plain):
            steps = Steps()
            derived_run.run_calls(types.SimpleNamespace(module=module), Derived(calls, "o", "a", configs=True), steps)
            print(module.__name__, [(m.index, m.config, m.error) for m in steps.sent])
        steps = Steps()
        derived_run.run_calls(types.SimpleNamespace(module=tuned), Derived(calls, "o", "a"), steps)
        print("plain step", [(m.index, m.config) for m in steps.sent])
        print("special", special, "restored", tuner.configs is configs and len(configs) == 2,
              {k: str(v) for k, v in tuner.cache.items() if k in cache} == {k: str(v) for k, v in cache.items()})
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    special = lines[3].split("restored")[0]
    index = int(special.split("[")[1].split("]")[0])
    assert lines[0] == f"tuned [({index}, 0, None), ({index}, 1, None)]", p.stdout
    assert lines[1] == "plain []", p.stdout
    assert lines[2] == "plain step [(0, None), (1, None)]", p.stdout
    assert lines[3].endswith("restored True True"), p.stdout
