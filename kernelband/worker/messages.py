"""Every message between the judge, its variant processes and its fork server, one frozen
dataclass each: ``to_wire()`` is the JSON object sent, ``from_wire()`` checks every field's
type and refuses an unknown or missing field, op or kind with a one-line
``MalformedMessage``. Each side decodes what it receives once, where it receives it:
the variant process its ``Job`` and ``Command``s (``Step``s, one class per op, which it
dispatches on by class); the judge each frame's meta (``wire.read_frame``: one class per
kind, an outputs frame's by its mode), where the sender is untrusted: a meta that does
not decode ends the job (``jobs.JobEndKind.MALFORMED``), a candidate's as a trust
refusal; the fork server its requests, the judge their replies. The session -> judge
requests (``requests.py``) and the calls a step or frame holds (``call_spec``) go through
the same decoder (``kernelband/decode.py``). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, Optional, TypeVar

from ..model import LaunchRecord, Task, Timing
from ..profile.schema import DeviceFacts
from .call_spec import DerivedCall, RecordedCall
from ..decode import MalformedMessage, Message, decode_fields

OpT = TypeVar("OpT", bound="Op")


@dataclass(frozen=True)
class Op(Message):
    """A message named by its ``op``; ``from_wire`` of a family (``Step``, ``ZygoteRequest``)
    decodes whichever of its ops the body names."""

    OP: ClassVar[str] = ""
    FAMILY: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP, **super().to_wire()}

    @classmethod
    def from_wire(cls: type[OpT], body: object) -> OpT:
        if not isinstance(body, Mapping):
            raise MalformedMessage(f"malformed {cls.FAMILY}: must be an object, got {type(body).__name__}")
        known = {c.OP: c for c in cls.__subclasses__()} or {cls.OP: cls}
        op = body.get("op")
        target = known.get(op) if isinstance(op, str) else None
        if target is None:
            raise MalformedMessage(f"malformed {cls.FAMILY}: unknown op {op!r:.40} (known: {', '.join(known)})")
        return decode_fields(target, {k: v for k, v in body.items() if k != "op"}, f"malformed {op} {cls.FAMILY}")


# ---------------------------------------------------------------------- judge -> variant process
@dataclass(frozen=True)
class Step(Op):
    """A step of a variant job (``variant.Steps``); its frames follow in order."""

    FAMILY: ClassVar[str] = "step"


@dataclass(frozen=True)
class Run(Step):
    """Run ``harness`` of module ``module`` under ``seed``: a ``RunOutputs`` frame. mode: check,
    neutral (launches replaced by poison), upcast (check, and the launches rerun on float64
    copies), sanitize (the harness run and nothing else: no fingerprints, snapshots or
    outputs sent, under compute-sanitizer, where every kernel of ours would be instrumented
    too); ``keep``: kept under that key for the steps below; ``again``: the re-check after
    timing; ``record``: wrappers whose calls to record; ``skip_over``: skipped when the
    harness's last run returned more bytes."""

    OP: ClassVar[str] = "run"
    module: str
    harness: str
    seed: int
    mode: Literal["check", "neutral", "upcast", "sanitize"] = "check"
    keep: Optional[str] = None
    again: bool = False
    record: list[str] = field(default_factory=list)
    skip_over: Optional[int] = None


@dataclass(frozen=True)
class ReplayCheck(Step):
    """Replay the kept run's launches once on restored or poisoned outputs: a ``ReplayOutputs``."""

    OP: ClassVar[str] = "replay_check"
    key: str


@dataclass(frozen=True)
class Time(Step):
    OP: ClassVar[str] = "time"
    key: str


# One sample's repeat budget and its fewest timed calls (``timing.bench_gpu``). Every lane's
# search rounds run in series under the exclusive GPU turn, which the judge's reads and every
# run wait for: with eight lanes those turns (ten samples of 25 ms and more) filled about half
# of a session's search span at 5711f5a. A paired round's sample (the final re-measurement,
# ``timing._sample_rounds``) keeps 25 ms.
SEARCH_SAMPLE_MS = 10
SEARCH_SAMPLE_MIN_REPS = 5
PAIRED_SAMPLE_MS = 25


@dataclass(frozen=True)
class Sample(Step):
    """One sample of the kept run (a round the judge drives, ``held_by_judge`` the GPU's timing turn)."""

    OP: ClassVar[str] = "sample"
    key: str
    held_by_judge: bool = False
    rep_ms: int = SEARCH_SAMPLE_MS  # a search round's by default; a paired round's passes its own
    min_reps: int = SEARCH_SAMPLE_MIN_REPS


@dataclass(frozen=True)
class Samples(Step):
    OP: ClassVar[str] = "samples"
    key: str
    rounds: int = 10


@dataclass(frozen=True)
class ProfileStep(Step):
    """Profile the kept run at ``tier``; ``time_ms`` its time (None: the job's own timing of it)."""

    OP: ClassVar[str] = "profile"
    key: str
    source: str
    tier: int = 1
    facts: DeviceFacts = field(default_factory=DeviceFacts)
    time_ms: Optional[float] = None


@dataclass(frozen=True)
class Derived(Step):
    """Calls beyond the harness (``derived_run.run_calls``), canary ``which``: a ``DerivedOutputs`` each.
    ``configs`` (the original's job only): instead, its special-values calls once per autotune
    config, each autotuner pinned to it (``derived_run.run_config_twins``): a frame each,
    ``DerivedOutputs.config`` the config's index (none where no kernel has two configs)."""

    OP: ClassVar[str] = "derived"
    calls: list[DerivedCall]
    module: str = "v"
    which: str = "a"
    configs: bool = False
    warm_threads: int = 0  # compile the calls' kernels this many at a time first (``warm_ahead``)


@dataclass(frozen=True)
class Warm(Step):
    """Compile the kernels of calls beyond the harness without launching any (Triton's
    warmup; ``derived_run.warm_calls``): a sibling process of a job runs it ahead of the
    job, into the job's Triton cache, so that the job finds those kernels compiled. Sends
    nothing; the judge never reads anything of it."""

    OP: ClassVar[str] = "warm"
    calls: list[DerivedCall]
    module: str = "v"
    compile_threads: int = 1  # compiles in flight at once (``compile_pool``, the judge's choice)


@dataclass(frozen=True)
class Release(Step):
    OP: ClassVar[str] = "release"
    key: str


@dataclass(frozen=True)
class Mark(Step):
    """The end of a batch: a ``MarkFrame`` (the judge reads frames up to it)."""

    OP: ClassVar[str] = "mark"


STEPS: dict[str, type[Step]] = {cls.OP: cls for cls in Step.__subclasses__()}


@dataclass(frozen=True)
class Job(Message):
    """A variant job, its stdin's first line. ``writes``: kernel -> the arguments the original's
    launches write (empty in the original's own job); ``interactive``: ``Command``s follow."""

    task: Task
    modules: dict[str, str]  # tag -> source
    steps: list[Step]
    interpreted: bool = False
    writes: dict[str, list[str]] = field(default_factory=dict)
    transport: str = "bytes"  # or "cuda_ipc" (the judge reads CUDA tensors in place)
    interactive: bool = False
    nonce: str = ""  # carried by every frame back
    gpu_alone: bool = False  # the only candidate on its GPU (one lane): its replay snapshots may use the GPU's room


@dataclass(frozen=True)
class Command(Message):
    """More steps for an interactive job (a line on its stdin; an empty line is an ack)."""

    steps: list[Step]


# ---------------------------------------------------------------------- variant process -> judge
@dataclass(frozen=True)
class FrameMeta(Message):
    """A frame's meta, ``KIND`` its kind; ``seconds`` its step's, ``timeline`` the process's so far."""

    KIND: ClassVar[str] = ""
    seconds: float = field(default=0.0, kw_only=True)
    timeline: dict[str, Any] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True)
class RunOutputs(FrameMeta):
    """A ``Run``'s outputs; ``skipped`` (``Run.skip_over``, its last run's ``output_bytes``), or
    ``error``: a neutralised run whose harness noticed that nothing was computed."""

    KIND: ClassVar[str] = "outputs"
    harness: str
    seed: int
    mode: Literal["check", "neutral", "upcast", "sanitize"]
    launches: list[LaunchRecord] = field(default_factory=list)
    written: dict[str, list[str]] = field(default_factory=dict)  # kernel -> arguments its launches wrote
    changed_inputs: list[str] = field(default_factory=list)  # inputs changed outside any launch's outputs
    streams: list[int] = field(default_factory=list)
    upcast: dict[str, list[bool]] = field(default_factory=dict)  # "kernel.arg" -> which have a float64 result
    again: bool = False
    kept: bool = False
    cuda_peak: int = 0  # the most GPU memory the process's allocator reserved
    calls: list[RecordedCall] = field(default_factory=list)  # the wrapper's calls (Run.record)
    pre_state: list[str] = field(default_factory=list)  # labels of the tree's pre_state tensors
    skipped: bool = False
    output_bytes: int = 0
    error: Optional[str] = None


@dataclass(frozen=True)
class ReplayOutputs(FrameMeta):
    KIND: ClassVar[str] = "outputs"
    key: str
    launches: int
    restored: bool  # from the starting state the kept run's launches found (else poisoned outputs)
    mode: Literal["replay"] = "replay"


@dataclass(frozen=True)
class DerivedOutputs(FrameMeta):
    """A derived call's outputs, or its ``error``; ``allocs``: where each allocation sits in its buffer;
    ``config``: the autotune config it was pinned to (``Derived.configs``; None: a plain run)."""

    KIND: ClassVar[str] = "outputs"
    index: int
    which: str
    error: Optional[str] = None
    allocs: list[list[int]] = field(default_factory=list)
    config: Optional[int] = None
    mode: Literal["derived"] = "derived"


@dataclass(frozen=True)
class TimingFrame(FrameMeta):
    KIND: ClassVar[str] = "timing"
    key: str
    timing: Timing


@dataclass(frozen=True)
class SampleFrame(FrameMeta):
    KIND: ClassVar[str] = "sample"
    key: str
    ms: float
    clock: str


@dataclass(frozen=True)
class SamplesFrame(FrameMeta):
    KIND: ClassVar[str] = "samples"
    key: str
    ms: list[float]
    clock: str


@dataclass(frozen=True)
class ProfileFrame(FrameMeta):
    KIND: ClassVar[str] = "profile"
    profile: dict[str, Any]  # checked where it is read (``profile.schema.Profile.from_wire``)


@dataclass(frozen=True)
class MarkFrame(FrameMeta):
    KIND: ClassVar[str] = "mark"


@dataclass(frozen=True)
class ErrorFrame(FrameMeta):
    """A job's last frame after a failure: its ``phase`` (import, compile, assert, run,
    tampered, protocol...), the step it failed in (None: before any)."""

    KIND: ClassVar[str] = "error"
    phase: str
    message: str = ""
    step: Optional[str] = None
    harness: Optional[str] = None
    seed: Optional[int] = None
    mode: Optional[str] = None
    fatal: bool = False  # the CUDA context is broken


@dataclass(frozen=True)
class DoneFrame(FrameMeta):
    KIND: ClassVar[str] = "done"


_OUTPUTS: dict[str, type[FrameMeta]] = {"replay": ReplayOutputs, "derived": DerivedOutputs}
FRAMES: dict[str, type[FrameMeta]] = {cls.KIND: cls for cls in FrameMeta.__subclasses__() if cls.KIND != "outputs"}


def decode_frame(kind: str, meta: Mapping[str, Any]) -> FrameMeta:
    """The typed meta of a frame of ``kind`` (an outputs frame's class by its mode)."""
    mode = meta.get("mode")
    by_mode = _OUTPUTS.get(mode, RunOutputs) if isinstance(mode, str) else RunOutputs
    cls = by_mode if kind == "outputs" else FRAMES.get(kind)
    if cls is None:
        raise MalformedMessage(f"malformed frame: unknown kind {kind[:40]!r}")
    return cls.from_wire(meta)


# ---------------------------------------------------------------------- judge <-> fork server
@dataclass(frozen=True)
class ZygoteRequest(Op):
    FAMILY: ClassVar[str] = "fork server request"


@dataclass(frozen=True)
class Spawn(ZygoteRequest):
    """Fork a variant process in ``dir`` with ``env`` (its stdin, stdout, stderr pass as fds)."""

    OP: ClassVar[str] = "spawn"
    dir: str
    env: dict[str, str]


@dataclass(frozen=True)
class Reap(ZygoteRequest):
    OP: ClassVar[str] = "reap"
    pid: int


@dataclass(frozen=True)
class Kill(ZygoteRequest):
    """Kill a job: its process group, and every orphan that came back to the fork server."""

    OP: ClassVar[str] = "kill"
    pid: int


@dataclass(frozen=True)
class Ready(Message):
    ready: bool


@dataclass(frozen=True)
class Spawned(Message):
    pid: int


@dataclass(frozen=True)
class Reaped(Message):
    status: Optional[int] = None  # exit code, -signal, or None while it runs


@dataclass(frozen=True)
class Killed(Message):
    strays: int = 0
