"""The steps of a session's two searches, each a ``dispatch`` (hand one evaluation to a
free worker, or say why the search ends) and a ``complete`` (take a finished one back)
for the session's dispatch loop:

- ``PolicySteps``: the policy picks (pool member, strategy), the generator writes a
  child, a worker evaluates it (virtual loss while it runs); a correct child joins the
  pool and the policy learns from the outcome.
- ``ExhaustiveSteps``: every point of the rules generator's space, in order.
"""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Protocol

from .events import EventPayload, Log
from .executor.base import Evaluator
from .executor.pool import Done, WorkerPool
from .model import Evaluation, Status, Task, Variant
from .session_config import SessionConfig, Usage
from .session_pool import CandidatePool
from .session_records import SessionRecords

if TYPE_CHECKING:  # the search modules load when a search runs (the functions below import them)
    from .generators.base import Generation, Generator
    from .search.base import Candidate, SearchPolicy

WAIT = "wait"  # dispatch(): nothing to pick until a running evaluation finishes
STOPPED = "stopped by request"
_UNREACHABLE_LIMIT = 3  # generator failures in a row that end the search
_IDLE_LIMIT = 50  # generations in a row with nothing new that end the search


class SearchSession(Protocol):
    """What the steps use of a session (session.Session): session.py imports this module,
    so the steps name the members they need rather than the class. Read-only properties,
    so that a plain attribute of a narrower type satisfies them; the steps change what
    these objects hold (usage counts, the pool), never the objects themselves."""

    @property
    def task(self) -> Task: ...
    @property
    def config(self) -> SessionConfig: ...
    @property
    def stop(self) -> threading.Event: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def pool(self) -> CandidatePool: ...
    @property
    def records(self) -> SessionRecords: ...
    @property
    def workers(self) -> WorkerPool: ...
    @property
    def evaluator(self) -> Evaluator: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def emit(self) -> Callable[[EventPayload], object]: ...

    def submit(self, variant: Variant, done: Done) -> None: ...


def _ended(session: SearchSession) -> Optional[str]:
    """Why the search must end before the next evaluation (a stop, the budget), or None."""
    if session.stop.is_set():
        return STOPPED
    return session.usage.exhausted(session.config.budget)


class PolicySteps:
    def __init__(self, session: SearchSession, policy: SearchPolicy, generator: Generator) -> None:
        self.s = session
        self.policy = policy
        self.generator = generator
        self.allowed = set(session.config.strategies or [])
        self.idle = 0  # generations in a row that had nothing new
        self.unreachable = 0  # generator failures in a row (the endpoint could not be reached)

    def offered(self, c: Candidate) -> list[str]:
        names = self.generator.offered(c.variant, self.s.task.kernel)
        return [s for s in names if not self.allowed or s in self.allowed]

    def dispatch(self) -> Optional[str]:
        """Pick, generate and hand one child to a free worker (virtual loss while it
        runs). Returns why the search ends, WAIT when nothing can be picked until a
        running evaluation finishes, or None to go on."""
        from .generators.base import GenContext, GenerationOutcome
        from .search.base import add_pending

        s = self.s
        why = _ended(s)
        if why:
            return why
        pick = self.policy.select(s.pool.members, self.offered, s.rng)
        if pick is None:
            return WAIT if s.workers.busy() else "search space exhausted"
        parent, strategy = pick
        ctx = GenContext(
            kernel=s.task.kernel,
            harness=s.task.harness,
            module_path=s.task.module_path,
            profile=s.pool.profiles.get(parent.id),
            device=s.evaluator.facts,
            rng=s.rng,
        )
        gen = self.generator.generate(parent.variant, strategy, ctx)
        s.usage.tokens += gen.tokens
        s.usage.dollars += gen.cost_usd
        if gen.outcome is GenerationOutcome.FAILED:
            return self._failed(gen)
        self.unreachable = 0
        if gen.outcome is GenerationOutcome.NOTHING:
            self.idle += 1  # the generator had nothing after all; offered() should now exclude it
            return "the generator produced nothing new" if self.idle > _IDLE_LIMIT else None
        self.idle = 0
        s.usage.evaluations += 1
        if gen.outcome is GenerationOutcome.REJECTED or gen.variant is None:
            ev = Evaluation(
                Status.REJECTED,
                gen.message or "the generator's output was unusable",
                interpreted=s.evaluator.interpreted,
                variant_id=gen.variant.id if gen.variant else "",
            )
            self.complete(parent, strategy, gen, None, ev)
            return None
        add_pending(self.policy, parent, strategy)
        s.submit(gen.variant, lambda worker, ev: self.complete(parent, strategy, gen, worker, ev))
        return None

    def _failed(self, gen: Generation) -> Optional[str]:
        """The endpoint could not be reached even after retries: a few in a row end the
        search; one that hangs (every attempt timed out) ends it at once: each try costs a
        full timeout."""
        s = self.s
        if s.stop.is_set():
            return STOPPED
        self.unreachable += 1
        s.emit(Log(level="warning", message=f"generator failed: {gen.message}"))
        if getattr(self.generator, "hung", False):
            s.warnings.append(f"the LLM endpoint does not answer: {gen.message}")
            return f"generator unavailable ({gen.message})"
        if self.unreachable >= _UNREACHABLE_LIMIT:
            s.warnings.append(f"the LLM endpoint failed {self.unreachable} times in a row: {gen.message}")
            return f"generator unavailable ({gen.message})"
        return None

    def complete(
        self, parent: Candidate, strategy: str, gen: Generation, worker: Optional[str], ev: Evaluation
    ) -> None:
        """A pull's evaluation is back: the pool member it started from, the strategy
        applied, what the generator gave."""
        from .generators.base import GenerationOutcome
        from .search.base import Outcome

        s = self.s
        child = None
        if ev.ok and ev.time_ms is not None and gen.outcome is GenerationOutcome.PRODUCED and gen.variant is not None:
            child = s.pool.candidate(gen.variant, ev.time_ms, ev.profile, parent)
            s.pool.add(child)
        # a slower candidate's time still teaches the policy (it is no failure), but it is
        # never pooled: it cannot be a parent or the best
        timed = ev.ok or ev.status == Status.SLOWER
        self.policy.update(parent, strategy, Outcome(timed, parent.time_ms, ev.time_ms if timed else None), child)
        s.records.record(
            parent,
            strategy,
            gen.variant,
            ev,
            gen.message if gen.outcome is not GenerationOutcome.PRODUCED else "",
            worker=worker,
        )


class ExhaustiveSteps:
    def __init__(self, session: SearchSession, space: list[Variant]) -> None:
        self.s = session
        self.todo: Iterator[Variant] = iter(space)

    def dispatch(self) -> Optional[str]:
        why = _ended(self.s)
        if why:
            return why
        variant = next(self.todo, None)
        if variant is None:
            return "search space exhausted"
        self.s.usage.evaluations += 1
        self.s.submit(variant, lambda worker, ev: self.complete(variant, worker, ev))
        return None

    def complete(self, variant: Variant, worker: Optional[str], ev: Evaluation) -> None:
        pool = self.s.pool
        if ev.ok and ev.time_ms is not None:
            pool.add(pool.candidate(variant, ev.time_ms, ev.profile, pool.original))
        self.s.records.record(pool.original, variant.strategy, variant, ev, worker=worker)
