"""The trust layer seen from the session: screen a variant, evaluate it in the worker,
and turn every way it can fail into an Evaluation with a clear status.

One bad variant never ends a session: a crash, a hang or a corrupted CUDA context
yields a result, the worker is replaced (and re-primed with the original from its
saved references), and the next request goes on.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from .decode import MalformedMessage
from .model import (
    PAST_INT32,
    Baseline,
    Evaluation,
    PairedTiming,
    SanitizerReport,
    Status,
    Task,
    Timing,
    Variant,
    WideReport,
)
from .profile.schema import DeviceFacts, Profile, ProfileError
from .screen import screen_variant
from .worker.client import WorkerClient, WorkerError, WorkerInfo
from .worker.deadlines import request_deadline_s
from .worker.requests import (
    ErrorKind,
    Evaluate,
    MeasureDevice,
    Paired,
    Prepare,
    ProfileRun,
    Request,
    Retime,
    Sanitize,
    WideCalls,
)

ReportT = TypeVar("ReportT", SanitizerReport, WideReport)  # a verification step's report


class SetupError(Exception):
    """The original kernel or its harness cannot be used (the job cannot start)."""


def screen(original: str, variant: str, kernel: str, harness: Optional[str]) -> Optional[str]:
    """Static checks before running (kernelband/screen.py): a reason to reject, or None."""
    return screen_variant(original, variant, kernel, harness)


def screen_task(task: Task, variant_source: str) -> Optional[str]:
    """The screen of a variant of ``task`` against each harness that lives in the module
    (a companion harness file is out of the variant's reach): a reason, or None."""
    if task.harness_path:
        return screen(task.source, variant_source, task.kernel, None)
    for harness in [task.harness, *task.check_harnesses]:
        reason = screen(task.source, variant_source, task.kernel, harness)
        if reason:
            return reason
    return None


class Evaluator:
    def __init__(
        self,
        task: Task,
        workdir: Optional[str] = None,
        on_log: Optional[Callable[[str], None]] = None,
        profile_tier: int = 0,
        env: Optional[dict[str, str]] = None,
    ) -> None:
        self.task = task
        self.profile_tier = profile_tier
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kernelband-"))
        self._env, self._on_log = env, on_log
        self.client = WorkerClient(task.device, env=env, on_log=on_log)  # env: the executor's pinning
        self.baseline: Optional[Baseline] = None
        self.facts = DeviceFacts()
        self.evaluations = 0
        self.worker_restarts = 0
        self._closed = False  # closed (the session ended): no new worker process after this
        self._revive_lock = threading.Lock()  # several candidates in flight may find the worker dead at once

    def _deadline(self, op: str, rounds: int = 10) -> float:
        """Seconds to wait for the judge's reply to ``op`` (worker/deadlines.py)."""
        derived = self.baseline.derived_calls if self.baseline is not None else 0
        return request_deadline_s(op, self.task, derived, rounds)

    @property
    def lanes(self) -> int:
        """Candidates this worker evaluates at once (the judge's answer at prepare)."""
        return max(1, self.baseline.lanes) if self.baseline is not None else 1

    # ------------------------------------------------------------------ lifecycle
    @property
    def info(self) -> Optional[WorkerInfo]:
        return self.client.info

    @property
    def interpreted(self) -> bool:
        return bool(self.client.info and self.client.info.interpreted)

    def start(self) -> WorkerInfo:
        if self._closed:  # a worker still preparing in the background when its session ended
            raise SetupError("the evaluation worker was closed")
        if not self.client.alive:
            from .worker.client import adopt

            prestarted = adopt(self.task.device, self._env, self._on_log)
            if prestarted is not None:  # started by the command while it set itself up
                self.client = prestarted
                assert prestarted.info is not None
                return prestarted.info
            try:
                return self.client.start()
            except WorkerError as e:
                tail = e.stderr_tail.strip().splitlines()
                why = tail[-1] if tail else str(e)
                raise SetupError(f"the evaluation worker could not start: {why}") from e
        assert self.client.info is not None
        return self.client.info

    def close(self) -> None:
        self._closed = True
        self.client.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _revive(self) -> None:
        """Start a fresh worker and prepare the original again (once, whichever of the
        candidates in flight notices first)."""
        with self._revive_lock:
            if self.client.alive:
                return
            if self._closed:
                raise WorkerError(ErrorKind.CRASHED, "the evaluation worker was closed")
            self.client.restart()
            self.worker_restarts += 1
            # the references only: no timing, no profile
            self.client.send(Prepare(task=self.task, workdir=str(self.workdir), time=False), self._deadline("prepare"))

    # ------------------------------------------------------------------ the original
    def prepare(self, time_it: bool = True, profile_tier: Optional[int] = None) -> Baseline:
        """Check the original and its harness; raise SetupError with the reason if unusable.
        ``profile_tier`` overrides the evaluator's for this call (0: references only, as a
        second worker of a session needs)."""
        self.start()
        tier = self.profile_tier if profile_tier is None else profile_tier
        try:
            request = Prepare(
                task=self.task, workdir=str(self.workdir), time=time_it, profile_tier=tier, facts=self.facts
            )
            raw = self.client.send(request, self._deadline("prepare"))
        except WorkerError as e:
            if e.worker_gone and not self._closed:
                self.client.restart()
            raise SetupError(f"the original kernel could not be run ({e.kind}): {e}") from e
        self.baseline = Baseline.from_dict(raw)
        if not self.baseline.ok:
            raise SetupError(self.baseline.message)
        return self.baseline

    def retime_original(self) -> Timing:
        """The original timed as a candidate's timing step runs (fresh process, kept run,
        replay check, frozen replays). Raises WorkerError/RuntimeError when it cannot."""
        self._ensure_worker()
        try:
            raw = self.client.send(Retime(), self._deadline("retime"))
        except WorkerError as e:
            if e.worker_gone:
                self._revive()
            raise
        return Timing.from_dict(raw["timing"])

    def device_facts(self) -> DeviceFacts:
        self.start()
        try:
            raw = self.client.send(MeasureDevice(), self._deadline("device_facts"))
            self.facts = DeviceFacts.from_dict(raw) if raw else DeviceFacts()
        except (WorkerError, ProfileError):
            self.facts = DeviceFacts()
        return self.facts

    # ------------------------------------------------------------------ variants
    def evaluate(
        self,
        variant: Variant,
        time_it: bool = True,
        profile_tier: Optional[int] = None,
        search: bool = False,
        rounds: Optional[int] = None,
    ) -> Evaluation:
        """Screen and run a variant. Never raises for anything the variant does. ``search``:
        a search's candidate, which ends as ``Status.SLOWER`` after its timing when it is
        confidently slower than the original (the rest of its checks would decide nothing);
        ``rounds``: paired timing rounds under the interpreter (the GPU's are fixed)."""
        if self.baseline is None:
            raise RuntimeError("prepare() first")
        self.evaluations += 1
        t0 = time.perf_counter()
        reason = screen_task(self.task, variant.source)
        if reason:
            return Evaluation(
                Status.REJECTED,
                reason,
                interpreted=self.interpreted,
                variant_id=variant.id,
                wall_s=time.perf_counter() - t0,
            )
        tier = self.profile_tier if profile_tier is None else profile_tier
        self._ensure_worker()
        try:
            request = Evaluate(
                source=variant.source,
                variant_id=variant.id,
                time=time_it,
                profile_tier=tier,
                facts=self.facts,
                screen=search,
                rounds=rounds,
            )
            raw = self.client.send(request, self._deadline("evaluate"))
            ev = Evaluation.from_dict(raw)
        except WorkerError as e:
            if e.kind == ErrorKind.SETUP:  # no candidate can be judged against this original: the search stops
                raise SetupError(str(e)) from e
            if e.kind == ErrorKind.PROTOCOL:  # the judge's fault: no candidate's verdict can be trusted
                raise SetupError(f"the judge's reply could not be read: {e}") from e
            ev = self._failure(variant, e)
        # after a timeout or crash: replace it now, not on the next request
        self._ensure_worker()
        self._on_baseline_clock(ev)
        ev.wall_s = time.perf_counter() - t0
        # what the worker did not account for: screening, pipes, JSON, restarts
        inner = ev.phases.get("variant_process_total", sum(ev.phases.values()))
        ev.phases["overhead"] = round(max(ev.wall_s - inner, 0.0), 6)
        return ev

    def _on_baseline_clock(self, ev: Evaluation) -> None:
        """A candidate timed against the reference lane gets its time on the baseline's
        clock: the baseline time times the paired ratio of the same rounds, so a search's
        ranking and its speedups are the paired measurement's, not two separate ones."""
        base = self.baseline.timing if self.baseline is not None else None
        if (
            ev.status not in (Status.OK, Status.SLOWER)
            or ev.timing is None
            or not ev.reference_ms
            or base is None
            or ev.reference_ms <= 0
        ):
            return
        scale = base.median_ms / ev.reference_ms
        t = ev.timing
        ev.phases["measured_ms"] = t.median_ms
        ev.timing = replace(t, median_ms=t.median_ms * scale, p20_ms=t.p20_ms * scale, p80_ms=t.p80_ms * scale)

    def _failure(self, variant: Variant, e: WorkerError) -> Evaluation:
        if e.kind == ErrorKind.TIMEOUT:
            status = Status.TIMEOUT
            msg = f"timed out after {self._deadline('evaluate'):.0f} s (hang or far too slow); worker restarted"
        elif e.kind == ErrorKind.CRASHED:
            status = Status.CRASHED
            tail = e.stderr_tail.strip().splitlines()[-3:]
            msg = f"{e}; worker restarted" + (f" (last output: {' | '.join(tail)})" if tail else "")
        else:
            status = Status.RUNTIME_ERROR
            msg = str(e)
        return Evaluation(status, msg, interpreted=self.interpreted, variant_id=variant.id)

    def _ensure_worker(self) -> None:
        """Replace a worker that has exited (crash, hang, or a corrupted context)."""
        if self.client.alive:
            return
        try:
            self._revive()
        except WorkerError as again:
            raise SetupError(f"the worker cannot be restarted: {again}") from again

    def paired_timing(self, variant: Variant, rounds: int = 10) -> PairedTiming:
        """Re-measure the original and the variant for a speedup with a CI: interleaved, or
        one after the other where two runs of the harness do not fit on the GPU together
        (``PairedTiming.order``)."""
        self._ensure_worker()
        try:
            raw = self.client.send(
                Paired(source=variant.source, variant_id=variant.id, rounds=rounds), self.paired_timeout_s(rounds)
            )
        except WorkerError as e:
            if e.worker_gone:
                self._revive()
            raise
        return PairedTiming.from_dict(raw)

    def sanitize(self, variant: Variant) -> SanitizerReport:
        """compute-sanitizer memcheck and racecheck over the variant's correctness harnesses
        (GPU only); a report that did not run says why (a reply that does not decode too)."""
        return self._report(Sanitize(source=variant.source), "sanitize", SanitizerReport, "memcheck")

    def wide_calls(self, variant: Variant, min_elements: int = PAST_INT32) -> WideReport:
        """The variant on calls past int32 offsets, the original the oracle (``judge_wide``;
        ``min_elements``: the threshold, lowered only by tests); a report that did not run
        says why (the judge lost or its reply unreadable too)."""
        return self._report(
            WideCalls(source=variant.source, min_elements=min_elements),
            "wide",
            WideReport,
            "the calls past int32 offsets",
        )

    def _report(self, request: Request, op: str, report: type[ReportT], what: str) -> ReportT:
        """A verification step's report (``report.from_wire`` of the judge's reply); where
        the judge is lost or its reply does not decode, one that did not run, saying why."""
        self._ensure_worker()
        try:
            raw = self.client.send(request, self._deadline(op))
            try:
                return report.from_wire(raw)
            except MalformedMessage as e:  # the judge's fault, as any reply that does not decode
                raise WorkerError(ErrorKind.PROTOCOL, str(e)) from None
        except WorkerError as e:
            if e.worker_gone:
                self._revive()
            return report.not_run(f"{what} could not run: {e}")

    def paired_timeout_s(self, rounds: int) -> float:
        """Two jobs at most (the original's block, then the variant's), each a kept run, its
        replay check and ``rounds`` samples."""
        return self._deadline("paired", rounds)

    def profile(self, source: Optional[str], tier: int) -> Optional[Profile]:
        """Profile the original (source None) or a variant source at a tier (None: the
        worker measured none)."""
        self._ensure_worker()
        try:
            raw = self.client.send(ProfileRun(source=source, tier=tier, facts=self.facts), self._deadline("profile"))
            return Profile.from_wire(raw.get("profile") if isinstance(raw, dict) else None)
        except WorkerError as e:
            if e.worker_gone:
                self._revive()
            raise


class WorkerLost(Exception):
    """The evaluation worker died and could not be restarted: the search ends here."""
