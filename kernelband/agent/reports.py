"""The agent tools' answers: small typed records (the MCP SDK turns them into output
schemas), built from what the engine printed, never from a number made up here.

An agent's context is small: each answer keeps what decides its next step (the verdict,
the precise reason of a rejection, what was checked, the diff) and drops the rest
(histories, full sources, per-tensor tables). Under the interpreter nothing reads as a
speedup: ``speed_claim`` is false and no ratio is reported, exactly as the CLI does.
Every string is scrubbed of secrets on the way out (kernelband/redact.py).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from kernelband_lsp import summary as S

from ..check_outcome import CheckOutcome, CheckScope
from ..decode import MalformedMessage
from ..model import Result, SanitizerReport
from ..profile.schema import Profile, StaticTier, TimingTier
from ..redact import scrub

if TYPE_CHECKING:
    from ..commands.list_cmd import KernelListing
    from _typeshed import DataclassInstance

MAX_WARNINGS = 5
MAX_LAUNCH_SITES = 8
INTERPRETER_TIME_NOTE = "CPU time under the Triton interpreter: not a GPU time, never a speedup"
NOTHING_WRITTEN = "nothing was written: the diff is for review; apply it only with the user's consent"


# ---------------------------------------------------------------- list_kernels
@dataclass
class HarnessInfo:
    """How the kernel is exercised: the timing harness and the correctness-only ones."""

    found: bool
    timing: Optional[str] = None  # the harness whose launches are timed (also checked)
    checks: list[str] = field(default_factory=list)  # correctness-only harnesses
    how: str = ""  # explicit | pyproject | convention
    path: Optional[str] = None  # companion file holding it, relative to the root
    reason: str = ""  # why none was found


@dataclass
class LaunchSite:
    line: int
    function: Optional[str]  # enclosing function (None: module level)
    grid: str
    kwargs: dict[str, str] = field(default_factory=dict)


@dataclass
class KernelEntry:
    name: str
    line: int
    autotuned: bool
    heuristics: bool
    constexpr: list[str]
    launch_sites: list[LaunchSite]
    harness: HarnessInfo


@dataclass
class KernelFile:
    file: str  # relative to the workspace root
    kernels: list[KernelEntry]


@dataclass
class KernelList:
    """The Triton kernels found (a file, or every Python file under a folder)."""

    files: list[KernelFile]
    skipped: list[str] = field(default_factory=list)  # files that could not be read or parsed, with why
    truncated: bool = False  # a folder with more files than are scanned


# ---------------------------------------------------------------- check_variant
@dataclass
class Memcheck:
    ran: bool
    ok: Optional[bool] = None
    findings: list[str] = field(default_factory=list)
    reason: str = ""  # why it did not run, or what a run left unchecked (racecheck past its time)


@dataclass
class Checked:
    """What a pass means: every harness under every seed, and each check listed."""

    seeds: list[int]
    harnesses: list[str]  # the first one is timed
    checks: list[str]
    memcheck: Memcheck
    deterministic: Optional[bool] = None  # the original gave the same outputs twice
    weak_harness: Optional[str] = None  # the harness cannot tell a broken kernel apart: why


@dataclass
class ErrorSummary:
    max_abs: Optional[float] = None
    max_rel: Optional[float] = None
    mismatched: Optional[int] = None
    total: Optional[int] = None
    worst_output: Optional[str] = None


@dataclass
class CheckReport:
    """The verdict on a variant. ``correct`` is false for every rejection, with ``reason``."""

    file: str
    kernel: str
    correct: bool
    status: str  # ok | slower | mismatch | rejected | compile_error | runtime_error | timeout | crashed
    verdict: Optional[str]  # verified_correct (interpreter) | improved | no_improvement; None when wrong
    speed_claim: bool  # GPU times that may be read as a speedup
    interpreted: Optional[bool]  # the Triton interpreter ran it (None: rejected before anything ran)
    reason: Optional[str]  # for a wrong variant: the precise reason, to fix the kernel
    message: str  # for a correct one: what it matched (which harnesses, seeds, the error)
    checked: Checked
    errors: Optional[ErrorSummary] = None
    speedup: Optional[float] = None  # only with speed_claim
    speedup_ci: Optional[list[float]] = None
    baseline_ms: Optional[float] = None
    variant_ms: Optional[float] = None
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- profile_kernel
@dataclass
class ProfileReport:
    file: str
    kernel: str
    tier: int
    interpreted: bool
    bottleneck: Optional[str]  # memory-bound | compute-bound | latency-bound | launch-bound; None: unknown
    evidence: str
    suggested_strategies: list[str]
    time_per_launch_ms: Optional[float]
    time_note: str = ""  # what the time is (CPU time under the interpreter)
    gpu: Optional[str] = None
    bytes_moved: Optional[float] = None
    flops: Optional[float] = None
    bandwidth_gbs: Optional[float] = None
    fraction_of_peak: dict[str, Optional[float]] = field(default_factory=dict)  # DRAM, SM, L2: 0..1
    static: dict[str, Optional[float]] = field(default_factory=dict)  # registers, spills, shared_bytes, occupancy
    launch: dict[str, Any] = field(default_factory=dict)  # grid, constexprs, num_warps, num_stages
    unavailable: dict[str, str] = field(default_factory=dict)  # tier -> why it was not measured


# ---------------------------------------------------------------- optimize_kernel
@dataclass
class OptimizeReport:
    """A session's outcome. ``diff`` is the proposed edit; nothing was written."""

    file: str
    kernel: str
    status: str  # improved | no_improvement | verified_correct | cancelled | failed
    speed_claim: bool
    written: bool  # always false: the agent tools never write the user's files
    message: str
    evaluations: int
    seconds: float
    diff: str = ""
    strategy_path: list[str] = field(default_factory=list)
    speedup: Optional[float] = None  # only with speed_claim: the paired re-measurement
    speedup_ci: Optional[list[float]] = None
    baseline_ms: Optional[float] = None
    best_ms: Optional[float] = None
    checked: Optional[Checked] = None
    stop_reason: str = ""
    warnings: list[str] = field(default_factory=list)
    results_uri: str = ""  # the MCP resource with this kernel's stored results
    note: str = NOTHING_WRITTEN


# ---------------------------------------------------------------- the results resource
@dataclass
class StoredResults:
    file: str
    kernel: str
    optimize: Optional[OptimizeReport]  # the last finished session
    profile: Optional[ProfileReport]  # the last profile of this file's kernel
    note: str = ""


# ---------------------------------------------------------------- builders
T = TypeVar("T", bound="DataclassInstance")


def scrubbed(record: T) -> T:
    """The record with every string redacted of secrets (a message may quote anything)."""
    changes: dict[str, object] = {}
    for f in dataclasses.fields(record):
        v = getattr(record, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            changes[f.name] = scrubbed(v)
        elif isinstance(v, list) and v and dataclasses.is_dataclass(v[0]):
            changes[f.name] = [scrubbed(x) for x in v]
        elif isinstance(v, (str, list, dict)):
            changes[f.name] = scrub(v)
    return dataclasses.replace(record, **changes)


def kernel_entry(row: KernelListing, relative: Callable[[str], str]) -> KernelEntry:
    """One row of ``list`` (kernelband.commands.list_cmd.list_kernels), as an agent reads it."""
    k, h = row.kernel, row.harness
    sites = [
        LaunchSite(line=s.range.start_line, function=s.enclosing_function, grid=s.grid, kwargs=dict(s.kwargs))
        for s in k.launch_sites[:MAX_LAUNCH_SITES]
    ]
    harness = HarnessInfo(
        found=h.found,
        timing=h.name,
        checks=[c for c in h.checks if c != h.name],
        how=h.how,
        path=relative(h.path) if h.path else None,
        reason=h.reason,
    )
    return KernelEntry(
        name=k.name,
        line=k.range.start_line,
        autotuned=k.is_autotuned,
        heuristics=k.has_heuristics,
        constexpr=k.constexpr_params,
        launch_sites=sites,
        harness=harness,
    )


def memcheck(raw: object) -> Memcheck:
    """From a printed report or its summary (``checked.memcheck``): the same fields."""
    try:
        report = raw if isinstance(raw, SanitizerReport) else SanitizerReport.from_wire(raw)
    except MalformedMessage:
        return Memcheck(ran=False, reason="not reported by the engine")
    return Memcheck(
        ran=report.ran,
        ok=report.ok if report.ran else None,
        findings=list(report.findings),
        reason=report.reason or report.left_unchecked,
    )


def checked(scope: CheckScope, deterministic: Optional[bool] = None, weak: Optional[str] = None) -> Checked:
    return Checked(
        seeds=list(scope.seeds),
        harnesses=list(scope.harnesses),
        checks=list(scope.checks),
        memcheck=memcheck(scope.memcheck),
        deterministic=deterministic,
        weak_harness=weak,
    )


def check_report(out: CheckOutcome, file: str) -> CheckReport:
    """From what ``kernelband check --json`` printed, decoded."""
    ok, status = out.ok, out.status.value
    speed_claim = out.speed_claim and out.paired
    errors = out.errors
    report = CheckReport(
        file=file,
        kernel=out.kernel,
        correct=ok,
        status=status,
        verdict=out.verdict.value if ok and out.verdict is not None else None,
        speed_claim=speed_claim,
        interpreted=out.interpreted,
        reason=None if ok else out.message or status,
        message=out.message if ok else "",
        checked=checked(out.checked, out.deterministic, out.weak_harness),
        errors=ErrorSummary(
            max_abs=S.num(errors.max_abs),
            max_rel=S.num(errors.max_rel),
            mismatched=errors.mismatched,
            total=errors.total,
            worst_output=errors.worst_output,
        )
        if errors is not None
        else None,
        warnings=list(out.warnings)[:MAX_WARNINGS],
    )
    if speed_claim:  # a GPU re-measurement: the numbers may be read as a speedup
        report.speedup = S.num(out.speedup)
        report.speedup_ci = list(out.speedup_ci) if out.speedup_ci is not None else None
        report.baseline_ms, report.variant_ms = S.num(out.baseline_ms), S.num(out.variant_ms)
    return scrubbed(report)


def profile_report(profile: Profile, file: str, tier: int) -> ProfileReport:
    timing, st, launch = profile.tiers.timing or TimingTier(), profile.tiers.static or StaticTier(), profile.launch
    interpreted = profile.interpreted
    report = ProfileReport(
        file=file,
        kernel=profile.kernel,
        tier=tier,
        interpreted=interpreted,
        bottleneck=profile.bottleneck,
        evidence=profile.diagnosis.evidence,
        suggested_strategies=list(profile.diagnosis.strategies),
        time_per_launch_ms=profile.time_per_launch_ms,
        time_note=INTERPRETER_TIME_NOTE if interpreted else "GPU time",
        gpu=profile.gpu,
        bytes_moved=S.num(timing.bytes_total),
        flops=S.num(timing.flops),
        bandwidth_gbs=None if interpreted else timing.bandwidth_gbs,
        fraction_of_peak={} if interpreted else {r: profile.saturation.get(r) for r in ("DRAM", "SM", "L2")},
        static={
            k: v
            for k, v in (
                ("registers", st.n_regs),
                ("spills", st.n_spills),
                ("shared_bytes", st.shared_bytes),
                ("occupancy", profile.occupancy),
            )
            if v is not None
        },
        launch={}
        if launch is None
        else {
            k: v
            for k, v in (
                ("grid", launch.grid or None),
                ("constexprs", launch.constexprs or None),
                ("num_warps", launch.num_warps),
                ("num_stages", launch.num_stages),
            )
            if v is not None
        },
        unavailable=dict(profile.unavailable),
    )
    return scrubbed(report)


def optimize_report(result: Result, file: str, results_uri: str) -> OptimizeReport:
    speed_claim = bool(result.speed_claim) and not result.interpreted
    raw_checked = result.extra.get("checked")
    report = OptimizeReport(
        file=file,
        kernel=result.kernel,
        status=result.status.value,
        speed_claim=speed_claim,
        written=False,
        message=result.message,
        evaluations=int(result.evaluations or 0),
        seconds=float(result.seconds or 0.0),
        diff=result.diff or "",
        strategy_path=list(result.strategy_path),
        checked=_optimize_checked(raw_checked),
        stop_reason=result.stop_reason,
        warnings=[str(w) for w in result.warnings][:MAX_WARNINGS],
        results_uri=results_uri,
    )
    if speed_claim and result.paired_rounds:  # the paired re-measurement's numbers, GPU time only
        report.speedup, report.speedup_ci = S.num(result.speedup), result.speedup_ci
        report.baseline_ms, report.best_ms = S.num(result.baseline_ms), S.num(result.best_ms)
    if result.memcheck and report.checked is not None:
        report.checked.memcheck = memcheck(result.memcheck)
    return scrubbed(report)


def _optimize_checked(raw: object) -> Optional[Checked]:
    """A Result's ``checked`` (an extra key: the block ``check --json`` prints); None when
    absent or malformed."""
    try:
        return checked(CheckScope.from_dict(raw)) if raw is not None else None
    except MalformedMessage:
        return None


def compact_json(data: Any) -> str:
    """One line of JSON without the empty fields (None, "", [], {}): what a model reads."""
    return json.dumps(_pruned(data), separators=(",", ":"), ensure_ascii=False)


def _pruned(v: Any) -> Any:
    if isinstance(v, dict):
        out = {k: _pruned(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x not in (None, "", [], {})}
    if isinstance(v, list):
        return [_pruned(x) for x in v]
    return v
