"""The run compute-sanitizer watches (``Run`` mode ``sanitize``, the judge's sanitize op):
the variant process runs the harness and nothing of ours beside it (no fingerprints,
snapshots or outputs sent, each of which the tool would instrument too), yet keeps every
rule a checked run keeps: a harness that fails, or a module that starts a thread, ends the
job with an error frame, never a clean run. Real variant processes under the interpreter."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers.kernels import AXPY
from kernelband.model import Task
from kernelband.worker.jobs import VariantJob
from kernelband.worker.messages import DoneFrame, ErrorFrame, Job, Run, RunOutputs


def _frames(tmp_path: Path, source: str, harness: str = "harness_axpy") -> list[object]:
    task = Task(module_path=str(tmp_path / "axpy.py"), source=AXPY, kernel="axpy_kernel", harness="harness_axpy",
                seeds=[0])
    job = VariantJob(Job(task, {"v": source}, [Run("v", harness, 0, "sanitize")], interpreted=True), timeout_s=120)
    frames: list[object] = []
    try:
        for frame in job.frames():
            frames.append(frame)
    except Exception as e:  # noqa: BLE001 - a fatal error frame ends the job: kept as the last item
        frames.append(e)
    finally:
        job.close()
    return frames


def test_the_harness_runs_and_nothing_is_sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    frames = _frames(tmp_path, AXPY)
    assert [type(f.meta) for f in frames] == [RunOutputs, DoneFrame]  # type: ignore[attr-defined]
    run = frames[0]
    assert run.meta.mode == "sanitize" and run.meta.seconds > 0  # type: ignore[attr-defined]
    assert not run.tree and not run.meta.launches  # no outputs, no launch records: the tool watched  # type: ignore[attr-defined]


@pytest.mark.parametrize("extra, says", [
    ("\ndef harness_fails():\n    raise RuntimeError('no')\n", "RuntimeError: no"),
    ("\nimport threading, time\ndef harness_thread():\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
     "    return harness_axpy()\n", "started threads"),
])
def test_a_run_that_breaks_a_rule_ends_in_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    extra: str, says: str) -> None:
    """Abuse: a variant whose harness fails, or that starts a thread, under the tool. Its
    job ends in an error frame (the judge's sanitize op then reports no clean run)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    harness = "harness_fails" if "fails" in extra else "harness_thread"
    frames = _frames(tmp_path, AXPY + extra, harness)
    errors = [f.meta for f in frames if isinstance(getattr(f, "meta", None), ErrorFrame)]
    failed = [f for f in frames if isinstance(f, Exception)]
    assert not any(isinstance(getattr(f, "meta", None), RunOutputs) for f in frames)
    assert any(says in e.message for e in errors) or any(says in str(e) for e in failed), frames
