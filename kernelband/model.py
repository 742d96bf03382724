"""Data that crosses a boundary: between the session and its worker, the engine and
the language server, the engine and the store. Plain dataclasses with to_dict /
from_dict so everything here is JSON-serialisable.

Conventions: source lines are 1-based and columns 0-based (as in Python's ``ast``);
times are milliseconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, TypedDict, TypeVar, cast

from .decode import MalformedMessage, decode_fields
from .json_types import JsonObject, JsonValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from .profile.schema import Profile


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:  # dataclasses.fields() per object was a tenth of `kernelband list` on a big file
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_PLAIN = (str, int, float, bool, type(None))


# dict makers for the small records a 1,200-kernel listing holds 50,000 of (set below them;
# tests/test_list_speed.py checks each against the generic path)
_FAST_TO_DICT: dict[type, Callable[..., JsonObject]] = {}


def _to_dict(obj: object) -> JsonValue:
    if type(obj) in _PLAIN:  # most values: no dataclass check (a tenth of `kernelband list`)
        return cast(JsonValue, obj)
    fast = _FAST_TO_DICT.get(type(obj))
    if fast is not None:
        return fast(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if not isinstance(obj, Serializable) and hasattr(obj, "to_dict"):
            return cast(JsonObject, obj.to_dict())  # its own wire form (the Profile)
        return _fields_dict(obj)
    if isinstance(obj, Enum):
        return cast(JsonValue, obj.value)
    if isinstance(obj, (list, tuple)):
        return [_to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _to_dict(v) for k, v in obj.items()}
    return cast(JsonValue, obj)  # no field declares another type: json.dumps judges it


def _fields_dict(obj: object) -> JsonObject:
    """A record's fields by name, each in its JSON form."""
    return {name: _to_dict(getattr(obj, name)) for name in _field_names(type(obj))}


def _record_dict(obj: object) -> JsonObject:
    """A record's JSON form: its fast dict maker's, else its fields'."""
    fast = _FAST_TO_DICT.get(type(obj))
    return fast(obj) if fast is not None else _fields_dict(obj)


_S = TypeVar("_S", bound="Serializable")


class Serializable:
    def to_dict(self) -> JsonObject:
        return _record_dict(self)

    @classmethod
    def from_dict(cls: type[_S], d: JsonObject) -> _S:
        """The record from its to_dict(); a class with nested records decodes them first."""
        return cls(**d)


def sha256_text(text: str) -> str:
    import hashlib  # here: 4 ms of OpenSSL set-up that `kernelband list` never needs

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- source


@dataclass(frozen=True)
class SourceRange(Serializable):
    """1-based lines, 0-based columns, end exclusive (like ast end_col_offset)."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Param(Serializable):
    name: str
    annotation: Optional[str] = None
    default: Optional[str] = None
    is_constexpr: bool = False


_FAST_TO_DICT[Param] = lambda p: {
    "name": p.name,
    "annotation": p.annotation,
    "default": p.default,
    "is_constexpr": p.is_constexpr,
}


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
    def from_dict(cls, d: JsonObject) -> "LaunchSite":
        kw: dict[str, Any] = dict(d)  # unchecked, as the fields' own: this record's to_dict()
        kw["range"] = SourceRange.from_dict(kw["range"])
        return cls(**kw)


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
    def from_dict(cls, d: JsonObject) -> "KernelInfo":
        kw: dict[str, Any] = dict(d)  # unchecked, as the fields' own: this record's to_dict()
        kw.pop("constexpr_params", None)
        for k in ("range", "def_range", "name_range"):
            kw[k] = SourceRange.from_dict(kw[k])
        kw["params"] = [Param.from_dict(p) for p in kw["params"]]
        kw["launch_sites"] = [LaunchSite.from_dict(s) for s in kw["launch_sites"]]
        return cls(**kw)

    def to_dict(self) -> JsonObject:
        d = _record_dict(self)
        d["constexpr_params"] = list(self.constexpr_params)
        return d


def _range_dict(r: SourceRange) -> JsonObject:
    return {"start_line": r.start_line, "start_col": r.start_col, "end_line": r.end_line, "end_col": r.end_col}


def _site_dict(s: LaunchSite) -> JsonObject:
    return {
        "kernel": s.kernel,
        "range": _range_dict(s.range),
        "grid": s.grid,
        "args": list(s.args),
        "kwargs": dict(s.kwargs),
        "enclosing_function": s.enclosing_function,
    }


def _kernel_dict(k: KernelInfo) -> JsonObject:
    """Nested records inline (fields hold what they are declared to: str lists, Params...)."""
    return {
        "name": k.name,
        "range": _range_dict(k.range),
        "def_range": _range_dict(k.def_range),
        "name_range": _range_dict(k.name_range),
        "params": [
            {"name": p.name, "annotation": p.annotation, "default": p.default, "is_constexpr": p.is_constexpr}
            for p in k.params
        ],
        "decorators": list(k.decorators),
        "is_autotuned": k.is_autotuned,
        "has_heuristics": k.has_heuristics,
        "launch_sites": [_site_dict(s) for s in k.launch_sites],
    }


_FAST_TO_DICT[SourceRange] = _range_dict
_FAST_TO_DICT[LaunchSite] = _site_dict
_FAST_TO_DICT[KernelInfo] = _kernel_dict


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
    """How one evaluation of a candidate ended (an Evaluation's status)."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    MISMATCH = "mismatch"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"
    # a search's candidate confidently slower than the original in its paired timing
    # rounds: correct on the timing harness's kept run (seed 0) and its replay, not checked
    # on every input (only a candidate that could be faster is): never pooled or offered
    SLOWER = "slower"

    def __str__(self) -> str:  # the wire's word, in messages and logs too
        return self.value


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
    check_harnesses: list[str] = field(
        default_factory=list
    )  # correctness-only harnesses (the timing harness `harness` is checked too)

    @property
    def source_hash(self) -> str:
        return sha256_text(self.source)


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


@dataclass
class ErrorStats(Serializable):
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_l2: float = 0.0
    mismatched: int = 0  # elements outside the element-wise bound
    total: int = 0
    worst_output: str = ""  # path of the worst output leaf, e.g. "[0]" or "['y']"


@dataclass
class Timing(Serializable):
    median_ms: float
    p20_ms: float
    p80_ms: float
    clock: str  # "cuda-events" (GPU time) or "cpu-interpreter" (wall time on the CPU)
    launches: int  # kernel launches replayed per timed call


@dataclass
class LaunchRecord(Serializable):
    kernel: str
    grid: list[int]
    constexprs: dict[str, Any] = field(default_factory=dict)
    num_warps: Optional[int] = None
    num_stages: Optional[int] = None
    tensor_bytes: int = 0  # bytes of the distinct tensor arguments


@dataclass
class Evaluation(Serializable):
    status: Status
    message: str = ""
    errors: Optional[ErrorStats] = None
    timing: Optional[Timing] = None
    launches: list[LaunchRecord] = field(default_factory=list)
    interpreted: bool = False
    profile: Optional[Profile] = None
    wall_s: float = 0.0
    variant_id: str = ""
    # wall seconds per phase in the worker: import, compile_and_first_run, correctness,
    # timing, profile (the session adds screen and process overhead)
    phases: dict[str, float] = field(default_factory=dict)
    # timed against the reference lane: the original's median over the same interleaved
    # rounds, and the paired speedup's 95% CI (None when the candidate was timed alone)
    reference_ms: Optional[float] = None
    speedup_ci: Optional[list[float]] = None
    # what the judge found out about the original after prepare returned (calls beyond the
    # harness it does not handle): the session's warnings, once each
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def time_ms(self) -> Optional[float]:
        return self.timing.median_ms if self.timing else None

    @classmethod
    def from_dict(cls, d: JsonObject) -> "Evaluation":
        kw: dict[str, Any] = {**d, "status": Status(d["status"])}
        if kw.get("errors") is not None:
            kw["errors"] = ErrorStats.from_dict(kw["errors"])
        return cls(**_measured(kw))


def _measured(d: JsonObject) -> dict[str, Any]:
    """An Evaluation's or Baseline's keyword arguments from its to_dict(), unchecked, with
    its timing, launches and profile decoded."""
    from .profile.schema import Profile  # here: the list command never reads a profile

    kw: dict[str, Any] = dict(d)
    if kw.get("timing") is not None:
        kw["timing"] = Timing.from_dict(kw["timing"])
    kw["launches"] = [LaunchRecord.from_dict(x) for x in kw.get("launches", [])]
    kw["profile"] = Profile.from_wire(kw.get("profile"))
    return kw


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
    profile: Optional[Profile] = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds per check, as Evaluation.phases
    lanes: int = 1  # candidates the judge can evaluate at once on its GPU
    derived_calls: int = 0  # calls beyond the harness every candidate runs (each a harness run's deadline)
    reference_lane: bool = False  # candidates are timed against the original's kept process (warm timing)
    # bytes whose bits the original's timed launches change: the least a faster candidate
    # must still write, the roofline's floor (None: not measured)
    floor_bytes: Optional[int] = None

    @classmethod
    def from_dict(cls, d: JsonObject) -> "Baseline":
        return cls(**_measured(d))


@dataclass
class PairedTiming(Serializable):
    """A/B re-measurement of the original (A) and a variant (B), interleaved where both
    runs fit in memory together."""

    baseline_ms: float
    variant_ms: float
    speedup: float  # baseline / variant, geometric mean over rounds
    ci_low: float  # 95% confidence interval of the speedup
    ci_high: float
    rounds: int
    clock: str
    # "interleaved" (A B A B in one process) or "sequential" (A's block, then B's: two runs
    # of the harness do not fit on the GPU together)
    order: str = "interleaved"


NO_GPU_SANITIZER = "no GPU: the interpreter has no compute-sanitizer"


_V = TypeVar("_V", bound="VerificationReport")


@dataclass(frozen=True)
class VerificationReport:
    """What every verification step's report starts with (``verification.STEPS``): whether
    it ran, what it found, or why it did not run. Its fields come first in each report's."""

    MALFORMED: ClassVar[str] = "malformed verification report"  # starts a from_wire error

    ran: bool
    ok: bool = True  # nothing found (a run that could not happen refuses nothing)
    reason: str = ""  # why it did not run

    @classmethod
    def not_run(cls: type[_V], reason: str) -> _V:
        return cls(ran=False, reason=reason)

    @property
    def refused(self) -> bool:
        return self.ran and not self.ok

    @property
    def left_unchecked(self) -> str:
        """What a run that happened still left unchecked, and why ("" when nothing)."""
        return ""

    @classmethod
    def from_wire(cls: type[_V], body: object) -> _V:
        """The report ``body`` describes, each field checked; a one-line MalformedMessage if not."""
        return decode_fields(cls, body, cls.MALFORMED)


@dataclass(frozen=True)
class SanitizerReport(VerificationReport):
    """compute-sanitizer's run over a variant's correctness harnesses (the judge's sanitize
    op): memcheck, then racecheck; the first tool that fails decides. Built once by the
    judge, sent as ``to_dict()`` and decoded once by the session (``from_wire``)."""

    MALFORMED: ClassVar[str] = "malformed sanitizer report"

    tool: str = "memcheck"  # the tool that decided: the first that failed, else the last
    exit_code: Optional[int] = None  # None: its job ended before the tool exited
    job: str = ""  # how the tool's job ended: "ok", or what stopped it
    findings: tuple[str, ...] = ()
    harnesses: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # the tools that ran, in order
    # a tool after a clean memcheck that did not finish (racecheck past its time), and why:
    # memcheck's verdict stands, what that tool checks is said to be unchecked
    unfinished: str = ""

    @property
    def left_unchecked(self) -> str:
        return self.unfinished

    def to_dict(self) -> JsonObject:
        """The printed form (``check --json``'s ``sanitizer``, a Result's ``memcheck``): the
        reason of a run that did not happen, else what each tool ran on and found."""
        if not self.ran:
            return {"ran": False, "ok": self.ok, "reason": self.reason}
        out: JsonObject = {
            "ran": True,
            "ok": self.ok,
            "tool": self.tool,
            "exit_code": self.exit_code,
            "job": self.job,
            "findings": list(self.findings),
            "harnesses": list(self.harnesses),
            "tools": list(self.tools),
        }
        if self.unfinished:
            out["unfinished"] = self.unfinished
        return out

    def summary(self) -> JsonObject:
        """In a few words (``checked.memcheck``): ran and ok with its first findings, or why not."""
        if not self.ran:
            return {"ran": False, "reason": self.reason or "memcheck could not run"}
        out: JsonObject = {"ran": True, "ok": self.ok, "findings": list(self.findings[:5])}
        if self.unfinished:
            out["unfinished"] = self.unfinished
        return out


# index: evaluations done so far; t: the session's seconds; parent: the pool member's id it
# was made from; speedup: over the original's search time, when correct; best_*: the pool's
# best so far; phases: Evaluation.phases
_HistoryFields = TypedDict(
    "_HistoryFields",
    {
        "index": int,
        "t": float,
        "variant_id": Optional[str],
        "parent": Optional[str],
        "strategy": Optional[str],
        "generator": Optional[str],
        "status": str,
        "time_ms": Optional[float],
        "speedup": Optional[float],
        "message": str,
        "description": str,
        "best_ms": float,
        "best_speedup_so_far": float,
        "phases": dict[str, float],
    },
)


class HistoryEntry(_HistoryFields, total=False):
    """One evaluation of a session, as its Result's ``history`` and the store keep it."""

    worker: str  # which worker evaluated it, with several


PAST_INT32 = 1 << 31  # elements: an offset computed in int32 (row * stride) wraps past them


@dataclass(frozen=True)
class WideReport(VerificationReport):
    """The calls past int32 offsets (the judge's ``wide`` op, ``judge_wide``): the variant on
    calls whose largest tensor holds more than ``elements`` elements, the original the
    oracle. Run on the verification path of every verdict (a correct variant, on a GPU
    with the memory), never during a search. Built once by the judge, decoded once by
    the session (``from_wire``)."""

    MALFORMED: ClassVar[str] = "malformed wide-calls report"

    elements: int = PAST_INT32  # the threshold the calls passed
    calls: tuple[str, ...] = ()  # the calls checked, described (``derived.describe_call``)
    dropped: tuple[str, ...] = ()  # calls the original does not handle: not held against the variant
    status: Optional[Status] = None  # a refusal's verdict
    message: str = ""  # what the variant did wrong

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "ran": self.ran,
            "ok": self.ok,
            "reason": self.reason,
            "elements": self.elements,
            "calls": list(self.calls),
            "dropped": list(self.dropped),
            "message": self.message,
        }
        if self.status is not None:
            out["status"] = self.status.value
        return out

    def summary(self) -> JsonObject:
        """In a few words (``checked.wide``): the calls and what was found, or why not run."""
        if not self.ran:
            return {"ran": False, "reason": self.reason or "the calls past int32 offsets could not run"}
        out: JsonObject = {"ran": True, "ok": self.ok, "calls": list(self.calls[:2])}
        if self.dropped:
            out["dropped"] = list(self.dropped[:2])
        if not self.ok:
            out["message"] = self.message
        return out


# --------------------------------------------------------------------------- results
# The optimize Result and the profile: what the engine prints (--json), emits (the
# `result` / `profile` events), stores (SQLite, as JSON) and the language server reads.
# The VS Code client declares the same Result in vscode-client/src/jobs.ts (OptimizeResult);
# tests/test_result_contract.py keeps the two in step.


class ResultStatus(str, Enum):
    """How a session (or a check) ended: a Result's status. Compares equal to its word."""

    IMPROVED = "improved"
    NO_IMPROVEMENT = "no_improvement"
    VERIFIED_CORRECT = "verified_correct"
    CANCELLED = "cancelled"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


FOUND_STATUSES = frozenset({ResultStatus.IMPROVED, ResultStatus.VERIFIED_CORRECT})  # a Result with a correct variant


def result_status(word: object) -> ResultStatus:
    """The status a stored or received word names. A Result whose status is missing, not a
    word, or a word this version does not know says nothing it can be trusted for: failed
    (as any other malformed field falls back to its default)."""
    if isinstance(word, ResultStatus):
        return word
    try:
        return ResultStatus(word) if isinstance(word, str) else ResultStatus.FAILED
    except ValueError:
        return ResultStatus.FAILED


def _num(v: object) -> Optional[float]:
    """A finite number, else None (stored results are JSON: never trust their types)."""
    import math

    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def _coerce(kind: str, v: object, default: object) -> object:
    """Bring one stored value to its field's type (``kind``: the annotation's text); a
    value of another type gives the default."""
    optional = kind.startswith("Optional[")
    base = kind[len("Optional[") : -1] if optional else kind
    if v is None:
        return None if optional else default
    if base.startswith("list"):
        return list(v) if isinstance(v, (list, tuple)) else default
    if base.startswith("dict"):
        return dict(v) if isinstance(v, dict) else default
    if base == "float":
        f = _num(v)
        return f if f is not None else default
    if base == "int":
        f = _num(v)
        return int(f) if f is not None and f == int(f) else default
    if base == "bool":
        return v if isinstance(v, bool) else default
    if base == "str":
        return v if isinstance(v, str) else default
    return v


_R = TypeVar("_R", bound="DataclassInstance")


def _from_json_dict(cls: type[_R], d: object) -> _R:
    """Build a dataclass from JSON: unknown keys go to ``extra``, missing ones take the
    default, values of the wrong type fall back to it (older or hand-made results)."""
    if not isinstance(d, dict):
        raise TypeError(f"{cls.__name__} from_dict expects an object, not {type(d).__name__}")
    kwargs: dict[str, object] = {}
    names = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        if f.name == "extra" or f.name not in d:
            continue
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
        kwargs[f.name] = _coerce(str(f.type), d[f.name], default)
    kwargs["extra"] = {k: v for k, v in d.items() if k not in names}
    return cls(**kwargs)


@dataclass
class Result:
    """The outcome of one optimize session (or of its job, when cancelled or failed).

    ``to_dict`` is the wire format (the same keys as ever: stored results and the VS Code
    client depend on them); keys in ``SOMETIMES`` appear only when set. ``extra`` keeps
    keys this version does not know (a newer engine's), so a round trip loses nothing."""

    status: ResultStatus  # its word on the wire (to_dict writes the value)
    kernel: str = ""
    file: str = ""
    session_id: str = ""
    original_hash: str = ""  # sha256 of the text the session started from
    baseline_ms: Optional[float] = None
    best_ms: Optional[float] = None
    speedup: Optional[float] = None  # None: no speed claim (verified_correct) or not measured
    speedup_ci: Optional[list[float]] = None  # [low, high], 95%
    speed_claim: bool = False  # GPU times that may be read as a speedup
    applicable: bool = False  # an editor may offer Apply / --apply may write best_source
    min_speedup: Optional[float] = None
    evaluations: int = 0
    interpreted: bool = False
    clock: str = ""
    gpu: Optional[str] = None
    triton_version: str = ""
    search: str = ""
    generator: str = ""
    strategy_path: list[str] = field(default_factory=list)
    diff: str = ""
    best_source: str = ""
    best_variant_id: Optional[str] = None
    seconds: float = 0.0
    tokens: int = 0
    cost_usd: float = 0.0
    stop_reason: str = ""
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    worker_restarts: int = 0
    baseline_bottleneck: Optional[str] = None
    # set only by some outcomes (absent from the JSON otherwise)
    paired_rounds: Optional[int] = None
    paired_medians_ms: Optional[list[float]] = None
    search_best_ms: Optional[float] = None
    search_baseline_ms: Optional[float] = None
    unverified_variant_id: Optional[str] = None
    unverified_diff: Optional[str] = None
    memcheck: Optional[SanitizerReport] = None  # the sanitizer run that refused the best candidate
    applied: Optional[bool] = None  # --apply wrote best_source into the file
    extra: JsonObject = field(default_factory=dict)

    SOMETIMES = (
        "paired_rounds",
        "paired_medians_ms",
        "search_best_ms",
        "search_baseline_ms",
        "unverified_variant_id",
        "unverified_diff",
        "memcheck",
        "applied",
    )

    def __post_init__(self) -> None:
        # a word given in code (a test, a hand-made Result) becomes the member it names, so
        # that the field has one type; an unknown word is a mistake in that code
        self.status = ResultStatus(self.status)

    @property
    def found(self) -> bool:
        """Carries a correct variant (improved, or verified_correct under the interpreter)."""
        return self.status in FOUND_STATUSES and bool(self.best_source)

    def to_dict(self, history: bool = True) -> JsonObject:
        out: JsonObject = {}
        for f in dataclasses.fields(self):
            if f.name == "extra" or (f.name == "history" and not history):
                continue
            v = getattr(self, f.name)
            if f.name in self.SOMETIMES and v is None:
                continue
            out[f.name] = _to_dict(v)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, d: JsonObject) -> "Result":
        if not isinstance(d, dict):  # stored JSON of another shape: _from_json_dict says so
            return _from_json_dict(cls, d)
        # decoded once, here: the word on the wire becomes the member
        fields: dict[str, object] = {**d, "status": result_status(d.get("status"))}
        if "applicable" not in fields:  # written before the field: the verdict then
            fields["applicable"] = fields["status"] == ResultStatus.IMPROVED and fields.get("speed_claim") is not False
        if fields.get("memcheck") is not None:
            try:
                fields["memcheck"] = SanitizerReport.from_wire(fields["memcheck"])
            except MalformedMessage:  # as any stored value of the wrong type: the default
                fields["memcheck"] = None
        return _from_json_dict(cls, fields)

    @classmethod
    def cancelled(
        cls,
        kernel: str,
        file: str,
        message: str,
        *,
        failed: bool = False,
        partial: Optional["Result"] = None,
        evaluations: Optional[int] = None,
    ) -> "Result":
        """The Result of a job that ended without the engine's own (cancelled, superseded,
        failed): a partial Result it did send is kept, with this status and message."""
        r = dataclasses.replace(partial) if partial is not None else cls(status=ResultStatus.CANCELLED)
        r.status = ResultStatus.FAILED if failed else ResultStatus.CANCELLED
        r.kernel, r.file = kernel, file
        r.message = message or r.message
        r.warnings = list(r.warnings)
        if partial is None and evaluations is not None:
            r.evaluations = int(evaluations)
        return r
