"""A session's workers seen from its search loop: submit a candidate to a free worker,
wait for the next finished one.

Slot 0 is the primary: it sets the baseline, and the final paired re-measurement and
memcheck run on it. The other workers prepare the original themselves (their own
references, on their own GPU) and re-time it once: a candidate timed on worker i is
scaled by (primary's time of the original / worker i's), so the pool compares times as
if measured on the primary GPU. The verdict never depends on that scaling: it comes
from the interleaved re-measurement on one GPU.

With one worker, a submitted evaluation runs at once in the caller's thread: the search
is exactly the sequential loop it always was. With several, each runs in a thread of
its own (the judge is a separate process: the thread only waits on its pipe).

A worker that cannot be restarted is dropped and its candidate handed to another one;
when none is left, its WorkerLost ends the search as with one worker.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import replace
from typing import Any, Callable, Optional

from ..model import Evaluation, Variant

Job = Callable[[Any], Evaluation]  # (evaluator) -> Evaluation; may raise (WorkerLost)


class WorkerPool:
    def __init__(self, evaluators: list[Any], labels: Optional[list[str]] = None) -> None:
        self.evaluators = evaluators
        self.labels = labels or [f"worker {i}" for i in range(len(evaluators))]
        self.scale = [1.0] * len(evaluators)
        self.live = list(range(len(evaluators)))
        self.lost: list[str] = []  # "label: why" of each dropped worker
        self._busy: set[int] = set()
        self._queued: list[tuple[Job, Any]] = []
        self._done: "queue.Queue[tuple[int, Any, Job, Optional[Evaluation], Optional[BaseException]]]" = queue.Queue()
        self._setup: list[threading.Thread] = []
        self._setup_errors: dict[int, str] = {}

    @property
    def parallel(self) -> bool:
        return len(self.evaluators) > 1

    @property
    def primary(self) -> Any:
        """The first live worker (slot 0 unless it was lost)."""
        return self.evaluators[self.live[0] if self.live else 0]

    # ------------------------------------------------------------------ setup of the others
    def begin_others(self) -> None:
        """Start and prepare workers 1.. in the background, while the primary prepares."""
        for i in range(1, len(self.evaluators)):
            t = threading.Thread(target=self._prepare_other, args=(i,), daemon=True, name=f"kb-prepare-{i}")
            t.start()
            self._setup.append(t)

    def _prepare_other(self, i: int) -> None:
        ev = self.evaluators[i]
        try:
            ev.start()
            ev.prepare(time_it=False)
        except Exception as e:  # noqa: BLE001 - this worker is dropped, the others go on
            self._setup_errors[i] = f"{type(e).__name__}: {e}"

    def finish_others(self, original: Variant, primary_ms: float, facts: dict[str, Any]) -> list[str]:
        """Join the background setup, re-time the original on each other worker (in
        parallel) for its scale. Returns warnings for the workers dropped."""
        for t in self._setup:
            t.join()
        self._setup = []
        threads = []
        for i in range(1, len(self.evaluators)):
            if i in self._setup_errors:
                continue
            self.evaluators[i].facts = facts
            t = threading.Thread(target=self._retime, args=(i, original, primary_ms), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        notes = []
        for i, why in sorted(self._setup_errors.items()):
            if i in self.live:
                self.live.remove(i)
                self.lost.append(f"{self.labels[i]}: {why}")
                notes.append(f"{self.labels[i]} could not be prepared and is not used: {why}")
        return notes

    def _retime(self, i: int, original: Variant, primary_ms: float) -> None:
        try:
            ev = self.evaluators[i].evaluate(original, profile_tier=0)
        except Exception as e:  # noqa: BLE001
            self._setup_errors[i] = f"{type(e).__name__}: {e}"
            return
        if not (ev.ok and ev.time_ms):
            self._setup_errors[i] = f"the original failed there ({ev.status.value}: {ev.message})"
            return
        self.scale[i] = primary_ms / ev.time_ms

    # ------------------------------------------------------------------ dispatch
    def free(self) -> bool:
        return not self._queued and any(i not in self._busy for i in self.live)

    def busy(self) -> bool:
        return bool(self._busy or self._queued)

    def submit(self, job: Job, tag: Any) -> None:
        slot = next(i for i in self.live if i not in self._busy)
        self._start(slot, job, tag)

    def _start(self, slot: int, job: Job, tag: Any) -> None:
        self._busy.add(slot)
        if not self.parallel:
            self._run(slot, job, tag)  # inline: the sequential search, unchanged
            return
        threading.Thread(target=self._run, args=(slot, job, tag), daemon=True, name=f"kb-eval-{slot}").start()

    def _run(self, slot: int, job: Job, tag: Any) -> None:
        try:
            self._done.put((slot, tag, job, job(self.evaluators[slot]), None))
        except BaseException as e:  # noqa: BLE001 - handed to wait(), in the search's thread
            self._done.put((slot, tag, job, None, e))

    def wait(self) -> tuple[Any, str, Evaluation]:
        """The next finished evaluation: (tag, worker label, Evaluation scaled to the
        primary's clock). Raises the job's exception when no worker is left for it."""
        from ..evaluate import WorkerLost

        while True:
            slot, tag, job, ev, err = self._done.get()
            self._busy.discard(slot)
            if err is None:
                assert ev is not None
                self._drain_queue()
                return tag, self.labels[slot], self._scaled(slot, ev)
            if not isinstance(err, WorkerLost) or not self.parallel:
                raise err
            if slot in self.live:
                self.live.remove(slot)
                self.lost.append(f"{self.labels[slot]}: {err}")
            if not self.live:
                raise err
            self._queued.append((job, tag))  # the candidate goes to another worker
            self._drain_queue()

    def _drain_queue(self) -> None:
        while self._queued:
            slot = next((i for i in self.live if i not in self._busy), None)
            if slot is None:
                return
            job, tag = self._queued.pop(0)
            self._start(slot, job, tag)

    def _scaled(self, slot: int, ev: Evaluation) -> Evaluation:
        s = self.scale[slot]
        if s == 1.0 or ev.timing is None:
            return ev
        t = ev.timing
        ev.timing = replace(t, median_ms=t.median_ms * s, p20_ms=t.p20_ms * s, p80_ms=t.p80_ms * s)
        return ev

    @property
    def worker_restarts(self) -> int:
        return sum(int(getattr(e, "worker_restarts", 0) or 0) for e in self.evaluators)

    def close(self) -> None:
        self._close_all()
        if self._setup:  # a worker still preparing (the primary failed first) may restart its judge
            for t in self._setup:  # when its pipe closes: wait for those threads, then close again
                t.join(timeout=30)
            self._close_all()

    def _close_all(self) -> None:
        for ev in self.evaluators:
            try:
                ev.close()
            except Exception:  # noqa: BLE001 - closing is best effort; each worker dies with its group
                pass
