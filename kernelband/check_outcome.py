"""What ``kernelband check --json`` prints, as one typed record: ``CheckOutcome``.

The CLI builds it (kernelband/checking.py) and prints ``to_dict()``; its readers (the
language server's re-verification, the agent tools) decode the printed object once with
``from_dict``, which checks every key it knows and turns a malformed object into a
one-line ``MalformedMessage``. Keys this version does not know are kept in ``extra`` and
printed back, as a Result keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from .decode import MalformedMessage, decode_fields
from .json_types import JsonObject
from .model import ErrorStats, ResultStatus, SanitizerReport, Status, WideReport

MALFORMED = "malformed check report"


@dataclass
class CheckScope:
    """What a pass means (``checked``): every harness under every seed, each check listed,
    whether compute-sanitizer ran and whether the calls past int32 offsets did (each
    printed as its ``summary()``, or why it did not; ``wide`` is None only in a report
    printed before it existed, and is then left out again)."""

    seeds: list[int]
    harness: str  # the harness that times (also checked)
    harnesses: list[str]  # the timing harness first, then the correctness-only ones
    checks: list[str]
    memcheck: SanitizerReport
    wide: Optional[WideReport] = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "seeds": list(self.seeds),
            "harness": self.harness,
            "harnesses": list(self.harnesses),
            "checks": list(self.checks),
            "memcheck": self.memcheck.summary(),
        }
        return out if self.wide is None else {**out, "wide": self.wide.summary()}

    def record(self, reports: Mapping[str, object]) -> None:
        """Each verification step's report in the field of its key (``verification.STEPS``)."""
        for key, report in reports.items():
            if key not in self.__dataclass_fields__:
                raise KeyError(f"CheckScope has no field for the verification step {key!r}")
            setattr(self, key, report)

    @classmethod
    def from_dict(cls, body: object) -> "CheckScope":
        return decode_fields(cls, body, "malformed checked block")


@dataclass
class CheckOutcome:
    """The check of one variant against the original: its status (the judge's word), the
    verdict of a correct one, and the re-measurement's numbers when there was one."""

    file: str  # the original module's path
    kernel: str
    harness: str
    variant: str  # the variant as the user named it
    checked: CheckScope
    status: Status
    message: str
    errors: Optional[ErrorStats] = None  # the comparison's error (None: rejected before it ran)
    speed_claim: bool = False  # GPU times that may be read as a speedup
    paired: bool = False  # the interleaved re-measurement ran (its numbers below)
    # the original's facts, None until it was prepared (a variant the screen rejected)
    interpreted: Optional[bool] = None
    clock: Optional[str] = None
    deterministic: Optional[bool] = None
    weak_harness: Optional[str] = None  # why the harness cannot tell a broken kernel apart
    sanitizer: Optional[SanitizerReport] = None  # compute-sanitizer's run over a correct variant (GPU)
    baseline_ms: Optional[float] = None
    variant_ms: Optional[float] = None
    speedup: Optional[float] = None
    speedup_ci: Optional[tuple[float, float]] = None  # 95%
    paired_medians_ms: Optional[tuple[float, float]] = None  # original, variant
    rounds: Optional[int] = None
    verdict: Optional[ResultStatus] = None  # improved | no_improvement | verified_correct, for a correct one
    min_speedup: Optional[float] = None
    warnings: list[str] = field(default_factory=list)
    extra: JsonObject = field(default_factory=dict)  # keys this version does not know

    # printed even when null: what a reader may count on finding
    ALWAYS = ("file", "kernel", "harness", "variant", "checked", "status", "message", "errors", "speed_claim", "paired")
    PAIRED = ("baseline_ms", "variant_ms", "speedup", "speedup_ci", "paired_medians_ms", "rounds")

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def to_dict(self) -> JsonObject:
        """The printed object, keys in the order the command has always printed them."""
        out: JsonObject = {
            "file": self.file,
            "kernel": self.kernel,
            "harness": self.harness,
            "variant": self.variant,
            "checked": self.checked.to_dict(),
        }
        flags = {"speed_claim": self.speed_claim, "paired": self.paired}
        if self.interpreted is not None:
            out.update(interpreted=self.interpreted, clock=self.clock, **flags)
            if self.deterministic is not None:
                out["deterministic"] = self.deterministic
        if self.weak_harness is not None:
            out["weak_harness"] = self.weak_harness
        out.update(
            status=self.status.value,
            message=self.message,
            errors=self.errors.to_dict() if self.errors is not None else None,
        )
        if self.interpreted is None:  # rejected before the original was prepared: the flags come last
            out.update(flags)
        if self.sanitizer is not None:
            out["sanitizer"] = self.sanitizer.to_dict()
        for name in (*self.PAIRED, "verdict", "min_speedup"):
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else getattr(value, "value", value)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, body: object) -> "CheckOutcome":
        """The outcome ``body`` prints, each known key checked; else a one-line MalformedMessage."""
        if not isinstance(body, dict):
            raise MalformedMessage(f"{MALFORMED}: the body must be an object, got {type(body).__name__}")
        missing = [k for k in cls.ALWAYS if k not in body]
        if missing:
            raise MalformedMessage(f"{MALFORMED}: missing required field(s) {', '.join(map(repr, missing))}")
        known = {k: v for k, v in body.items() if k in _FIELDS}
        outcome = decode_fields(cls, known, MALFORMED)
        outcome.extra = {k: v for k, v in body.items() if k not in _FIELDS}
        return outcome


_FIELDS = frozenset(CheckOutcome.__dataclass_fields__) - {"extra"}
