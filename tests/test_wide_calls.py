"""Calls past int32 offsets (kernelband/worker/derived.py ``wide_calls``, judge_wide.py,
verification.py ``WIDE``): a recorded call grown until its largest tensor holds
more than 2**31 elements, where an offset computed in int32 (``token * stride``) wraps.

No test here allocates 2**31 elements: the drawing is checked on its own (shapes, index
ranges, bytes), the judge's gate on the device's room with a faked GPU, and the run path
end to end under the interpreter with the threshold lowered through the request (the
same judge op, original and variant processes, canaries and comparisons)."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.kernels import prepared_evaluator
from helpers.paths import REPO

from kernelband.model import PAST_INT32, Status, Variant, WideReport
from kernelband.verification import WIDE, WIDE_ON_INTERPRETER
from kernelband.worker import derived, derived_run, judge_wide
from kernelband.worker.call_spec import RecordedCall, TensorArg, ValueArg
from kernelband.worker.requests import WideCalls


def _tensor(shape: tuple[int, ...], dtype: str, ident: int, **facts: Any) -> TensorArg:
    return TensorArg(shape=shape, dtype=dtype, device="cpu", contiguous=True, id=ident,
                     floating=dtype.startswith(("float", "bfloat")), **facts)


# the round-3 embedding's GPU harness: 8192 ids into a 32000 x 4096 fp32 table
EMBEDDING = RecordedCall("embedding", (_tensor((8192,), "int64", 0, max=31999, distinct=False, sorted=False),
                                       _tensor((32000, 4096), "float32", 1)), {},
                         returns=_tensor((8192, 4096), "float32", 2))


def test_an_embedding_grows_its_vocabulary_past_the_wrap_and_its_ids_reach_the_last_row():
    (call, nbytes), = derived.wide_calls([EMBEDDING], seed=3, min_elements=PAST_INT32)
    ids, table = call.args
    assert isinstance(ids, TensorArg) and isinstance(table, TensorArg)
    rows = table.shape[0]
    assert call.flavour == "wide" and table.shape[1] == 4096 and ids.shape == (8192,)  # only the vocabulary grows
    assert rows * 4096 > PAST_INT32 * derived.WIDE_MARGIN and (rows - 3) * 4096 <= PAST_INT32 * derived.WIDE_MARGIN + 4096
    assert ids.index_high == rows and ids.wide
    # the bytes the judge weighs against the GPU's room: table, ids and the returned rows
    assert nbytes == rows * 4096 * 4 + 8192 * 8 + 8192 * 4096 * 4
    assert nbytes > 10 << 30
    # the ids as the variant process draws them: below the rows, the last row among them,
    # and many past the row whose offset no longer fits in int32
    import torch

    values = derived_run.place(ids, call.seed + 7919 * ids.id, "a").view
    assert values.dtype == torch.int64
    wraps = PAST_INT32 // 4096
    assert int(values.max()) == rows - 1 and int(values.min()) >= 0
    assert int((values >= wraps).sum()) > 8192 // 10


def test_rows_grow_and_not_the_row_and_an_integer_passing_that_size_follows_it():
    """A row's block is often the row (a 2**31 block is no compile): the rows grow; an
    integer argument equal to their count is mapped with them (the existing rule)."""
    softmax = RecordedCall("softmax", (_tensor((4096, 1000), "float16", 0), ValueArg(4096), ValueArg(1000)), {})
    (call, nbytes), = derived.wide_calls([softmax], seed=1, min_elements=PAST_INT32)
    x, n_rows, n_cols = call.args
    assert isinstance(x, TensorArg) and x.shape[1] == 1000 and math.prod(x.shape) > PAST_INT32
    assert n_rows == ValueArg(x.shape[0]) and n_cols == ValueArg(1000)
    assert nbytes == math.prod(x.shape) * 2


def test_a_square_matmul_grows_every_dimension_of_that_size_and_stays_just_past_the_threshold():
    a, b = _tensor((4096, 4096), "float16", 0), _tensor((4096, 4096), "float16", 1)
    (call, _), = derived.wide_calls([RecordedCall("matmul", (a, b), {})], seed=0, min_elements=PAST_INT32)
    grown = call.tensors()[0].shape
    assert grown[0] == grown[1] and PAST_INT32 < grown[0] ** 2 < 1.3 * PAST_INT32


def test_the_draw_is_seeded_and_a_repeated_recorded_call_is_drawn_once():
    assert derived.wide_calls([EMBEDDING, EMBEDDING], 7, PAST_INT32) == derived.wide_calls([EMBEDDING], 7, PAST_INT32)
    assert len(derived.wide_calls([EMBEDDING, EMBEDDING], 7, PAST_INT32)) == 1
    assert derived.wide_calls([RecordedCall("f", (ValueArg(3),), {})], 7, PAST_INT32) == []


def test_no_call_of_the_search_is_wide():
    """The search's draws stay as they were: no wide call among them (each would cost
    gigabytes per candidate); the wide ones come only from the verification path."""
    for interpreted in (True, False):
        calls = derived.derive([EMBEDDING], seed=5, interpreted=interpreted)
        assert calls and all(c.flavour != "wide" for c in calls)
        assert all(derived.call_bytes(c) <= derived.MAX_CALL_BYTES for c in calls)


# --------------------------------------------------------------------------- the judge's gate
def _judge(on_gpu: bool) -> Any:
    return SimpleNamespace(ref=SimpleNamespace(recorded_calls=[EMBEDDING]), session_seed=3, on_gpu=on_gpu)


def test_under_the_interpreter_a_call_past_int32_is_skipped_and_says_why():
    report = judge_wide.check_wide(_judge(on_gpu=False), WideCalls(source="# v\n"))
    assert not report.ran and report.ok and not report.refused
    assert "GPU only" in report.reason and "10.13 GiB" in report.reason and "interpreter" in report.reason


@pytest.mark.parametrize("free_gib, runs", [(30, False), (80, True)])
def test_on_a_gpu_the_call_runs_only_where_the_free_memory_holds_it_several_times(monkeypatch, free_gib, runs):
    monkeypatch.setattr(judge_wide.torch.cuda, "mem_get_info", lambda: (free_gib << 30, 141 << 30))
    ran: list[list[Any]] = []

    def original(judge: Any, ref: Any, calls: list[Any], siblings: int = 2, frames_share: int = 4) -> Any:
        ran.append(calls)
        assert siblings == 0  # no sibling process builds a 10 GiB call's inputs ahead
        assert frames_share == 2  # its frames may take half the free memory: nothing of a search runs beside it
        return [], [], "stop here"

    monkeypatch.setattr(judge_wide, "original_references", original)
    report = judge_wide.check_wide(_judge(on_gpu=True), WideCalls(source="# v\n"))
    assert not report.ran
    if runs:
        assert [c.flavour for c in ran[0]] == ["wide"] and report.reason == "stop here"
    else:
        assert not ran and "more than 1/4 of the GPU's free memory (30.00 GiB)" in report.reason


# add_scale's harness call: out = alpha * x + y over 2**24 float32 elements
AXPY = RecordedCall("axpy", (ValueArg(0.5), _tensor((1 << 24,), "float32", 0), _tensor((1 << 24,), "float32", 1)), {},
                    returns=_tensor((1 << 24,), "float32", 2))


def test_an_elementwise_call_of_30_gib_is_skipped_even_where_the_gpu_has_the_memory(monkeypatch):
    """Its three grown tensors (30 GiB) fit a quarter of an empty H200, but one verification
    spends at most WIDE_MAX_BYTES on these calls; the embedding's 10 GiB call still runs."""
    monkeypatch.setattr(judge_wide.torch.cuda, "mem_get_info", lambda: (139 << 30, 141 << 30))
    ran: list[list[Any]] = []

    def original(judge: Any, ref: Any, calls: list[Any], siblings: int = 2, frames_share: int = 4) -> Any:
        ran.append(calls)
        return [], [], "stop here"

    monkeypatch.setattr(judge_wide, "original_references", original)
    axpy = SimpleNamespace(ref=SimpleNamespace(recorded_calls=[AXPY]), session_seed=3, on_gpu=True)
    report = judge_wide.check_wide(axpy, WideCalls(source="# v\n"))
    assert not ran and not report.ran and not report.refused
    assert "30.00 GiB" in report.reason and "16.00 GiB a verification spends on these calls" in report.reason
    assert judge_wide.check_wide(_judge(on_gpu=True), WideCalls(source="# v\n")).reason == "stop here"
    assert [c.flavour for c in ran[0]] == ["wide"]


def test_without_recorded_calls_nothing_is_drawn():
    judge = SimpleNamespace(ref=SimpleNamespace(recorded_calls=[]), session_seed=0, on_gpu=True)
    assert "could not be recorded" in judge_wide.check_wide(judge, WideCalls(source="")).reason


# --------------------------------------------------------------------------- the session's side
class _Fake:
    def __init__(self, interpreted: bool, report: WideReport) -> None:
        self.interpreted, self.report, self.asked = interpreted, report, 0

    def wide_calls(self, variant: Variant, min_elements: int = PAST_INT32) -> WideReport:
        self.asked += 1
        return self.report


def test_a_cpu_session_never_asks_the_judge_and_its_verdict_is_unchanged():
    fake = _Fake(True, WideReport(ran=True, ok=False, message="x"))
    refusal, report = WIDE.check(fake, Variant("# v\n"))  # type: ignore[arg-type]
    assert refusal is None and report == WideReport.not_run(WIDE_ON_INTERPRETER) and fake.asked == 0


def test_on_a_gpu_a_wrong_result_is_the_refusal_and_a_skipped_run_refuses_nothing():
    wrong = WideReport(ran=True, ok=False, status=Status.MISMATCH, message="beyond the harness, embedding(...): x")
    refusal, report = WIDE.check(_Fake(False, wrong), Variant("# v\n"))  # type: ignore[arg-type]
    assert refusal == "fails on a call past int32 offsets: beyond the harness, embedding(...): x" and report == wrong
    skipped = WideReport.not_run("embedding(...) takes 10.13 GiB, more than 1/4 of the GPU's free memory")
    assert WIDE.check(_Fake(False, skipped), Variant("# v\n")) == (None, skipped)  # type: ignore[arg-type]


def test_the_report_crosses_the_wire_and_reads_back():
    report = WideReport(ran=True, ok=False, calls=("a",), dropped=("b",), status=Status.CRASHED, message="m")
    assert WideReport.from_wire(report.to_dict()) == report
    assert report.summary() == {"ran": True, "ok": False, "calls": ["a"], "dropped": ["b"], "message": "m"}


# --------------------------------------------------------------------------- end to end, interpreter
EMBEDDING_SOURCE = (REPO / "tests" / "redteam" / "kernels" / "embedding.py").read_text(encoding="utf-8")
# the interpreter's analogue of an int32 wrap: offsets kept modulo 2**17 elements
SMALL_WRAP = 1 << 17
OFFSET = "    row = tl.load(w_ptr + token * stride_w + cols, mask=mask)\n"
WRAPPED = EMBEDDING_SOURCE.replace(OFFSET, f"    row = tl.load(w_ptr + (token * stride_w) % {SMALL_WRAP} + cols, mask=mask)\n")


@pytest.fixture(scope="module")
def embedding_ev(tmp_path_factory):
    assert OFFSET in EMBEDDING_SOURCE
    ev = prepared_evaluator(tmp_path_factory.mktemp("wide"), "embedding", EMBEDDING_SOURCE, "embedding_kernel",
                            "test_embedding")
    yield ev
    ev.close()


def test_a_variant_whose_offsets_wrap_past_the_threshold_is_refused_and_the_original_passes(embedding_ev):
    """The same judge op as on a GPU, its threshold lowered through the request: the table
    grows past 2**17 elements, its ids reach the last row, and a variant whose offsets wrap
    there reads other rows."""
    wrong = embedding_ev.wide_calls(Variant(WRAPPED), min_elements=SMALL_WRAP)
    assert wrong.ran and wrong.refused and wrong.status == Status.MISMATCH, wrong
    assert "embedding(" in wrong.message and len(wrong.calls) == 1
    right = embedding_ev.wide_calls(Variant(EMBEDDING_SOURCE), min_elements=SMALL_WRAP)
    assert right.ran and right.ok and not right.dropped, right
    rows = int(right.calls[0].split("x96 float32")[0].rsplit(" ", 1)[-1])
    assert rows * 96 > SMALL_WRAP


@pytest.mark.parametrize("dodge", [
    "    assert weight.numel() < (1 << 17), 'table too large'\n",  # raise where the call is wide
    "    if weight.numel() >= (1 << 17):\n        raise SystemExit(0)\n",  # end its process quietly there
])
def test_a_variant_that_dodges_the_wide_call_is_refused_not_skipped(embedding_ev, dodge):
    """A variant that sees the call is past the threshold and raises or ends its process
    there cannot turn the check into a skip: only the original's own failure drops a call,
    and the original ran this one."""
    dodging = EMBEDDING_SOURCE.replace("    n, dim = ids.numel(), weight.shape[1]\n",
                                       "    n, dim = ids.numel(), weight.shape[1]\n" + dodge)
    assert dodging != EMBEDDING_SOURCE
    report = embedding_ev.wide_calls(Variant(dodging), min_elements=SMALL_WRAP)
    assert report.ran and report.refused and report.status is not None and report.status != Status.OK, report


def test_at_its_real_size_the_interpreters_judge_skips_it(embedding_ev):
    report = embedding_ev.wide_calls(Variant(WRAPPED))
    assert not report.ran and "GPU only" in report.reason


def test_a_call_the_original_itself_refuses_at_that_size_is_dropped_not_held_against_the_variant(tmp_path):
    guarded = EMBEDDING_SOURCE.replace("    n, dim = ids.numel(), weight.shape[1]\n",
                                       "    n, dim = ids.numel(), weight.shape[1]\n"
                                       "    assert weight.numel() < (1 << 17), 'table too large'\n")
    ev = prepared_evaluator(tmp_path, "embedding", guarded, "embedding_kernel", "test_embedding")
    try:
        report = ev.wide_calls(Variant(WRAPPED), min_elements=SMALL_WRAP)
    finally:
        ev.close()
    assert not report.ran and not report.refused
    assert "the original raises" in report.reason and "table too large" in report.reason


def test_the_wide_calls_frames_stay_on_the_gpu_where_half_its_free_memory_holds_them(monkeypatch: Any) -> None:
    """A 10 GiB call's two canary frames (40 GiB with their buffers) on a GPU with 139 GiB
    free: on the GPU at the wide op's share, on the host at the search's quarter."""
    from kernelband.worker import judge_derivation

    monkeypatch.setattr(judge_derivation.torch.cuda, "mem_get_info", lambda: (139 << 30, 141 << 30))
    judge = _judge(on_gpu=True)
    judge.ref_device = "cuda"
    calls = [call for call, _ in derived.wide_calls([EMBEDDING], 0, PAST_INT32)]
    assert judge_derivation.frames_device(judge, calls, 2, judge_wide.WIDE_FRAMES_SHARE) == "cuda"
    assert judge_derivation.frames_device(judge, calls, 2) is None
