"""A session's preparation, before the search: the primary worker starts (the others
prepare in the background), the device's peaks come from the store's cache or are
measured once, the original is checked and timed warm like a candidate (the baseline
event), and it becomes the pool's first member. A weak harness (one that cannot tell a
broken kernel from the real one) ends the session here unless it is allowed."""

from __future__ import annotations

import time
from typing import Callable, Optional

from .events import Baseline, EventPayload, Log
from .evaluate import SetupError
from .executor.base import Evaluator
from .executor.pool import WorkerPool
from .harness import harness_hash
from .model import Baseline as PreparedBaseline
from .model import Task, Variant
from .profile.schema import DeviceFacts, Profile
from .session_config import SessionConfig
from .session_pool import CandidatePool
from .store import ProfileKey, Store
from .trace import mark


class Preparation:
    def __init__(
        self,
        task: Task,
        config: SessionConfig,
        evaluator: Evaluator,
        workers: WorkerPool,
        store: Optional[Store],
        pool: CandidatePool,
        emit: Callable[[EventPayload], object],
        warn: Callable[[str], None],
        warnings: list[str],
        on_started: Optional[Callable[[], None]] = None,
    ) -> None:
        self.task = task
        self.config = config
        self.evaluator = evaluator  # the primary worker
        self.workers = workers
        self.store = store
        self.pool = pool
        self.emit = emit
        self.warn = warn  # a Result warning and a log event, once per note
        self.warnings = warnings  # the session's Result warnings (notes added without a log event)
        self.setup_s: dict[str, float] = {}  # seconds of each step, in the baseline event
        self.on_started = on_started  # called once the primary worker is up (the session's warm-up)

    def run(self) -> None:
        mark("setup.start")
        self.workers.begin_others()  # the other workers prepare in the background
        t0 = time.perf_counter()
        info = self.evaluator.start()
        self.setup_s["worker_start"] = round(time.perf_counter() - t0, 3)
        if self.on_started is not None:
            self.on_started()
        self.pool.platform.gpu, self.pool.platform.triton_version = info.device_name, info.triton_version
        if not info.interpreted:
            self.evaluator.facts = self._device_facts()
        t1 = time.perf_counter()
        self.setup_s["device_facts"] = round(t1 - t0 - self.setup_s["worker_start"], 3)
        mark("setup.prepare")
        base = self.evaluator.prepare()
        mark("setup.prepared")
        self.setup_s["prepare"] = round(time.perf_counter() - t1, 3)
        self.setup_s.update({f"prepare.{k}": round(v, 3) for k, v in base.phases.items()})
        self._check_harness(base)
        assert base.timing is not None
        original = Variant(self.task.source, generator="original", description="the original kernel")
        t2 = time.perf_counter()
        # timed warm already when the original's process stays as the reference lane
        time_ms = base.timing.median_ms if base.reference_lane else self._warm_baseline_ms(base.timing.median_ms)
        self.setup_s["retime"] = round(time.perf_counter() - t2, 3)
        mark("setup.retimed")
        self._emit_baseline(base, time_ms)
        self.pool.add(self.pool.candidate(original, time_ms, base.profile, None))
        self.workers.add_lanes(0)
        if self.workers.parallel:  # the others re-time the original on their GPU: their scale
            for note in self.workers.finish_others(original, time_ms, self.evaluator.facts):
                self.warn(note)
        if self.store and base.profile:
            self._store_profile(self.store, base.profile)

    def _device_facts(self) -> DeviceFacts:
        platform = self.pool.platform
        return device_facts(self.evaluator, self.store, platform.gpu, platform.triton_version, self.emit)

    def _check_harness(self, base: PreparedBaseline) -> None:
        """The baseline's notes become warnings; a weak harness ends the session unless allowed."""
        if base.message:
            self.warnings.append(base.message)
        if base.weak_harness and not self.config.allow_weak_harness:
            self._emit_baseline(base, base.timing.median_ms if base.timing else None)
            raise SetupError(
                f"weak harness: {base.weak_reason} (it could not tell a broken kernel from the real one; "
                "fix the harness)"
            )
        if base.weak_harness:
            self.warnings.append(f"weak harness: {base.weak_reason}")

    def _store_profile(self, store: Store, profile: Profile) -> None:
        platform = self.pool.platform
        store.put_profile(
            ProfileKey(
                self.task.source_hash, harness_hash(self.task), platform.gpu, platform.triton_version, self.task.kernel
            ),
            profile,
            file=self.task.module_path,
        )

    def _emit_baseline(self, base: PreparedBaseline, time_ms: Optional[float]) -> None:
        self.emit(
            Baseline(
                time_ms=time_ms,
                clock=base.timing.clock if base.timing else None,
                interpreted=base.interpreted,
                speed_claim=not base.interpreted,
                device=base.device_name,
                deterministic=base.deterministic,
                weak_harness=base.weak_harness,
                message=base.weak_reason or base.message,
                prepare_ms=base.timing.median_ms if base.timing else None,
                setup_s=dict(self.setup_s),
            )
        )

    def _warm_baseline_ms(self, prepare_ms: float) -> float:
        """The original timed exactly as candidates are (same request, warm worker), so
        per-candidate ratios compare like with like: prepare's first timing ran cold and
        made progress lines overstate speedups (32.81x in the search, 7.51x verified)."""
        try:
            return self.evaluator.retime_original().median_ms
        except SetupError as e:
            raise SetupError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - WorkerError or the judge's refusal: fall back, say so
            self.warn(
                f"the original could not be re-timed like a candidate ({e}); search-time ratios use its first timing"
            )
            return prepare_ms


def device_facts(
    evaluator: Evaluator,
    store: Optional[Store],
    gpu: str,
    triton_version: str,
    emit: Optional[Callable[[EventPayload], object]] = None,
) -> DeviceFacts:
    """The device's peaks: from the workspace store, else this machine's cache, else
    measured (once per card, driver and Triton version), and cached in both."""
    from . import machine_cache
    from .profile.device import valid_cached

    key = machine_cache.device_key(evaluator.info)
    facts = store.get_device_facts(gpu, triton_version) if store else None
    if not valid_cached(facts):
        facts = machine_cache.get_device_facts(key)
    if facts is None or not valid_cached(facts):
        if emit is not None:
            emit(Log(level="info", message="measuring the GPU's peak bandwidth and matrix rates (once per GPU)..."))
        facts = evaluator.device_facts()
        if valid_cached(facts):
            machine_cache.put_device_facts(key, facts)
    if store and valid_cached(facts):
        store.put_device_facts(gpu, triton_version, facts)
    return facts
