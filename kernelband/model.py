"""Data that crosses a boundary: between the session and its worker, the engine and
the language server, the engine and the store. Plain dataclasses with to_dict /
from_dict so everything here is JSON-serialisable.

Conventions: source lines are 1-based and columns 0-based (as in Python's ``ast``);
times are milliseconds.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:  # dataclasses.fields() per object was a tenth of `kernelband list` on a big file
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {name: _to_dict(getattr(obj, name)) for name in _field_names(type(obj))}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [_to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _to_dict(v) for k, v in obj.items()}
    return obj


class Serializable:
    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- source


@dataclass(frozen=True)
class SourceRange(Serializable):
    """1-based lines, 0-based columns, end exclusive (like ast end_col_offset)."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SourceRange":
        return cls(**d)


@dataclass(frozen=True)
class Param(Serializable):
    name: str
    annotation: Optional[str] = None
    default: Optional[str] = None
    is_constexpr: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Param":
        return cls(**d)


@dataclass(frozen=True)
class LaunchSite(Serializable):
    """A ``kernel[grid](...)`` call."""

    kernel: str
    range: SourceRange
    grid: str  # source text of the grid expression
    args: list[str]  # source text of positional args
    kwargs: dict[str, str]  # keyword -> source text
    enclosing_function: Optional[str]  # None at module level

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LaunchSite":
        d = dict(d)
        d["range"] = SourceRange.from_dict(d["range"])
        return cls(**d)


@dataclass(frozen=True)
class KernelInfo(Serializable):
    """A ``@triton.jit`` function found in a module's source."""

    name: str
    range: SourceRange  # whole definition including decorators
    def_range: SourceRange  # the ``def`` statement without decorators
    name_range: SourceRange  # just the function name token
    params: list[Param]
    decorators: list[str]  # source text of each decorator, outermost first
    is_autotuned: bool
    has_heuristics: bool
    launch_sites: list[LaunchSite]

    @property
    def constexpr_params(self) -> list[str]:
        return [p.name for p in self.params if p.is_constexpr]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "KernelInfo":
        d = dict(d)
        d.pop("constexpr_params", None)
        for k in ("range", "def_range", "name_range"):
            d[k] = SourceRange.from_dict(d[k])
        d["params"] = [Param.from_dict(p) for p in d["params"]]
        d["launch_sites"] = [LaunchSite.from_dict(s) for s in d["launch_sites"]]
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        d = _to_dict(self)
        d["constexpr_params"] = self.constexpr_params
        return d


@dataclass(frozen=True)
class FunctionInfo(Serializable):
    """A plain (non-kernel) module-level function: candidates for harnesses/wrappers."""

    name: str
    range: SourceRange
    params: list[Param]
    calls: list[str]  # names of module-level functions/kernels it calls by name
    launches: list[str]  # kernels it launches directly
    # "function"; "class": a module-level class (e.g. a torch.autograd.Function) whose methods'
    # calls and launches are its own; "alias": `name = Cls.apply` and the like (calls = [Cls])
    kind: str = "function"

    @property
    def is_zero_arg(self) -> bool:
        return all(p.default is not None for p in self.params)


@dataclass(frozen=True)
class ParseError(Serializable):
    message: str
    line: int
    col: int


# --------------------------------------------------------------------------- jobs


class Status(str, Enum):
    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    MISMATCH = "mismatch"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"


@dataclass
class Task(Serializable):
    """Everything a worker needs to run a kernel: serialisable, no live objects."""

    module_path: str  # absolute path of the user's file
    source: str  # the module's text as the job started (may be unsaved editor text)
    kernel: str
    harness: str  # name of a zero-argument function: the timing workload (also checked)
    harness_path: Optional[str] = None  # companion file holding the harness, if any
    device: str = "auto"  # "auto" | "cuda" | "cuda:N" | "cpu" (interpreter)
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    timeout_s: float = 120.0  # per harness run of an evaluation
    check_harnesses: list[str] = field(default_factory=list)  # correctness-only harnesses (the timing harness `harness` is checked too)

    @property
    def source_hash(self) -> str:
        return sha256_text(self.source)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Task":
        return cls(**d)


@dataclass
class Variant(Serializable):
    """A complete module source produced by a generator."""

    source: str
    parent: Optional[str] = None  # id of the parent variant; None for the original
    strategy: Optional[str] = None
    generator: Optional[str] = None
    description: str = ""
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = sha256_text(self.source)[:12]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Variant":
        return cls(**d)


@dataclass
class ErrorStats(Serializable):
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_l2: float = 0.0
    mismatched: int = 0  # elements outside the element-wise bound
    total: int = 0
    worst_output: str = ""  # path of the worst output leaf, e.g. "[0]" or "['y']"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ErrorStats":
        return cls(**d)


@dataclass
class Timing(Serializable):
    median_ms: float
    p20_ms: float
    p80_ms: float
    clock: str  # "cuda-events" (GPU time) or "cpu-interpreter" (wall time on the CPU)
    launches: int  # kernel launches replayed per timed call

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Timing":
        return cls(**d)


@dataclass
class LaunchRecord(Serializable):
    kernel: str
    grid: list[int]
    constexprs: dict[str, Any] = field(default_factory=dict)
    num_warps: Optional[int] = None
    num_stages: Optional[int] = None
    tensor_bytes: int = 0  # bytes of the distinct tensor arguments

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LaunchRecord":
        return cls(**d)


@dataclass
class Evaluation(Serializable):
    status: Status
    message: str = ""
    errors: Optional[ErrorStats] = None
    timing: Optional[Timing] = None
    launches: list[LaunchRecord] = field(default_factory=list)
    interpreted: bool = False
    profile: Optional[dict[str, Any]] = None
    wall_s: float = 0.0
    variant_id: str = ""
    # wall seconds per phase in the worker: import, compile_and_first_run, correctness,
    # timing, profile (the session adds screen and process overhead)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def time_ms(self) -> Optional[float]:
        return self.timing.median_ms if self.timing else None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Evaluation":
        d = dict(d)
        d["status"] = Status(d["status"])
        if d.get("errors") is not None:
            d["errors"] = ErrorStats.from_dict(d["errors"])
        if d.get("timing") is not None:
            d["timing"] = Timing.from_dict(d["timing"])
        d["launches"] = [LaunchRecord.from_dict(x) for x in d.get("launches", [])]
        return cls(**d)


@dataclass
class Baseline(Serializable):
    """What the worker learned about the original kernel before any search."""

    ok: bool
    message: str = ""
    deterministic: bool = True
    weak_harness: bool = False
    weak_reason: str = ""
    timing: Optional[Timing] = None
    launches: list[LaunchRecord] = field(default_factory=list)
    interpreted: bool = False
    device_name: str = ""
    triton_version: str = ""
    profile: Optional[dict[str, Any]] = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Baseline":
        d = dict(d)
        if d.get("timing") is not None:
            d["timing"] = Timing.from_dict(d["timing"])
        d["launches"] = [LaunchRecord.from_dict(x) for x in d.get("launches", [])]
        return cls(**d)


@dataclass
class PairedTiming(Serializable):
    """Interleaved A/B re-measurement of the original (A) and a variant (B)."""

    baseline_ms: float
    variant_ms: float
    speedup: float  # baseline / variant, geometric mean over rounds
    ci_low: float  # 95% confidence interval of the speedup
    ci_high: float
    rounds: int
    clock: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PairedTiming":
        return cls(**d)
