"""Request handlers of the worker: prepare the original, evaluate variants, time, profile.

The original's outputs for each seed are saved under ``<workdir>/refs`` so that a
worker restarted after a crash can pick up where the last one stopped.
"""
from __future__ import annotations

import os
import platform
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

import torch
import triton

from ..model import Baseline, Evaluation, LaunchRecord, Status, Task
from .capture import CapturedLaunch
from .compare import bitwise_equal, compare_outputs, count_tensors, describe, to_cpu
from .runner import HarnessError, ModuleVersion, load_module, run_harness, synchronize
from .timing import on_gpu, paired_timing, time_launches

_FATAL_MARKERS = ("illegal memory access", "illegal address", "unspecified launch failure", "device-side assert",
                  "CUDA error", "misaligned address", "an illegal instruction")

# Tests only: an exception whose text contains this marker counts as a corrupted
# context, so the fatal path can be exercised under the CPU interpreter.
_TEST_FATAL_ENV = "KERNELBAND_TEST_FATAL_MARKER"


def _simulated_fatal(exc: BaseException) -> bool:
    marker = os.environ.get(_TEST_FATAL_ENV, "")
    return bool(marker) and marker in str(exc)


def _launch_record(launch: CapturedLaunch) -> LaunchRecord:
    consts = {k: v for k, v in launch.kwargs.items() if k not in ("grid", "warmup") and isinstance(v, (int, float, bool, str))}
    best = getattr(launch.obj, "best_config", None)
    if best is not None:
        consts.update({k: v for k, v in getattr(best, "kwargs", {}).items() if isinstance(v, (int, float, bool, str))})
        consts.setdefault("num_warps", getattr(best, "num_warps", None))
        consts.setdefault("num_stages", getattr(best, "num_stages", None))
    seen: set[int] = set()
    nbytes = 0
    for a in list(launch.args) + list(launch.kwargs.values()):
        if isinstance(a, torch.Tensor) and id(a) not in seen:
            seen.add(id(a))
            nbytes += a.numel() * a.element_size()
    return LaunchRecord(
        kernel=launch.name,
        grid=launch.resolved_grid(),
        constexprs={k: v for k, v in consts.items() if k not in ("num_warps", "num_stages")},
        num_warps=consts.get("num_warps"),
        num_stages=consts.get("num_stages"),
        tensor_bytes=nbytes,
    )


class _PhaseClock:
    """Accumulates wall seconds per phase of an evaluation (for throughput reports)."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases
        self.t = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = round(self.phases.get(phase, 0.0) + now - self.t, 6)
        self.t = now


def _status_for(err: HarnessError) -> Status:
    return Status.COMPILE_ERROR if err.phase in ("compile", "import") else Status.RUNTIME_ERROR


class WorkerService:
    def __init__(self, interpreted: bool) -> None:
        self.interpreted = interpreted
        self.fatal = False
        self.task: Optional[Task] = None
        self.workdir: Optional[Path] = None
        self.original: Optional[ModuleVersion] = None
        self.original_launches: list[CapturedLaunch] = []
        self.refs: dict[int, Any] = {}
        self.variants: "OrderedDict[str, list[CapturedLaunch]]" = OrderedDict()

    # ------------------------------------------------------------------ plumbing
    def handle(self, op: Optional[str], req: dict[str, Any]) -> Any:
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise ValueError(f"unknown worker op {op!r}")
        return handler(req)

    def context_broken(self, exc: BaseException) -> bool:
        """After an exception, is the CUDA context still usable?"""
        if _simulated_fatal(exc):
            self.fatal = True
            return True
        if not on_gpu():
            return False
        text = str(exc)
        if not any(m in text for m in _FATAL_MARKERS):
            try:
                torch.cuda.synchronize()
                return False
            except Exception:  # noqa: BLE001
                self.fatal = True
                return True
        self.fatal = True
        return True

    def _device_name(self) -> str:
        if on_gpu():
            return torch.cuda.get_device_name()
        return f"CPU ({platform.machine()}, Triton interpreter)"

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        return {
            "device_name": self._device_name(),
            "triton_version": triton.__version__,
            "torch_version": torch.__version__,
            "interpreted": self.interpreted,
            "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "pid": os.getpid(),
        }

    def _ref_path(self, seed: int) -> Path:
        assert self.workdir is not None
        return self.workdir / "refs" / f"seed{seed}.pt"

    # ------------------------------------------------------------------ original
    def op_prepare(self, req: dict[str, Any]) -> dict[str, Any]:
        """Load the original, record reference outputs and check the harness.

        With ``restore`` (a restarted worker) the saved references are reused and only
        the baseline launches are re-captured."""
        task = Task.from_dict(req["task"])
        self.task = task
        self.workdir = Path(req["workdir"])
        os.environ["KERNELBAND_WORKDIR"] = str(self.workdir)
        self.variants.clear()
        self.refs.clear()
        base = Baseline(ok=False, interpreted=self.interpreted, device_name=self._device_name(),
                        triton_version=triton.__version__)
        try:
            self.original = load_module(task, task.source, "original", str(self.workdir))
        except HarnessError as e:
            base.message = f"the original module does not import: {e}"
            return base.to_dict()
        restore = bool(req.get("restore")) and all(self._ref_path(s).exists() for s in task.seeds)
        try:
            out0, launches = run_harness(self.original, task.seeds[0])
        except HarnessError as e:
            base.message = f"the harness {task.harness} fails on the original kernel: {e}"
            return base.to_dict()
        self.original_launches = launches
        base.launches = [_launch_record(l) for l in launches]
        if task.kernel not in {l.name for l in launches}:
            seen = ", ".join(sorted({l.name for l in launches})) or "no Triton kernel"
            base.message = f"the harness {task.harness} never launches {task.kernel} (it launched: {seen})"
            return base.to_dict()
        if count_tensors(out0) == 0:
            base.message = f"the harness {task.harness} returns no tensors; return the kernel's outputs"
            return base.to_dict()
        if restore:
            self.refs = {s: torch.load(self._ref_path(s), weights_only=False) for s in task.seeds}
        else:
            self._ref_path(0).parent.mkdir(parents=True, exist_ok=True)
            self.refs[task.seeds[0]] = to_cpu(out0)
            try:
                for s in task.seeds[1:]:
                    self.refs[s] = to_cpu(run_harness(self.original, s)[0])
                again = to_cpu(run_harness(self.original, task.seeds[0])[0])
            except HarnessError as e:
                base.message = f"the harness fails on the original kernel: {e}"
                return base.to_dict()
            if not bitwise_equal(self.refs[task.seeds[0]], again):
                verdict = compare_outputs(self.refs[task.seeds[0]], again)
                if not verdict.ok:
                    base.deterministic = False
                    base.message = ("the original is not deterministic under a fixed seed "
                                    f"({verdict.message}); seed the harness's inputs and avoid racy atomics")
                    return base.to_dict()
                base.message = "note: the original is not bitwise reproducible (within tolerance)"
            for s, ref in self.refs.items():
                torch.save(ref, self._ref_path(s))
            base.weak_harness, base.weak_reason = self._weak_harness_check(task)
            if len(task.seeds) > 1 and bitwise_equal(self.refs[task.seeds[0]], self.refs[task.seeds[1]]):
                base.message = ("note: outputs are identical for every seed: the harness does not draw seeded "
                                "random inputs, so correctness is checked on one input only")
        base.ok = True
        if req.get("time", True):
            base.timing = time_launches(self.original_launches)
        tier = int(req.get("profile_tier", 0))
        if tier > 0:
            base.profile = self._profile(self.original_launches, base.timing.median_ms if base.timing else None, tier,
                                         task.source, req.get("facts") or {})
        return base.to_dict()

    def _weak_harness_check(self, task: Task) -> tuple[bool, str]:
        """Would a kernel that does nothing (and leaves NaN in its buffers) pass?"""
        assert self.original is not None
        seeds = task.seeds
        try:
            out, _ = run_harness(self.original, seeds[0], skip_launches=True)
        except HarnessError:
            return False, ""  # the harness notices a missing kernel: good
        if compare_outputs(self.refs[seeds[0]], out).ok:
            return True, "with the kernel's launches skipped the harness still returns the same outputs"
        return False, ""

    # ------------------------------------------------------------------ variants
    def _require_task(self) -> Task:
        if self.task is None or self.original is None:
            raise RuntimeError("worker has no task: send prepare first")
        return self.task

    def op_evaluate(self, req: dict[str, Any]) -> dict[str, Any]:
        task = self._require_task()
        vid = req.get("variant_id") or "variant"
        ev = Evaluation(status=Status.OK, interpreted=self.interpreted, variant_id=vid)
        phases = ev.phases
        clock = _PhaseClock(phases)
        try:
            version = load_module(task, req["source"], f"v_{vid}", str(self.workdir))
        except HarnessError as e:
            ev.status, ev.message = _status_for(e), f"does not import: {e}"
            return ev.to_dict()
        clock.lap("import")
        launches0: list[CapturedLaunch] = []
        worst = None
        for s in task.seeds:
            try:
                out, launches = run_harness(version, s)
                # the first run includes Triton's compilation of the variant
                clock.lap("compile_and_first_run" if s == task.seeds[0] else "correctness")
            except HarnessError as e:
                ev.status = _status_for(e)
                ev.message = f"seed {s}: {e}"
                if self.context_broken(e.exc):
                    ev.message += " (CUDA context corrupted: worker restarts)"
                return ev.to_dict()
            if s == task.seeds[0]:
                launches0 = launches
                ev.launches = [_launch_record(l) for l in launches]
            if task.kernel not in {l.name for l in launches}:
                seen = ", ".join(sorted({l.name for l in launches})) or "no Triton kernel"
                ev.status = Status.REJECTED
                ev.message = f"the variant never launches {task.kernel} (it launched: {seen}); a torch fallback is not a kernel"
                return ev.to_dict()
            verdict = compare_outputs(self.refs[s], out)
            clock.lap("correctness")
            if worst is None or verdict.stats.rel_l2 >= worst.rel_l2:
                worst = verdict.stats
            if not verdict.ok:
                ev.status, ev.errors = Status.MISMATCH, verdict.stats
                ev.message = f"seed {s}: {verdict.message}"
                return ev.to_dict()
        ev.errors = worst
        ev.message = f"matches the original on seeds {task.seeds} ({describe(worst)})"
        if req.get("time", True):
            ev.timing = time_launches(launches0)
            clock.lap("timing")
        self.variants[vid] = launches0
        while len(self.variants) > 4:  # each entry keeps its inputs alive
            self.variants.popitem(last=False)
        tier = int(req.get("profile_tier", 0))
        if tier > 0:
            ev.profile = self._profile(launches0, ev.time_ms, tier, req["source"], req.get("facts") or {})
            clock.lap("profile")
        return ev.to_dict()

    def op_paired(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require_task()
        vid = req["variant_id"]
        launches = self.variants.get(vid)
        if launches is None:
            ev = self.op_evaluate({"source": req["source"], "variant_id": vid, "time": False})
            if ev["status"] != Status.OK.value:
                raise RuntimeError(f"variant {vid} no longer passes: {ev['message']}")
            launches = self.variants[vid]
        return paired_timing(self.original_launches, launches, rounds=int(req.get("rounds", 10))).to_dict()

    # ------------------------------------------------------------------ profiling
    def _profile(self, launches: list[CapturedLaunch], time_ms: Optional[float], tier: int, source: str,
                 facts: dict[str, Any]) -> Optional[dict[str, Any]]:
        try:
            from ..profile.collect import collect_profile
        except ImportError:
            return None
        task = self._require_task()
        return collect_profile(launches, time_ms, tier, facts, source, task.kernel, self.interpreted)

    def op_profile(self, req: dict[str, Any]) -> dict[str, Any]:
        """Profile the original (source None) or a variant at a tier."""
        task = self._require_task()
        tier = int(req.get("tier", 2))
        if req.get("source") is None:
            launches, source = self.original_launches, task.source
        else:
            ev = self.op_evaluate({"source": req["source"], "variant_id": req.get("variant_id", "profiled"), "time": False})
            if ev["status"] != Status.OK.value:
                raise RuntimeError(f"cannot profile a failing variant: {ev['message']}")
            launches, source = self.variants[req.get("variant_id", "profiled")], req["source"]
        timing = time_launches(launches)
        prof = self._profile(launches, timing.median_ms, tier, source, req.get("facts") or {})
        return {"timing": timing.to_dict(), "profile": prof}

    def op_device_facts(self, req: dict[str, Any]) -> Optional[dict[str, Any]]:
        try:
            from ..profile.device import measure_device_facts
        except ImportError:
            return None
        return measure_device_facts()

    def op_sync(self, req: dict[str, Any]) -> None:
        synchronize()
