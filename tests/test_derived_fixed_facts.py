"""Inputs beyond the harness: what every call of a harness holds fixed is varied too
(kernelband/worker/derived.py): the plain arguments it passes one value of (a scale, a
flag: ``_scalar_calls``) and the batch, never empty in a harness (``_empty_call``).

A harness calls ``f(x, 0.125)`` or ``f(x, bias, relu=True)``: before, every derived call
kept the sign of a float argument and the value of a flag, so a rewrite right only for
that sign or that flag was judged correct. The honest bugs of the class, each written as
an edit of an original that handles every value: a scale moved through a ReLU or a max
(equal only for a scale of 0 or more), a flag's other branch dropped, a flag the harness
never passes ignored. Correct rewrites of the same originals still pass. An empty batch (a serving step with
no tokens) takes down a persistent rewrite that divides the rows among its programs; one
that keeps a program when there are no rows passes."""
from __future__ import annotations

import ast
import textwrap

import pytest
from helpers.kernels import prepared_evaluator

from kernelband.evaluate import Evaluator
from kernelband.model import Status, Variant
from kernelband.worker import derived
from kernelband.worker.derived import DefaultedParam
from kernelband.worker.judge_derived import optional_parameters
from kernelband.worker.call_spec import RecordedCall, TensorArg, ValueArg

SCALED_RELU = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.jit
    def scaled_relu_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.maximum(x * scale, 0.0), mask=mask)


    def scaled_relu(x, scale):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scaled_relu_kernel[(triton.cdiv(n, 128),)](x, out, n, scale, BLOCK=128)
        return out


    def harness_relu():
        x = torch.randn(4099, device=DEVICE)
        return scaled_relu(x, 0.125)
''')

# the kernel on its own: the persistent rewrite below replaces it
ROW_MAX_KERNEL = textwrap.dedent('''
    @triton.jit
    def row_max_kernel(x_ptr, out_ptr, n_cols, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
        s = tl.where(mask, x * scale, -float("inf"))
        tl.store(out_ptr + row, tl.max(s, axis=0))
''')
ROW_MAX_LAUNCH = "    row_max_kernel[(n_rows,)](x, out, n_cols, scale, BLOCK=triton.next_power_of_2(n_cols))\n"
ROW_MAX = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

''') + ROW_MAX_KERNEL + textwrap.dedent('''

    def row_max(x, scale):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    ''') + ROW_MAX_LAUNCH + textwrap.dedent('''\
        return out


    def harness_max():
        x = torch.randn(33, 100, device=DEVICE)
        return row_max(x, 2.0)
''')

# the same row max, persistent: a few programs, each over its share of the rows
ROW_MAX_PERSISTENT = ROW_MAX.replace(ROW_MAX_KERNEL, textwrap.dedent('''
    @triton.jit
    def row_max_kernel(x_ptr, out_ptr, n_rows, n_cols, scale, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        for i in range(ROWS):
            row = tl.program_id(0) * ROWS + i
            if row < n_rows:
                x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
                s = tl.where(mask, x * scale, -float("inf"))
                tl.store(out_ptr + row, tl.max(s, axis=0))
''')).replace(ROW_MAX_LAUNCH,
                "    programs = min(n_rows, 8)\n"
                "    rows = triton.cdiv(n_rows, programs)\n"
                "    row_max_kernel[(programs,)](x, out, n_rows, n_cols, scale, ROWS=rows, "
                "BLOCK=triton.next_power_of_2(n_cols))\n")
assert ROW_MAX_PERSISTENT.count("ROWS=rows") == 1 and "ROWS: tl.constexpr" in ROW_MAX_PERSISTENT

# the flag passed by the harness (relu=True), and one it never passes (square=False)
BIAS_ACT = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.jit
    def bias_act_kernel(x_ptr, b_ptr, out_ptr, n_cols, RELU: tl.constexpr, SQUARE: tl.constexpr,
                        BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        y = tl.load(x_ptr + row * n_cols + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
        if RELU:
            y = tl.maximum(y, 0.0)
        if SQUARE:
            y = y * y
        tl.store(out_ptr + row * n_cols + cols, y, mask=mask)


    def bias_act(x, bias, relu, square=False):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        bias_act_kernel[(n_rows,)](x, bias, out, n_cols, RELU=relu, SQUARE=square,
                                   BLOCK=triton.next_power_of_2(n_cols))
        return out


    def harness_act():
        x = torch.randn(17, 100, device=DEVICE)
        b = torch.randn(100, device=DEVICE)
        return bias_act(x, b, relu=True)
''')


@pytest.fixture(scope="module")
def relu_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("relu"), "scaled_relu", SCALED_RELU, "scaled_relu_kernel",
                            "harness_relu", seeds=(0,), timeout_s=120.0)
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def max_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("rowmax"), "row_max", ROW_MAX, "row_max_kernel", "harness_max",
                            seeds=(0,), timeout_s=120.0)
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def act_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("act"), "bias_act", BIAS_ACT, "bias_act_kernel", "harness_act",
                            seeds=(0,), timeout_s=120.0)
    yield ev
    ev.close()


def _variant(source: str, *edits: tuple[str, str]) -> Variant:
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return Variant(source=source)


def _refused_beyond_the_harness(ev: Evaluator, variant: Variant) -> str:
    got = ev.evaluate(variant)
    assert got.status == Status.MISMATCH, (got.status, got.message)
    return got.message


# --------------------------------------------------------------------------- the draw
def _recorded(*args, **kwargs) -> RecordedCall:
    return RecordedCall("f", tuple(args), dict(kwargs))


X = TensorArg(shape=(64, 200), dtype="float32", device="cpu", contiguous=True, id=0, floating=True)


def test_every_draw_negates_each_float_argument_and_flips_each_flag():
    call = _recorded(X, ValueArg(0.125), ValueArg(True), eps=ValueArg(1e-5), mode=ValueArg("fast"))
    for seed in range(40):
        scalars = [c for c in derived.derive([call], seed) if c.flavour == "scalars"]
        assert len(scalars) == 1, seed
        got = scalars[0]
        assert [a.v for a in got.args if isinstance(a, ValueArg)] == [-0.125, False]
        assert got.kwargs["eps"] == ValueArg(-1e-5) and got.kwargs["mode"] == ValueArg("fast")
        assert got.scale is None and got.fresh_fill is None  # plain values: the consistency rule holds there


def test_a_flag_the_harness_never_passes_is_passed_flipped():
    call = _recorded(X, ValueArg(2.0))
    optional = {"f": [DefaultedParam("approximate", "False", 2), DefaultedParam("inplace", " True "),
                      DefaultedParam("eps", "1e-6", 3), DefaultedParam("out", "None", 4)]}
    scalars = [c for c in derived.derive([call], 3, optional=optional) if c.flavour == "scalars"]
    assert len(scalars) == 1
    assert scalars[0].kwargs["approximate"] == ValueArg(True) and scalars[0].kwargs["inplace"] == ValueArg(False)
    assert "eps" not in scalars[0].kwargs and "out" not in scalars[0].kwargs  # the defaults call varies eps


WRAPPER_WITH_DEFAULTS = """
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


def act(x, scale=1.0, relu=False, *, eps=1e-6, out=None):
    k[(1,)](x, x.numel(), BLOCK=16)
    return x
"""


def test_a_defaulted_parameter_passed_by_position_counts_as_passed():
    """A harness that passes ``act(x, 0.5, True)`` has passed ``scale`` and ``relu``: the
    scalars and defaults calls must not pass them again by keyword (the original would
    raise "got multiple values" and the call would be dropped, its check lost)."""
    optional = optional_parameters(WRAPPER_WITH_DEFAULTS, "k")
    assert optional == {"act": [DefaultedParam("scale", "1.0", 1), DefaultedParam("relu", "False", 2),
                                DefaultedParam("eps", "1e-6"), DefaultedParam("out", "None")]}
    positional = RecordedCall("act", (X, ValueArg(0.5), ValueArg(True)), {})
    calls = derived.derive([positional], 5, optional=optional)
    (scalars,) = [c for c in calls if c.flavour == "scalars"]
    assert [a.v for a in scalars.args if isinstance(a, ValueArg)] == [-0.5, False] and not scalars.kwargs
    (defaults,) = [c for c in calls if c.flavour == "defaults"]
    assert set(defaults.kwargs) == {"eps"}  # scale was passed; eps was not
    # passed by keyword or left out: the same rule by name
    by_keyword = RecordedCall("act", (X,), {"scale": ValueArg(0.5)})
    (scalars,) = [c for c in derived.derive([by_keyword], 5, optional=optional) if c.flavour == "scalars"]
    assert scalars.kwargs == {"scale": ValueArg(-0.5), "relu": ValueArg(True)}


def test_every_draw_holds_an_empty_batch_with_its_counts_following():
    n = ValueArg(64)  # the rows, passed on their own: mapped with them
    for seed in range(40):
        empty = [c for c in derived.derive([_recorded(X, n, ValueArg(0.5))], seed) if c.flavour == "empty"]
        assert len(empty) == 1, seed
        assert empty[0].args[0].shape[0] == 0 and empty[0].args[0].shape[1] > 1 and empty[0].args[1] == ValueArg(0)
    single = TensorArg(shape=(1, 200), dtype="float32", device="cpu", contiguous=True, id=0, floating=True)
    assert not [c for c in derived.derive([_recorded(single)], 1) if c.flavour == "empty"]  # one row: none to drop
    # a square matmul's rows are also its reduction: emptied by position (test_derived_empty_batch.py)
    a = TensorArg(shape=(64, 64), dtype="float16", device="cpu", contiguous=True, id=0, floating=True)
    b = TensorArg(shape=(64, 64), dtype="float16", device="cpu", contiguous=True, id=1, floating=True)
    first, _both = [c for c in derived.derive([_recorded(a, b)], 1) if c.flavour == "empty"]
    assert first.tensors()[0].shape[0] == 0 and first.tensors()[1].shape[0] == first.tensors()[0].shape[1] > 1
    a = TensorArg(shape=(33, 301), dtype="float16", device="cpu", contiguous=True, id=0, floating=True)
    b = TensorArg(shape=(301, 45), dtype="float16", device="cpu", contiguous=True, id=1, floating=True)
    (empty,) = [c for c in derived.derive([_recorded(a, b)], 1) if c.flavour == "empty"]
    assert [t.shape[0] for t in empty.tensors()][0] == 0 and empty.tensors()[1].shape[0] > 1


def test_a_call_without_plain_arguments_gets_no_scalars_call():
    assert not [c for c in derived.derive([_recorded(X, ValueArg(None), ValueArg(0.0))], 1)
                if c.flavour == "scalars"]
    # integers are sizes, counts or strides: they are mapped with the sizes, never flipped
    assert not [c for c in derived.derive([_recorded(X, ValueArg(1), ValueArg(0))], 1) if c.flavour == "scalars"]


# --------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_a_scale_moved_through_a_relu_is_wrong_for_negative_scales(relu_ev):
    message = _refused_beyond_the_harness(relu_ev, _variant(
        SCALED_RELU, ("tl.store(out_ptr + offs, tl.maximum(x * scale, 0.0), mask=mask)",
                      "tl.store(out_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)")))
    assert "scaled_relu(" in message and "-0.125" in message, message


@pytest.mark.slow
def test_a_scale_moved_through_a_max_is_wrong_for_negative_scales(max_ev):
    message = _refused_beyond_the_harness(max_ev, _variant(
        ROW_MAX, ('s = tl.where(mask, x * scale, -float("inf"))\n',
                  's = tl.where(mask, x, -float("inf"))\n'),
        ("tl.store(out_ptr + row, tl.max(s, axis=0))", "tl.store(out_ptr + row, tl.max(s, axis=0) * scale)")))
    assert "-2.0" in message, message


@pytest.mark.slow
def test_a_flag_specialised_to_the_harness_value_is_wrong(act_ev):
    message = _refused_beyond_the_harness(act_ev, _variant(
        BIAS_ACT, ("    if RELU:\n        y = tl.maximum(y, 0.0)\n", "    y = tl.maximum(y, 0.0)\n")))
    assert "relu=False" in message, message


@pytest.mark.slow
def test_a_flag_the_harness_never_passes_ignored_is_wrong(act_ev):
    message = _refused_beyond_the_harness(act_ev, _variant(
        BIAS_ACT, ("    if SQUARE:\n        y = y * y\n", "")))
    assert "square=True" in message, message


# the same wrapper, its flags passed by position: they are passed, and flipped in place
BIAS_ACT_POSITIONAL = BIAS_ACT.replace("return bias_act(x, b, relu=True)", "return bias_act(x, b, True, False)")


@pytest.mark.slow
def test_flags_passed_by_position_are_flipped_in_place(tmp_path):
    """A harness that passes ``square`` by position has passed it: the scalars call flips it
    where it stands. Passing it again by keyword made the original raise ("multiple values")
    and the call was dropped, so a variant that ignored either flag was judged correct."""
    assert BIAS_ACT_POSITIONAL != BIAS_ACT
    ev = prepared_evaluator(tmp_path, "bias_act_positional", BIAS_ACT_POSITIONAL, "bias_act_kernel", "harness_act",
                            seeds=(0,), timeout_s=120.0)
    try:
        assert "multiple values" not in ev.baseline.message, ev.baseline.message
        message = _refused_beyond_the_harness(ev, _variant(BIAS_ACT_POSITIONAL, ("    if SQUARE:\n        y = y * y\n", "")))
        assert "bias_act(" in message and "False, True" in message, message
        ok = ev.evaluate(_variant(BIAS_ACT_POSITIONAL, ("BLOCK=triton.next_power_of_2(n_cols))",
                                                        "BLOCK=triton.next_power_of_2(n_cols), num_warps=2)")))
        assert ok.status == Status.OK, (ok.status, ok.message)
    finally:
        ev.close()


@pytest.mark.slow
def test_a_persistent_rewrite_that_divides_by_the_rows_fails_on_an_empty_batch(max_ev):
    got = max_ev.evaluate(Variant(source=ROW_MAX_PERSISTENT))
    assert got.status != Status.OK and "row_max(0x" in got.message, (got.status, got.message)
    assert "ZeroDivisionError" in got.message, got.message


@pytest.mark.slow
def test_correct_rewrites_of_the_same_originals_pass(relu_ev, max_ev, act_ev):
    for ev, variant in (
        (relu_ev, _variant(SCALED_RELU, ("BLOCK=128)", "BLOCK=512)"), ("cdiv(n, 128)", "cdiv(n, 512)"))),
        # max(x * s) written as s * max(x) for s >= 0 and s * min(x) below: right for every sign
        (max_ev, _variant(ROW_MAX, ("tl.store(out_ptr + row, tl.max(s, axis=0))",
                                    "hi = tl.max(tl.where(mask, x, -float('inf')), axis=0)\n"
                                    "    lo = tl.min(tl.where(mask, x, float('inf')), axis=0)\n"
                                    "    tl.store(out_ptr + row, tl.where(scale >= 0, hi * scale, lo * scale))"))),
        # persistent, with a program kept when there are no rows
        (max_ev, _variant(ROW_MAX_PERSISTENT, ("programs = min(n_rows, 8)", "programs = max(1, min(n_rows, 8))"))),
        (act_ev, _variant(BIAS_ACT, ("BLOCK=triton.next_power_of_2(n_cols))",
                                     "BLOCK=triton.next_power_of_2(n_cols), num_warps=2)"))),
    ):
        got = ev.evaluate(variant)
        assert got.status == Status.OK, (got.status, got.message)


def test_a_grown_dimension_passes_two_to_the_sixteen_without_multiplying_a_large_one():
    """Grown calls exist for sizes past 2**16 (16-bit indices). A dimension whose fourfold
    passes that grows to just past it, not to 4-8 times itself: a vocabulary of 32000
    became 256000, a 2**18 block compiled by every candidate of a row-per-block kernel."""
    def grown(n: int) -> set[int]:
        t = TensorArg(shape=(16, n), dtype="float32", device="cuda", contiguous=True, id=0, floating=True)
        return {c.tensors()[0].shape[-1] for seed in range(40)
                for c in derived.derive([_recorded(t)], seed) if c.flavour == "grow"}

    assert grown(32000) <= set(range(65539, 65543)), grown(32000)
    assert grown(100000) <= set(range(100000, 100004)), grown(100000)
    small = grown(4096)  # a small dimension: past 2**16 either way
    assert small and min(small) >= 65539 and max(small) <= 65542, small
    assert grown(9000) <= {s + k for s in (36000, 72000) for k in (0, 1, 3)} | set(range(65539, 65543))


def test_optional_parameters_parses_the_source_once(monkeypatch):
    """detect reads the tree optional_parameters already parsed (a wrapper module of a
    thousand kernels is not parsed twice), with the same result."""
    parses = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parses.append(1) or real(*a, **k))
    assert optional_parameters(WRAPPER_WITH_DEFAULTS, "k")["act"][0] == DefaultedParam("scale", "1.0", 1)
    assert len(parses) == 1
