"""The judge's ``wide`` op: a variant on calls past int32 offsets (DESIGN section 6, "Beyond
the harness's own inputs").

An offset a kernel computes in int32 (``token * stride``) wraps only where a tensor holds
more than 2**31 elements: a table of 600k x 4096 fp32, 10 GiB. No call of the search
reaches that (``derived.MAX_CALL_BYTES``), and one per candidate would cost gigabytes and
seconds each; so these calls (``derived.wide_calls``) run once per verdict, on the
verification path every verdict takes after a candidate's checks (``verification``), where
the device has the memory. The machinery is the derived calls': the original runs them
with two canaries and is the oracle (a call it raises on, reads or writes out of bounds
on, is dropped: ``judge_derivation.original_references``), then the variant runs them
once and each frame is judged as any call beyond the harness (``judge_derived.verdict_of``).
"""

from __future__ import annotations

from typing import Optional

import torch

from ..json_types import JsonObject
from ..model import Status, WideReport
from .call_spec import DerivedCall
from .derived import describe_call, wide_calls
from .jobs import Frame, JobEndKind, JobFailed
from .judge_candidate import error_verdict, reading_gpu
from .judge_core import JudgeCore, Reference
from .judge_derivation import References, original_references
from .judge_derived import INTERPRETED_CALL_BYTES, verdict_of
from .messages import Derived, DerivedOutputs, ErrorFrame, Mark
from .requests import WideCalls

# the GPU's free memory holds this many times a call's bytes: the variant process's inputs
# and outputs, their canary buffers read by the judge, the references it keeps, a margin
WIDE_SAFETY = 4
# the original's frames of these calls stay on the GPU where half its free memory holds
# them: nothing of the search runs beside this op, and on the host an embedding's 10 GiB
# table took `kernelband check` from 15-22 s to 57 s (copies and canary checks on the CPU)
WIDE_FRAMES_SHARE = 2
# what one verification may spend on these calls, whatever the GPU holds: a gather's grown
# table is one tensor (an embedding's: 10 GiB), an elementwise kernel's call three of that
# size (add_scale's: 30 GiB). That one took add_scale's session from 23-34 s to 57 s on an
# H200, and its original crashed on it (int32 offsets of its own), so nothing was checked
WIDE_MAX_BYTES = 16 << 30


def wide(judge: JudgeCore, req: WideCalls) -> JsonObject:
    """The reply: ``check_wide``'s report as its ``to_dict()``."""
    return check_wide(judge, req).to_dict()


def check_wide(judge: JudgeCore, req: WideCalls) -> WideReport:
    """Draw the wide calls of the harness's recorded calls, keep those the device has room
    for, run the original on them (the oracle), then the variant; a report that did not
    run says why (no refusal then)."""
    ref = judge.ref
    if not ref.recorded_calls:
        return WideReport.not_run("the harness's calls of the kernel's wrapper could not be recorded")
    drawn = wide_calls(ref.recorded_calls, judge.session_seed, req.min_elements)
    if not drawn:
        return WideReport.not_run("the wrapper's recorded calls have no tensor of two elements or more to grow")
    budget, room = call_budget(judge)
    calls = [call for call, nbytes in drawn if nbytes <= budget]
    if not calls:
        call, nbytes = min(drawn, key=lambda d: d[1])
        return WideReport.not_run(f"{describe_call(call)} takes {_gib(nbytes)}, more than {room}")
    # a scratch Reference: these runs' seconds are not the session's (a search's deadlines);
    # the session's references are final (prepare is long done)
    scratch = Reference()
    scratch.references_final.set()
    kept, notes, failure = original_references(judge, scratch, calls, siblings=0, frames_share=WIDE_FRAMES_SHARE)
    if failure or not kept:
        return WideReport.not_run(failure or (notes[0] if notes else "the original handles none of the calls"))
    described = tuple(describe_call(call) for call, _ in kept)
    verdict = _variant_verdict(judge, req.source, kept)
    if verdict is None:
        return WideReport(ran=True, elements=req.min_elements, calls=described, dropped=tuple(notes))
    status, message = verdict
    return WideReport(
        ran=True,
        ok=False,
        elements=req.min_elements,
        calls=described,
        dropped=tuple(notes),
        status=status,
        message=message,
    )


def call_budget(judge: JudgeCore) -> tuple[int, str]:
    """(the bytes a wide call may take, where that bound comes from). Under the interpreter
    the budget of any derived call there: a call past 2**31 elements never runs on the CPU."""
    if judge.on_gpu:
        free, _ = torch.cuda.mem_get_info()
        if free // WIDE_SAFETY > WIDE_MAX_BYTES:
            return WIDE_MAX_BYTES, f"the {_gib(WIDE_MAX_BYTES)} a verification spends on these calls"
        return free // WIDE_SAFETY, f"1/{WIDE_SAFETY} of the GPU's free memory ({_gib(free)})"
    return INTERPRETED_CALL_BYTES, (
        f"the Triton interpreter's {_gib(INTERPRETED_CALL_BYTES)} for a derived call (GPU only)"
    )


def _variant_verdict(judge: JudgeCore, source: str, references: References) -> Optional[tuple[Status, str]]:
    """None where the variant agrees with the original on every kept call, else the
    verdict: the first call it gets wrong, raises on, crashes or hangs on."""
    calls: list[DerivedCall] = [call for call, _ in references]
    job = judge.job({"v": source}, [Derived(calls, "v", "a"), Mark()], len(calls) + 1, trusted=False)
    try:
        for frame in job.until_mark():
            if isinstance(frame.meta, ErrorFrame):
                return error_verdict(frame.meta)
            if isinstance(frame.meta, DerivedOutputs):
                with reading_gpu():
                    failed = verdict_of(judge, Frame(frame.meta, frame.tree), references)
                if failed is not None:
                    return failed
    except JobFailed as e:  # the original ran these calls in its process: the variant's failure
        status = Status.TIMEOUT if e.end.kind == JobEndKind.TIMEOUT else Status.CRASHED
        return status, f"on a call past int32 offsets ({describe_call(calls[0])}): {e}"
    finally:
        job.close()
    return None


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.2f} GiB" if nbytes >= 1 << 30 else f"{nbytes / (1 << 20):.1f} MiB"
