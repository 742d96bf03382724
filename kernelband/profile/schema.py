"""The one typed profile (DESIGN section 7; docs/ARCHITECTURE.md "Profiles"): the tiers
(static, timing, counters), what the search and the editor derive from them (runtime
vectors, phi, saturation, diagnosis: ``assemble.derive``), and its one wire form.

Built once, in the variant process (``worker.profiling.collect_profile``); every process
boundary carries ``to_dict()`` and the receiving end decodes it once with
``Profile.from_dict``: a missing key or tier takes its default (older engines' rows), an
unknown key is kept in ``extra`` (a newer engine's or profiler's), a value of the wrong
type is a ``ProfileError`` that says where. Unknown numbers are None (null on the wire),
never NaN: a non-finite float reads as unknown. Pure: no torch, triton or worker here.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union, cast

from ..json_types import JsonObject, JsonValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")


class ProfileError(ValueError):
    """Not a profile: a value of the wrong type, and where it is."""


_HINTS: dict[type, dict[str, Any]] = {}  # the fields' types: typing's runtime forms


def decode(cls: type[T], raw: object, where: str = "profile") -> T:
    """A record from its JSON: the defaults for what is missing or null, ``extra`` for
    unknown keys, a ProfileError for a wrong type."""
    if not isinstance(raw, dict):
        raise _wrong(where, "an object", raw)
    hints = _HINTS.get(cls) or _HINTS.setdefault(cls, typing.get_type_hints(cls))
    kwargs: dict[str, object] = {}
    for name, tp in hints.items():
        value = _value(tp, raw.get(name), f"{where}.{name}") if name != "extra" else None
        if value is not None:
            kwargs[name] = value
    if "extra" in hints:
        kwargs["extra"] = {k: v for k, v in raw.items() if k not in hints}
    return cls(**kwargs)


def _value(tp: Any, v: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if v is None or tp is Any:
        return v
    if origin is Union:  # Optional[X]
        return _value(next(a for a in args if a is not type(None)), v, where)
    if dataclasses.is_dataclass(tp):
        return decode(typing.cast(type, tp), v, where)
    if origin is list:
        if not isinstance(v, (list, tuple)):
            raise _wrong(where, "a list", v)
        return [_value(args[0], x, f"{where}[{i}]") for i, x in enumerate(v)]
    if origin is dict:
        if not isinstance(v, dict):
            raise _wrong(where, "an object", v)
        return {str(k): _value(args[1], x, f"{where}.{k}") for k, x in v.items()}
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if tp is float and number:
        return float(v) if math.isfinite(v) else None
    if tp is int and number and math.isfinite(v) and float(v).is_integer():
        return int(v)
    if tp in (str, bool) and isinstance(v, tp):
        return v
    raise _wrong(where, getattr(tp, "__name__", str(tp)), v)


def _wrong(where: str, expected: str, v: object) -> ProfileError:
    return ProfileError(f"{where}: expected {expected}, got {type(v).__name__} {str(v)[:60]!r}")


def encode(obj: object) -> JsonValue:
    """The JSON form of a record (``extra`` merged back in, after the fields)."""
    if isinstance(obj, DeviceFacts):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _record(obj)
    if isinstance(obj, (list, tuple)):
        return [encode(x) for x in obj]
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    return cast(JsonValue, obj)  # a number, string, bool or None (the fields' types)


def _record(obj: DataclassInstance) -> JsonObject:
    """A record's fields in their JSON form, then its ``extra`` keys."""
    out: JsonObject = {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name != "extra"}
    for k, v in getattr(obj, "extra", {}).items():
        out.setdefault(k, v)
    return out


@dataclass(frozen=True)
class DeviceFacts:
    """What the judge measured or read about its GPU (``worker.device_facts``; what they mean
    and how they are cached: ``profile.device``). ``DeviceFacts()`` knows nothing (not
    measured yet, or the measurement failed); under the interpreter the facts are a labelled
    placeholder (``profile.device.interpreter_facts``). Every boundary (the store, the
    machine cache, the judge's requests and reply, a profile) carries ``to_dict()``."""

    name: Optional[str] = None
    interpreted: bool = False
    placeholder: bool = False  # nothing about a GPU is known: the peaks and limits are None
    note: Optional[str] = None
    compute_capability: Optional[str] = None  # "9.0"
    sm_count: Optional[int] = None
    warp_size: Optional[int] = None
    max_warps_per_sm: Optional[int] = None
    max_blocks_per_sm: Optional[int] = None
    regs_per_sm: Optional[int] = None
    max_regs_per_thread: Optional[int] = None
    shared_per_sm: Optional[int] = None  # bytes
    shared_per_block_optin: Optional[int] = None
    reserved_shared_per_block: Optional[int] = None
    l2_bytes: Optional[int] = None
    memory_bytes: Optional[int] = None
    torch: Optional[str] = None  # versions
    triton: Optional[str] = None
    facts_version: Optional[int] = None  # profile.device.FACTS_VERSION when measured
    max_regs_per_block: Optional[int] = None
    copy_gbs: Optional[float] = None  # device-to-device copy, bytes read + written per second
    matmul_tflops: Optional[dict[str, Optional[float]]] = None  # bf16 | tf32 | fp32 -> the measured rate
    measured_at: Optional[float] = None  # time.time()
    measure_s: Optional[float] = None

    # stated even when unknown (null), so that a reader sees the peaks are not known
    _ALWAYS = ("copy_gbs", "matmul_tflops", "sm_count")

    @property
    def known(self) -> bool:
        """Anything at all is known (the placeholder too)."""
        return self != DeviceFacts()

    @property
    def has_peaks(self) -> bool:
        """Facts of a real GPU with at least a measured copy bandwidth."""
        return not self.placeholder and bool(self.copy_gbs)

    def peak_tflops(self, dtype: Optional[str]) -> Optional[float]:
        """The measured matrix rate for ``dtype`` (bf16 | tf32 | fp32), None when not measured."""
        return (self.matmul_tflops or {}).get(dtype) if dtype else None

    def to_dict(self) -> JsonObject:
        """The JSON form: ``{}`` when nothing is known, else the facts that are known."""
        if not self.known:
            return {}
        values = ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in values if v is not None or k in self._ALWAYS}

    @classmethod
    def from_dict(cls, raw: object) -> "DeviceFacts":
        """The facts a JSON object holds: an unknown key is ignored (an older or newer
        engine's), a missing or null one is unknown; ProfileError for a value of the wrong type."""
        return decode(cls, raw, "device")


def decoded_facts(raw: object) -> Optional[DeviceFacts]:
    """The facts a cache holds, None where it holds none or something that is not facts."""
    try:
        return DeviceFacts.from_dict(raw) if isinstance(raw, dict) else None
    except ProfileError:
        return None


@dataclass
class Occupancy:
    """Tier 1's occupancy estimate from the device's limits (profile/occupancy.py)."""

    theoretical: Optional[float] = None  # 0..1
    limiter: Optional[str] = None  # warps | blocks | registers | shared_memory
    blocks_per_sm: Optional[int] = None
    warps_per_sm: Optional[int] = None
    max_warps_per_sm: Optional[int] = None
    limits: dict[str, Optional[int]] = field(default_factory=dict)  # resident programs per limit
    waves: Optional[float] = None
    sm_fill: Optional[float] = None
    extra: JsonObject = field(default_factory=dict)


@dataclass
class StaticTier:
    """Tier 1: what the compiler decided (profile/static.py)."""

    n_regs: Optional[int] = None  # per thread
    n_spills: Optional[int] = None
    shared_bytes: Optional[int] = None
    num_warps: Optional[int] = None
    num_stages: Optional[int] = None
    num_ctas: Optional[int] = None
    warp_size: Optional[int] = None
    threads_per_program: Optional[int] = None
    max_threads: Optional[int] = None
    kernel_name: Optional[str] = None
    hash: Optional[str] = None
    source: Optional[str] = None  # where the compiled kernel was found
    dot_tiles: list[str] = field(default_factory=list)
    occupancy: Optional[Occupancy] = None
    other_specializations: int = 0
    extra: JsonObject = field(default_factory=dict)


@dataclass
class Roofline:
    bound: str = ""  # memory | compute
    ridge: Optional[float] = None  # FLOP/B
    attainable_tflops: Optional[float] = None
    fraction_of_attainable: Optional[float] = None
    note: Optional[str] = None
    extra: JsonObject = field(default_factory=dict)


@dataclass
class TimingTier:
    """Tier 2: time, bytes and FLOPs against the measured peaks (worker/profiling.py)."""

    time_ms: Optional[float] = None  # every launch of the kernel
    clock: str = ""
    launches: int = 1
    time_per_launch_ms: Optional[float] = None
    bytes_read: Optional[int] = None
    bytes_written: Optional[int] = None
    bytes_total: Optional[int] = None
    tensors: list[dict[str, Any]] = field(default_factory=list)  # per tensor: read / written, bytes, evidence
    write_detection: Optional[str] = None
    flops: Optional[int] = None
    flops_note: Optional[str] = None
    arithmetic_intensity: Optional[float] = None
    bandwidth_gbs: Optional[float] = None
    bandwidth_frac: Optional[float] = None  # of the measured copy bandwidth
    tflops: Optional[float] = None
    compute_frac: Optional[float] = None  # of the measured matrix rate
    compute_peak: Optional[str] = None  # bf16 | tf32 | fp32
    compute_peak_tflops: Optional[float] = None
    copy_peak_gbs: Optional[float] = None
    roofline: Optional[Roofline] = None
    note: Optional[str] = None
    extra: JsonObject = field(default_factory=dict)


@dataclass
class CounterTier:
    """Tier 3: Nsight Compute's counters (worker/counters.py), named as profile/ncu.py derives them."""

    values: dict[str, Optional[float]] = field(default_factory=dict)
    per_launch: list[dict[str, Optional[float]]] = field(default_factory=list)
    kernel_names: list[str] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)  # name -> the ncu metric used
    ncu: str = ""
    seconds: Optional[float] = None
    command: str = ""
    cached: bool = False
    extra: JsonObject = field(default_factory=dict)


@dataclass
class Tiers:
    static: Optional[StaticTier] = None  # None: not collected (Profile.unavailable says why)
    timing: Optional[TimingTier] = None
    counters: Optional[CounterTier] = None


@dataclass
class Launch:
    """The kernel's first launch: grid, constexprs and the bytes its tensors span."""

    count: int = 0  # launches of the kernel in the harness
    grid: list[int] = field(default_factory=list)
    programs: Optional[int] = None
    constexprs: dict[str, Any] = field(default_factory=dict)
    num_warps: Optional[int] = None
    num_stages: Optional[int] = None
    block_elems: Optional[int] = None  # product of the BLOCK_* constexprs
    footprint_bytes: Optional[int] = None
    error: Optional[str] = None  # why the rest is unknown


@dataclass
class Diagnosis:
    bottleneck: str = ""  # memory-bound | compute-bound | latency-bound | launch-bound | unknown
    evidence: str = ""
    strategies: list[str] = field(default_factory=list)


@dataclass
class Profile:
    """A kernel's profile. The derived fields (runtime values and vectors, phi, saturation,
    diagnosis) are a function of the rest: ``assemble.derive`` sets them."""

    kernel: str = ""
    tier: int = 0  # the tier asked for (1-3)
    tiers: Tiers = field(default_factory=Tiers)
    unavailable: dict[str, str] = field(default_factory=dict)  # tier -> why it was not measured
    device: DeviceFacts = field(default_factory=DeviceFacts)  # the device facts it was measured against
    interpreted: bool = False
    time_ms: Optional[float] = None  # the kernel's launches, together
    launch: Optional[Launch] = None
    has_dot: bool = False
    collect_s: Optional[float] = None
    retimed: Optional[str] = None  # why (and whether) the kernel's launches were timed alone
    file: Optional[str] = None  # where (the profile command's)
    harness: Optional[str] = None
    gpu: Optional[str] = None
    triton_version: Optional[str] = None
    # derived
    runtime_values: dict[str, Optional[float]] = field(default_factory=dict)
    runtime_vectors: dict[str, list[Optional[float]]] = field(default_factory=dict)  # feature set -> vector
    phi: Optional[list[Optional[float]]] = None  # 9-dim hardware vector (PHI_NAMES); None without counters
    saturation: dict[str, Optional[float]] = field(default_factory=dict)  # L2, DRAM, SM: fraction of peak
    saturation_basis: dict[str, str] = field(default_factory=dict)
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    extra: JsonObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: object) -> "Profile":
        return decode(cls, raw)

    @classmethod
    def from_wire(cls, raw: object) -> Optional["Profile"]:
        """A profile as a job event, a judge's reply or a store row carries it: anything
        but a non-empty object is no profile."""
        return cls.from_dict(raw) if isinstance(raw, dict) and raw else None

    def to_dict(self) -> JsonObject:
        return _record(self)

    @property
    def bottleneck(self) -> Optional[str]:
        """The bottleneck class, None when not diagnosed."""
        b = self.diagnosis.bottleneck
        return b if b and b != "unknown" else None

    @property
    def launches(self) -> int:
        tm = self.tiers.timing
        return (tm.launches if tm else 0) or (self.launch.count if self.launch else 0) or 1

    @property
    def time_per_launch_ms(self) -> Optional[float]:
        tm = self.tiers.timing
        if tm is not None and tm.time_per_launch_ms is not None:
            return tm.time_per_launch_ms
        return self.time_ms / self.launches if self.time_ms is not None else None

    def counter(self, name: str) -> Optional[float]:
        return self.tiers.counters.values.get(name) if self.tiers.counters else None

    @property
    def occupancy(self) -> Optional[float]:
        """0..1: achieved (tier 3) where measured, else theoretical (tier 1)."""
        achieved = self.counter("achieved_occupancy")
        if achieved is not None:
            return achieved / 100.0
        st = self.tiers.static
        return st.occupancy.theoretical if st and st.occupancy else None
