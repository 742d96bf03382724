"""The empty batch where the batch's size is also another dimension (a square matmul,
M = N = K): sizes are mapped by value, so emptying the rows that way would empty the
reduction too. There the batch is emptied by position (``derived._positional_empty_calls``):
the first tensor's first dimension 0, the other sizes drawn small and the same in every
tensor; a second call empties the tensors shaped like the first too, a third an output
buffer the harness passes by name. The original decides which is a valid call: those it
raises on are dropped and held against no candidate. End to end under the interpreter: a
persistent rewrite of a square matmul that divides the row tiles among min(M, 2)
programs divides by zero on the empty batch and is refused; the original and a rewrite
that keeps a program pass."""
from __future__ import annotations

import re
import textwrap

import pytest
from helpers.kernels import prepared_evaluator

from kernelband.model import Status, Variant
from kernelband.worker import derived
from kernelband.worker.call_spec import DerivedCall, RecordedCall, TensorArg


def _tensor(shape: list[int], ident: int) -> dict:
    return {"t": "tensor", "shape": shape, "dtype": "float32", "device": "cpu", "contiguous": True, "id": ident,
            "floating": True}


SQUARE = {"fn": "matmul", "args": [_tensor([48, 48], 0), _tensor([48, 48], 1)], "kwargs": {}}
SQUARE_OUT = {"fn": "matmul", "args": [_tensor([48, 48], 0), _tensor([48, 48], 1)], "kwargs": {"out": _tensor([48, 48], 2)}}
SEEDS = range(40)


def _empty(call: dict, seed: int) -> list[DerivedCall]:
    from kernelband.worker.judge_derived import calls_to_derive

    return [c for c in calls_to_derive([RecordedCall.from_dict(call)], seed, interpreted=True) if c.flavour == "empty"]


def _shapes(call: DerivedCall) -> list[tuple[int, ...]]:
    return [t.shape for t in call.tensors()]


def test_a_square_matmul_gets_its_batch_emptied_by_position():
    for seed in SEEDS:
        first, both = _empty(SQUARE, seed)
        (a, b) = _shapes(first)
        assert a[0] == 0 and a[1] >= 2 and b == (a[1], a[1]), (seed, a, b)  # the reduction kept, and consistent
        assert _shapes(both) == [(0, a[1]), (0, a[1])], seed  # the tensor shaped like the first too


def test_an_output_buffer_of_the_batchs_shape_is_emptied_with_it_in_a_call_of_its_own():
    for seed in SEEDS:
        calls = _empty(SQUARE_OUT, seed)
        assert len(calls) == 3, seed
        k = _shapes(calls[0])[0][1]
        assert [_shapes(c) for c in calls] == [[(0, k), (k, k), (k, k)], [(0, k), (0, k), (0, k)],
                                               [(0, k), (k, k), (0, k)]], seed


def test_the_positional_empty_calls_are_the_same_for_the_same_seed():
    for seed in (0, 7):
        assert _empty(SQUARE_OUT, seed) == _empty(SQUARE_OUT, seed)
    draws = {tuple(_shapes(_empty(SQUARE, seed)[0])) for seed in SEEDS}
    assert len(draws) > 1  # the small sizes are drawn, not fixed


def test_a_batch_of_another_size_is_still_emptied_by_value():
    """Not square: every tensor sharing the batch's size loses it (the rows of an out= buffer too)."""
    rows = {"fn": "rmsnorm", "args": [_tensor([32, 256], 0), _tensor([256], 1)], "kwargs": {"out": _tensor([32, 256], 2)}}
    for seed in SEEDS:
        (empty,) = _empty(rows, seed)
        a, w, out = _shapes(empty)
        assert a[0] == 0 and out == a and w == (a[1],), seed


def test_one_row_or_a_scalar_first_gets_no_empty_call():
    assert not _empty({"fn": "f", "args": [_tensor([1, 48], 0), _tensor([48, 48], 1)], "kwargs": {}}, 1)
    square_1d = derived.derive([RecordedCall("f", (TensorArg((48,), "float32", "cpu", True, 0, True),
                                                   TensorArg((3, 48), "float32", "cpu", True, 1, True)), {})], 1)
    (empty,) = [c for c in square_1d if c.flavour == "empty"]  # 48 is the second tensor's later dimension
    assert _shapes(empty)[0] == (0,) and _shapes(empty)[1][1] >= 2


# --------------------------------------------------------------------------- end to end
SQUARE_MATMUL = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      TILES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        for i in range(TILES):
            offs_m = (tl.program_id(0) * TILES + i) * BLOCK_M + tl.arange(0, BLOCK_M)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BLOCK_K)):
                ks = k * BLOCK_K + offs_k
                a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                            mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
                b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                            mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
                acc += tl.dot(a, b)
            tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
                     mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


    def matmul(a, b):
        assert a.shape[1] == b.shape[0]
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), dtype=torch.float32, device=a.device)
        tiles = 1
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), TILES=tiles, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
        return c


    def harness_matmul():
        a = torch.randn(48, 48, device=DEVICE)
        b = torch.randn(48, 48, device=DEVICE)
        return matmul(a, b)
''')
LAUNCH = "    tiles = 1\n    grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))\n"
# persistent: a few programs, each over its share of the row tiles (none when there are no rows)
PERSISTENT = ("    programs = min(M, 2)\n    tiles = triton.cdiv(triton.cdiv(M, 16), programs)\n"
              "    grid = (programs, triton.cdiv(N, 16))\n")
assert SQUARE_MATMUL.count(LAUNCH) == 1


@pytest.fixture(scope="module")
def square_ev(tmp_path_factory):
    ev = prepared_evaluator(tmp_path_factory.mktemp("square"), "square", SQUARE_MATMUL, "matmul_kernel",
                            "harness_matmul", seeds=(0,), timeout_s=300.0)
    yield ev
    ev.close()


@pytest.mark.slow
def test_a_persistent_square_matmul_that_divides_by_the_rows_is_refused(square_ev):
    got = square_ev.evaluate(Variant(SQUARE_MATMUL.replace(LAUNCH, PERSISTENT)), time_it=False)
    assert got.status == Status.MISMATCH and "ZeroDivisionError" in got.message, (got.status, got.message)
    assert "matmul(0x" in got.message, got.message


@pytest.mark.slow
def test_the_original_and_a_persistent_rewrite_that_keeps_a_program_pass(square_ev):
    """The empty call the original raises on (both operands emptied: K no longer matches)
    is dropped, noted, and held against neither."""
    # dropped: the rank split (a 3-D operand) and the call with both operands emptied, at least
    noted = re.search(r"(\d+) of (\d+) calls beyond the harness are not checked", square_ev.baseline.message)
    assert noted and int(noted[1]) >= 2, square_ev.baseline.message
    checked = int(noted[2]) - int(noted[1])
    for source in (SQUARE_MATMUL.replace("BLOCK_K=16)", "BLOCK_K=32)"),
                   SQUARE_MATMUL.replace(LAUNCH, PERSISTENT.replace("min(M, 2)", "max(1, min(M, 2))"))):
        got = square_ev.evaluate(Variant(source), time_it=False)
        assert got.status == Status.OK and f"{checked} calls beyond the harness" in got.message, (got.status, got.message)
