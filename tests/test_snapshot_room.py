"""Replay snapshots of a job alone on its GPU (``Job.gpu_alone``): beyond their budget (a
quarter of what was free before the harness ran) a storage still gets a device copy while
the GPU keeps ``device_reserve`` free; otherwise, and where the copy finds no room, it goes
to the host as before. The GPU's answers are stood in for here (no GPU in CI); the wire
and the bookkeeping are real."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernelband.worker import prestate
from kernelband.worker.messages import Job
from kernelband.worker.prestate import PreState


def _gpu_with_free(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 8 * free))


def test_beyond_the_budget_a_copy_goes_to_the_gpu_only_while_it_leaves_the_reserve(monkeypatch):
    gib = 1 << 30
    live = SimpleNamespace(is_cuda=True, device="cuda:0")
    state = PreState(device_budget=1, device_reserve=20 * gib)
    _gpu_with_free(monkeypatch, 60 * gib)
    assert state._room_beyond_budget(live, 17 * gib)  # 43 GiB left
    _gpu_with_free(monkeypatch, 30 * gib)
    assert not state._room_beyond_budget(live, 17 * gib)  # 13 GiB left: to the host
    assert not PreState(device_budget=1)._room_beyond_budget(live, 1)  # not alone: the budget only
    assert not state._room_beyond_budget(SimpleNamespace(is_cuda=False, device="cpu"), 1)


def test_a_copy_the_gpu_has_no_room_for_falls_back_instead_of_failing_the_run():
    class Full:
        def clone(self):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    assert prestate._device_copy(Full()) is None


def test_storages_past_the_budget_are_copied_where_there_is_room(monkeypatch):
    a, b = torch.arange(1000, dtype=torch.float32), torch.arange(1000, dtype=torch.float32) * 2
    monkeypatch.setattr(PreState, "_room_beyond_budget", lambda self, live, size: self.device_reserve > 0)
    alone = PreState(device_budget=4000, device_reserve=1)
    alone.take("k", {"X": a, "Y": b})  # each storage is 4000 bytes: Y is past the budget
    assert alone.on_device and alone.device_held == 8000
    shared = PreState(device_budget=4000)
    shared.take("k", {"X": a, "Y": b})
    assert not shared.on_device and shared.storages[prestate.storage_key(b)].fp is not None
    b += 1  # Y changed and has no copy: no replay can start from the call's state
    assert not shared.restorable and alone.restorable


def test_the_judge_says_so_on_the_wire():
    from kernelband.model import Task

    task = Task(source="", kernel="k", harness="h", module_path="m.py")
    job = Job(task, {}, [], gpu_alone=True)
    assert Job.from_wire(job.to_wire()).gpu_alone is True
    assert Job.from_wire(Job(task, {}, []).to_wire()).gpu_alone is False


def test_launch_inputs_are_checked_where_the_originals_run_showed_its_own():
    """A candidate's launch inputs are checked against what the original's launches found
    at the same harness and seed: where the original's snapshots did not fit on the GPU
    (it showed none), a candidate alone on the GPU showing its own is not refused for
    inputs nobody recorded; where they did, a tensor from nowhere still is."""
    from kernelband.worker.judge_candidate import Refusal, _check_inputs_of_launches
    from kernelband.worker.judge_core import Reference
    from kernelband.worker.messages import RunOutputs
    from kernelband.worker.observe import content_key

    x = torch.randn(64)
    cached = torch.randn(64)  # a result kept from an earlier call
    ref = Reference(known_inputs={content_key(x)}, inputs_seen={("h", 0)})
    judge = SimpleNamespace(ref=ref)
    meta = RunOutputs("h", 0, "check", pre_state=["k.X", "k.Y"])
    _check_inputs_of_launches(judge, {"pre_state": [x]}, meta, "h, seed 0")
    with pytest.raises(Refusal, match="k.Y reads a tensor that neither"):
        _check_inputs_of_launches(judge, {"pre_state": [x, cached]}, meta, "h, seed 0")
    unseen = RunOutputs("h", 7, "check", pre_state=["k.X", "k.Y"])
    _check_inputs_of_launches(judge, {"pre_state": [x, cached]}, unseen, "h, seed 7")
