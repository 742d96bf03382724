"""A session's workers seen from its search loop: submit a candidate to a free worker,
wait for the next finished one (``drive`` runs the whole dispatch loop).

Slot 0 is the primary: it sets the baseline (timed and profiled), and the final paired
re-measurement runs on it. The other workers start at once, in the background, while
the primary prepares: each prepares the original itself (its own references, on its own
GPU, no timing or profile) and re-times it as a candidate's timing step runs; it joins
the search as soon as that is done (and the primary's baseline is known), without
holding up the primary. A candidate timed on worker i is scaled by (primary's time of
the original / worker i's), so the pool compares times as if measured on the primary
GPU. The verdict never depends on that scaling: each candidate is checked against its
worker's own references, and the speedup comes from the interleaved re-measurement on
one GPU. At the end a free second worker runs the finalist's memcheck while the primary
re-measures it (``spare``); closing the workers runs in parallel.

With one worker, a submitted evaluation runs at once in the caller's thread: the search
is exactly the sequential loop it always was. With several, each runs in a thread of
its own (the judge is a separate process: the thread only waits on its pipe).

A worker that cannot be restarted is dropped and its candidate handed to another one
(or kept until a worker still preparing joins); when none is left, its WorkerLost ends
the search as with one worker. ``timeline`` records what each worker did when (setup
steps and evaluations, seconds since the pool was made), for the scaling benchmark.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, NamedTuple, Optional, TypedDict, Union

from ..events import EventPayload, Log
from ..model import Evaluation, Variant
from ..profile.schema import DeviceFacts
from .base import Evaluator

Job = Callable[[Evaluator], Evaluation]  # (evaluator) -> Evaluation; may raise (WorkerLost)
Done = Callable[
    [Optional[str], Evaluation], None
]  # takes a job's Evaluation back: (worker label, None with one worker)
Emit = Callable[[EventPayload], object]  # EventEmitter.emit (its Event is not used)


@dataclass(frozen=True)
class Step:
    """What a worker did (start, prepare, retime, baseline or evaluate), in seconds since the pool was made."""

    worker: str
    what: str
    start: float
    end: float


# ``WorkerPool.usage()`` of one worker (the scaling benchmark writes it to JSON)
WorkerUsage = TypedDict(
    "WorkerUsage", {"evaluations": int, "busy_s": float, "ready_at_s": Optional[float], "busy_share": Optional[float]}
)


# a job that ran on a slot: its Evaluation, or what it raised
_Ran = NamedTuple(
    "_Ran",
    [("slot", int), ("job", Job), ("done", Done), ("ev", Optional[Evaluation]), ("err", Optional[BaseException])],
)


class WorkerPool:
    def __init__(
        self, evaluators: list[Evaluator], labels: Optional[list[str]] = None, emit: Optional[Emit] = None
    ) -> None:
        self.evaluators = list(evaluators)
        self.labels = labels or [f"worker {i}" for i in range(len(evaluators))]
        self.workers = len(self.evaluators)  # slots 0..workers-1 are workers; later slots are lanes of one
        self.scale = [1.0] * len(evaluators)
        self.live = [0]  # workers taking candidates: the primary; the others once prepared (begin_others)
        self.lost: list[str] = []  # "label: why" of each dropped worker
        self.timeline: list[Step] = []
        self._emit = emit
        self._t0 = time.monotonic()
        self._busy: set[int] = set()
        self._queued: list[tuple[Job, Done]] = []
        self._events: "queue.Queue[Union[_Ran, int]]" = queue.Queue()  # a job that ran, or the slot that is ready
        self._joining: dict[int, threading.Thread] = {}
        self._retimed: dict[int, float] = {}  # each other worker's time of the original, on its clock
        self._setup_errors: dict[int, str] = {}
        self._primary_ms: Optional[float] = None
        self._facts = DeviceFacts()
        self._last_lost: Optional[BaseException] = None
        self._search_span: Optional[tuple[float, float]] = None

    @property
    def parallel(self) -> bool:
        return len(self.evaluators) > 1

    def add_lanes(self, worker: int) -> None:
        """More slots on one prepared worker: as many candidates in flight on its GPU as its
        judge said it can hold (``Evaluator.lanes``); the search fills them all."""
        ev = self.evaluators[worker]
        for k in range(1, ev.lanes):
            self.evaluators.append(ev)
            self.labels.append(f"{self.labels[worker]} lane {k + 1}")
            self.scale.append(self.scale[worker])
            self.live = sorted(self.live + [len(self.evaluators) - 1])

    @property
    def primary(self) -> Evaluator:
        """The first live worker (slot 0 unless it was lost)."""
        return self.evaluators[self.live[0] if self.live else 0]

    def _now(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def _log(self, message: str, level: str = "info") -> None:
        if self._emit is not None:
            self._emit(Log(level=level, message=message))

    # ------------------------------------------------------------------ setup of the others
    def begin_others(self) -> None:
        """Start and prepare workers 1.. in the background, while the primary prepares."""
        for i in range(1, self.workers):
            t = threading.Thread(target=self._prepare_other, args=(i,), daemon=True, name=f"kb-prepare-{i}")
            self._joining[i] = t
            t.start()

    def _prepare_other(self, i: int) -> None:
        """Start, prepare (references only) and re-time the original on worker i; then tell
        the search loop it can join."""
        ev = self.evaluators[i]
        step = "start"
        t = self._now()
        try:
            ev.start()
            t = self._mark(i, step, t)
            step = "prepare"
            ev.prepare(time_it=False, profile_tier=0)
            t = self._mark(i, step, t)
            step = "retime"
            ms = ev.retime_original().median_ms
            self._mark(i, step, t)
            if not ms or ms <= 0:
                raise RuntimeError(f"re-timing the original there gave {ms!r} ms")
            self._retimed[i] = ms
        except Exception as e:  # noqa: BLE001 - this worker is dropped, the others go on
            self._setup_errors[i] = f"{step} failed: {type(e).__name__}: {e}"
        self._events.put(i)

    def _mark(self, i: int, what: str, start: float) -> float:
        end = self._now()
        self.timeline.append(Step(self.labels[i], what, start, end))
        return end

    def finish_others(self, original: Variant, primary_ms: float, facts: DeviceFacts) -> list[str]:
        """The primary's baseline is known: the other workers that are prepared join now,
        the rest join the search as soon as they are (they never hold up the primary).
        Returns warnings for the workers dropped so far."""
        del original  # each worker re-times the original itself (retime_original)
        self._primary_ms, self._facts = primary_ms, facts
        self.timeline.append(Step(self.labels[0], "baseline", 0.0, self._now()))
        notes = []
        while True:  # only "ready" events exist before the search
            try:
                item = self._events.get_nowait()
            except queue.Empty:
                break
            assert isinstance(item, int)
            note = self._join(item)
            if note:
                notes.append(note)
        return notes

    def _join(self, i: int) -> Optional[str]:
        """Worker i finished its setup: it takes candidates from now on, or is dropped."""
        self._joining.pop(i, None)
        why = self._setup_errors.get(i)
        if why is None and self._primary_ms is None:  # cannot happen in drive(): finish_others came first
            why = "the primary worker has no baseline"
        if why is not None:
            self.lost.append(f"{self.labels[i]}: {why}")
            return f"{self.labels[i]} could not be prepared and is not used: {why}"
        assert self._primary_ms is not None
        self.scale[i] = self._primary_ms / self._retimed[i]
        self.evaluators[i].facts = self._facts
        self.live = sorted(self.live + [i])
        self.add_lanes(i)
        steps = {e.what: e.end - e.start for e in self.timeline if e.worker == self.labels[i]}
        self._log(
            f"{self.labels[i]} takes candidates from {self._now():.1f} s (start {steps.get('start', 0):.1f} s, "
            f"prepare {steps.get('prepare', 0):.1f} s, re-time {steps.get('retime', 0):.1f} s)"
        )
        return None

    # ------------------------------------------------------------------ dispatch
    def free(self) -> bool:
        return not self._queued and any(i not in self._busy for i in self.live)

    def busy(self) -> bool:
        return bool(self._busy or self._queued)

    def submit(self, job: Job, done: Done) -> None:
        """Run ``job`` on a free worker; ``drive`` hands its Evaluation to ``done``."""
        slot = next(i for i in self.live if i not in self._busy)
        self._start(slot, job, done)

    def _start(self, slot: int, job: Job, done: Done) -> None:
        self._busy.add(slot)
        if not self.parallel:
            self._run(slot, job, done)  # inline: the sequential search, unchanged
            return
        threading.Thread(target=self._run, args=(slot, job, done), daemon=True, name=f"kb-eval-{slot}").start()

    def _run(self, slot: int, job: Job, done: Done) -> None:
        start = self._now()
        try:
            ev, err = job(self.evaluators[slot]), None
        except BaseException as e:  # noqa: BLE001 - handed to drive(), in the search's thread
            ev, err = None, e
        self._mark(slot, "evaluate", start)
        self._events.put(_Ran(slot, job, done, ev, err))

    def drive(self, dispatch: Callable[[], Optional[str]], wait: str) -> str:
        """Keep every free worker busy: ``dispatch`` submits one job to a free worker
        (returns None to go on, ``wait`` when nothing can be picked until a running one
        finishes, else why the search ends); each finished job's ``done`` gets its worker's
        label (None with one worker) and Evaluation, in this thread. A worker that finishes
        its setup joins at once. Running jobs always finish before this returns."""
        start = self._now()
        ended: Optional[str] = None
        try:
            while True:
                while ended is None and self.free():
                    step = dispatch()
                    if step == wait:
                        break
                    ended = step
                if not self.busy():
                    if ended is not None:
                        return ended
                    continue
                self._next()
        finally:
            self._search_span = (start, self._now())
            if self.parallel:
                self._log(self.summary_line())

    def _next(self) -> None:
        """Block for the next event: a finished job (handed to its ``done``, scaled to the
        primary's clock), or a worker that joined, failed to, or was lost with its job
        queued again. Raises the job's exception when no worker is left for it."""
        from ..evaluate import WorkerLost

        item = self._events.get()
        if isinstance(item, int):
            self._join(item)
            self._after_change()
            return
        self._busy.discard(item.slot)
        if item.err is None:
            assert item.ev is not None
            self._drain_queue()
            item.done(self.labels[item.slot] if self.parallel else None, self._scaled(item.slot, item.ev))
            return
        if not isinstance(item.err, WorkerLost) or not self.parallel:
            raise item.err
        if item.slot in self.live:
            self.live.remove(item.slot)
            self.lost.append(f"{self.labels[item.slot]}: {item.err}")
        self._last_lost = item.err
        self._queued.append((item.job, item.done))  # the job goes to another worker
        self._after_change()

    def _after_change(self) -> None:
        self._drain_queue()
        if self._queued and not self.live and not self._joining:
            assert self._last_lost is not None
            raise self._last_lost  # no worker left for the queued candidates

    def _drain_queue(self) -> None:
        while self._queued:
            slot = next((i for i in self.live if i not in self._busy), None)
            if slot is None:
                return
            job, done = self._queued.pop(0)
            self._start(slot, job, done)

    def _scaled(self, slot: int, ev: Evaluation) -> Evaluation:
        s = self.scale[slot]
        if s == 1.0 or ev.timing is None:
            return ev
        t = ev.timing
        ev.timing = replace(t, median_ms=t.median_ms * s, p20_ms=t.p20_ms * s, p80_ms=t.p80_ms * s)
        return ev

    # ------------------------------------------------------------------ after the search
    def spare(self) -> Optional[Evaluator]:
        """A prepared worker besides the primary with nothing to do (the finalist's memcheck
        runs there while the primary re-measures), or None."""
        if not self.live:
            return None
        primary = self.primary
        return next(
            (self.evaluators[i] for i in self.live[1:] if i not in self._busy and self.evaluators[i] is not primary),
            None,
        )

    def usage(self) -> dict[str, WorkerUsage]:
        """Per worker: evaluations, seconds busy evaluating, share of the search phase busy,
        when it joined (seconds since the pool was made)."""
        span = self._search_span
        out: dict[str, WorkerUsage] = {}
        for label in self.labels:
            evals = [e for e in self.timeline if e.worker == label and e.what == "evaluate"]
            busy = sum(e.end - e.start for e in evals)
            setup = [e for e in self.timeline if e.worker == label and e.what in ("baseline", "retime")]
            out[label] = {
                "evaluations": len(evals),
                "busy_s": round(busy, 3),
                "ready_at_s": max((e.end for e in setup), default=None),
                "busy_share": round(busy / (span[1] - span[0]), 3) if span and span[1] > span[0] else None,
            }
        return out

    def summary_line(self) -> str:
        span = self._search_span
        length = f" of {span[1] - span[0]:.1f} s" if span else ""
        parts = [
            f"{w} {u['evaluations']} evaluations, busy {100 * (u['busy_share'] or 0):.0f}%"
            for w, u in self.usage().items()
        ]
        return f"search phase{length} on {len(self.labels)} workers: " + "; ".join(parts)

    @property
    def worker_restarts(self) -> int:
        return sum(e.worker_restarts for e in self._distinct())

    def _distinct(self) -> list[Evaluator]:
        """Each worker once (lanes share their worker's evaluator)."""
        return list({id(e): e for e in self.evaluators}.values())

    def close(self) -> None:
        self._close_all()
        if self._joining:  # a worker still preparing (a short search, or the primary failed first) may
            for t in list(self._joining.values()):  # have started its judge as it was closed: wait for
                t.join(timeout=30)  # those threads, then close again
            self._close_all()

    def _close_all(self) -> None:
        """Close every worker at once (a graceful judge shutdown may take seconds each)."""
        threads = [
            threading.Thread(target=_close_quietly, args=(ev,), daemon=True, name="kb-close") for ev in self._distinct()
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)


def _close_quietly(ev: Evaluator) -> None:
    try:
        ev.close()
    except Exception:  # noqa: BLE001 - closing is best effort; each worker dies with its group
        pass
