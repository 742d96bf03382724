"""Candidates' processes made ahead (``JudgeCore._make_spare``; GPU only, skipped elsewhere):
a candidate's job starts in a process that entered its sandbox and made its CUDA context
while the previous candidate ran, and its verdict is the one a fresh process gives. A
spare knows nothing of its candidate until the job comes: a candidate that is wrong is
still wrong in it, and one left by a closed session never takes another's job."""
from __future__ import annotations

import dataclasses
import json

import pytest
from helpers.kernels import AXPY, axpy_task, edited

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="spares are made on a GPU only")


def test_candidates_start_in_spares_with_the_same_verdicts(tmp_path, monkeypatch):
    from kernelband.evaluate import Evaluator
    from kernelband.model import Status, Variant

    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KERNELBAND_TRACE", str(trace))
    source = AXPY.replace("torch.randn(3001)", "torch.randn(3001, device='cuda')")
    task = dataclasses.replace(axpy_task(tmp_path, source), device="cuda")
    ev = Evaluator(task)
    try:
        assert ev.prepare(time_it=False).ok
        wrong = edited("alpha * x + y", "alpha * x - y", source)
        # a search's candidates: only they start in, and leave, spares
        verdicts = [ev.evaluate(v, time_it=False, search=True).status
                    for v in (Variant(source), wrong, Variant(source), wrong)]
    finally:
        ev.close()
    assert verdicts == [Status.OK, Status.MISMATCH, Status.OK, Status.MISMATCH]
    requests = [m for m in map(json.loads, trace.read_text().splitlines()) if m["what"] == "job.request"]
    assert any(m.get("spare") for m in requests), requests  # later candidates started in spares
    assert not any(m.get("spare") for m in requests if m.get("trusted")), requests  # never the original's
