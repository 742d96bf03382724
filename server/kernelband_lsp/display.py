"""What the editors show of a job and its Result, worded in one place.

One rule decides whether a number may be read as a speedup: times measured under the
Triton interpreter (``speed_claim: false`` on a baseline, candidate or progress event;
``interpreted`` on a Result) are CPU times, so no ratio ("1.43x") and no before -> after
pair of times is shown for them anywhere: progress, lenses, hovers, evidence, review,
summaries. The same module words the progress lines, the job's phase while no event comes
(starting the engine, preparing the original...), the lens line of a running job and
the one-line summary of a Result, so VS Code, Neovim and any other client read the same
text (the VS Code client shows these strings; it does not word them again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from kernelband.events import Baseline, Candidate, EventPayload, JobError, Log, ProfileReady, Progress, Started
from kernelband.model import FOUND_STATUSES, Result, ResultStatus

from . import summary as S

# what an interpreted result may claim: it passed the checks; its timing says nothing about a GPU
INTERPRETED_NOTE = "correct; speed needs a GPU"

OPTIMIZE, PROFILE, CHECK = "optimize", "profile", "check"
VERBS = {OPTIMIZE: "optimizing", PROFILE: "profiling", CHECK: "re-verifying"}
# a stored variant of an earlier session, re-checked before the search (not a search pull)
STORED_GENERATOR = "stored"


# ---------------------------------------------------------------------------- the rule
def result_claims_speed(result: Optional[Result]) -> bool:
    """May the Result's times and ratio be read as a speedup (GPU times)?"""
    if result is None:
        return False
    clock = (result.clock or "").lower()
    return not (result.interpreted or result.status == ResultStatus.VERIFIED_CORRECT or "interpret" in clock)


def event_claims_speed(payload: EventPayload) -> Optional[bool]:
    """True or False when a job event says whether its times are GPU times; None when it
    does not say (an event without times)."""
    claim = getattr(payload, "speed_claim", None)
    if claim is False or getattr(payload, "interpreted", None) is True:
        return False
    clock = getattr(payload, "clock", None)
    if isinstance(clock, str) and ("interpret" in clock.lower() or clock.lower() == "cpu"):
        return False
    return True if claim is True else None


def ratio(value: object, claim: bool) -> Optional[str]:
    """'1.43x', or None without a value or without a speed claim."""
    v = S.num(value)
    return f"{v:.2f}x" if claim and v is not None else None


def time_pair(before: object, after: object, claim: bool) -> Optional[str]:
    """'0.64 ms → 0.15 ms', or None without both times or without a speed claim."""
    b, a = S.num(before), S.num(after)
    if not claim or b is None or a is None:
        return None
    return f"{S.fmt_ms(b)} → {S.fmt_ms(a)}"


def speedup_phrase(result: Optional[Result]) -> Optional[str]:
    """'1.43x (95% CI 1.30–1.50x)' for a Result that claims speed, else None."""
    return S.speedup_phrase(result) if result_claims_speed(result) else None


def device_text(result: Result) -> tuple[str, Optional[str]]:
    """(label, value) of the device row: the GPU, or what ran without one (never a CPU
    described as a GPU)."""
    if result.interpreted or not result_claims_speed(result):
        return "Device", "no GPU: Triton's interpreter on the CPU"
    return "GPU", str(result.gpu) if result.gpu else None


def via(result: Result) -> str:
    """' via tiling → vectorize': the strategies that led to the variant ('' when none)."""
    path = result.strategy_path
    return f" via {' → '.join(map(str, path))}" if path else ""


def _evals(n: object) -> str:
    v = S.num(n)
    if v is None:
        return ""
    return f", {int(v)} evaluation{'' if int(v) == 1 else 's'}"


def result_summary(result: Result, kernel: str = "") -> str:
    """One line for a finished optimization (notifications, the output channel, $/progress end)."""
    k = result.kernel or kernel or "the kernel"
    claim = result_claims_speed(result)
    evals = _evals(result.evaluations)
    if result.status == ResultStatus.IMPROVED and claim:
        pair = time_pair(result.baseline_ms, result.best_ms, claim)
        return f"{k}: {speedup_phrase(result) or 'faster'} faster" + (f", {pair}" if pair else "") + via(result) + evals
    if result.status in FOUND_STATUSES:
        cpu_faster = result.status == ResultStatus.IMPROVED
        extra = " (faster in CPU-interpreter time, which says nothing about a GPU)" if cpu_faster else ""
        return f"{k}: found a variant that is {INTERPRETED_NOTE}{extra}{via(result)}{evals}"
    if result.status == ResultStatus.NO_IMPROVEMENT:
        best = ratio(result.speedup, claim) if (S.num(result.speedup) or 1.0) != 1.0 else None
        tail = f" (best {best}, below the noise floor)" if best else ""
        return f"{k}: no faster variant found{tail}{evals}"
    if result.status == ResultStatus.CANCELLED:
        return f"{k}: cancelled{evals}"
    return f"{k}: failed" + (f": {result.message}" if result.message else "")


def _elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


# ---------------------------------------------------------------------------- a job
@dataclass
class JobDisplay:
    """The words for one running job: a line per event, its phase while no event comes,
    and the lens line. Fed the job's events in order (``on_event``)."""

    kind: str
    background: bool = False
    total: Optional[int] = None  # the evaluation budget (None: no evaluation limit)
    done: int = 0  # search evaluations finished (a re-checked stored variant is not one)
    best_speedup: Optional[float] = None
    claim: Optional[bool] = None  # None until an event says
    phase: str = ""
    started: float = field(default_factory=time.monotonic)
    _after_recheck: bool = False

    def __post_init__(self) -> None:
        if not self.phase:
            # a check job sends no events: its one phase says all it does
            self.phase = (
                "checking the code as it stands against the original (every seed, the trust checks, the timing)"
                if self.kind == CHECK
                else "starting the engine (Python, torch and Triton load)"
            )

    @property
    def claims_speed(self) -> bool:
        return self.claim is not False

    @property
    def verb(self) -> str:
        v = VERBS.get(self.kind, self.kind)
        return "background " + v if self.background else v

    def percent(self) -> Optional[float]:
        if self.total:
            return 100.0 * min(self.done, self.total) / self.total
        return None

    def _note_claim(self, payload: EventPayload) -> None:
        c = event_claims_speed(payload)
        if c is False or (c is True and self.claim is None):
            self.claim = c  # once a job is known to run under the interpreter, it stays so

    def _next_phase(self) -> str:
        if self.total and self.done >= self.total:
            return "search done: preparing the result"
        if self.total:
            return f"evaluating candidate {self.done + 1} of {self.total}"
        return f"evaluating candidate {self.done + 1}"

    def on_event(self, payload: EventPayload) -> Optional[str]:
        """The progress line for this event (None: the event is no progress line)."""
        self._note_claim(payload)
        if isinstance(payload, Started):
            self.total = payload.evaluations
            if self.kind == OPTIMIZE:
                self.phase = "preparing: compiling, checking and timing the original"
                limit = f"{self.total} evaluations" if self.total else "no evaluation limit"
                return f"started ({payload.generator} generator, {limit})" if payload.generator else "started"
            self.phase = "compiling and running the harness" if self.kind == PROFILE else "checking the variant"
            return "started"
        if isinstance(payload, Log):
            msg, level = payload.message.strip(), payload.level.lower()
            if level in ("warning", "error"):
                return f"{level}: {msg}" if msg else None
            if msg.endswith(("...", "…")):  # the engine announces a step it is starting
                self.phase = msg.rstrip(".…").strip()
                return msg.rstrip(".…").strip() + "…"
            return None  # bookkeeping: the output channel has it, the progress line does not
        if isinstance(payload, Baseline):
            self.phase = self._next_phase()
            weak = " (warning: the harness may not detect a broken kernel)" if payload.weak_harness else ""
            if payload.time_ms is None:
                return "original measured" + weak
            if self.claims_speed:
                return f"original: {S.fmt_ms(payload.time_ms)}" + weak
            return f"original checked ({S.fmt_ms(payload.time_ms)} of CPU-interpreter time, not a GPU time)" + weak
        if isinstance(payload, Candidate):
            return self._candidate_line(payload)
        if isinstance(payload, Progress):
            if self._after_recheck:  # the re-check's own progress: not a search evaluation
                self._after_recheck = False
                return None
            self.done = payload.done
            if payload.total:
                self.total = payload.total
            if payload.best_speedup is not None:
                self.best_speedup = payload.best_speedup
            self.phase = self._next_phase()
            return self.counts()
        if isinstance(payload, ProfileReady):
            return "profile ready"
        if isinstance(payload, JobError):
            return f"error: {payload.message or 'the job reported an error'}"
        return None

    def _candidate_line(self, c: Candidate) -> str:
        status = c.status or "?"
        if c.generator == STORED_GENERATOR or c.index == 0:
            self._after_recheck = True
            r = ratio(c.speedup, self.claims_speed) if status == "ok" else None
            return f"re-checked the variant an earlier session found: {status}" + (f" ({r})" if r else "")
        text = f"#{c.index} {c.strategy or 'candidate'}: {status}"
        if status == "ok" and self.claims_speed:
            r = ratio(c.speedup, True)
            text += (f" {S.fmt_ms(c.time_ms)}" if c.time_ms is not None else "") + (f" ({r})" if r else "")
        return text

    def counts(self) -> str:
        """'3/4 evaluated · best 1.21x' (no ratio without a speed claim)."""
        text = f"{self.done}/{self.total} evaluated" if self.total else f"{self.done} evaluated"
        r = ratio(self.best_speedup, self.claims_speed) if (self.best_speedup or 0) > 1.0 else None
        return text + (f" · best {r}" if r else "")

    def status(self, now: Optional[float] = None) -> str:
        """While no event comes: where the job is and for how long ('… · 12 s')."""
        elapsed = _elapsed((now if now is not None else time.monotonic()) - self.started)
        parts = [self.counts()] if self.kind == OPTIMIZE and self.done else []
        parts.append(f"{self.phase}…")
        return " · ".join(parts) + f" ({elapsed})"

    def line(self, queued_ahead: Optional[int] = None, running: bool = True) -> str:
        """The lens line of the job: 'optimizing 3/4 · best 1.21x', 'optimizing: preparing…'."""
        if not running:
            return f"{self.verb}: queued" + (f" ({queued_ahead} ahead)" if queued_ahead else "")
        if self.kind == OPTIMIZE and self.total and (self.done or self.phase.startswith(("evaluating", "search"))):
            return f"{self.verb} {self.counts()}"
        return f"{self.verb}: {self.phase}…"
