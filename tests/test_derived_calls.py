"""Inputs beyond the harness: derived calls of the wrapper, the original as the oracle,
every tensor in a canary-padded buffer (kernelband/worker/derived.py, derived_run.py,
judge_derived.py).

Honest bugs that the harness's own inputs cannot show (a mask dropped because the
harness's size is a multiple of the block, a caller's row stride ignored, a store past
the end) are wrong variants here; correct rewrites still pass; a derived call the
original itself gets wrong is not held against anyone."""
from __future__ import annotations

import math

import textwrap

import pytest
from helpers.kernels import AUTOTUNED, BLOCKWISE, BLOCKWISE_GRID, BLOCKWISE_TUNED, SCALE, prepared_evaluator

from kernelband.model import Status, Variant
from kernelband.worker import derived, derived_run
from kernelband.worker.call_spec import DerivedCall, RecordedCall, TensorArg


# row-wise: the caller's row stride is honoured by the original
ROWS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.jit
    def row_scale_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask)
        tl.store(out_ptr + row * out_row_stride + cols, x * 2.0, mask=mask)


    def row_scale(x):
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        row_scale_kernel[(n_rows,)](x, out, x.stride(0), out.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out


    def harness_rows():
        x = torch.randn(16, 100, device=DEVICE)
        return row_scale(x)
''')


@pytest.fixture(scope="module")
def scale_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "scale", SCALE, "scale_kernel", "harness_scale")
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def rows_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "rows", ROWS, "row_scale_kernel", "harness_rows")
    yield ev
    ev.close()


def _variant(source: str, old: str, new: str) -> Variant:
    assert source.count(old) == 1, old
    return Variant(source.replace(old, new))


def test_a_correct_rewrite_passes_every_derived_call(scale_ev):
    ev = scale_ev.evaluate(Variant(SCALE.replace("cdiv(n, 128)", "cdiv(n, 256)").replace("BLOCK=128)", "BLOCK=256)")),
                           time_it=False)
    assert ev.ok, ev.message
    assert "calls beyond the harness" in ev.message


def test_a_dropped_mask_is_caught_at_sizes_the_harness_does_not_use(scale_ev):
    """4096 is a multiple of 128: without its mask the kernel is right on the harness and
    reads and writes past the end at every other size."""
    v = _variant(SCALE, "    x = tl.load(x_ptr + offs, mask=mask)\n    tl.store(out_ptr + offs, x * factor, mask=mask)",
                 "    x = tl.load(x_ptr + offs)\n    tl.store(out_ptr + offs, x * factor)")
    ev = scale_ev.evaluate(v, time_it=False)
    # under the interpreter the stray writes may corrupt the process's heap before any
    # comparison: a crash during a call beyond the harness is a rejection too
    assert ev.status in (Status.MISMATCH, Status.CRASHED) and "beyond the harness" in ev.message, ev.message


def test_a_store_past_the_end_is_caught_by_the_canaries(scale_ev):
    """Correct values everywhere it should write, and one element more: only a canary sees it."""
    v = _variant(SCALE, "    tl.store(out_ptr + offs, x * factor, mask=mask)",
                 "    tl.store(out_ptr + offs, x * factor, mask=mask)\n"
                 "    tl.store(out_ptr + n + tl.arange(0, BLOCK), x * 0.0, mask=tl.arange(0, BLOCK) < 1)")
    ev = scale_ev.evaluate(v, time_it=False)
    assert ev.status == Status.MISMATCH and "outside its tensors" in ev.message, ev.message


def test_a_caller_row_stride_ignored_is_caught(rows_ev):
    """The harness's tensor is contiguous, so row stride and n_cols agree there; a slice of
    a wider tensor (rows padded) shows the difference."""
    v = _variant(ROWS, "x_ptr + row * x_row_stride + cols", "x_ptr + row * n_cols + cols")
    ev = rows_ev.evaluate(v, time_it=False)
    assert ev.status == Status.MISMATCH and "beyond the harness" in ev.message, ev.message


def test_a_correct_rows_rewrite_passes(rows_ev):
    ev = rows_ev.evaluate(Variant(ROWS.replace("x * 2.0, mask=mask)", "x + x, mask=mask)")), time_it=False)
    assert ev.ok, ev.message


# --------------------------------------------------------------------------- the pieces
RECORDED_DICTS = [{"fn": "scale", "args": [{"t": "tensor", "shape": [4096], "dtype": "float32", "device": "cpu",
                                      "contiguous": True, "id": 0, "floating": True},
                                     {"t": "value", "v": 1.5}, {"t": "value", "v": 4096}], "kwargs": {}}]
RECORDED = [RecordedCall.from_dict(c) for c in RECORDED_DICTS]


def test_derived_calls_are_reproducible_and_within_their_budget():
    a, b = derived.derive(RECORDED, 11), derived.derive(RECORDED, 11)
    assert a == b and derived.derive(RECORDED, 12) != a
    for call in a:
        if call.flavour not in ("grow", "long", "high"):  # only these go past the harness's sizes
            assert call.args[0].shape[0] <= 4096
        assert call.args[2].v == call.args[0].shape[0]  # n follows the size it equals
    # 1-D: no rank to split; a long fp16 call has a float32 twin; its float factor is negated; an empty call
    assert {c.flavour for c in a} == set(derived.FLAVOURS) - {"rank"} | {"sizes", "high", "scalars", "empty"}
    small = derived.derive(RECORDED, 11, max_bytes=4 << 10)
    assert all(c.args[0].shape[0] * 4 <= 4 << 10 for c in small)


def test_the_judge_finds_the_tensor_in_its_buffer_by_its_own_layout():
    import torch

    spec = TensorArg(shape=(3, 5), dtype="float32", device="cpu", contiguous=False, id=0, floating=True,
                     layout="strided", pad=(17, 9))
    placed = derived_run.place(spec, 3, "a")
    view, rest = derived_run.split_buffer(placed.buffer, spec)
    assert torch.equal(view, placed.view) and not placed.view.is_contiguous()
    assert derived_run.canaries_intact(rest, "a")
    placed.buffer[-1] = 0.0  # a write past the end
    assert not derived_run.canaries_intact(derived_run.split_buffer(placed.buffer, spec)[1], "a")
    # a buffer of another size than the judge's layout needs is not accepted
    assert derived_run.split_buffer(placed.buffer[:-1], spec) == (None, None)


@pytest.mark.parametrize("layout", ["spread", "transposed", "strided", "contiguous"])
@pytest.mark.parametrize("which", ["a", "b"])
def test_canaries_are_counted_in_every_slot_and_never_in_the_tensor(layout, which):
    """The canaries are counted, not gathered: a write to any one slot (before, after, or
    between the elements of a spread layout) shows, whatever the tensor itself holds
    (NaN, the canary's own value); an allocation's canaries likewise."""
    import torch

    spec = TensorArg(shape=(3, 4), dtype="float32", device="cpu", contiguous=layout == "contiguous", id=0,
                     floating=True, layout=layout, pad=(5, 6))
    placed = derived_run.place(spec, 3, which)
    view, rest = derived_run.split_buffer(placed.buffer, spec)
    view.fill_(derived_run.canary_value(view.dtype, which))  # the tensor holding the canary's value is no canary
    view[0, 0] = float("nan")
    assert derived_run.canaries_intact(rest, which)
    inside = torch.zeros(placed.buffer.numel(), dtype=torch.bool)
    inside.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
    slots = (~inside).nonzero().flatten().tolist()
    assert len(slots) == placed.buffer.numel() - view.numel() >= 11
    for slot in slots:
        changed = placed.buffer.clone()
        changed[slot] = 0.5
        assert not derived_run.canaries_intact(derived_run.split_buffer(changed, spec)[1], which), slot
    buffer = torch.full((10,), derived_run.canary_value(torch.float32, which))
    buffer[3:7] = 1.0
    assert derived_run.canaries_intact(derived_run.allocation_canaries(buffer, 3, 4), which)
    buffer[7] = 1.0  # one past the allocation
    assert not derived_run.canaries_intact(derived_run.allocation_canaries(buffer, 3, 4), which)
    assert not derived_run.canaries_intact(None, which)


@pytest.mark.slow
def test_an_original_whose_process_dies_on_a_derived_call_drops_that_call(tmp_path):
    """The original reads far out of bounds (a segfault under the interpreter) at sizes
    larger than its harness's: the calls it dies on are dropped with a note, the original
    is run again, and the other derived calls still check candidates."""
    dies = SCALE.replace("    x = tl.load(x_ptr + offs, mask=mask)\n",
                         "    far = tl.where(n > 4096, 100000000000, 0)\n"
                         "    x = tl.load(x_ptr + offs + far, mask=mask)\n")
    ev = prepared_evaluator(tmp_path, "dies", dies, "scale_kernel", "harness_scale")
    try:
        assert "process fails on it" in ev.baseline.message and "died" in ev.baseline.message, ev.baseline.message
        ok = ev.evaluate(Variant(dies.replace("x * factor", "factor * x")), time_it=False)
        assert ok.ok and "calls beyond the harness" in ok.message, ok.message
        wrong = ev.evaluate(Variant(dies.replace("x * factor", "x * factor + (x > 100.0)")), time_it=False)
        assert wrong.status == Status.MISMATCH and "beyond the harness" in wrong.message, wrong.message
    finally:
        ev.close()


def test_derived_calls_run_one_autotune_config_each_by_turn(tmp_path):
    """New sizes are new autotune keys: inside ``one_config_per_call`` a tuning round runs
    one config, not every one compiled and benchmarked. Which one is the call's turn
    (modulo the configs), so calls with different turns check different configs; a config
    that cannot run (out of resources) hands over to the next; the autotuner gets its own
    bench back after. In a process of its own: the interpreter must be chosen before
    Triton starts."""
    import os
    import subprocess
    import sys

    (tmp_path / "tuned.py").write_text(AUTOTUNED, encoding="utf-8")
    script = textwrap.dedent("""
        import torch
        import tuned
        from triton.runtime.errors import OutOfResources
        from kernelband.worker import autotune_clock

        runs = []
        tuner = tuned.scale_kernel
        before = dict(vars(tuner))
        picked = []
        with autotune_clock.one_config_per_call(lambda: runs.append(1)):
            for turn, n in ((0, 1000), (1, 1001), (2, 1002), (4, 1003)):
                with autotune_clock.config_turn(turn):
                    out = tuned.scale(torch.ones(n), 2.0)
                assert torch.equal(out, torch.full((n,), 2.0))
                picked.append(tuner.best_config.kwargs["BLOCK"])
            def no_room(nargs):  # the config the turn names cannot run here
                if nargs["BLOCK"] == 128:
                    raise OutOfResources(1 << 20, 1 << 16, "shared memory")
            tuner.configs[1].pre_hook = no_room
            with autotune_clock.config_turn(1):
                out = tuned.scale(torch.ones(1004), 2.0)
            assert torch.equal(out, torch.full((1004,), 2.0))
            picked.append(tuner.best_config.kwargs["BLOCK"])
            tuner.configs[1].pre_hook = None
        after = {k: v for k, v in vars(tuner).items() if k not in ("cache", "nargs", "bench_time", "configs_timings", "best_config")}
        changed = sorted(k for k in after if after[k] is not before.get(k))
        print(len(runs), changed or "none", len(tuner.cache), *picked)
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    # five keys, one run each (the hand-over's refused config never ran); turns 0, 1, 2
    # and 4 (= 1 modulo 3) check BLOCK 64, 128, 256, 128; turn 1 with 128 out of
    # resources runs 256; Triton's own bench back after
    assert p.stdout.split() == ["5", "none", "5", "64", "128", "256", "128", "256"], p.stdout
    assert "@triton.autotune" in AUTOTUNED and "BLOCK=128)" not in AUTOTUNED


def test_dropping_a_call_renumbers_the_aliased_calls_twins():
    """An aliased call is judged against its twin by index: dropping an earlier call must
    not leave it pointing at another call, and dropping its twin drops it too."""
    from kernelband.worker.judge_derivation import calls_without

    calls = [DerivedCall(fn="f", args=(), kwargs={}, flavour=f, seed=0, sizes={}, twin=1 if f == "alias" else None)
             for f in ("sizes", "alias_twin", "alias", "grow")]
    after = calls_without(calls, 0)
    assert [c.flavour for c in after] == ["alias_twin", "alias", "grow"] and after[1].twin == 0
    assert [c.flavour for c in calls_without(calls, 1)] == ["sizes", "grow"]
    assert calls_without(calls, 3) == calls[:3] and calls[2].twin == 1


def test_a_process_of_the_original_is_started_again_only_for_calls_left_to_run(monkeypatch):
    """Each call that takes the original's process down is dropped and the rest run in a
    fresh one; when the last call is the one dropped, no fresh process is started (on a
    GPU a call past int32 offsets crashed add_scale's original, and an empty process
    followed it)."""
    from kernelband.worker import judge_derivation

    calls = [DerivedCall(fn="f", args=(), kwargs={}, flavour=f, seed=0, sizes={}) for f in ("sizes", "grow")]
    runs: list[int] = []

    def crashing(judge, ref, calls, twins, keep_cache, siblings, frames_share):
        runs.append(len(calls))
        return 0, "died"

    monkeypatch.setattr(judge_derivation, "_run", crashing)
    kept, notes, failure = judge_derivation.original_references(None, None, calls)
    assert runs == [2, 1] and kept == [] and failure == ""
    assert "fails on 2 calls beyond the harness" in notes[0]


# --------------------------------------------------------------------------- every class, every draw
def _tensor(shape: list[int], dtype: str, ident: int) -> dict:
    return {"t": "tensor", "shape": shape, "dtype": dtype, "device": "cpu", "contiguous": True, "id": ident,
            "floating": "float" in dtype}


ROWS_OUT = {"fn": "rmsnorm", "args": [_tensor([32, 256], "float32", 0), _tensor([256], "float32", 1)],
            "kwargs": {"out": _tensor([32, 256], "float32", 2)}}  # an out= buffer the harness passes
MATMUL = {"fn": "matmul", "args": [_tensor([64, 96], "float16", 0), _tensor([96, 80], "float16", 1)], "kwargs": {}}
LOOKUP = {"fn": "embedding", "args": [_tensor([256], "int64", 0), _tensor([4000, 128], "float32", 1)],
          "kwargs": {}}
SEEDS = range(40)


def _draws(call: dict, interpreted: bool = True) -> list[list[DerivedCall]]:
    from kernelband.worker.judge_derived import calls_to_derive

    return [calls_to_derive([RecordedCall.from_dict(call)], seed, interpreted) for seed in SEEDS]


def _of(calls: list[DerivedCall], flavour: str) -> list[DerivedCall]:
    return [c for c in calls if c.flavour == flavour]


def _sizes(call: DerivedCall) -> list[int]:
    return [d for a in derived_run.distinct_tensors(call) for d in a.shape]


def test_every_draw_holds_a_ragged_and_an_aligned_call():
    """Block-size bugs: a size no tile of 16 or more divides, and every size a multiple of
    16 but not of 32 (a K mask skipped when K % 16 == 0 with BLOCK_K = 32)."""
    for draw in _draws(MATMUL):
        (ragged,), (aligned,) = _of(draw, "sizes"), _of(draw, "aligned")
        assert all(d % 16 for d in _sizes(ragged)), derived.describe_call(ragged)
        assert all(d % 16 == 0 and d % 32 for d in _sizes(aligned)), derived.describe_call(aligned)
        assert ragged.args[0].shape[1] == ragged.args[1].shape[0]  # K maps to one size


def test_every_draw_holds_a_long_reduced_precision_row():
    """Accumulating in 16 bits: rows past 2**14 of large values summing to about 0 (the
    error is the partial sums', the tolerance the result's), in fp16 (bf16 has no oracle
    under the interpreter) or the harness's own reduced dtype; within the interpreter's budget."""
    from kernelband.worker.judge_derived import INTERPRETED_CALL_BYTES

    for call, dtype in ((ROWS_OUT, "float16"), (MATMUL, "float16")):
        for draw in _draws(call):
            (long,) = _of(draw, "long")
            floats = [a for a in derived_run.distinct_tensors(long) if a.floating]
            assert all(a.dtype == dtype and a.values == "centred" for a in floats)
            assert derived._call_bytes(derived_run.distinct_tensors(long), {}) <= INTERPRETED_CALL_BYTES
            if call is ROWS_OUT:
                assert long.args[0].shape[-1] > 1 << 14, derived.describe_call(long)
    # on a GPU too the long call is fp16 in every session (statistics kept in the input's
    # dtype overflow there; a bf16 long row only loses bits a tolerance can hide); the
    # grown call takes bf16 in turn
    gpu_draws = _draws(ROWS_OUT, interpreted=False)
    assert {_of(d, "long")[0].args[0].dtype for d in gpu_draws} == {"float16"}
    assert "bfloat16" in {_of(d, "grow")[0].args[0].dtype for d in gpu_draws}
    # a harness row already long is kept: a new row size is a new compile of a kernel whose
    # block is its row (18.6 s for a 16384 block at one warp on an H100)
    long_row = dict(ROWS_OUT, args=[_tensor([64, 8192], "bfloat16", 0), _tensor([8192], "bfloat16", 1)],
                    kwargs={"out": _tensor([64, 8192], "bfloat16", 2)})
    for draw in _draws(long_row, interpreted=False):
        assert _of(draw, "long")[0].args[0].shape[-1] == 8192
    x = derived_run.place(_of(_draws(ROWS_OUT)[0], "long")[0].args[0], 5, "a", 8.0).view.double()
    assert x.abs().sum(-1).min() > 1000 * x.sum(-1).abs().max()


def test_every_draw_holds_indices_past_int16():
    """A vocabulary grown past 2**16, its indices past 2**15 and 2**16 in every draw."""
    for draw in _draws(LOOKUP):
        (grow,) = _of(draw, "grow")
        ids, table = grow.args
        assert table.shape[0] > 1 << 16 and ids.wide
        values = derived_run.place(ids, grow.seed, "a").view
        assert int(values.max()) >= 1 << 16 and int(((values >= 1 << 15) & (values < table.shape[0])).sum()) >= 1
        assert int(values.max()) < table.shape[0]


def test_every_draw_splits_the_rows_into_two_dimensions_of_two_or_more():
    """A 3-D input for a 2-D one: x.shape[0] is then not the number of rows."""
    for draw in _draws(ROWS_OUT):
        (rank,) = _of(draw, "rank")
        x = rank.args[0].shape
        assert len(x) == 3 and min(x[:2]) >= 2 and rank.kwargs["out"].shape[:2] == x[:2]


def test_every_draw_writes_the_output_over_an_input():
    """An out= buffer the harness passes (or an optional one it never passes): one call
    writes it over an input of its shape, judged against its twin (a fresh buffer)."""
    for draw in _draws(ROWS_OUT):
        (alias,) = _of(draw, "alias")
        twin = draw[alias.twin]
        assert twin.flavour == "alias_twin" and alias.kwargs["out"].id == alias.args[0].id
        assert twin.kwargs["out"].id != twin.args[0].id and twin.sizes == alias.sizes
        assert min(_sizes(twin)) >= 2  # a single column hides an in-place hazard
    # on a GPU at the harness's sizes: a grid that fits the GPU at once runs every program
    # together (each reads before any writes), so an in-place hazard needs several waves
    for draw in _draws(ROWS_OUT, interpreted=False):
        (alias,) = _of(draw, "alias")
        assert list(alias.args[0].shape) == ROWS_OUT["args"][0]["shape"], derived.describe_call(alias)


# A row sum in tiles of 32 columns: the harness's 64 columns are two whole tiles
ROWSUM = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.jit
    def rowsum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
            acc += x.to(tl.float32)
        tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


    def rowsum(x):
        out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        rowsum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=32)
        return out


    def harness_rowsum():
        return rowsum(torch.randn(8, 64, device=DEVICE))
''')


@pytest.fixture(scope="module")
def rowsum_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "rowsum", ROWSUM, "rowsum_kernel", "harness_rowsum")
    yield ev
    ev.close()


@pytest.mark.slow
def test_a_variant_right_only_on_the_harness_sizes_fails_in_every_session(rowsum_ev):
    """Abuse: the harness's column count written into the wrapper. Every draw has sizes
    other than 64 (ragged and aligned ones), so no session lets it through."""
    ev = rowsum_ev.evaluate(_variant(ROWSUM, "x.shape[1], x.stride(0)", "64, x.stride(0)"), time_it=False)
    assert ev.status in (Status.MISMATCH, Status.CRASHED) and "beyond the harness" in ev.message, ev.message


@pytest.mark.slow
def test_a_mask_skipped_when_the_size_looks_whole_fails_in_every_session(rowsum_ev):
    """n_cols % 16 == 0 taken for a whole number of tiles of 32: right at 64, wrong at 48."""
    load = "        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)\n"
    v = _variant(ROWSUM, load, "        if n_cols % 16 == 0:  # a whole number of tiles\n"
                               "            x = tl.load(x_ptr + row * stride + cols)\n"
                               "        else:\n    " + load)
    ev = rowsum_ev.evaluate(v, time_it=False)
    assert ev.status in (Status.MISMATCH, Status.CRASHED) and "beyond the harness" in ev.message, ev.message


@pytest.mark.slow
def test_accumulating_in_fp16_fails_in_every_session(rowsum_ev):
    """Right for the harness's fp32; a long fp16 row of large values summing to about 0
    shows the partial sums rounded to 11 bits."""
    v = _variant(ROWSUM, "acc += x.to(tl.float32)", "acc += x.to(x_ptr.dtype.element_ty)")
    v = Variant(v.source.replace("acc = tl.zeros((BLOCK,), dtype=tl.float32)",
                                 "acc = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)"))
    ev = rowsum_ev.evaluate(v, time_it=False)
    assert ev.status == Status.MISMATCH and "beyond the harness" in ev.message, ev.message


@pytest.mark.slow
def test_a_correct_rowsum_rewrite_passes(rowsum_ev):
    ev = rowsum_ev.evaluate(Variant(ROWSUM.replace("BLOCK=32)", "BLOCK=64)")), time_it=False)
    assert ev.ok, ev.message


def test_every_long_call_has_a_float32_twin_of_the_same_values():
    for draw in _draws(ROWS_OUT):
        (long,), highs = _of(draw, "long"), _of(draw, "high")
        (high,) = [h for h in highs if draw[h.twin] is long]
        assert draw[high.twin] is long and high.sizes == long.sizes and high.seed == long.seed
        a = derived_run.place(long.args[0], 1, "a", 4.0).view
        b = derived_run.place(high.args[0], 1, "a", 4.0).view
        assert a.dtype != b.dtype and bool((a.float() == b).all())


@pytest.fixture(scope="module")
def rowsum16_ev(tmp_path_factory):
    """An original that itself accumulates in its input's dtype: on a long fp16 row it is
    no oracle to the last bit."""
    source = ROWSUM.replace("acc = tl.zeros((BLOCK,), dtype=tl.float32)",
                            "acc = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)")
    source = source.replace("acc += x.to(tl.float32)", "acc += x")
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "rowsum16", source, "rowsum_kernel", "harness_rowsum")
    yield ev, source
    ev.close()


@pytest.mark.slow
def test_reordering_an_original_that_accumulates_in_fp16_passes(rowsum16_ev):
    """Another tile width sums in another order: on the long fp16 row both results are off
    the float32 twin's by about as much, so the candidate is as precise as the original."""
    ev, source = rowsum16_ev
    got = ev.evaluate(Variant(source.replace("BLOCK=32)", "BLOCK=64)")), time_it=False)
    assert got.ok, got.message


# an original that takes only fp16 (as a kernel that asserts its dtype does): the long
# call's float32 twin raises there, so the long call has no higher-precision reference
ROWSUM_FP16_ONLY = ROWSUM.replace(
    "    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)",
    "    assert x.dtype == torch.float16\n    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)",
).replace("torch.randn(8, 64, device=DEVICE)", "torch.randn(8, 64, device=DEVICE, dtype=torch.float16)")


@pytest.fixture(scope="module")
def rowsum_fp16_only_ev(tmp_path_factory):
    assert ROWSUM_FP16_ONLY.count("assert x.dtype") == 1 and "float16)" in ROWSUM_FP16_ONLY
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "rowsum_fp16_only", ROWSUM_FP16_ONLY,
                            "rowsum_kernel", "harness_rowsum")
    yield ev
    ev.close()


@pytest.mark.slow
def test_reordering_an_original_without_a_float32_twin_passes(rowsum_fp16_only_ev):
    """Another tile width sums the long row's large values in another float32 order, through
    the whole evaluator, for an original without a float32 twin. Here the interpreter's
    reordering stays within the plain tolerance, so this guards the path, not the floor:
    the case that needs the floor (an H200's split-K matmuls, results near 0 moved past the
    plain tolerance) is tests/test_compare.py's long-row test."""
    ev = rowsum_fp16_only_ev
    got = ev.evaluate(Variant(ROWSUM_FP16_ONLY.replace("BLOCK=32)", "BLOCK=64)")), time_it=False)
    assert got.ok, got.message


@pytest.mark.slow
def test_accumulating_in_fp16_fails_without_a_float32_twin(rowsum_fp16_only_ev):
    """Abuse of the rule above: a 16-bit accumulator, right on the harness's short rows, is
    off on the long row by far more than the relative L2 tolerance."""
    v = ROWSUM_FP16_ONLY.replace("acc = tl.zeros((BLOCK,), dtype=tl.float32)",
                                 "acc = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)")
    v = v.replace("acc += x.to(tl.float32)", "acc += x")
    assert v != ROWSUM_FP16_ONLY
    got = rowsum_fp16_only_ev.evaluate(Variant(v), time_it=False)
    assert got.status == Status.MISMATCH and "beyond the harness" in got.message, got.message


def test_a_cuda_error_that_breaks_the_originals_context_is_a_crash_not_a_dropped_call():
    """On a GPU, a derived call that makes the original access memory illegally raises in
    Python, and every later call of that process fails the same way (the context is gone):
    dropping each would leave no call checked and the broken process as the reference lane
    (seen on an H200 with kv_cache_scatter: every candidate then refused). The first such
    error, in the order the calls ran, names the call to drop before the original is run
    again."""
    from kernelband.worker.jobs import Frame
    from kernelband.worker.judge_derivation import first_context_error
    from kernelband.worker.messages import DerivedOutputs

    sticky = ("AcceleratorError: CUDA error: an illegal memory access was encountered\n"
              "Search for `cudaErrorIllegalAddress'")

    def frame(error=None):
        return Frame(DerivedOutputs(0, "a", error=error))

    frames = {("a", 0): frame(), ("a", 1): frame("ValueError: too many values to unpack"),
              ("a", 2): frame(sticky), ("a", 3): frame(sticky), ("b", 0): frame(sticky)}
    index, why = first_context_error(frames, 4)
    assert index == 2 and "illegal memory access" in why
    # an ordinary exception of the original (it does not handle that call) is no crash
    assert first_context_error({("a", 0): frame("ValueError: bad shape"), ("b", 0): frame()}, 1) is None


def test_a_long_row_passes_the_threshold_without_growing_a_long_harness_row_further():
    """A long call's row is past LONG_ROW, and a row already past it is not multiplied
    (a kernel whose block is its row compiles once per row size)."""
    import random

    from kernelband.worker.derived import LONG_ROW, _mapping

    rng = random.Random(3)
    for row in (1000, LONG_ROW + 100, 40000):
        tensors = [TensorArg(shape=(64, row), dtype="float32", device="cpu", contiguous=True, id=0, floating=True)]
        mapping, grown = _mapping("long", tensors, [64, row], rng, interpreted=False)
        assert grown == row and LONG_ROW <= mapping[row] <= max(row, LONG_ROW) + 3


@pytest.mark.slow
def test_a_variant_wrong_only_on_long_float32_rows_fails(rowsum_ev):
    """Abuse of the float32 twin's wider tolerance: a wrapper that adds 1 to its result only
    for float32 rows past 2**14 (the twin is the only such call: the long call itself is
    16-bit, the grown one another dtype). The twin is judged at 100 times the plain
    tolerance, not on shapes alone, so it fails in every session."""
    wrong = ROWSUM.replace(
        "    return out\n",
        "    if x.dtype == torch.float32 and x.shape[1] > 16384:\n        out = out + 1.0\n    return out\n")
    ev = rowsum_ev.evaluate(Variant(wrong), time_it=False)
    assert ev.status == Status.MISMATCH and "float32 large rows" in ev.message, ev.message


# --------------------------------------------------------------------------- integer inputs keep their invariants
SLOTS = {"fn": "reshape_and_cache",
         "args": [_tensor([64, 4, 32], "float16", 0), dict(_tensor([64], "int64", 1), max=511, distinct=True, sorted=False),
                  _tensor([512, 4, 32], "float16", 2)], "kwargs": {}}
ROPE = {"fn": "rotary", "args": [dict(_tensor([64], "int64", 0), max=96, distinct=False, sorted=False),
                                 _tensor([64, 4, 32], "float32", 1), _tensor([97, 32], "float32", 2)], "kwargs": {}}
OFFSETS = {"fn": "varlen", "args": [_tensor([300, 64], "float32", 0),
                                    dict(_tensor([9], "int32", 1), max=300, distinct=True, sorted=True)], "kwargs": {}}


def test_the_recording_keeps_what_a_kernel_may_rely_on_in_integer_inputs():
    import torch

    def facts(value: torch.Tensor) -> tuple:
        spec = derived.describe(value, {})
        assert isinstance(spec, TensorArg)
        return spec.max, spec.distinct, spec.sorted

    assert facts(torch.tensor([5, 1, 9])) == (9, True, False)
    assert facts(torch.tensor([0, 3, 3, 7])) == (7, False, True)
    assert facts(torch.zeros(3)) == (None, None, None)


def test_scatter_slots_stay_distinct_and_within_the_cache_in_every_call():
    """Duplicate slots make two programs write one place in an order no oracle fixes (a
    correct candidate with another block size was refused on the GPU for it); slots past
    the cache are reads and writes outside every tensor of the call."""
    for interpreted in (True, False):
        for draw in _draws(SLOTS, interpreted):
            for call in draw:
                slots, cache = call.args[1], call.args[2]
                values = derived_run.place(slots, call.seed, "a").view.reshape(-1)
                if call.flavour == "empty":
                    assert values.numel() == 0
                    continue
                assert values.unique().numel() == values.numel(), derived.describe_call(call)
                assert int(values.max()) < cache.shape[0], derived.describe_call(call)


def test_positions_stay_below_the_rows_of_the_table_they_index():
    for draw in _draws(ROPE, interpreted=False):
        for call in draw:
            positions, table = call.args[0], call.args[2]
            values = derived_run.place(positions, call.seed, "a").view
            if call.flavour == "empty":
                continue  # no positions
            assert int(values.max()) < table.shape[0], derived.describe_call(call)


def test_a_rank_split_leaves_a_table_of_another_shape_alone():
    for draw in _draws(ROPE):
        (rank,) = _of(draw, "rank")
        assert len(rank.args[1].shape) == 4 and len(rank.args[2].shape) == 2, derived.describe_call(rank)


def test_sorted_offsets_stay_sorted():
    for draw in _draws(OFFSETS):
        for call in draw:
            values = derived_run.place(call.args[1], call.seed, "a").view
            assert bool((values[1:] >= values[:-1]).all()), derived.describe_call(call)
            # an offset may be the end of the rows (inclusive), never past it
            rows = math.prod(call.args[0].shape[:-1])  # a rank call splits them in two
            assert int(values.max()) <= rows, derived.describe_call(call)


@pytest.fixture(scope="module")
def softmax_ev(tmp_path_factory):
    from helpers.paths import REPO

    source = (REPO / "tests" / "redteam" / "kernels" / "softmax.py").read_text(encoding="utf-8")
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "softmax", source, "softmax_kernel", "bench_softmax")
    yield ev, source
    ev.close()


def test_precision_lost_only_beyond_the_harness_fails(softmax_ev):
    """Probabilities rounded through fp16 at every size but the harness's: within the
    tolerance everywhere (4.9e-4 relative against 1e-3), so only the consistency rule on
    calls beyond the harness sees it: there it is farther from the original than the
    candidate's outputs at seed 0 (0) and the original's own error allow."""
    ev, source = softmax_ev
    lossy = _variant(source, "    softmax_output = numerator / denominator\n",
                     "    softmax_output = numerator / denominator\n"
                     "    if n_cols != 256:  # the harness's width: exact there\n"
                     "        softmax_output = softmax_output.to(tl.float16).to(tl.float32)\n")
    got = ev.evaluate(lossy, time_it=False)
    assert got.status == Status.MISMATCH and got.message.startswith("precision: beyond the harness"), got.message


def test_a_correct_softmax_rewrite_passes_the_consistency_rule_beyond_the_harness(softmax_ev):
    ev, source = softmax_ev
    wider = _variant(source, "BLOCK_SIZE = triton.next_power_of_2(n_cols)", "BLOCK_SIZE = 2 * triton.next_power_of_2(n_cols)")
    got = ev.evaluate(wider, time_it=False)
    assert got.ok, got.message


def test_a_reordered_atomic_scatter_passes_the_special_values_call(tmp_path):
    """The special-values call holds magnitudes of 3e4: atomics that add in another order
    (here: the source rows walked backwards, a correct rewrite) round such sums ulp(3e4)
    = 0.004 apart, which the plain tolerance (1e-4 + 1e-3 * |ref|) refused on a GPU
    (scatter_add_fp32, 1 of 20736 elements, relative L2 1.1e-8). Finite values of that call
    are compared at the float32 twin's scale."""
    from helpers.paths import REPO

    source = (REPO / "benchmarks" / "suite" / "scatter_add_fp32.py").read_text(encoding="utf-8")
    ev = prepared_evaluator(tmp_path, "scatter", source, "scatter_add_kernel", "harness_scatter_add")
    try:
        backwards = _variant(source, "    i = tl.program_id(0)\n",
                             "    i = tl.num_programs(0) - 1 - tl.program_id(0)  # the same adds, in reverse\n")
        got = ev.evaluate(backwards, time_it=False)
        assert got.ok, got.message
    finally:
        ev.close()


def test_the_special_values_scale_still_compares_nan_and_inf_positions_exactly():
    """The looser scale of the special-values call is for finite values only: infinities
    clamped to a large finite value (a dropped -inf guard, a ReLU by multiplication) and a
    NaN turned into a number still fail, however large the scale. (Deterministic: whether a
    session's draw puts infinities where a given kernel reads them is up to the draw.)"""
    import torch

    from kernelband.worker.compare import compare_outputs
    from kernelband.worker.judge_derived import HIGH_TOLERANCE_SCALE

    ref = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.5])
    reordered = ref.clone()
    reordered[4] += 0.0039  # a sum of +-3e4 magnitudes, added in another order: ulp(3e4) apart
    assert compare_outputs(ref, reordered, tol_scale=HIGH_TOLERANCE_SCALE).ok
    assert not compare_outputs(ref, reordered).ok  # the plain tolerance refused it
    clamped = ref.clone()
    clamped[1], clamped[2] = 1.0e30, -1.0e30
    assert not compare_outputs(ref, clamped, tol_scale=HIGH_TOLERANCE_SCALE).ok
    numbered = ref.clone()
    numbered[3] = 0.0
    assert not compare_outputs(ref, numbered, tol_scale=HIGH_TOLERANCE_SCALE).ok


# a block fixed at 128 columns: past 128 the original writes nothing (fresh memory stays as
# it was), so there it is no oracle; within them it is
FIXED_BLOCK = ROWS.replace("BLOCK=triton.next_power_of_2(n_cols))", "BLOCK=128)")


@pytest.fixture(scope="module")
def fixed_block_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "fixed", FIXED_BLOCK, "row_scale_kernel", "harness_rows")
    yield ev
    ev.close()


def test_what_the_original_leaves_unwritten_is_not_held_against_a_candidate(fixed_block_ev):
    """A candidate that writes every column of a long row where the original, its block
    fixed at 128, leaves the rest as fresh memory: the same wherever the original wrote."""
    whole_row = _variant(FIXED_BLOCK, "BLOCK=128)", "BLOCK=max(128, triton.next_power_of_2(n_cols)))")
    got = fixed_block_ev.evaluate(whole_row, time_it=False)
    assert got.ok, got.message


def test_a_candidate_wrong_where_the_original_wrote_is_still_caught_beyond_the_harness(fixed_block_ev):
    """Past the harness's 100 columns the candidate is wrong in the columns the original
    does write (the first 128), or writes nothing at all: both refused."""
    off_by_one = _variant(FIXED_BLOCK, "x * 2.0, mask=mask)", "x * 2.0 + (n_cols > 100), mask=mask)")
    got = fixed_block_ev.evaluate(off_by_one, time_it=False)
    assert got.status == Status.MISMATCH and "beyond the harness" in got.message, got.message
    skips = _variant(FIXED_BLOCK, "    row_scale_kernel[", "    if n_cols > 100:\n        return out\n    row_scale_kernel[")
    got = fixed_block_ev.evaluate(skips, time_it=False)
    assert got.status == Status.MISMATCH and "beyond the harness" in got.message, got.message




def _pinned(rows: int) -> str:
    """BLOCKWISE with its autotuner replaced by a fixed block of ``rows`` rows."""
    source = _variant(BLOCKWISE, BLOCKWISE_TUNED, "").source
    source = _variant(source, BLOCKWISE_GRID, f"flag_kernel[(triton.cdiv(n_rows, {rows}),)](").source
    return _variant(source, "BLOCK_N=triton.next_power_of_2(n_cols))",
                    f"BLOCK_M={rows}, BLOCK_N=triton.next_power_of_2(n_cols))").source


@pytest.fixture(scope="module")
def blockwise_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("derived"), "blockwise", BLOCKWISE, "flag_kernel", "harness_flagged")
    yield ev
    ev.close()


def test_a_candidate_on_either_of_the_originals_configs_passes_the_special_values_call(blockwise_ev):
    """Whichever config the original's autotuner picked for the special-values call, a
    candidate pinned to the other one differs from it only where the original's own configs
    do: its config twins leave those elements undefined (both were refused before)."""
    assert "beyond the harness are not checked" not in blockwise_ev.baseline.message, blockwise_ev.baseline.message
    for rows in (1, 2):
        got = blockwise_ev.evaluate(Variant(_pinned(rows)), time_it=False)
        assert got.ok, (rows, got.message)


def test_a_candidate_wrong_where_every_config_agrees_is_refused_beyond_the_harness(blockwise_ev):
    """A first row holding an infinity left as it is, not NaN: every config of the original
    stores NaN there (row 0 of the special-values call is all -inf, whatever the block), so
    the config twins leave it defined and the candidate is refused on that call."""
    cheat = _variant(_pinned(1), 'tl.where(flag, float("nan")', 'tl.where(flag, tl.where(rows[:, None] == 0, x * 2.0, float("nan"))')
    got = blockwise_ev.evaluate(cheat, time_it=False)
    assert got.status == Status.MISMATCH and "beyond the harness" in got.message and "special values" in got.message, \
        got.message


# ids whose values stayed below the table's rows in the harness's call (a recorded fact)
INDEXED_LOOKUP = {"fn": "embedding", "args": [dict(_tensor([256], "int64", 0), max=3999),
                                              _tensor([4000, 128], "bfloat16", 1)], "kwargs": {}}


def test_a_table_its_integer_argument_indexes_is_never_split_and_the_indices_stay_in_it():
    """A rank split of a lookup table is no input its wrapper takes: the indices, bounded by
    the rows it had, would point past the rows it has (on a GPU into memory beyond every
    canary, the same in both of the original's runs and other in a candidate's: every
    candidate refused). Sorted offsets into a batch's rows still split it (above)."""
    for draw in _draws(INDEXED_LOOKUP, interpreted=False):
        for call in draw:
            ids, table = call.args
            assert len(table.shape) == 2, derived.describe_call(call)
            if ids.shape[0] and table.shape[0]:
                values = derived_run.place(ids, call.seed + 7919 * ids.id, "a").view
                assert int(values.max()) < table.shape[0], derived.describe_call(call)


def test_a_config_wrong_at_other_sizes_is_run_at_its_turn(tmp_path):
    """What would fool a pick by timing: a candidate whose slowest config is wrong wherever
    the size is not a whole number of its blocks. A one-run timing picks the fast configs
    and never shows it; by turns, every config computes some call beyond the harness, so
    the wrong one's result reaches the judge. In a process of its own (the interpreter)."""
    import os
    import subprocess
    import sys

    # BLOCK 128 drops the mask's last block (a tail left unwritten at a ragged size)
    wrong = AUTOTUNED.replace("    mask = offs < n\n", "    mask = (offs < n) & ((BLOCK != 128) | (offs < n - n % 128))\n")
    assert wrong != AUTOTUNED
    (tmp_path / "tuned_wrong.py").write_text(wrong, encoding="utf-8")
    script = textwrap.dedent("""
        import torch
        import tuned_wrong
        from kernelband.worker import autotune_clock

        right = []
        with autotune_clock.one_config_per_call(lambda: None):
            for turn in range(3):  # three calls at ragged sizes, each its own key
                n = 1001 + turn
                with autotune_clock.config_turn(turn):
                    out = tuned_wrong.scale(torch.ones(n), 2.0)
                right.append((tuned_wrong.scale_kernel.best_config.kwargs["BLOCK"],
                              bool(torch.equal(out, torch.full((n,), 2.0)))))
        print(*[f"{b}:{ok}" for b, ok in right])
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["64:True", "128:False", "256:True"], p.stdout
