"""The executor interface: where a session's evaluation workers (judges) run.

An executor hands out *slots*, one per worker (one per GPU, or a number of CPU slots
under the interpreter), and builds an evaluator for a slot. An evaluator has the
``kernelband.evaluate.Evaluator`` API (start, device_facts, prepare, evaluate,
paired_timing, sanitize, profile, close; ``interpreted``, ``info``, ``facts``,
``baseline``, ``worker_restarts``): the local executor returns real Evaluators whose
judge process is pinned to its GPU, the Ray executor returns proxies to a Ray actor
that runs the same Evaluator next to its GPU. The trust layer is unchanged either way:
each worker owns one GPU and times on it alone (per-GPU ``KERNELBAND_TIMING_LOCK``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from ..evaluate import SetupError
from ..model import Task


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


class Executor(Protocol):
    name: str

    def slots(self, device: str) -> list[Slot]:
        """The workers a job on ``device`` (auto | cuda | cuda:N | cpu) gets, primary first."""
        ...

    def evaluator(self, slot: Slot, task: Task, workdir: Optional[str], profile_tier: int) -> Any:
        """An evaluator (Evaluator API, not started) for ``task`` on ``slot``."""
        ...

    def close(self) -> None: ...
