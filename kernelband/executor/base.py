"""The executor interface: where a session's evaluation workers (judges) run.

An executor hands out *slots*, one per worker (one per GPU, or a number of CPU slots
under the interpreter), and builds an evaluator for a slot, an ``Evaluator`` (the
Protocol below): the local executor returns ``kernelband.evaluate.Evaluator`` objects whose
judge process is pinned to its GPU, the Ray executor returns proxies to a Ray actor
that runs the same Evaluator next to its GPU (a test checks both have every member,
with the same parameters). The trust layer is unchanged either way:
each worker owns one GPU and times on it alone (per-GPU ``KERNELBAND_TIMING_LOCK``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, runtime_checkable

from ..evaluate import SetupError
from ..model import PAST_INT32, Baseline, Evaluation, PairedTiming, SanitizerReport, Task, Timing, Variant, WideReport
from ..profile.schema import DeviceFacts, Profile
from ..worker.client import WorkerInfo


class ExecutorUnavailable(SetupError):
    """The executor cannot be used here (Ray not installed, cluster unreachable): one line;
    a SetupError, so every command reports it as a job that cannot start (exit 2)."""


@dataclass(frozen=True)
class Slot:
    """One evaluation worker: ``device`` is what its judge is told (Task.device);
    ``env`` pins it (CUDA_VISIBLE_DEVICES); ``gpu`` is True when it owns a GPU."""

    label: str
    device: str
    env: dict[str, str] = field(default_factory=dict)
    gpu: bool = False


@dataclass
class ExecutorOptions:
    """What the CLI (``--executor``, ``--workers``, ``--ray-address``) asks for."""

    name: str = "local"
    workers: Optional[int] = None  # None: one per visible GPU; 1 on the CPU/interpreter
    ray_address: Optional[str] = None  # None: an already initialised Ray, else a local instance

    def validate(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {self.workers}")


@runtime_checkable
class Evaluator(Protocol):
    """What a session, its worker pool and its result builder use of an evaluation worker
    (``kernelband.evaluate.Evaluator`` documents each member)."""

    baseline: Optional[Baseline]  # the original's, once prepared
    facts: DeviceFacts  # the device's facts, sent with each request that profiles
    worker_restarts: int

    @property
    def info(self) -> Optional[WorkerInfo]: ...

    @property
    def interpreted(self) -> bool: ...

    @property
    def lanes(self) -> int:
        """Candidates it evaluates at once."""
        ...

    def start(self) -> WorkerInfo: ...

    def device_facts(self) -> DeviceFacts: ...

    def prepare(self, time_it: bool = True, profile_tier: Optional[int] = None) -> Baseline: ...

    def evaluate(
        self,
        variant: Variant,
        time_it: bool = True,
        profile_tier: Optional[int] = None,
        search: bool = False,
        rounds: Optional[int] = None,
    ) -> Evaluation: ...

    def retime_original(self) -> Timing: ...

    def paired_timing(self, variant: Variant, rounds: int = 10) -> PairedTiming: ...

    def sanitize(self, variant: Variant) -> SanitizerReport: ...

    def wide_calls(self, variant: Variant, min_elements: int = PAST_INT32) -> WideReport: ...

    def profile(self, source: Optional[str], tier: int) -> Optional[Profile]: ...

    def close(self) -> None: ...


class Executor(Protocol):
    name: str

    def slots(self, device: str) -> list[Slot]:
        """The workers a job on ``device`` (auto | cuda | cuda:N | cpu) gets, primary first."""
        ...

    def evaluator(self, slot: Slot, task: Task, workdir: Optional[str], profile_tier: int) -> Evaluator:
        """An evaluator (Evaluator API, not started) for ``task`` on ``slot``."""
        ...

    def close(self) -> None: ...
