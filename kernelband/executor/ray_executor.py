"""Ray executor: the same evaluation worker, run as a Ray actor per GPU of a cluster
(``num_gpus=1``; on a cluster without GPUs, ``num_cpus=1`` actors under the interpreter).

What crosses the network (docs/RAY.md): the task (kernel name, harness names, seeds,
timeouts), the module's source text and each variant's source text, the companion
harness file's text, and the modules of the kernel's folder that it imports (ship.py,
size-limited); back come Evaluations, Baselines and timings. The session, the bandit
and the generator (with any API key) stay in the driver process: no key is sent.
On the node, the actor writes the texts into its own temp dir and runs an ordinary
Evaluator there (judge process, sandboxed variant processes, per-GPU timing lock).

An actor that dies (node lost, killed) is replaced: a fresh actor is started and
prepared from the texts again, and the request is retried once on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Concatenate, Optional, ParamSpec, TypeVar

from ..model import PAST_INT32, Baseline, Evaluation, PairedTiming, SanitizerReport, Task, Timing, Variant, WideReport
from ..profile.schema import DeviceFacts, Profile
from ..worker.client import WorkerInfo
from ..worker.deadlines import call_deadline_s
from .base import Evaluator, ExecutorOptions, ExecutorUnavailable, Slot

_P = ParamSpec("_P")
_R = TypeVar("_R")

RAY_MISSING = "the ray executor needs Ray: pip install 'kernelband[ray]'"
# seconds added to the evaluator's own deadlines before the driver gives up on an actor
_SLACK_S = 120.0
# a new actor: scheduled on a node, its texts written, its judge started
_ACTOR_START_S = 600.0


def import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise ExecutorUnavailable(RAY_MISSING) from None
    return ray


class EvaluatorActor:
    """Runs on the node: an Evaluator over a local copy of the module and harness texts."""

    def __init__(
        self, t: Task, harness_text: Optional[str], profile_tier: int, local_modules: Optional[dict[str, bytes]] = None
    ) -> None:
        from ..evaluate import Evaluator as LocalEvaluator
        from .ship import unpack

        self.root = tempfile.mkdtemp(prefix="kernelband-ray-")
        src = Path(self.root, "src")
        src.mkdir()
        unpack(local_modules or {}, src)  # the modules of the kernel's folder it imports, beside it
        module = src / Path(t.module_path).name
        module.write_text(t.source, encoding="utf-8")
        harness_path = None
        if t.harness_path and harness_text is not None:
            harness_path = src / Path(t.harness_path).name
            harness_path.write_text(harness_text, encoding="utf-8")
        t = replace(t, module_path=str(module), harness_path=str(harness_path) if harness_path else None)
        self.ev = LocalEvaluator(t, workdir=os.path.join(self.root, "work"), profile_tier=profile_tier)

    def call(self, method: str, facts: Optional[DeviceFacts], *args: Any, **kwargs: Any) -> Any:
        if facts is not None:
            self.ev.facts = facts
        if method == "info":
            return self.ev.info
        return getattr(self.ev, method)(*args, **kwargs)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.ev.close()
        shutil.rmtree(self.root, ignore_errors=True)


class RayEvaluator:
    """The Evaluator API, on a Ray actor (replaced when it dies)."""

    def __init__(self, executor: "RayExecutor", slot: Slot, task: Task, profile_tier: int) -> None:
        self.executor = executor
        self.slot = slot
        self.task = task
        self.profile_tier = profile_tier
        self._harness_text = Path(task.harness_path).read_text(encoding="utf-8") if task.harness_path else None
        from .ship import collect

        texts = [(task.module_path, task.source)]
        if task.harness_path and self._harness_text is not None:
            texts.append((task.harness_path, self._harness_text))
        self._local_modules = collect(task.module_path, texts)  # the modules of the kernel's folder it imports
        self.facts = DeviceFacts()
        self.baseline: Optional[Baseline] = None
        self.info: Optional[WorkerInfo] = None
        self.worker_restarts = 0
        self._prepared: Optional[bool] = None  # time_it of the last prepare (replayed on a new actor)
        self._actor: Any = None
        self._closed = False  # no new actor after close (a thread may still be waiting on the old one)

    # ------------------------------------------------------------------ the actor
    def _new_actor(self) -> Any:
        ray = self.executor.ray
        cls = ray.remote(EvaluatorActor)
        opts: dict[str, Any] = {"num_gpus": 1} if self.slot.gpu else {"num_cpus": 1}
        opts["max_restarts"] = 0  # we replace it ourselves: a restarted actor would have lost its references
        task = replace(self.task, device=self.slot.device)
        return cls.options(**opts).remote(task, self._harness_text, self.profile_tier, self._local_modules)

    def _get(self, ref: Any, timeout_s: float) -> Any:
        return self.executor.ray.get(ref, timeout=timeout_s)

    def _call(
        self, method: Callable[Concatenate[Evaluator, _P], _R], timeout_s: float, *args: _P.args, **kwargs: _P.kwargs
    ) -> _R:
        """One request: the actor's Evaluator runs ``method`` (``timeout_s``: the evaluator's
        own deadline for it, before Ray's slack); an actor that died (or stopped answering)
        is replaced and the request retried once on the new one."""
        from ..evaluate import SetupError

        for attempt in (0, 1):
            if self._actor is None:
                self._start_actor(replacing=attempt > 0 or self.info is not None)
            try:
                return self._get(
                    self._actor.call.remote(method.__name__, self.facts, *args, **kwargs), timeout_s + _SLACK_S
                )
            except self.executor.lost_errors as e:
                self._drop_actor()
                if attempt:
                    raise SetupError(f"the Ray worker ({self.slot.label}) died twice: {type(e).__name__}: {e}") from e
        raise AssertionError("unreachable")

    def _start_actor(self, replacing: bool) -> None:
        from ..evaluate import SetupError

        if self._closed:
            raise SetupError(f"the Ray worker ({self.slot.label}) was closed")
        self._actor = self.executor.track(self._new_actor())
        try:
            self.info = self._get(self._actor.call.remote("start", None), _ACTOR_START_S)
            if replacing:
                self.worker_restarts += 1
                if self._prepared is not None:  # the new actor needs the original's references again
                    self._get(
                        self._actor.call.remote("prepare", self.facts, time_it=False, profile_tier=0),
                        self._deadline("prepare") + _SLACK_S,
                    )
        except self.executor.lost_errors as e:
            self._drop_actor()
            raise SetupError(f"the Ray worker ({self.slot.label}) could not be started: {type(e).__name__}: {e}") from e

    def _drop_actor(self) -> None:
        actor, self._actor = self._actor, None
        if actor is not None:
            self.executor.kill(actor)

    # ------------------------------------------------------------------ Evaluator API
    @property
    def interpreted(self) -> bool:
        return bool(self.info and self.info.interpreted)

    @property
    def lanes(self) -> int:
        """One: an actor serves one call at a time."""
        return 1

    def start(self) -> WorkerInfo:
        if self._actor is None:
            self._start_actor(replacing=False)
        assert self.info is not None
        return self.info

    def device_facts(self) -> DeviceFacts:
        self.facts = self._call(Evaluator.device_facts, self._deadline("device_facts"))
        return self.facts

    def prepare(self, time_it: bool = True, profile_tier: Optional[int] = None) -> Baseline:
        self.baseline = self._call(
            Evaluator.prepare, self._deadline("prepare"), time_it=time_it, profile_tier=profile_tier
        )
        self._prepared = time_it
        return self.baseline

    def evaluate(
        self,
        variant: Variant,
        time_it: bool = True,
        profile_tier: Optional[int] = None,
        search: bool = False,
        rounds: Optional[int] = None,
    ) -> Evaluation:
        return self._call(
            Evaluator.evaluate,
            self._deadline("evaluate"),
            variant,
            time_it=time_it,
            profile_tier=profile_tier,
            search=search,
            rounds=rounds,
        )

    def retime_original(self) -> Timing:
        """The original timed as a candidate's timing step runs (Evaluator.retime_original)."""
        return self._call(Evaluator.retime_original, self._deadline("retime"))

    def paired_timing(self, variant: Variant, rounds: int = 10) -> PairedTiming:
        return self._call(Evaluator.paired_timing, self._deadline("paired", rounds), variant, rounds=rounds)

    def sanitize(self, variant: Variant) -> SanitizerReport:
        return self._call(Evaluator.sanitize, self._deadline("sanitize"), variant)

    def wide_calls(self, variant: Variant, min_elements: int = PAST_INT32) -> WideReport:
        return self._call(Evaluator.wide_calls, self._deadline("wide"), variant, min_elements=min_elements)

    def profile(self, source: Optional[str], tier: int) -> Optional[Profile]:
        return self._call(Evaluator.profile, self._deadline("profile"), source, tier)

    def _deadline(self, op: str, rounds: int = 10) -> float:
        """What the actor's Evaluator may take for ``op`` (worker/deadlines.py, the local
        evaluator's rule); ``_call`` adds Ray's slack."""
        derived = self.baseline.derived_calls if self.baseline is not None else 0
        return call_deadline_s(op, self.task, derived, rounds)

    def close(self) -> None:
        self._closed = True
        actor, self._actor = self._actor, None
        if actor is None:
            return
        try:
            self._get(actor.close.remote(), 30.0)
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
            pass
        self.executor.kill(actor)


class RayExecutor:
    name = "ray"

    def __init__(self, options: Optional[ExecutorOptions] = None) -> None:
        self.options = options or ExecutorOptions(name="ray")
        self.options.validate()
        self.ray = import_ray()
        from ray import exceptions as rex

        # an actor process that died, a node that is gone, or no answer in time
        self.lost_errors: tuple[type[BaseException], ...] = tuple(
            getattr(rex, n)
            for n in (
                "RayActorError",
                "ActorUnavailableError",
                "GetTimeoutError",
                "WorkerCrashedError",
                "NodeDiedError",
            )
            if hasattr(rex, n)
        )
        self._connect()
        self._actors: list[Any] = []

    def _connect(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        address = self.options.ray_address
        if address:
            kwargs["address"] = address
            kwargs["runtime_env"] = _runtime_env()
        try:
            # stdout may carry JSON-lines events (the language server reads them): Ray's notes go to stderr
            with contextlib.redirect_stdout(sys.stderr):
                ray.init(**kwargs)
        except Exception as e:  # noqa: BLE001 - connection failures come in many types
            where = address or "a local Ray instance"
            if _auth_refused(e):
                raise ExecutorUnavailable(
                    f"cannot connect to Ray at {where}: the cluster requires Ray token authentication; set "
                    "RAY_AUTH_MODE=token and give the cluster's token (RAY_AUTH_TOKEN_PATH, RAY_AUTH_TOKEN or "
                    "~/.ray/auth_token; docs/RAY.md)"
                ) from None
            raise ExecutorUnavailable(f"cannot connect to Ray at {where}: {type(e).__name__}: {e}") from None

    def _gpus(self) -> int:
        return int(self.ray.cluster_resources().get("GPU", 0))

    def slots(self, device: str) -> list[Slot]:
        wanted = self.options.workers
        gpus = 0 if device == "cpu" else self._gpus()
        if gpus:
            n = min(wanted or gpus, gpus)
            return [Slot(f"ray gpu {i}", "cuda", gpu=True) for i in range(n)]
        if device.startswith("cuda"):
            raise ExecutorUnavailable(f"device {device!r} asked for, but the Ray cluster has no GPU")
        return [Slot(f"ray cpu {i}", "cpu") for i in range(wanted or 1)]

    def evaluator(self, slot: Slot, task: Task, workdir: Optional[str], profile_tier: int) -> RayEvaluator:
        return RayEvaluator(self, slot, task, profile_tier)

    def track(self, actor: Any) -> Any:
        self._actors.append(actor)
        return actor

    def kill(self, actor: Any) -> None:
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        if actor in self._actors:
            self._actors.remove(actor)

    def close(self) -> None:
        for actor in list(self._actors):
            self.kill(actor)


def _auth_refused(e: BaseException) -> bool:
    """Ray 2.52+: the cluster asks for a token this driver does not have (the cause of the
    ConnectionError ray.init raises)."""
    seen = 0
    cur: Optional[BaseException] = e
    while cur is not None and seen < 10:
        if type(cur).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(cur):
            return True
        cur, seen = cur.__cause__ or cur.__context__, seen + 1
    return False


def _runtime_env() -> dict[str, Any]:
    """A remote cluster gets this engine's code (py_modules), so its actors run the same
    judge as the driver; KERNELBAND_RAY_SHIP_CODE=0 relies on what the nodes installed."""
    if os.environ.get("KERNELBAND_RAY_SHIP_CODE", "1") == "0":
        return {}
    import kernelband

    return {"py_modules": [str(Path(kernelband.__file__).parent)]}
