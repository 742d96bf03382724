"""A session's records of its evaluations: each one a history entry, kept for the
Result, sent as ``candidate`` and ``progress`` events, and written to the store (its
history row and its evaluation row, keyed by the variant's source and the harness)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from .events import Candidate, EventPayload, Progress
from .harness import harness_hash
from .model import Evaluation, HistoryEntry, Task, Variant, sha256_text
from .session_config import SessionConfig, Usage
from .session_pool import CandidatePool
from .store import Store

if TYPE_CHECKING:  # events.Candidate is the event; this is the pool member
    from .search.base import Candidate as PoolMember


class SessionRecords:
    def __init__(
        self,
        session_id: str,
        task: Task,
        config: SessionConfig,
        store: Optional[Store],
        pool: CandidatePool,
        usage: Usage,
        emit: Callable[[EventPayload], object],
        interpreted: Callable[[], bool],
    ) -> None:
        self.session_id = session_id
        self.task = task
        self.config = config
        self.store = store
        self.pool = pool
        self.usage = usage
        self.emit = emit
        self.interpreted = interpreted  # the evaluator's: ratios of CPU-interpreter times are no speed claim
        self.history: list[HistoryEntry] = []

    def record(
        self,
        parent: Optional[PoolMember],
        strategy: Optional[str],
        variant: Optional[Variant],
        ev: Evaluation,
        description: str = "",
        worker: Optional[str] = None,
    ) -> None:
        entry = self._entry(parent, strategy, variant, ev, description)
        if worker is not None:  # several workers: which one evaluated it
            entry["worker"] = worker
        self.history.append(entry)
        # speed_claim false: the ratios are CPU-interpreter times, never shown as a GPU speedup
        speed_claim = not self.interpreted()
        e = entry
        self.emit(
            Candidate(
                e["index"],
                e["variant_id"],
                e["parent"],
                e["strategy"],
                e["generator"],
                e["status"],
                e["time_ms"],
                e["speedup"],
                e["message"],
                e["description"],
                e["phases"],
                worker,
                speed_claim,
            )
        )
        self.emit(
            Progress(
                done=self.usage.done,
                total=self.config.budget.evaluations,
                best_ms=entry["best_ms"],
                best_speedup=entry["best_speedup_so_far"],
                message=f"{strategy or 'candidate'}: {ev.status.value}",
                speed_claim=speed_claim,
            )
        )
        if self.store:
            self._store(self.store, entry, strategy, variant, ev)

    def _entry(
        self,
        parent: Optional[PoolMember],
        strategy: Optional[str],
        variant: Optional[Variant],
        ev: Evaluation,
        description: str,
    ) -> HistoryEntry:
        base_ms = self.pool.original.time_ms
        best = self.pool.best()
        return {
            "index": self.usage.done,
            "t": round(self.usage.seconds, 3),
            "variant_id": variant.id if variant else None,
            "parent": parent.id if parent is not None else None,
            "strategy": strategy,
            "generator": variant.generator if variant else self.config.generator,
            "status": ev.status.value,
            "time_ms": ev.time_ms,
            "speedup": (base_ms / ev.time_ms) if ev.ok and ev.time_ms else None,
            "message": ev.message,
            "description": description or (variant.description if variant else ""),
            "best_ms": best.time_ms,
            "best_speedup_so_far": base_ms / best.time_ms,
            "phases": ev.phases,
        }

    def _store(
        self, store: Store, entry: HistoryEntry, strategy: Optional[str], variant: Optional[Variant], ev: Evaluation
    ) -> None:
        platform = self.pool.platform
        store.add_history(self.session_id, len(self.history) - 1, entry)
        store.add_evaluation(
            session_id=self.session_id,
            source_hash=sha256_text(variant.source) if variant else "",
            harness_hash=harness_hash(self.task),
            gpu=platform.gpu,
            triton_version=platform.triton_version,
            kernel=self.task.kernel,
            variant_id=variant.id if variant else "",
            strategy=strategy,
            evaluation=ev.to_dict(),
        )
