"""A KernelBand session: task + budget + generator + search policy -> events -> Result.

Loop: the policy picks (pool member, strategy); the generator writes a child; the
evaluator screens, checks and times it; a correct child joins the pool; the policy
learns from the reward. At the end the fastest member and the original are
re-measured interleaved for a speedup with a 95% confidence interval, and
kernelband/verdict.py says what that interval means (one noise floor; no speed claim
from the interpreter's CPU times).

Faults: a worker that cannot be restarted ends the search, not the session: the Result
is the best verified so far, with a warning. A session's temp dir is its own
(``kernelband-session-<pid>-*``); one left by a killed process is removed by the next
session, and its `running` row in the store is marked `interrupted`.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING, Optional

from .evaluate import SetupError, WorkerLost
from .events import EventEmitter, Finished, Log, Started
from .executor.base import Evaluator, Executor
from .executor.pool import Done, WorkerPool
from .model import FOUND_STATUSES, Evaluation, Result, ResultStatus, Task, Variant
from .options import EXHAUSTIVE, SEARCH_NAMES
from .redact import register_secret, scrub
from .result_builder import ResultBuilder, SearchOutcome
from .session_config import Budget, SessionConfig, Usage  # noqa: F401 - Budget: re-exported
from .session_pool import CandidatePool, Platform
from .session_records import SessionRecords
from .session_search import WAIT, ExhaustiveSteps, PolicySteps
from .session_setup import Preparation
from .session_warm import GeneratorWarmup, warm_imports
from .store import Store
from .trace import mark
from .workdirs import WORKDIR_PREFIX, job_workdir, session_workdir, sweep_stale_workdirs  # noqa: F401 - re-exported

if TYPE_CHECKING:  # the generators load once a session runs (_make_generator imports them)
    from .generators.base import Generator


class Session:
    """One session's loop; its pool (``session_pool``), records (``session_records``),
    preparation (``session_setup``), search steps (``session_search``) and Result
    (``result_builder``) each live in their own module."""

    def __init__(
        self,
        task: Task,
        config: SessionConfig,
        emitter: Optional[EventEmitter] = None,
        store: Optional[Store] = None,
        stop: Optional[threading.Event] = None,
        evaluator: Optional[Evaluator] = None,
        executor: Optional[Executor] = None,  # None: the local one (a worker per visible GPU)
    ) -> None:
        config.budget.validate()
        if config.search not in SEARCH_NAMES:
            raise ValueError(f"unknown search {config.search!r}; known: {', '.join(SEARCH_NAMES)}")
        self.task = task
        self.config = config
        self.emit = (emitter or EventEmitter()).emit
        self.store = store
        self.stop = stop or threading.Event()
        register_secret(config.generator_options.get("api_key"))  # never logged, stored or emitted
        self._workdir: Optional[str] = None
        labels: Optional[list[str]] = None
        if evaluator is None:
            self._workdir = session_workdir()
            evaluators, labels = self._evaluators(executor, self._workdir)
        else:
            evaluators = [evaluator]
        self.evaluator = evaluators[0]  # the primary worker: baseline, final re-measurement
        self.workers = WorkerPool(evaluators, labels, emit=self.emit)
        self.id = uuid.uuid4().hex[:12]
        self.rng = random.Random(config.seed)
        self.usage = Usage()
        self.warnings: list[str] = []
        self.platform = Platform()
        self.pool = CandidatePool(task, config, store, self.platform, self._warn_once)
        self.records = SessionRecords(
            self.id, task, config, store, self.pool, self.usage, self.emit, lambda: self.evaluator.interpreted
        )

    def _evaluators(self, executor: Optional[Executor], workdir: str) -> tuple[list[Evaluator], list[str]]:
        """One evaluator per slot of the executor (the local one by default); each
        worker but the primary gets a subdirectory of the session's workdir."""
        from .executor import make_executor

        executor = executor or make_executor()
        slots = executor.slots(self.task.device)
        evs = [
            executor.evaluator(
                slot, self.task, workdir if i == 0 else os.path.join(workdir, f"w{i}"), self.config.profile_tier
            )
            for i, slot in enumerate(slots)
        ]
        return evs, [slot.label for slot in slots]

    def _warn_once(self, note: str) -> None:
        """A Result warning and a log event, once per distinct note."""
        if note not in self.warnings:
            self.warnings.append(note)
            self.emit(Log(level="warning", message=note))

    def _evaluate(
        self,
        variant: Variant,
        profile_tier: Optional[int] = None,
        evaluator: Optional[Evaluator] = None,
        search: bool = False,
    ) -> Evaluation:
        """Evaluator.evaluate, with "the worker cannot be restarted" turned into WorkerLost
        (the search stops; the session still ends with a Result)."""
        mark("session.evaluate", variant=variant.id)
        try:
            ev = (evaluator or self.evaluator).evaluate(variant, profile_tier=profile_tier, search=search)
            mark("session.verdict", variant=variant.id, status=str(ev.status))
            for note in ev.notes:  # what the judge learnt of the original after prepare
                self._warn_once(f"note: {note}")
            return ev
        except SetupError as e:
            raise WorkerLost(str(e)) from e

    def submit(self, variant: Variant, done: Done) -> None:
        """Evaluate ``variant`` on a free worker (in flight until ``done`` takes its Evaluation)."""

        def finished(worker: Optional[str], ev: Evaluation) -> None:
            self.usage.in_flight -= 1
            done(worker, ev)

        self.usage.in_flight += 1
        self.workers.submit(lambda evaluator: self._evaluate(variant, evaluator=evaluator, search=True), finished)

    # ------------------------------------------------------------------ the search
    def _warm_start(self) -> None:
        if not (self.store and self.config.warm_start and self.config.search != EXHAUSTIVE):
            return
        allowed = set(self.config.strategies or [])
        # only variants this session's strategies could have made (a stored access_layout
        # winner is no answer to "tiling only")
        stored = [
            v
            for v in self.store.variants(self.task.source_hash, self.task.kernel, self.platform.gpu)
            if not allowed or v["strategy"] in allowed
        ]
        if not stored or self.usage.exhausted(self.config.budget):
            return
        prev, original = stored[0], self.pool.original
        variant = Variant(
            prev["source"],
            parent=original.id,
            strategy=prev["strategy"],
            generator="stored",
            description="best variant found by an earlier session",
        )
        # the re-check is not a search pull: it does not take an evaluation of the budget
        ev = self._evaluate(variant)
        if ev.ok and ev.time_ms is not None:
            self.pool.add(self.pool.candidate(variant, ev.time_ms, ev.profile, original))
        self.records.record(original, prev["strategy"], variant, ev, "re-checked from an earlier session")

    def _search(self, generator: Generator) -> str:
        from .search import registry
        from .search.compat import CompatibilityModels

        # the bandit config's compat_* constants apply to the stored models too
        compat = CompatibilityModels.load(self.store, self.config.bandit) if self.store else None
        policy = registry.make_policy(self.config.search, self.config.bandit, compat)
        try:  # keep every free worker busy; with one worker, the plain select-generate-evaluate-update loop
            return self.workers.drive(PolicySteps(self, policy, generator).dispatch, WAIT)
        finally:
            if compat is not None and self.store is not None:
                compat.save(self.store)

    def _exhaustive(self, generator: Generator) -> str:
        space = generator.enumerate_space(self.pool.original.variant, self.task.kernel)
        self.emit(Log(level="info", message=f"exhaustive search over {len(space)} points of the rules space"))
        return self.workers.drive(ExhaustiveSteps(self, space).dispatch, WAIT)

    def _finish(self, stop_reason: str) -> Result:
        original, best = self.pool.original, self.pool.best()
        outcome = SearchOutcome(
            session_id=self.id,
            stop_reason=stop_reason,
            original=original,
            best=best,
            strategy_path=self.pool.strategy_path(best),
            evaluations=self.usage.evaluations,
            seconds=self.usage.seconds,
            tokens=self.usage.tokens,
            dollars=self.usage.dollars,
            history=self.records.history,
            warnings=self.warnings,
            gpu=self.platform.gpu,
            triton_version=self.platform.triton_version,
            baseline_bottleneck=(p.diagnosis.bottleneck or None)
            if (p := self.pool.profiles.get(original.id))
            else None,
            overshoot=self.usage.overshoot(self.config.budget),
        )
        log = lambda message: self.emit(Log(level="info", message=message))  # noqa: E731
        return ResultBuilder(
            self.task, self.config, self.evaluator, self._warn_once, log, spare=self.workers.spare()
        ).build(outcome)

    # ------------------------------------------------------------------ run
    def _make_generator(self) -> Generator:
        from .generators import make_generator

        options = dict(self.config.generator_options)
        if self.evaluator.interpreted:
            options.setdefault("autotune", False)  # the interpreter cannot benchmark autotune configs
        options["stop"] = self.stop  # Ctrl-C ends an LLM request or its backoff at once
        return make_generator(self.config.generator, seed=self.config.seed, **options)

    def run(self) -> Result:
        self.emit(
            Started(
                kernel=self.task.kernel,
                file=self.task.module_path,
                source_hash=self.task.source_hash,
                budget=asdict(self.config.budget),
                generator=self.config.generator,
                search=self.config.search,
                session_id=self.id,
            )
        )
        self._clean_leftovers()
        warm_imports()
        warmup: list[GeneratorWarmup] = []  # built once the worker says whether it interprets
        original = Variant(self.task.source, generator="original")
        try:
            Preparation(
                self.task,
                self.config,
                self.evaluator,
                self.workers,
                self.store,
                self.pool,
                self.emit,
                self._warn_once,
                self.warnings,
                on_started=lambda: warmup.append(GeneratorWarmup(self._make_generator, original, self.task.kernel)),
            ).run()
            generator = warmup[0].result() if warmup else self._make_generator()
            if self.store:
                self.store.start_session(
                    self.id,
                    self.task.module_path,
                    self.task.kernel,
                    self.task.source_hash,
                    self.platform.gpu,
                    self.platform.triton_version,
                    self.config.to_dict(),
                )
            result = self._result(self._run_search(generator))
            if self.store:
                for c in self.pool.members[1:]:
                    self.store.put_variant(
                        self.task.source_hash,
                        self.task.kernel,
                        self.platform.gpu,
                        c.id,
                        c.variant.source,
                        c.time_ms,
                        c.variant.strategy,
                    )
                self.store.finish_session(self.id, result.status.value, result.to_dict(history=False))
            self.emit(Finished(result))
            return result
        finally:
            self.workers.close()  # every worker (the primary included)
            if self._workdir:
                shutil.rmtree(self._workdir, ignore_errors=True)

    def _result(self, stop_reason: str) -> Result:
        """The Result as the CLI prints it, the store keeps it and the editor gets it: a
        stop by request said so, no secrets, capped."""
        result = self._finish(stop_reason)
        if self.stop.is_set():
            result.status = result.status if result.status in FOUND_STATUSES else ResultStatus.CANCELLED
            result.stop_reason = "stopped by request"
        return Result.from_dict(scrub(result.to_dict()))

    def _run_search(self, generator: Generator) -> str:
        """The search, ended early (not aborted) when the worker cannot be restarted."""
        try:
            self._warm_start()
            return self._exhaustive(generator) if self.config.search == EXHAUSTIVE else self._search(generator)
        except WorkerLost as e:
            self._warn_once(
                f"{e}: the search stopped after {self.usage.evaluations} evaluations; the result is the "
                "best verified so far"
            )
            return f"evaluation worker lost ({e})"
        finally:
            if self.workers.parallel:
                if self.workers.lost:
                    self._warn_once(f"workers lost during the search: {'; '.join(self.workers.lost)}")
                self.evaluator = self.workers.primary  # a live worker re-measures the winner

    def _clean_leftovers(self) -> None:
        """What sessions killed before their cleanup left: `running` rows and temp dirs."""
        if self.store:
            stale = self.store.mark_interrupted()
            if stale:
                self.emit(Log(level="info", message=f"{len(stale)} earlier session(s) stopped before finishing"))
        sweep_stale_workdirs()


def run_session(
    task: Task,
    config: SessionConfig,
    emitter: Optional[EventEmitter] = None,
    store: Optional[Store] = None,
    stop: Optional[threading.Event] = None,
    executor: Optional[Executor] = None,
) -> Result:
    """Run one session to its end (budget, exhaustion or stop) and return its Result;
    ``executor`` says where its workers run (None: the local one, a worker per GPU)."""
    return Session(task, config, emitter, store, stop, executor=executor).run()
