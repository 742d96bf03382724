"""The judge's state and how it runs variant jobs: the task and its workdir, what it
knows of the original (``Reference``), the fork server, the reference lane (a long-lived
process of the original that candidates are timed against), and where a job's frames
are read. The ops live beside it, one module per concern (``judge_original``,
``judge_candidate``, ``judge_timing``, ``judge_memcheck``); ``judge.py`` dispatches.

Several candidates may be evaluated at once (one thread each): the Reference is written
only by ``prepare`` and read by everyone else; GPU work is ordered by the cross-process
GPU lock (shared for runs and the judge's reads, exclusive for timing); the lane is used
by one thread at a time.
"""

from __future__ import annotations

import contextlib
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

import torch

from ..model import LaunchRecord, Task
from ..profile.schema import DeviceFacts
from ..trace import mark
from . import checks, spares
from .call_spec import DerivedCall, RecordedCall
from .compare import set_compute_device
from .deadlines import deadline_s
from .jobs import Frame, VariantJob
from .lane_turns import LaneLevel, TurnQueue
from .messages import (
    PAIRED_SAMPLE_MS,
    Derived,
    ErrorFrame,
    FrameMeta,
    Job,
    ProfileFrame,
    ProfileStep,
    Release,
    ReplayCheck,
    ReplayOutputs,
    Run,
    RunOutputs,
    Sample,
    SampleFrame,
    Step,
    Time,
    TimingFrame,
)
from .spares import EARLY_CUDA_ENV

if TYPE_CHECKING:
    from .zygote_handle import EarlyZygote, Zygote

_SMALL_FRAME_BYTES = 64 << 20  # below this, where a frame is decoded does not matter
MAX_LANES = 8  # candidates evaluated at once on one GPU, at most
GPU_MARGIN_BYTES = 1 << 30  # free GPU memory left beside a decoded frame or the references
TRANSPORT_ENV = "KERNELBAND_TRANSPORT"  # "bytes" forces outputs through the pipe on a GPU


def gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


@dataclass
class Reference:
    """What the judge knows of the original, per (harness, seed)."""

    outputs: dict[tuple[str, int], Any] = field(default_factory=dict)
    masks: dict[str, dict[str, Any]] = field(default_factory=dict)  # harness -> leaf -> changed-by-Triton mask
    neutral_raised: dict[str, bool] = field(default_factory=dict)
    # (harness, seed) -> "kernel.arg" -> [float64 result]: a float64 rerun of the original's
    # launches at every seed whose references fit (precision is judged wherever there is one)
    high: dict[tuple[str, int], dict[str, list[Any]]] = field(default_factory=dict)
    # (harness, seed, "kernel.arg", index) -> the original's own error against that rerun
    high_error: dict[tuple[str, int, str, int], checks.ErrorStats] = field(default_factory=dict)
    # (harness, seed) checked against its outputs, whose float64 result was dropped: with
    # them it would exceed the seed's share of the host memory budget
    high_dropped: set[tuple[str, int]] = field(default_factory=set)
    writes: dict[str, list[str]] = field(default_factory=dict)  # kernel -> argument names it writes
    changed_inputs: set[str] = field(default_factory=set)
    streams: set[int] = field(default_factory=set)
    skipped: set[tuple[str, int]] = field(default_factory=set)  # (harness, seed) not checked: outputs too large
    cuda_peak: int = 0  # the original's variant process: most GPU memory its allocator reserved
    changed_bytes: Optional[int] = None  # bytes the original's timed launches changed (judge_original.changed_bytes)
    slowest_run_s: float = 0.0  # the original's slowest run of a harness or derived call (compile included)
    first_run_s: float = 0.0  # the original's first run of its harness (its first compile included)
    replay_valid: bool = False
    bitwise_reproducible: bool = True  # the original gives bit-identical outputs for the same seed
    stale: bool = False  # the original itself returns buffers that a later call overwrites
    launches: list[LaunchRecord] = field(default_factory=list)
    kept_bytes: int = 0  # bytes of the references kept on the GPU
    pinned_bytes: int = 0  # page-locked host memory the references kept on the host may take
    recorded_calls: list[RecordedCall] = field(default_factory=list)  # the harness's calls of the wrapper
    # contents the original's launches found (and its harness's tensors): what a candidate's
    # launches may read besides fresh memory, constants and what earlier launches wrote
    known_inputs: set[tuple[str, int, tuple[int, int]]] = field(default_factory=set)
    # (harness, seed) whose run showed what the original's launches found (its snapshots fit
    # on the GPU): a candidate's launch inputs are checked there only
    inputs_seen: set[tuple[str, int]] = field(default_factory=set)
    derived: list[tuple[DerivedCall, Any]] = field(default_factory=list)  # (derived call, the original's outputs)
    # the derivation (judge_derivation): set once ``derived`` is final, perhaps after prepare
    # returned; its notes (calls dropped), or why it could not be run; the calls drawn
    # (before any was dropped), the harness-run deadlines it may take, its seconds
    derived_ready: threading.Event = field(default_factory=threading.Event)
    derived_notes: list[str] = field(default_factory=list)
    derived_failure: str = ""
    drawn_calls: list[DerivedCall] = field(default_factory=list)
    derived_calls_s: float = 0.0  # the original's seconds in those calls so far (compiles included)
    derive_started: float = 0.0  # time.monotonic() when the derivation started (0: not yet)
    # set once prepare has made the references final (moved to the GPU or kept on the
    # host): a derivation started during prepare judges its frames after it
    references_final: threading.Event = field(default_factory=threading.Event)
    spares_started: bool = False  # the first wave's processes started during the reference job
    derivation_runs: int = 0
    derived_s: float = 0.0

    def original_error(self, harness: Optional[str] = None, seeds: Optional[set[int]] = None) -> Optional[float]:
        """The original's largest relative error against its float64 reruns, over the given
        harness's (else every harness's) given seeds (else every seed): None where it has
        none there."""
        errors = [
            e.rel
            for (h, s, _, _), e in self.high_error.items()
            if (harness is None or h == harness) and (seeds is None or s in seeds)
        ]
        return max(errors) if errors else None

    def derived_runs(self) -> int:
        """The calls beyond the harness a candidate runs: the kept ones, or while they are
        still being made, every one drawn."""
        return len(self.derived) if self.derived_ready.is_set() else len(self.drawn_calls)

    def calls_ahead(self) -> list[DerivedCall]:
        """The calls beyond the harness a candidate will run: the kept ones, or while they
        are still being made, every one drawn (what a sibling compiles ahead of it)."""
        return [call for call, _ in self.derived] if self.derived_ready.is_set() else list(self.drawn_calls)


def sample_step(key: str, held_by_judge: bool, paired: bool = False) -> Sample:
    """A sample of ``key``'s kept run: a search round's, or a paired re-measurement's."""
    return Sample(key, held_by_judge, PAIRED_SAMPLE_MS, 1) if paired else Sample(key, held_by_judge)


class Lane:
    """The reference lane: the original's own process, kept alive after ``prepare`` with a
    checked kept run of the timing harness, so that each candidate is timed against the
    original in alternating rounds (two processes, one GPU turn): the search ranks on the
    same paired measurement as the final verdict."""

    def __init__(self, job: VariantJob, key: str = "o") -> None:
        self.job = job
        self.key = key
        self.lock = TurnQueue()  # oldest candidate first (``lane_turns.TurnQueue``)
        self.level: Optional[LaneLevel] = None  # the original's usual median in turns: from its baseline

    def sample(self, held_by_judge: bool, timeout_s: float, paired: bool = False) -> tuple[float, str]:
        """One sample of the original: a search round's, or (``paired``) a paired
        re-measurement's (``messages.SEARCH_SAMPLE_MS`` / ``PAIRED_SAMPLE_MS``)."""
        self.job.command([sample_step(self.key, held_by_judge, paired)], timeout_s)
        meta = self.job.next_frame().meta
        if not isinstance(meta, SampleFrame):
            raise RuntimeError(f"the reference lane answered {meta.KIND}: {getattr(meta, 'message', '')}")
        return meta.ms, meta.clock

    @property
    def alive(self) -> bool:
        proc = self.job.proc
        return proc is not None and proc.poll() is None

    def close(self) -> None:
        self.job.close()


class JudgeCore:
    def __init__(self, interpreted: bool) -> None:
        self.interpreted = interpreted
        self.task: Optional[Task] = None
        self.workdir: Optional[Path] = None
        self.ref = Reference()
        self.on_log: Optional[Callable[[str], None]] = None
        self.network = ""
        self.zygote: Optional[Zygote] = None
        self.early_zygote: Optional[EarlyZygote] = None  # started by main() before torch was imported
        self._zygote_lock = threading.Lock()
        self.preparing = False
        self.lane: Optional[Lane] = None
        self.lanes = 0  # candidates evaluated at once (``judge_original.candidate_lanes``); 0 until prepare sets it
        self.spares = spares.Spares()  # started processes for candidate jobs (``keep_spares``)
        from .judge_derived import new_session_seed

        self.session_seed = new_session_seed()  # which inputs beyond the harness a candidate is shown
        self.ref_device: Optional[str] = "cuda" if gpu() else None
        set_compute_device(self.ref_device)
        self.refs_on_gpu = False
        self.transport = "cuda_ipc" if gpu() and os.environ.get(TRANSPORT_ENV, "") != "bytes" else "bytes"
        self.sandbox_skip = ""  # sandbox layers left out so that CUDA IPC works here (prepare finds out)
        self._gpu_frame_held = threading.local()  # a frame was rebuilt on the GPU since the last release
        if gpu() and not os.environ.get("KERNELBAND_TIMING_LOCK"):
            from .gpu_lock import default_lock_path

            # timed regions are exclusive across sessions on this GPU (variant processes inherit it)
            os.environ["KERNELBAND_TIMING_LOCK"] = default_lock_path()

    @property
    def on_gpu(self) -> bool:
        """Candidates run on a GPU (not under the interpreter): contexts to make, kernels to compile."""
        return self.ref_device == "cuda" and not self.interpreted

    def close(self) -> None:
        """Stop the lane, the spares and the fork server (and with it any job still running)."""
        self.close_lane()
        self.spares.close()
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def close_lane(self) -> None:
        if self.lane is not None:
            self.lane.close()
            self.lane = None

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
    def job(
        self,
        modules: dict[str, str],
        steps: list[Step],
        runs: int,
        trusted: bool,
        interactive: bool = False,
        run_timeout_s: Optional[float] = None,
    ) -> VariantJob:
        """A started variant job; its timeout allows for ``runs`` runs of the harness, each
        ``run_timeout_s`` (default: the task's)."""
        task = self.require_task()
        alone = self.on_gpu and self.lanes == 1  # the one candidate on this GPU: its harness may fill it
        spec = Job(
            task,
            modules,
            steps,
            self.interpreted,
            {} if trusted else self.ref.writes,
            self.transport,
            interactive,
            gpu_alone=alone,
        )
        timeout_s = deadline_s(run_timeout_s or task.timeout_s, runs)
        job = None if trusted else self.spares.take(self._spare_fits)
        if job is not None:
            job.adopt(spec, timeout_s)
        else:
            job = self._new_job(spec, timeout_s, trusted)
        mark("job.request", job=job.nonce[:8], trusted=trusted, steps=[s.OP for s in steps][:12])
        if alone and self.ref.cuda_peak > 0:
            waited = wait_for_room(lane_bytes(self.ref))
            if waited > 0.05:
                mark("job.waited_for_room", job=job.nonce[:8], seconds=round(waited, 3))
        job.start(self.live_zygote())
        return job

    def _new_job(self, spec: Job, timeout_s: float, trusted: bool, early_cuda: bool = False) -> VariantJob:
        assert self.workdir is not None
        return VariantJob(
            spec,
            timeout_s=timeout_s,
            # the original's jobs start from this machine's compiled kernels of the same source
            # (written only from original-only jobs); a candidate's from this session's
            trusted_cache=persistent_cache(spec.task) if trusted else self.workdir / "triton-cache-trusted",
            # over the byte channel, large outputs that are only compared are rebuilt on the GPU
            device=self._frame_device,
            after_frame=self._release_frame_memory,
            on_log=self.on_log,
            extra_env={**self._sandbox_env(), **({EARLY_CUDA_ENV: "1"} if early_cuda else {})},
        )

    def keep_spares(self, lanes: int) -> None:
        """Spare processes for this task's candidate jobs from now on (``spares.py``)."""
        task = self.require_task()

        def make() -> VariantJob:
            spare = self._new_job(
                Job(task, {}, [], self.interpreted, {}, self.transport), 0.0, trusted=False, early_cuda=self.on_gpu
            )
            spare.spawn(self.live_zygote())
            return spare

        free = torch.cuda.mem_get_info()[0] if self.on_gpu else 0
        self.spares.keep(spares.wanted(self.on_gpu, lanes, free), make)

    def _spare_fits(self, spare: VariantJob) -> bool:
        """A spare made for this task, in the sandbox and transport a new job gets now."""
        env = {k: v for k, v in spare.extra_env.items() if k != EARLY_CUDA_ENV}
        return spare.job.task is self.task and env == self._sandbox_env() and spare.job.transport == self.transport

    def _sandbox_env(self) -> dict[str, str]:
        if not self.sandbox_skip:
            return {}
        asked = [x for x in os.environ.get("KERNELBAND_SANDBOX_SKIP", "").split(",") if x.strip()]
        return {"KERNELBAND_SANDBOX_SKIP": ",".join(sorted(set(asked) | set(self.sandbox_skip.split(","))))}

    def _frame_device(self, kind: str, meta: FrameMeta, nbytes: int) -> Optional[str]:
        """Where a byte frame's tensors are rebuilt: on the GPU when it is large, only
        compared, and fits beside what the variant process holds; else on the host."""
        if self.ref_device != "cuda" or self.refs_on_gpu or nbytes <= _SMALL_FRAME_BYTES or kind != "outputs":
            return None
        if self._becomes_reference(meta):
            return None
        free, _ = torch.cuda.mem_get_info()
        if nbytes + GPU_MARGIN_BYTES > free:
            return None
        self._gpu_frame_held.value = True
        return "cuda"

    def _release_frame_memory(self) -> None:
        """A frame rebuilt on the GPU has been compared and dropped: hand its blocks back now
        (the variant's next full-size run needs that room)."""
        if getattr(self._gpu_frame_held, "value", False):
            self._gpu_frame_held.value = False
            torch.cuda.empty_cache()

    def _becomes_reference(self, meta: FrameMeta) -> bool:
        """An outputs frame of the original that is kept as a reference (prepare)."""
        return (
            self.preparing
            and isinstance(meta, RunOutputs)
            and meta.mode in ("check", "upcast")
            and not meta.again
            and not meta.skipped
        )

    def keep_trusted_cache(self, job: VariantJob) -> None:
        """An original-only job's compiled kernels seed later jobs' private caches (which
        untrusted code can write to, so nothing flows back from them), and the next
        session's original on this machine."""
        assert self.workdir is not None
        src = job.dir / "triton-cache"
        if src.is_dir():
            import shutil

            shutil.copytree(src, self.workdir / "triton-cache-trusted", dirs_exist_ok=True)
            target = persistent_cache(self.require_task())
            if target is not None:
                try:
                    shutil.copytree(src, target, dirs_exist_ok=True)
                except OSError:
                    pass  # a cache that cannot be written only costs a compile next time

    # ------------------------------------------------------------------ the fork server
    def prestart_zygote(self) -> None:
        """Start the fork server now, beside the session's own setup, so its imports are not
        paid inside the first job."""

        def start_and_stay() -> None:
            self.live_zygote()
            # the fork server dies with the thread that started it (PR_SET_PDEATHSIG is per
            # thread): this one lives as long as the judge
            threading.Event().wait()

        threading.Thread(target=start_and_stay, daemon=True, name="kernelband-zygote").start()

    def live_zygote(self) -> Optional["Zygote"]:
        """The fork server, started on first use and replaced when it died; None (plain
        processes) when disabled or when it cannot start."""
        from .zygote_handle import Zygote, use_zygote

        if not use_zygote():
            return None
        with self._zygote_lock:
            if self.zygote is None and self.early_zygote is not None:
                early, self.early_zygote = self.early_zygote, None
                self.zygote = early.take(self.interpreted)
            if self.zygote is None or not self.zygote.alive or self.zygote.interpreted != self.interpreted:
                if self.zygote is not None:
                    self.zygote.close()
                try:
                    self.zygote = Zygote(self.interpreted)
                except OSError as e:
                    if self.on_log:
                        self.on_log(f"kernelband: fork server unavailable ({e}); starting variant processes one by one")
                    self.zygote = None
            return self.zygote


def persistent_cache(task: Task) -> Optional[Path]:
    """This machine's Triton cache for the original module's source (one folder per source
    hash and Triton version, under the machine cache); None when disabled."""
    from ..machine_cache import trusted_triton_cache

    return trusted_triton_cache(task.source_hash[:24])


def timed_steps(key: str, time_it: bool, tier: int, facts: DeviceFacts, source: str) -> list[Step]:
    """After the kept run of ``key``: its replay check, its timing (needed for a
    profile too), its profile at ``tier``, then its release."""
    steps: list[Step] = [ReplayCheck(key)]
    if time_it or tier > 0:
        steps.append(Time(key))
    if tier > 0:
        steps.append(ProfileStep(key, source, tier, facts))
    return steps + [Release(key)]


ROOM_POLL_S = 0.05
ROOM_STALL_S = 0.5  # free memory that stopped growing this long: no teardown is under way


def wait_for_room(nbytes: int, free_bytes: Optional[Callable[[], int]] = None, timeout_s: float = 10.0) -> float:
    """Wait while the GPU's free memory is below ``nbytes`` and still growing (a closed
    job's process gives its memory back as it dies, after ``close`` returns); the seconds
    waited. A job of a harness that fills the GPU started before that found no room for
    its snapshots there and kept them on the host: on one H200 a 32 GiB harness's timing
    step then took 22 s instead of 0.3 (benchmarks/results/eval_speed/h200_2ecaa38/D)."""
    free_bytes = free_bytes or (lambda: int(torch.cuda.mem_get_info()[0]))
    t0 = last_growth = time.monotonic()
    free = free_bytes()
    while free < nbytes and time.monotonic() - t0 < timeout_s and time.monotonic() - last_growth < ROOM_STALL_S:
        time.sleep(ROOM_POLL_S)
        now = free_bytes()
        if now > free:
            last_growth = time.monotonic()
        free = now
    return time.monotonic() - t0


def lane_bytes(ref: Reference) -> int:
    """GPU memory one candidate's lane is allowed: the original's peak and a margin."""
    return max(ref.cuda_peak, 1) + GPU_MARGIN_BYTES // 4


def note_run_seconds(ref: Reference, frame: Frame[FrameMeta]) -> None:
    """The original's slowest run (a search's candidate gets a multiple of it per run) and
    its first (``warm.compiles_heavily``)."""
    if frame.kind == "outputs":
        ref.slowest_run_s = max(ref.slowest_run_s, frame.meta.seconds)
        ref.first_run_s = ref.first_run_s or frame.meta.seconds


def original_setup_message(task: Task, meta: ErrorFrame) -> str:
    """Why the original cannot serve as a reference, from its job's error frame."""
    phase, message = meta.phase, meta.message
    if phase in ("import", "compile") and meta.step is None:
        return f"the original module does not import: {message}"
    h = meta.harness or task.harness
    if phase == "assert":
        return f"the harness {h} fails its own check on the original kernel: {message}"
    return f"the harness {h} fails on the original kernel: {message}"


def count_runs(steps: list[Step]) -> int:
    """The steps that run the harness (its timeout is per run)."""
    return sum(
        len(s.calls) if isinstance(s, Derived) else 1 for s in steps if isinstance(s, (Run, Time, ProfileStep, Derived))
    )


def add_frame_phase(phases: dict[str, float], frame: Frame[FrameMeta], t0: float) -> None:
    """A frame's seconds into the phase it belongs to (the cost-of-defences report);
    what came before the first frame (start-up, imports, compile) is ``process_start``."""
    if "process_start" not in phases:
        add_phase(phases, "process_start", time.perf_counter() - t0 - frame.meta.seconds)
    add_phase(phases, phase_of(frame), frame.meta.seconds)


def add_phase(phases: dict[str, float], name: str, seconds: float) -> None:
    phases[name] = round(phases.get(name, 0.0) + max(seconds, 0.0), 6)


@contextlib.contextmanager
def timed_phase(phases: Optional[dict[str, float]], name: str) -> Iterator[None]:
    """The seconds of the block into ``phases[name]`` (host wall time: each check ends in
    a synchronisation, so its GPU work is inside)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if phases is not None:
            add_phase(phases, name, time.perf_counter() - t0)


def phase_of(frame: Frame[FrameMeta]) -> str:
    """Which check a frame's seconds belong to (for the cost-of-defences report)."""
    meta = frame.meta
    if isinstance(meta, (TimingFrame, SampleFrame)):
        return "timing"
    if isinstance(meta, ProfileFrame):
        return "profile"
    if isinstance(meta, ReplayOutputs):
        return "replay_check"
    if isinstance(meta, RunOutputs) and meta.mode == "neutral":
        return "neutralised_runs"
    return "recheck_after_timing" if isinstance(meta, RunOutputs) and meta.again else "correctness_runs"
