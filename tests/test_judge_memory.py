"""The judge hands cached GPU memory back after every op (a compared output is garbage,
but torch's allocator would keep its blocks for the rest of the session)."""
from __future__ import annotations

import pytest
import torch

from helpers.kernels import AXPY

from kernelband.worker import judge as judge_mod
from kernelband.worker.judge import JudgeService
from kernelband.worker.messages import RunOutputs
from kernelband.worker.requests import decode


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the judge's calls of torch.cuda.empty_cache, as if on a GPU machine (the
    call is what is checked; no GPU number is involved)."""
    calls: list[str] = []
    monkeypatch.setattr(judge_mod, "gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    return calls


def test_every_op_ends_by_releasing_cached_gpu_memory(releases: list[str]) -> None:
    judge = JudgeService(interpreted=False)
    assert judge.serve(decode("sandbox", {})) == {"network": judge.network}
    assert releases == ["empty_cache"]


def test_an_op_that_fails_releases_too(releases: list[str]) -> None:
    judge = JudgeService(interpreted=False)
    with pytest.raises(RuntimeError):  # evaluate before prepare: no task
        judge.serve(decode("evaluate", {"source": "", "variant_id": "x"}))
    assert releases == ["empty_cache"]


def test_no_release_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(judge_mod, "gpu", lambda: False)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    JudgeService(interpreted=True).serve(decode("sandbox", {}))
    assert calls == []


# ---------------------------------------------------------------- within an op, per frame



def test_a_job_hands_each_frame_back_before_the_next_is_decoded(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The paired re-measurement runs the harness twice in one op: the first run's
    outputs, decoded on the GPU and compared, must not stay cached while the second run
    allocates. So the release comes between frames, not after the op. A real variant
    process (interpreter) sends two outputs frames; the hook runs after each."""
    from kernelband.model import Task
    from kernelband.worker.jobs import VariantJob
    from kernelband.worker.messages import Job, ReplayCheck, Run

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = Task(module_path=str(tmp_path / "axpy.py"), source=AXPY, kernel="axpy_kernel", harness="harness_axpy",
                seeds=[0])
    events: list[str] = []
    steps = [Run("m", "harness_axpy", 0, keep="m"), ReplayCheck("m")]
    job = VariantJob(Job(task, {"m": AXPY}, steps, interpreted=True),
                     timeout_s=120, after_frame=lambda: events.append("released"))
    try:
        for frame in job.frames():
            events.append(frame.kind)
    finally:
        job.close()
    # an op-end release alone (two outputs frames held at once: OOM on the GPU) would read outputs, outputs, done
    assert events == ["outputs", "released", "outputs", "released", "done"]


def test_only_a_frame_rebuilt_on_the_gpu_is_released(releases: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate's large outputs frame goes to the GPU when it fits beside the
    variant's memory (then its blocks are released once, after it is compared); one
    decoded on the host leaves the device alone."""
    judge = JudgeService(interpreted=False)
    judge.ref_device, judge.refs_on_gpu = "cuda", False
    free = [64 << 30]
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (free[0], 80 << 30))
    big = 16 << 30
    assert judge._frame_device("outputs", RunOutputs("h", 0, "check"), big) == "cuda"
    judge._release_frame_memory()
    judge._release_frame_memory()  # nothing new rebuilt: no second call
    assert releases == ["empty_cache"]
    free[0] = 12 << 30  # the variant holds two runs: the frame is rebuilt on the host
    assert judge._frame_device("outputs", RunOutputs("h", 0, "check"), big) is None
    judge._release_frame_memory()
    assert releases == ["empty_cache"]


STAMPED = AXPY + '''

def harness_stamped():
    import time
    harness_axpy()
    return torch.tensor([time.time()], dtype=torch.float64)
'''


def test_the_variant_starts_its_next_run_only_after_the_judge_is_done_with_the_last_frame(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge releasing a frame is not enough if the variant process has already
    begun its next full-size run (it did: its frame bytes were read, so it went on, and
    the paired re-measurement ran out of GPU memory). The variant waits for the judge's
    ack. Here the judge takes 1.5 s over the first frame; the second run, stamped with
    its start time, must begin after that. Without await_judge it begins at once."""
    import time

    from kernelband.model import Task
    from kernelband.worker.jobs import VariantJob
    from kernelband.worker.messages import Job, Run

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = Task(module_path=str(tmp_path / "stamped.py"), source=STAMPED, kernel="axpy_kernel",
                harness="harness_stamped", seeds=[0])
    steps = [Run("m", "harness_stamped", seed) for seed in (0, 1)]
    job = VariantJob(Job(task, {"m": STAMPED}, steps, interpreted=True), timeout_s=120)
    started: list[float] = []
    done_with_first = 0.0
    try:
        for frame in job.frames():
            if frame.kind == "outputs":
                started.append(float(frame.tree["returned"][0]))
                if len(started) == 1:
                    time.sleep(1.5)  # the judge comparing a large frame
                    done_with_first = time.time()
    finally:
        job.close()
    assert len(started) == 2
    assert started[1] >= done_with_first, (started, done_with_first)
