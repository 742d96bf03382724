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

import math
import os
import random
import shutil
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from .evaluate import Evaluator, SetupError, WorkerLost  # noqa: F401 - WorkerLost: re-exported
from .executor.pool import WorkerPool
from .worker.client import WorkerError
from .events import EventEmitter
from .options import DEFAULT_LLM_TIMEOUT_S, EXHAUSTIVE, SEARCH_NAMES  # noqa: F401 - re-exported
from .model import Evaluation, Result, Status, Task, Variant, sha256_text
from .redact import register_secret, scrub
from .store import Store
from .result_builder import ResultBuilder, SearchOutcome, unified_diff  # noqa: F401 - unified_diff: re-exported
from .verdict import DEFAULT_MIN_SPEEDUP, IMPROVED, VERIFIED_CORRECT

WORKDIR_PREFIX = "kernelband-session-"


_WAIT = "wait"  # dispatch(): nothing to pick until a running evaluation finishes



def session_workdir() -> str:
    """A private temp dir named after this process, so a later session can tell a dead
    session's leftovers from a live one's."""
    return tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")


def sweep_stale_workdirs(root: Optional[str] = None) -> list[str]:
    """Remove session temp dirs whose process is gone (a session killed by SIGKILL or a
    crash never ran its cleanup). Returns the paths removed."""
    from .store import _pid_alive

    removed = []
    base = Path(root or tempfile.gettempdir())
    for d in base.glob(f"{WORKDIR_PREFIX}*"):
        pid_text = d.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        try:
            if d.is_dir() and d.stat().st_uid == os.getuid():
                shutil.rmtree(d, ignore_errors=True)
                removed.append(str(d))
        except OSError:
            continue
    return removed


@contextmanager
def job_workdir() -> Iterator[str]:
    """A session-style temp dir for a one-off job (check, profile): swept when this
    process dies without cleaning up, removed when the job ends."""
    sweep_stale_workdirs()
    path = session_workdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Budget:
    """Any combination; None = unlimited. At least one must be set."""

    evaluations: Optional[int] = 16
    seconds: Optional[float] = None
    tokens: Optional[int] = None
    dollars: Optional[float] = None

    def validate(self) -> None:
        if all(v is None for v in (self.evaluations, self.seconds, self.tokens, self.dollars)):
            raise ValueError("a session needs a budget: evaluations, seconds, tokens or dollars above 0 "
                             "(0 means no limit, so they cannot all be 0)")
        for name in ("evaluations", "seconds", "tokens", "dollars"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise ValueError(f"budget {name} must be positive, got {v}")


@dataclass
class Usage:
    evaluations: int = 0
    tokens: int = 0
    dollars: float = 0.0
    started: float = field(default_factory=time.monotonic)
    in_flight: int = 0  # counted in evaluations (the budget), not finished yet (several workers)

    @property
    def done(self) -> int:
        return self.evaluations - self.in_flight

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def exhausted(self, b: Budget) -> Optional[str]:
        if b.evaluations is not None and self.evaluations >= b.evaluations:
            return f"evaluation budget reached ({self.evaluations})"
        if b.seconds is not None and self.seconds >= b.seconds:
            return f"time budget reached ({self.seconds:.0f} s)"
        if b.tokens is not None and self.tokens >= b.tokens:
            return f"token budget reached ({self.tokens} of {b.tokens})"
        if b.dollars is not None and self.dollars >= b.dollars:
            return f"dollar budget reached (${self.dollars:.4f} of ${b.dollars:.4f})"
        return None

    def overshoot(self, b: Budget) -> Optional[str]:
        """Budgets are checked before each LLM request, whose size is only known after it:
        the last request can go past a token or dollar budget. Say so rather than hide it."""
        over = []
        if b.tokens is not None and self.tokens > b.tokens:
            over.append(f"{self.tokens} of {b.tokens} tokens")
        if b.dollars is not None and self.dollars > b.dollars:
            over.append(f"${self.dollars:.4f} of ${b.dollars:.4f}")
        if not over:
            return None
        return (f"the last LLM request went past the budget ({', '.join(over)}): budgets are checked before "
                "each request and a reply's size is only known after it")


@dataclass
class SessionConfig:
    search: str = "kernelband"
    generator: str = "rules"
    budget: Budget = field(default_factory=Budget)
    seed: int = 0
    bandit: Any = None  # search.config.BanditConfig; None = defaults for the search
    generator_options: dict[str, Any] = field(default_factory=dict)  # model, base_url, temperature...
    strategies: Optional[list[str]] = None  # restrict to these; None = all
    profile_tier: int = 2  # profile each correct candidate up to this tier (features for the bandit)
    paired_rounds: int = 10
    min_speedup: float = DEFAULT_MIN_SPEEDUP  # "improved" needs the CI's lower bound above this (kernelband/verdict.py)
    cpu_tuning: bool = False  # under the interpreter, let CPU times decide "improved" (and --apply) anyway
    warm_start: bool = True  # seed the pool with the best variant stored by earlier sessions
    allow_weak_harness: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["bandit"] = asdict(self.bandit) if self.bandit is not None and hasattr(self.bandit, "__dataclass_fields__") else None
        return d


class Session:
    def __init__(
        self,
        task: Task,
        config: SessionConfig,
        emitter: Optional[EventEmitter] = None,
        store: Optional[Store] = None,
        stop: Optional[threading.Event] = None,
        evaluator: Optional[Evaluator] = None,
        executor: Any = None,  # executor.Executor; None: the local one (a worker per visible GPU)
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
        evaluators, labels = [evaluator], None
        if evaluator is None:
            self._workdir = session_workdir()
            evaluators, labels = self._evaluators(executor, self._workdir)
        self.evaluator = evaluators[0]  # the primary worker: baseline, final re-measurement
        self.workers = WorkerPool(evaluators, labels, emit=self.emit)
        self.id = uuid.uuid4().hex[:12]
        self.rng = random.Random(config.seed)
        self.usage = Usage()
        self.history: list[dict[str, Any]] = []
        self.pool: list[Any] = []  # search.base.Candidate
        self.profiles: dict[str, dict[str, Any]] = {}  # candidate id -> its profile
        self.by_id: dict[str, Any] = {}
        self.gpu = ""
        self.triton_version = ""
        self.warnings: list[str] = []
        self._counters_off: Optional[str] = None  # why tier 3 was given up for this session

    def _evaluators(self, executor: Any, workdir: str) -> tuple[list[Any], list[str]]:
        """One evaluator per slot of the executor (the local one by default); each
        worker but the primary gets a subdirectory of the session's workdir."""
        from .executor import make_executor

        executor = executor or make_executor()
        slots = executor.slots(self.task.device)
        evs = [executor.evaluator(slot, self.task, workdir if i == 0 else os.path.join(workdir, f"w{i}"),
                                  self.config.profile_tier) for i, slot in enumerate(slots)]
        return evs, [slot.label for slot in slots]

    # ------------------------------------------------------------------ helpers
    def _candidate(self, variant: Variant, time_ms: float, profile: Optional[dict[str, Any]], parent: Any) -> Any:
        from .search.base import Candidate

        if profile and self.config.profile_tier >= 3:
            profile = self._with_counters(variant, profile)
        prof = profile or {}
        if profile:
            self.profiles[variant.id] = profile  # the generator's prompt shows the parent's profile
        rv = (prof.get("runtime_vectors") or {}).get(self._feature_set()) or prof.get("runtime_vector") \
            or [math.log(max(time_ms, 1e-9))]
        return Candidate(
            id=variant.id,
            variant=variant,
            time_ms=time_ms,
            phi=prof.get("phi"),
            runtime_vector=[float(x) for x in rv],
            saturation={k: float(v) for k, v in (prof.get("saturation") or {}).items() if v is not None},
            parent_id=parent.id if parent is not None else None,
            depth=(parent.depth + 1) if parent is not None else 0,
        )

    def _feature_set(self) -> str:
        """The clustering runtime vector the policy's config resolves to: feature_set when
        set, else the one of the search's variant (make_policy picks it from the name)."""
        from .search.config import BanditConfig

        variant = "v2" if self.config.search == "kernelband-v2" else "v1"
        return (self.config.bandit or BanditConfig()).with_variant(variant).resolved().feature_set

    def _with_counters(self, variant: Variant, profile: dict[str, Any]) -> dict[str, Any]:
        """Tier 3 runs Nsight Compute around a fresh process, outside the worker; it
        degrades to tiers 1-2 with a note when ncu or counter access is missing."""
        from dataclasses import replace

        from .profile.assemble import attach_counters
        from .worker.counters import add_counters, lasting_counter_failure

        if self._counters_off:  # ncu cannot work here: do not re-run it for every candidate
            return attach_counters(profile, {"ok": False, "reason": self._counters_off})
        try:
            profile = add_counters(profile, replace(self.task, source=variant.source), store=self.store, gpu=self.gpu,
                                   triton_version=self.triton_version)
        except Exception as e:  # noqa: BLE001 - counters are optional, never a session failure
            self._warn_once(f"counters unavailable: {type(e).__name__}: {e}")
            return profile
        reason = lasting_counter_failure(profile)
        if reason:
            self._counters_off = reason
            self._warn_once(f"counters unavailable: {reason}; carrying on with tiers 1-2 for the rest of the session")
        return profile

    def _warn_once(self, note: str) -> None:
        """A Result warning and a log event, once per distinct note."""
        if note not in self.warnings:
            self.warnings.append(note)
            self.emit("log", level="warning", message=note)

    def _add(self, cand: Any) -> None:
        self.pool.append(cand)
        self.by_id[cand.id] = cand

    def _best(self) -> Any:
        return min(self.pool, key=lambda c: c.time_ms)

    def _strategy_path(self, cand: Any) -> list[str]:
        path: list[str] = []
        while cand is not None and cand.parent_id is not None:
            path.append(cand.variant.strategy or "?")
            cand = self.by_id.get(cand.parent_id)
        return list(reversed(path))

    def _record(self, parent: Any, strategy: Optional[str], variant: Optional[Variant], ev: Evaluation,
                description: str = "", worker: Optional[str] = None) -> None:
        base_ms = self.pool[0].time_ms
        speedup = (base_ms / ev.time_ms) if ev.ok and ev.time_ms else None
        best = self._best()
        entry = {
            "index": self.usage.done,
            "t": round(self.usage.seconds, 3),
            "variant_id": variant.id if variant else None,
            "parent": parent.id if parent is not None else None,
            "strategy": strategy,
            "generator": variant.generator if variant else self.config.generator,
            "status": ev.status.value,
            "time_ms": ev.time_ms,
            "speedup": speedup,
            "message": ev.message,
            "description": description or (variant.description if variant else ""),
            "best_ms": best.time_ms,
            "best_speedup_so_far": base_ms / best.time_ms,
            "phases": ev.phases,
        }
        if worker is not None:  # several workers: which one evaluated it
            entry["worker"] = worker
        self.history.append(entry)
        # speed_claim false: the ratios are CPU-interpreter times, never shown as a GPU speedup
        self.emit("candidate", **{k: entry[k] for k in ("index", "variant_id", "parent", "strategy", "generator", "status",
                                                         "time_ms", "speedup", "message", "description",
                                                         "phases")},
                  **({"worker": worker} if worker is not None else {}), speed_claim=not self.evaluator.interpreted)
        total = self.config.budget.evaluations
        self.emit("progress", done=self.usage.done, total=total, best_ms=best.time_ms,
                  best_speedup=entry["best_speedup_so_far"], message=f"{strategy or 'candidate'}: {ev.status.value}",
                  speed_claim=not self.evaluator.interpreted)
        if self.store:
            self.store.add_history(self.id, len(self.history) - 1, entry)
            self.store.add_evaluation(
                session_id=self.id, source_hash=sha256_text(variant.source) if variant else "", harness_hash=self._harness_hash(),
                gpu=self.gpu, triton_version=self.triton_version, kernel=self.task.kernel,
                variant_id=variant.id if variant else "", strategy=strategy, evaluation=ev.to_dict(),
            )

    def _harness_hash(self) -> str:
        from .harness import harness_hash

        return harness_hash(self.task)

    # ------------------------------------------------------------------ phases
    def _setup(self) -> None:
        self.workers.begin_others()  # the other workers prepare in the background
        t0 = time.perf_counter()
        info = self.evaluator.start()
        self.setup_s = {"worker_start": round(time.perf_counter() - t0, 3)}
        self.gpu, self.triton_version = info.device_name, info.triton_version
        if not info.interpreted:
            facts = self.store.get_device_facts(self.gpu, self.triton_version) if self.store else None
            if facts is None:
                self.emit("log", level="info", message="measuring device peaks (once per device)...")
                facts = self.evaluator.device_facts()
                if facts and self.store:
                    self.store.put_device_facts(self.gpu, self.triton_version, facts)
            self.evaluator.facts = facts or {}
        t1 = time.perf_counter()
        self.setup_s["device_facts"] = round(t1 - t0 - self.setup_s["worker_start"], 3)
        base = self.evaluator.prepare()
        self.setup_s["prepare"] = round(time.perf_counter() - t1, 3)
        self.setup_s.update({f"prepare.{k}": round(v, 3) for k, v in base.phases.items()})
        if base.message:
            self.warnings.append(base.message)
        if base.weak_harness and not self.config.allow_weak_harness:
            self._emit_baseline(base, base.timing.median_ms if base.timing else None)
            raise SetupError(f"weak harness: {base.weak_reason} (it could not tell a broken kernel from the real one; "
                             "fix the harness)")
        if base.weak_harness:
            self.warnings.append(f"weak harness: {base.weak_reason}")
        assert base.timing is not None
        original = Variant(self.task.source, generator="original", description="the original kernel")
        t2 = time.perf_counter()
        time_ms = self._warm_baseline_ms(original, base.timing.median_ms)
        self.setup_s["retime"] = round(time.perf_counter() - t2, 3)
        self._emit_baseline(base, time_ms)
        self._add(self._candidate(original, time_ms, base.profile, None))
        if self.workers.parallel:  # the others re-time the original on their GPU: their scale
            for note in self.workers.finish_others(original, time_ms, self.evaluator.facts):
                self._warn_once(note)
        if self.store:
            key_profile = base.profile
            if key_profile:
                from .store import ProfileKey

                self.store.put_profile(ProfileKey(self.task.source_hash, self._harness_hash(), self.gpu,
                                                  self.triton_version, self.task.kernel), key_profile,
                                       file=self.task.module_path)

    def _emit_baseline(self, base: Any, time_ms: Optional[float]) -> None:
        self.emit("baseline", time_ms=time_ms, clock=base.timing.clock if base.timing else None,
                  interpreted=base.interpreted, speed_claim=not base.interpreted, device=base.device_name,
                  deterministic=base.deterministic, weak_harness=base.weak_harness,
                  message=base.weak_reason or base.message,
                  prepare_ms=base.timing.median_ms if base.timing else None,
                  setup_s=dict(getattr(self, "setup_s", {})))

    def _warm_baseline_ms(self, original: Variant, prepare_ms: float) -> float:
        """The original timed exactly as candidates are (same request, warm worker), so
        per-candidate ratios compare like with like: prepare's first timing ran cold and
        made progress lines overstate speedups (32.81x in the search, 7.51x verified)."""
        try:
            return self.evaluator.retime_original().median_ms
        except SetupError as e:
            raise SetupError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - WorkerError or the judge's refusal: fall back, say so
            self._warn_once(f"the original could not be re-timed like a candidate ({e}); "
                            "search-time ratios use its first timing")
            return prepare_ms

    def _evaluate(self, variant: Variant, profile_tier: Optional[int] = None, evaluator: Any = None) -> Evaluation:
        """Evaluator.evaluate, with "the worker cannot be restarted" turned into WorkerLost
        (the search stops; the session still ends with a Result)."""
        try:
            return (evaluator or self.evaluator).evaluate(variant, profile_tier=profile_tier)
        except SetupError as e:
            raise WorkerLost(str(e)) from e

    def _warm_start(self) -> None:
        if not (self.store and self.config.warm_start and self.config.search != EXHAUSTIVE):
            return
        allowed = set(self.config.strategies or [])
        # only variants this session's strategies could have made (a stored access_layout
        # winner is no answer to "tiling only")
        stored = [v for v in self.store.variants(self.task.source_hash, self.task.kernel, self.gpu)
                  if not allowed or v["strategy"] in allowed]
        if not stored or self.usage.exhausted(self.config.budget):
            return
        prev = stored[0]
        variant = Variant(prev["source"], parent=self.pool[0].id, strategy=prev["strategy"], generator="stored",
                          description="best variant found by an earlier session")
        # the re-check is not a search pull: it does not take an evaluation of the budget
        ev = self._evaluate(variant)
        if ev.ok and ev.time_ms is not None:
            self._add(self._candidate(variant, ev.time_ms, ev.profile, self.pool[0]))
        self._record(self.pool[0], prev["strategy"], variant, ev, "re-checked from an earlier session")

    def _search(self, generator: Any) -> str:
        from .generators.base import GenContext
        from .search.base import Outcome, add_pending
        from .search.registry import make_policy
        from .search.compat import CompatibilityModels

        # the bandit config's compat_* constants apply to the stored models too
        compat = CompatibilityModels.load(self.store, self.config.bandit) if self.store else None
        policy = make_policy(self.config.search, self.config.bandit, compat)
        allowed = set(self.config.strategies or [])

        def offered(c: Any) -> list[str]:
            names = generator.offered(c.variant, self.task.kernel)
            return [s for s in names if not allowed or s in allowed]

        reason = "search space exhausted"
        counts = {"idle": 0, "unreachable": 0}

        def dispatch() -> Optional[str]:
            """Pick, generate and hand one child to a free worker (virtual loss while it
            runs). Returns why the search ends, _WAIT when nothing can be picked until a
            running evaluation finishes, or None to go on."""
            if self.stop.is_set():
                return "stopped by request"
            why = self.usage.exhausted(self.config.budget)
            if why:
                return why
            pick = policy.select(self.pool, offered, self.rng)
            if pick is None:
                return _WAIT if self.workers.busy() else reason
            parent, strategy = pick
            ctx = GenContext(kernel=self.task.kernel, harness=self.task.harness, module_path=self.task.module_path,
                             profile=self.profiles.get(parent.id), device=self.evaluator.facts or None, rng=self.rng)
            gen = generator.generate(parent.variant, strategy, ctx)
            self.usage.tokens += gen.tokens
            self.usage.dollars += gen.cost_usd
            if getattr(gen, "failed", False):
                if self.stop.is_set():
                    return "stopped by request"
                # the endpoint could not be reached even after retries: a few in a row end the search;
                # one that hangs (every attempt timed out) ends it at once: each try costs a full timeout
                counts["unreachable"] += 1
                self.emit("log", level="warning", message=f"generator failed: {gen.message}")
                if getattr(generator, "hung", False):
                    self.warnings.append(f"the LLM endpoint does not answer: {gen.message}")
                    return f"generator unavailable ({gen.message})"
                if counts["unreachable"] >= 3:
                    self.warnings.append(f"the LLM endpoint failed {counts['unreachable']} times in a row: {gen.message}")
                    return f"generator unavailable ({gen.message})"
                return None
            counts["unreachable"] = 0
            if gen.variant is None and not gen.rejected:
                counts["idle"] += 1  # the generator had nothing after all; offered() should now exclude it
                return "the generator produced nothing new" if counts["idle"] > 50 else None
            counts["idle"] = 0
            self.usage.evaluations += 1
            if gen.rejected or gen.variant is None:
                ev = Evaluation(Status.REJECTED, gen.message or "the generator's output was unusable",
                                interpreted=self.evaluator.interpreted,
                                variant_id=gen.variant.id if gen.variant else "")
                complete((parent, strategy, gen), None, ev)
                return None
            self.usage.in_flight += 1
            add_pending(policy, parent, strategy)
            variant = gen.variant
            self.workers.submit(lambda evaluator: self._evaluate(variant, evaluator=evaluator), (parent, strategy, gen))
            return None

        def complete(tag: Any, worker: Optional[str], ev: Evaluation) -> None:
            parent, strategy, gen = tag
            child = None
            if ev.ok and ev.time_ms is not None and gen.variant is not None and not gen.rejected:
                child = self._candidate(gen.variant, ev.time_ms, ev.profile, parent)
                self._add(child)
            policy.update(parent, strategy, Outcome(ev.ok, parent.time_ms, ev.time_ms if ev.ok else None), child)
            self._record(parent, strategy, gen.variant, ev, gen.message if (gen.variant is None or gen.rejected) else "",
                         worker=worker)

        try:
            return self._dispatch_loop(dispatch, complete)
        finally:
            if compat is not None and self.store is not None:
                compat.save(self.store)

    def _exhaustive(self, generator: Any) -> str:
        space = generator.enumerate_space(self.pool[0].variant, self.task.kernel)
        self.emit("log", level="info", message=f"exhaustive search over {len(space)} points of the rules space")
        todo = iter(space)

        def dispatch() -> Optional[str]:
            if self.stop.is_set():
                return "stopped by request"
            why = self.usage.exhausted(self.config.budget)
            if why:
                return why
            variant = next(todo, None)
            if variant is None:
                return "search space exhausted"
            self.usage.evaluations += 1
            self.usage.in_flight += 1
            self.workers.submit(lambda evaluator: self._evaluate(variant, evaluator=evaluator), variant)
            return None

        def complete(variant: Any, worker: Optional[str], ev: Evaluation) -> None:
            if ev.ok and ev.time_ms is not None:
                self._add(self._candidate(variant, ev.time_ms, ev.profile, self.pool[0]))
            self._record(self.pool[0], variant.strategy, variant, ev, worker=worker)

        return self._dispatch_loop(dispatch, complete)

    def _dispatch_loop(self, dispatch: Callable[[], Optional[str]], complete: Callable[[Any, Optional[str], Evaluation], None]) -> str:
        """Keep every free worker busy (WorkerPool.drive): ``dispatch`` hands one evaluation
        to a free worker (or says why the search ends); ``complete`` takes each finished
        one. With one worker this is the plain select-generate-evaluate-update loop."""
        def done(tag: Any, worker: Optional[str], ev: Evaluation) -> None:
            self.usage.in_flight -= 1
            complete(tag, worker, ev)

        return self.workers.drive(dispatch, done, _WAIT)

    def _finish(self, stop_reason: str) -> Result:
        original, best = self.pool[0], self._best()
        outcome = SearchOutcome(
            session_id=self.id, stop_reason=stop_reason, original=original, best=best,
            strategy_path=self._strategy_path(best), evaluations=self.usage.evaluations, seconds=self.usage.seconds,
            tokens=self.usage.tokens, dollars=self.usage.dollars, history=self.history, warnings=self.warnings,
            gpu=self.gpu, triton_version=self.triton_version,
            baseline_bottleneck=((self.profiles.get(original.id) or {}).get("diagnosis") or {}).get("bottleneck"),
            overshoot=self.usage.overshoot(self.config.budget))
        log = lambda message: self.emit("log", level="info", message=message)  # noqa: E731
        return ResultBuilder(self.task, self.config, self.evaluator, self._warn_once, log,
                             spare=self.workers.spare()).build(outcome)

    # ------------------------------------------------------------------ run
    def _make_generator(self) -> Any:
        from .generators import make_generator

        options = dict(self.config.generator_options)
        if self.evaluator.interpreted:
            options.setdefault("autotune", False)  # the interpreter cannot benchmark autotune configs
        options["stop"] = self.stop  # Ctrl-C ends an LLM request or its backoff at once
        return make_generator(self.config.generator, seed=self.config.seed, **options)

    def run(self) -> Result:
        self.emit("started", kernel=self.task.kernel, file=self.task.module_path, source_hash=self.task.source_hash,
                  budget=asdict(self.config.budget), generator=self.config.generator, search=self.config.search,
                  session_id=self.id)
        self._clean_leftovers()
        try:
            self._setup()
            generator = self._make_generator()
            if self.store:
                self.store.start_session(self.id, self.task.module_path, self.task.kernel, self.task.source_hash,
                                         self.gpu, self.triton_version, self.config.to_dict())
            reason = self._run_search(generator)
            result = self._finish(reason)
            if self.stop.is_set():
                result.status = result.status if result.status in (IMPROVED, VERIFIED_CORRECT) else "cancelled"
                result.stop_reason = "stopped by request"
            # what the CLI prints, the store keeps and the editor gets: no secrets, capped
            result = Result.from_dict(scrub(result.to_dict()))
            if self.store:
                for c in self.pool[1:]:
                    self.store.put_variant(self.task.source_hash, self.task.kernel, self.gpu, c.id, c.variant.source,
                                           c.time_ms, c.variant.strategy)
                self.store.finish_session(self.id, result.status, result.to_dict(history=False))
            self.emit("result", result=result.to_dict())
            return result
        finally:
            self.workers.close()  # every worker (the primary included)
            if self._workdir:
                shutil.rmtree(self._workdir, ignore_errors=True)

    def _run_search(self, generator: Any) -> str:
        """The search, ended early (not aborted) when the worker cannot be restarted."""
        try:
            self._warm_start()
            return self._exhaustive(generator) if self.config.search == EXHAUSTIVE else self._search(generator)
        except WorkerLost as e:
            self._warn_once(f"{e}: the search stopped after {self.usage.evaluations} evaluations; the result is the "
                            "best verified so far")
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
                self.emit("log", level="info", message=f"marked {len(stale)} stale running session(s) as interrupted")
        sweep_stale_workdirs()


def run_session(task: Task, config: SessionConfig, emitter: Optional[EventEmitter] = None, store: Optional[Store] = None,
                stop: Optional[threading.Event] = None, executor: Any = None) -> Result:
    """Run one session to its end (budget, exhaustion or stop) and return its Result;
    ``executor`` says where its workers run (None: the local one, a worker per GPU)."""
    return Session(task, config, emitter, store, stop, executor=executor).run()
