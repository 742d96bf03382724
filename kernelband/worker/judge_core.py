"""The judge's state and how it runs variant jobs: the task and its workdir, what it
knows of the original (``Reference``), the fork server, and where a job's frames are
rebuilt. The ops live beside it, one module per concern (``judge_original``,
``judge_candidate``, ``judge_timing``, ``judge_memcheck``); ``judge.py`` dispatches."""
from __future__ import annotations

import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

import torch

from ..model import LaunchRecord, Task
from .compare import set_compute_device
from .jobs import Frame, VariantJob

if TYPE_CHECKING:
    from .jobs import Zygote

_SMALL_FRAME_BYTES = 64 << 20  # below this, where a frame is decoded does not matter
GPU_MARGIN_BYTES = 1 << 30  # free GPU memory left beside a decoded frame or the references


def gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


@dataclass
class Reference:
    """What the judge knows of the original, per (harness, seed)."""

    outputs: dict[tuple[str, int], Any] = field(default_factory=dict)
    masks: dict[str, dict[str, Any]] = field(default_factory=dict)  # harness -> leaf -> changed-by-Triton mask
    neutral_raised: dict[str, bool] = field(default_factory=dict)
    high: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # harness -> "kernel.arg" -> [float64 result]
    high_error: dict[tuple[str, str, int], tuple[float, float, float]] = field(default_factory=dict)
    writes: dict[str, list[str]] = field(default_factory=dict)  # kernel -> argument names it writes
    changed_inputs: set[str] = field(default_factory=set)
    streams: set[int] = field(default_factory=set)
    skipped: set[tuple[str, int]] = field(default_factory=set)  # (harness, seed) not checked: outputs too large
    cuda_peak: int = 0  # the original's variant process: most GPU memory its allocator reserved
    replay_valid: bool = False
    stale: bool = False  # the original itself returns buffers that the next call overwrites
    launches: list[LaunchRecord] = field(default_factory=list)


class JudgeCore:
    def __init__(self, interpreted: bool) -> None:
        self.interpreted = interpreted
        self.fatal = False
        self.task: Optional[Task] = None
        self.workdir: Optional[Path] = None
        self.ref = Reference()
        self.on_log: Optional[Callable[[str], None]] = None
        self.network = ""
        self.zygote: Any = None
        self._zygote_lock = threading.Lock()
        self.preparing = False
        self.ref_device: Optional[str] = "cuda" if gpu() else None
        set_compute_device(self.ref_device)
        self.refs_on_gpu = False
        self._gpu_frame_held = False  # a frame was rebuilt on the GPU since the last release
        if gpu() and not os.environ.get("KERNELBAND_TIMING_LOCK"):
            from .timing import default_lock_path

            # timed regions are exclusive across sessions on this GPU (variant processes inherit it)
            os.environ["KERNELBAND_TIMING_LOCK"] = default_lock_path()

    def close(self) -> None:
        """Stop the fork server (and with it any job still running)."""
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def device_name(self) -> str:
        if gpu():
            return torch.cuda.get_device_name()
        return f"CPU ({platform.machine()}, Triton interpreter)"

    def require_task(self) -> Task:
        if self.task is None:
            raise RuntimeError("worker has no task: send prepare first")
        return self.task

    def harnesses(self) -> list[str]:
        task = self.require_task()
        return [task.harness] + [h for h in task.check_harnesses if h != task.harness]

    # ------------------------------------------------------------------ variant jobs
    def job(self, modules: dict[str, str], steps: list[dict[str, Any]], runs: int, trusted: bool) -> VariantJob:
        """A started variant job; its timeout allows for ``runs`` runs of the harness."""
        task = self.require_task()
        assert self.workdir is not None
        cache = self.workdir / "triton-cache-trusted"
        job = VariantJob(
            {"task": task.to_dict(), "modules": modules, "steps": steps, "interpreted": self.interpreted,
             "writes": {} if trusted else self.ref.writes},
            timeout_s=30.0 + task.timeout_s * max(runs, 1),
            trusted_cache=None if trusted else cache,
            # references arrive on the host and move to the GPU only if they fit comfortably
            # (prepare); a candidate's outputs are compared slice by slice on the references' device
            device=self._frame_device,
            after_frame=self._release_frame_memory,
            on_log=self.on_log,
        )
        job.start(self.live_zygote())
        return job

    def _frame_device(self, kind: str, meta: dict[str, Any], nbytes: int) -> Optional[str]:
        """Where a frame's tensors are rebuilt. References arrive on the host (prepare);
        a large frame that is only compared (a candidate's outputs, a re-run, a neutralised
        run) is rebuilt on the GPU when the references stay on the host and it fits beside
        what the variant process holds, so each side keeps one copy of the outputs and the
        comparison runs on the GPU."""
        if self.ref_device != "cuda" or self.refs_on_gpu or nbytes <= _SMALL_FRAME_BYTES or kind != "outputs":
            return None
        if self._becomes_reference(meta):
            return None
        free, _ = torch.cuda.mem_get_info()
        if nbytes + GPU_MARGIN_BYTES > free:
            return None
        self._gpu_frame_held = True
        return "cuda"

    def _release_frame_memory(self) -> None:
        """A frame rebuilt on the GPU has been compared and dropped: hand its blocks back
        to the device now, not at the end of the op. Within one op the variant process
        may next run the harness again (the paired re-measurement keeps two runs), and the
        allocator's cache would hold one output's worth of memory that run needs
        (measured on the 32 GiB layernorm: 16 GiB, and an OOM)."""
        if self._gpu_frame_held:
            self._gpu_frame_held = False
            torch.cuda.empty_cache()

    def _becomes_reference(self, meta: dict[str, Any]) -> bool:
        """An outputs frame of the original that is kept as a reference (prepare)."""
        return (self.preparing and meta.get("mode") in ("check", "upcast") and not meta.get("again")
                and not meta.get("skipped"))

    def keep_trusted_cache(self, job: VariantJob) -> None:
        """An original-only job's compiled kernels seed later jobs' private caches (which
        untrusted code can write to, so nothing flows back from them)."""
        assert self.workdir is not None
        src = job.dir / "triton-cache"
        if src.is_dir():
            import shutil

            shutil.copytree(src, self.workdir / "triton-cache-trusted", dirs_exist_ok=True)

    # ------------------------------------------------------------------ the fork server
    def prestart_zygote(self) -> None:
        """Start the fork server now, beside the session's own setup (device facts, the
        store), so its imports are not paid inside the first job."""
        def start_and_stay() -> None:
            self.live_zygote()
            # the fork server dies with the thread that started it (PR_SET_PDEATHSIG is per
            # thread): this one lives as long as the judge
            threading.Event().wait()

        threading.Thread(target=start_and_stay, daemon=True, name="kernelband-zygote").start()

    def live_zygote(self) -> Optional["Zygote"]:
        """The fork server, started on first use and replaced when it died; None (plain
        processes) when disabled or when it cannot start."""
        from .jobs import Zygote, _use_zygote

        if not _use_zygote():
            return None
        with self._zygote_lock:
            if self.zygote is None or not self.zygote.alive:
                if self.zygote is not None:
                    self.zygote.close()
                try:
                    self.zygote = Zygote(self.interpreted)
                except OSError as e:
                    if self.on_log:
                        self.on_log(f"kernelband: fork server unavailable ({e}); starting variant processes one by one")
                    self.zygote = None
            return self.zygote


def timed_steps(key: str, time_it: bool, tier: int, facts: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """After the kept run of ``key``: its replay check, its timing (needed for a
    profile too), its profile at ``tier``, then its release."""
    steps: list[dict[str, Any]] = [{"op": "replay_check", "key": key}]
    if time_it or tier > 0:
        steps.append({"op": "time", "key": key})
    if tier > 0:
        steps.append({"op": "profile", "key": key, "tier": tier, "facts": facts, "source": source})
    return steps + [{"op": "release", "key": key}]


def count_runs(steps: list[dict[str, Any]]) -> int:
    """The steps that run the harness (its timeout is per run)."""
    return sum(1 for s in steps if s["op"] in ("run", "time", "profile"))


def timed_frames(job: VariantJob, phases: dict[str, float], t0: float) -> Iterator[Frame]:
    """The job's frames, each frame's seconds added to the phase it belongs to (the
    cost-of-defences report); what came before the first run ended (interpreter start,
    imports, sandbox, compile) is ``process_start``."""
    first = True
    for frame in job.frames():
        seconds = float(frame.meta.get("seconds", 0.0))
        if first:
            add_phase(phases, "process_start", time.perf_counter() - t0 - seconds)
            first = False
        add_phase(phases, phase_of(frame), seconds)
        yield frame


def add_phase(phases: dict[str, float], name: str, seconds: float) -> None:
    phases[name] = round(phases.get(name, 0.0) + max(seconds, 0.0), 6)


def phase_of(frame: Frame) -> str:
    """Which check a frame's seconds belong to (for the cost-of-defences report)."""
    mode = frame.meta.get("mode")
    if frame.kind == "timing":
        return "timing"
    if frame.kind == "profile":
        return "profile"
    if mode == "neutral":
        return "neutralised_runs"
    if mode == "replay":
        return "replay_check"
    if frame.meta.get("again"):
        return "recheck_after_timing"
    return "correctness_runs"
