"""The judge: the worker's trusted side. It holds the original's reference outputs,
compares, validates timings, computes statistics and writes every verdict. No code of a
module version ever runs here: the original and each candidate run in variant processes
(``variant.py``, one per job, sandboxed and killed with their whole tree afterwards),
which send back data frames only (``wire.py``).

What a candidate must pass (DESIGN section 6), in the order the checks run:
1. every harness (the timing one and the correctness ones) under every seed, fresh
   inputs per seed, all in one process: what the harness returns *and* every tensor the
   kernel's launches wrote (in-place outputs) match the original's within tolerance; a
   harness's own failing assert is a mismatch;
2. no input the original leaves unchanged is changed, no new launch argument is written,
   no launch runs on another stream, no thread is started, nothing of the runtime the
   measurement relies on is replaced;
3. precision: the error against a float64 (or float32) rerun of the *original's* launches
   is at most 4x the original's own error;
4. Triton produces the outputs: with the candidate's launches neutralised, its outputs
   change everywhere the original's do;
5. timing is of frozen replays (no module code runs while timing), and a replay of the
   timed launches, with their outputs poisoned first, reproduces the references;
6. after timing, the harness still gives the references (no state drift).
"""
from __future__ import annotations

import os
import platform
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch

from ..model import Baseline, Evaluation, LaunchRecord, Status, Task, Timing
from . import checks
from .compare import bitwise_equal, compare_outputs, count_tensors, describe, set_compute_device, to_device
from .jobs import Frame, JobFailed, VariantJob
from .stats import paired_statistics

if TYPE_CHECKING:
    from .jobs import Zygote

_REF_GPU_FRACTION = 0.4
# Host memory the references of one harness may take across its seeds (DESIGN section 4:
# host memory stays under about 2 GiB plus one copy of the outputs). A harness whose
# outputs per call are bigger than this share keeps the reference of its first seed only:
# its other seeds are not run (the small correctness harnesses still run every seed).
_REF_HOST_BYTES_ENV = "KERNELBAND_REF_HOST_BYTES"
_REF_HOST_BYTES = 2 << 30
_SMALL_FRAME_BYTES = 64 << 20  # below this, where a frame is decoded does not matter
_GPU_MARGIN_BYTES = 1 << 30  # free GPU memory left beside a decoded frame or the references


def _ref_host_bytes() -> int:
    try:
        return max(int(os.environ.get(_REF_HOST_BYTES_ENV, _REF_HOST_BYTES)), 0)
    except ValueError:
        return _REF_HOST_BYTES
# Tests only: make the paired re-measurement fail with this text (frozen replays leave a
# correct variant no way to fail it, yet the CLI's handling of that failure is tested).
_TEST_PAIRED_FAILURE_ENV = "KERNELBAND_TEST_PAIRED_FAILURE"  # references stay on the GPU while they take at most this share of free memory


def _gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


@dataclass
class Reference:
    """What the judge knows of the original, per (harness, seed)."""

    outputs: dict[tuple[str, int], Any] = field(default_factory=dict)
    masks: dict[str, dict[str, Any]] = field(default_factory=dict)  # harness -> leaf -> changed-by-Triton mask
    neutral_raised: dict[str, bool] = field(default_factory=dict)
    high: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # harness -> "kernel.arg" -> [float64 result]
    high_error: dict[tuple[str, str, int], tuple[float, float, float]] = field(default_factory=dict)
    writes: dict[str, list[str]] = field(default_factory=dict)  # kernel -> argument names it writes
    changed_inputs: set[str] = field(default_factory=set)
    streams: set[int] = field(default_factory=set)
    skipped: set[tuple[str, int]] = field(default_factory=set)  # (harness, seed) not checked: outputs too large
    cuda_peak: int = 0  # the original's variant process: most GPU memory its allocator reserved
    replay_valid: bool = False
    stale: bool = False  # the original itself returns buffers that the next call overwrites
    launches: list[LaunchRecord] = field(default_factory=list)


class Verdict(Exception):
    """A check failed: the evaluation ends with this status and message."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


class JudgeService:
    def __init__(self, interpreted: bool) -> None:
        self.interpreted = interpreted
        self.fatal = False
        self.task: Optional[Task] = None
        self.workdir: Optional[Path] = None
        self.ref = Reference()
        self.on_log: Optional[Callable[[str], None]] = None
        self.network = ""
        self.zygote: Any = None
        self._zygote_lock = threading.Lock()
        self.preparing = False
        self.ref_device: Optional[str] = "cuda" if _gpu() else None
        set_compute_device(self.ref_device)
        self.refs_on_gpu = False
        if _gpu() and not os.environ.get("KERNELBAND_TIMING_LOCK"):
            from .timing import default_lock_path

            # timed regions are exclusive across sessions on this GPU (variant processes inherit it)
            os.environ["KERNELBAND_TIMING_LOCK"] = default_lock_path()

    # ------------------------------------------------------------------ plumbing
    def handle(self, op: Optional[str], req: dict[str, Any]) -> Any:
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise ValueError(f"unknown worker op {op!r}")
        return handler(req)

    def context_broken(self, exc: BaseException) -> bool:
        """The judge runs no module code: its CUDA context only breaks by its own bugs."""
        return False

    def close(self) -> None:
        """Stop the fork server (and with it any job still running)."""
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def _device_name(self) -> str:
        if _gpu():
            return torch.cuda.get_device_name()
        return f"CPU ({platform.machine()}, Triton interpreter)"

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        import triton

        return {
            "device_name": self._device_name(),
            "triton_version": triton.__version__,
            "torch_version": torch.__version__,
            "interpreted": self.interpreted,
            "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "pid": os.getpid(),
            **self._prestart_zygote(),
        }

    def _prestart_zygote(self) -> dict[str, Any]:
        """Start the fork server now, beside the session's own setup (device facts, the
        store), so its imports are not paid inside the first job."""
        def start_and_stay() -> None:
            self._zygote()
            # the fork server dies with the thread that started it (PR_SET_PDEATHSIG is per
            # thread): this one lives as long as the judge
            threading.Event().wait()

        threading.Thread(target=start_and_stay, daemon=True, name="kernelband-zygote").start()
        return {}

    def _require_task(self) -> Task:
        if self.task is None:
            raise RuntimeError("worker has no task: send prepare first")
        return self.task

    def _checked_runs(self) -> str:
        """Which harnesses ran under which seeds, for the verdict's message."""
        task = self._require_task()
        skipped = {h for h, _ in self.ref.skipped}
        if not skipped:
            return f"seeds {task.seeds} of {', '.join(self._harnesses())}"
        parts = [f"{h} (seed {task.seeds[0]} only: outputs too large for every seed's reference)" if h in skipped
                 else f"{h} (seeds {task.seeds})" for h in self._harnesses()]
        return ", ".join(parts)

    def _harnesses(self) -> list[str]:
        task = self._require_task()
        return [task.harness] + [h for h in task.check_harnesses if h != task.harness]

    def _job(self, modules: dict[str, str], steps: list[dict[str, Any]], runs: int, trusted: bool) -> VariantJob:
        task = self._require_task()
        assert self.workdir is not None
        cache = self.workdir / "triton-cache-trusted"
        job = VariantJob(
            {"task": task.to_dict(), "modules": modules, "steps": steps, "interpreted": self.interpreted,
             "writes": {} if trusted else self.ref.writes},
            timeout_s=30.0 + task.timeout_s * max(runs, 1),
            trusted_cache=None if trusted else cache,
            # references arrive on the host and move to the GPU only if they fit comfortably
            # (prepare); a candidate's outputs are compared slice by slice on the references' device
            device=self._frame_device,
            on_log=self.on_log,
        )
        job.start(self._zygote())
        return job

    def _frame_device(self, kind: str, meta: dict[str, Any], nbytes: int) -> Optional[str]:
        """Where a frame's tensors are rebuilt. References arrive on the host (prepare);
        a large frame that is only compared (a candidate's outputs, a re-run, a neutralised
        run) is rebuilt on the GPU when the references stay on the host and it fits beside
        what the variant process holds, so each side keeps one copy of the outputs and the
        comparison runs on the GPU."""
        if self.ref_device != "cuda" or self.refs_on_gpu or nbytes <= _SMALL_FRAME_BYTES or kind != "outputs":
            return None
        if self._becomes_reference(meta):
            return None
        free, _ = torch.cuda.mem_get_info()
        return "cuda" if nbytes + _GPU_MARGIN_BYTES <= free else None

    def _becomes_reference(self, meta: dict[str, Any]) -> bool:
        """An outputs frame of the original that is kept as a reference (prepare)."""
        return (self.preparing and meta.get("mode") in ("check", "upcast") and not meta.get("again")
                and not meta.get("skipped"))

    def _zygote(self) -> Optional["Zygote"]:
        """The fork server, started on first use and replaced when it died; None (plain
        processes) when disabled or when it cannot start."""
        from .jobs import _use_zygote

        if not _use_zygote():
            return None
        with self._zygote_lock:
            return self._live_zygote()

    def _live_zygote(self) -> Optional["Zygote"]:
        from .jobs import Zygote

        if self.zygote is None or not self.zygote.alive:
            if self.zygote is not None:
                self.zygote.close()
            try:
                self.zygote = Zygote(self.interpreted)
            except OSError as e:
                if self.on_log:
                    self.on_log(f"kernelband: fork server unavailable ({e}); starting variant processes one by one")
                self.zygote = None
        return self.zygote

    def _keep_trusted_cache(self, job: VariantJob) -> None:
        """An original-only job's compiled kernels seed later jobs' private caches (which
        untrusted code can write to, so nothing flows back from them)."""
        assert self.workdir is not None
        src = job.dir / "triton-cache"
        if src.is_dir():
            import shutil

            shutil.copytree(src, self.workdir / "triton-cache-trusted", dirs_exist_ok=True)

    # ------------------------------------------------------------------ the original
    def _reference_steps(self, time_it: bool, tier: int, facts: dict[str, Any]) -> list[dict[str, Any]]:
        task = self._require_task()
        s0, rest = task.seeds[0], task.seeds[1:]
        steps: list[dict[str, Any]] = []
        for h in self._harnesses()[1:]:
            steps += [{"op": "run", "module": "o", "harness": h, "seed": s, "mode": "upcast" if s == s0 else "check"}
                      for s in task.seeds]
        steps.append({"op": "run", "module": "o", "harness": task.harness, "seed": s0, "mode": "upcast", "keep": "o"})
        steps.append({"op": "replay_check", "key": "o"})
        if time_it or tier > 0:
            steps.append({"op": "time", "key": "o"})
        if tier > 0:
            steps.append({"op": "profile", "key": "o", "tier": tier, "facts": facts, "source": task.source})
        steps.append({"op": "release", "key": "o"})
        # the timing harness's other seeds only while their references fit the host budget
        per_seed = _ref_host_bytes() // max(len(task.seeds), 1)
        steps += [{"op": "run", "module": "o", "harness": task.harness, "seed": s, "mode": "check", "skip_over": per_seed}
                  for s in rest]
        steps += [{"op": "run", "module": "o", "harness": h, "seed": s0, "mode": "check", "again": True}
                  for h in self._harnesses()]
        steps += [{"op": "run", "module": "o", "harness": h, "seed": s0, "mode": "neutral"} for h in self._harnesses()]
        return steps

    def op_prepare(self, req: dict[str, Any]) -> dict[str, Any]:
        """Run the original in a variant process and keep what the judge needs of it."""
        task = Task.from_dict(req["task"])
        self.task = task
        self.workdir = Path(req["workdir"])
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ref = Reference()
        self.refs_on_gpu = False
        base = Baseline(ok=False, interpreted=self.interpreted, device_name=self._device_name(),
                        triton_version=_triton_version())
        tier = int(req.get("profile_tier", 0))
        steps = self._reference_steps(bool(req.get("time", True)), tier, req.get("facts") or {})
        runs = sum(1 for s in steps if s["op"] in ("run", "time", "profile"))
        notes: list[str] = []
        self.preparing = True
        t0 = time.perf_counter()
        job = self._job({"o": task.source}, steps, runs, trusted=True)
        first = True
        try:
            for frame in job.frames():
                if first:  # interpreter start, imports, sandbox, compile: before the first run ended
                    _add(base.phases, "process_start", time.perf_counter() - t0 - float(frame.meta.get("seconds", 0.0)))
                    first = False
                _add(base.phases, _phase_of(frame), float(frame.meta.get("seconds", 0.0)))
                if frame.kind == "error":
                    base.message = _setup_message(task, frame.meta)
                    return base.to_dict()
                self._absorb_reference(frame, base, notes)
                if base.message and not base.ok and not base.deterministic:
                    return base.to_dict()
            self._keep_trusted_cache(job)
        except JobFailed as e:
            base.message = f"the original kernel could not be run ({e.end.kind}): {e}"
            if e.end.stderr_tail:
                base.message += f" (last output: {' | '.join(e.end.stderr_tail.splitlines()[-3:])})"
            return base.to_dict()
        except _SetupProblem as e:
            base.message = str(e)
            return base.to_dict()
        finally:
            self.preparing = False
            base.phases["variant_process_total"] = round(time.perf_counter() - t0, 6)
            job.close()
            self.network = job.network
        if not base.deterministic:
            return base.to_dict()
        self._move_references()
        n_masked = sum(checks.count_changed(m) for m in self.ref.masks.values())
        if n_masked == 0 and not any(self.ref.neutral_raised.values()):
            base.weak_harness = True
            base.weak_reason = "with the kernel's launches skipped the harness still returns the same outputs"
        if len(task.seeds) > 1 and bitwise_equal(self.ref.outputs.get((task.harness, task.seeds[0])),
                                                 self.ref.outputs.get((task.harness, task.seeds[1]))):
            notes.append("outputs are identical for every seed: the harness does not draw seeded random inputs, "
                         "so correctness is checked on one input only")
        if not self.ref.high:
            notes.append("no float64 rerun of the original was possible: precision is checked by tolerance only")
        if self.ref.skipped:
            seeds = sorted({s for h, s in self.ref.skipped})
            size = max((_tree_bytes(v) for v in self.ref.outputs.values()), default=0)
            notes.append(f"{task.harness} returns {size / 2**30:.1f} GiB per call: it is checked on seed {task.seeds[0]} "
                         f"only, not seeds {seeds} (the references of every seed would not fit "
                         f"{_ref_host_bytes() / 2**30:.1f} GiB of host memory, {_REF_HOST_BYTES_ENV}); "
                         "smaller harnesses run every seed")
        if not self.ref.replay_valid:
            notes.append("replays of the original do not reproduce its outputs (an in-place or accumulating kernel): "
                         "timed replays are checked by launch count and grid only")
        base.ok = True
        base.launches = self.ref.launches
        base.message = "; ".join(f"note: {n}" for n in notes)
        return base.to_dict()

    def _absorb_reference(self, frame: Frame, base: Baseline, notes: list[str]) -> None:
        task = self._require_task()
        meta = frame.meta
        if frame.kind == "timing":
            base.timing = Timing.from_dict(meta["timing"])
            return
        if frame.kind == "profile":
            base.profile = meta.get("profile")
            return
        if frame.kind != "outputs":
            return
        self.ref.cuda_peak = max(self.ref.cuda_peak, int(meta.get("cuda_peak") or 0))
        mode = meta.get("mode")
        if meta.get("skipped"):
            self.ref.skipped.add((meta["harness"], int(meta["seed"])))
            return
        if mode == "replay":
            ref = self.ref.outputs[(task.harness, task.seeds[0])]
            self.ref.replay_valid = compare_outputs(ref, frame.tree).ok
            return
        h, seed = meta["harness"], int(meta["seed"])
        if mode == "neutral":
            if meta.get("error"):
                self.ref.neutral_raised[h] = True
            else:
                self.ref.masks[h] = checks.change_masks(self.ref.outputs[(h, seed)], frame.tree)
            return
        launches = [LaunchRecord.from_dict(x) for x in meta.get("launches", [])]
        if task.kernel not in {l.kernel for l in launches}:
            seen = ", ".join(sorted({l.kernel for l in launches})) or "no Triton kernel"
            raise _SetupProblem(f"the harness {h} never launches {task.kernel} (it launched: {seen})")
        tree = frame.tree
        self.ref.stale = self.ref.stale or bool(meta.get("stale"))
        if mode == "check" and meta.get("again"):
            first = self.ref.outputs[(h, seed)]
            if not bitwise_equal(first, tree):
                verdict = compare_outputs(first, tree)
                if not verdict.ok:
                    base.deterministic = False
                    base.message = ("the original is not deterministic under a fixed seed "
                                    f"({verdict.message}); seed the harness's inputs and avoid racy atomics")
                    return
                if "not bitwise reproducible" not in " ".join(notes):
                    notes.append("the original is not bitwise reproducible (within tolerance)")
            return
        high = tree.pop("upcast", None) if isinstance(tree, dict) else None
        if count_tensors(tree.get("returned")) + count_tensors(tree.get("written")) == 0:
            raise _SetupProblem(f"the harness {h} returns no tensors and its launches write none")
        self.ref.outputs[(h, seed)] = tree
        for kernel, names in (meta.get("written") or {}).items():
            have = self.ref.writes.setdefault(kernel, [])
            have += [n for n in names if n not in have]
        self.ref.changed_inputs |= set(meta.get("changed_inputs") or [])
        self.ref.streams |= set(meta.get("streams") or [])
        if h == task.harness and seed == task.seeds[0]:
            self.ref.launches = launches
        if high:
            self._absorb_high(h, seed, tree, high, meta.get("upcast") or {})

    def _absorb_high(self, h: str, seed: int, tree: Any, high: dict[str, list[Any]], present: dict[str, list[bool]]) -> None:
        kept: dict[str, list[Any]] = {}
        for key, values in high.items():
            flags = present.get(key, [])
            refs = tree["written"].get(key, [])
            kept[key] = []
            for j, value in enumerate(values):
                if j < len(flags) and flags[j] and j < len(refs) and isinstance(refs[j], torch.Tensor) \
                        and refs[j].is_floating_point() and value.shape == refs[j].shape:
                    kept[key].append(value)
                    self.ref.high_error[(h, key, j)] = checks.error_against(value, refs[j])
                else:
                    kept[key].append(None)
        if any(v is not None for vs in kept.values() for v in vs):
            self.ref.high[h] = kept

    def _move_references(self) -> None:
        """Move the references to the GPU when they fit comfortably beside what the
        harness itself needs there (comparisons on the GPU are far faster); else they stay
        on the host, where they arrived, and large candidate frames are rebuilt on the GPU
        instead (``_frame_device``)."""
        if self.ref_device != "cuda":
            return
        total = sum(_tree_bytes(tree) for tree in self.ref.outputs.values()) + _tree_bytes(self.ref.high)
        free, _ = torch.cuda.mem_get_info()
        if total <= _REF_GPU_FRACTION * free and total + self.ref.cuda_peak + _GPU_MARGIN_BYTES <= free:
            self.refs_on_gpu = True
            self.ref.outputs = {k: to_device(v, "cuda") for k, v in self.ref.outputs.items()}
            self.ref.masks = {h: {p: to_device(m, "cuda") for p, m in ms.items()} for h, ms in self.ref.masks.items()}
            self.ref.high = to_device(self.ref.high, "cuda")

    # ------------------------------------------------------------------ candidates
    def _candidate_steps(self, time_it: bool, tier: int, facts: dict[str, Any], source: str) -> list[dict[str, Any]]:
        task = self._require_task()
        s0, rest = task.seeds[0], task.seeds[1:]
        steps: list[dict[str, Any]] = []
        for h in self._harnesses()[1:]:
            steps += [{"op": "run", "module": "v", "harness": h, "seed": s, "mode": "check"} for s in task.seeds
                      if (h, s) not in self.ref.skipped]
        steps += [{"op": "run", "module": "v", "harness": task.harness, "seed": s, "mode": "check"} for s in rest
                  if (task.harness, s) not in self.ref.skipped]
        steps += [{"op": "run", "module": "v", "harness": h, "seed": s0, "mode": "neutral"} for h in self._harnesses()]
        steps.append({"op": "run", "module": "v", "harness": task.harness, "seed": s0, "mode": "check", "keep": "v"})
        steps.append({"op": "replay_check", "key": "v"})
        if time_it or tier > 0:
            steps.append({"op": "time", "key": "v"})
        if tier > 0:
            steps.append({"op": "profile", "key": "v", "tier": tier, "facts": facts, "source": source})
        steps.append({"op": "release", "key": "v"})
        steps.append({"op": "run", "module": "v", "harness": task.harness, "seed": s0, "mode": "check", "again": True})
        return steps

    def op_evaluate(self, req: dict[str, Any]) -> dict[str, Any]:
        task = self._require_task()
        vid = req.get("variant_id") or "variant"
        ev = Evaluation(status=Status.OK, interpreted=self.interpreted, variant_id=vid)
        tier = int(req.get("profile_tier", 0))
        steps = self._candidate_steps(bool(req.get("time", True)), tier, req.get("facts") or {}, req["source"])
        runs = sum(1 for s in steps if s["op"] in ("run", "time", "profile"))
        t0 = time.perf_counter()
        job = self._job({"v": req["source"]}, steps, runs, trusted=False)
        worst = None
        first = True
        try:
            for frame in job.frames():
                if first:  # interpreter start, imports, sandbox: before the first run ended
                    _add(ev.phases, "process_start", time.perf_counter() - t0 - float(frame.meta.get("seconds", 0.0)))
                    first = False
                _add(ev.phases, _phase_of(frame), float(frame.meta.get("seconds", 0.0)))
                t_judge = time.perf_counter()
                worst = self._judge_frame(frame, ev, worst)
                _add(ev.phases, "judge", time.perf_counter() - t_judge)
            ev.errors = worst
            ev.message = f"matches the original on {self._checked_runs()} ({describe(worst)})"
        except Verdict as v:
            ev.status, ev.message = v.status, v.args[0]
            ev.errors = worst if v.status != Status.MISMATCH else (ev.errors or worst)
            ev.timing = None
        except JobFailed as e:
            ev.status = Status.TIMEOUT if e.end.kind == "timeout" else Status.CRASHED
            tail = [l for l in e.end.stderr_tail.splitlines() if l.strip()][-3:]
            ev.message = str(e) + (f" (last output: {' | '.join(tail)})" if tail else "")
            ev.timing = None
        finally:
            job.close()
        ev.phases["variant_process_total"] = round(time.perf_counter() - t0, 6)
        if job.strays_killed:
            ev.message += f"; {job.strays_killed} leftover process(es) of the variant killed"
        return ev.to_dict()

    def _judge_frame(self, frame: Frame, ev: Evaluation, worst: Any) -> Any:
        task = self._require_task()
        meta = frame.meta
        if frame.kind == "error":
            raise Verdict(*_error_verdict(meta))
        if frame.kind == "timing":
            ev.timing = Timing.from_dict(meta["timing"])
            return worst
        if frame.kind == "profile":
            ev.profile = meta.get("profile")
            return worst
        if frame.kind != "outputs":
            return worst
        mode = meta.get("mode")
        if mode == "replay":
            if self.ref.replay_valid:
                verdict = compare_outputs(self.ref.outputs[(task.harness, task.seeds[0])], frame.tree)
                if not verdict.ok:
                    raise Verdict(Status.REJECTED, "trust: a replay of the timed launches does not reproduce the "
                                                   f"outputs ({verdict.message}): the timing would not be of the checked work")
            return worst
        h, seed = meta["harness"], int(meta["seed"])
        where = f"{h}, seed {seed}"
        if mode == "neutral":
            self._check_neutral(h, meta, frame.tree)
            return worst
        launches = [LaunchRecord.from_dict(x) for x in meta.get("launches", [])]
        if task.kernel not in {l.kernel for l in launches}:
            seen = ", ".join(sorted({l.kernel for l in launches})) or "no Triton kernel"
            raise Verdict(Status.REJECTED, f"the variant never launches {task.kernel} in {h} (it launched: {seen}); "
                                           "a torch fallback is not a kernel")
        self._check_side_effects(meta, where)
        verdict = compare_outputs(self.ref.outputs[(h, seed)], frame.tree)
        if not verdict.ok:
            ev.errors = verdict.stats
            prefix = "after timing, " if meta.get("again") else ""
            raise Verdict(Status.MISMATCH, f"{prefix}{where}: {verdict.message}")
        if h == task.harness and seed == task.seeds[0] and not meta.get("again"):
            ev.launches = launches
        self._check_precision(h, seed, frame.tree)
        if worst is None or verdict.stats.rel_l2 >= worst.rel_l2:
            worst = verdict.stats
        return worst

    def _check_side_effects(self, meta: dict[str, Any], where: str) -> None:
        for kernel, names in (meta.get("written") or {}).items():
            allowed = self.ref.writes.get(kernel)
            if allowed is None:
                continue
            extra = [n for n in names if n not in allowed]
            if extra:
                raise Verdict(Status.REJECTED, f"trust: {where}: {kernel} writes its argument {extra[0]}, which the "
                                               "original only reads (inputs must stay unchanged)")
        changed = [c for c in meta.get("changed_inputs") or [] if c not in self.ref.changed_inputs]
        if changed:
            raise Verdict(Status.REJECTED, f"trust: {where}: the input {changed[0]} was modified outside the kernel's "
                                           "outputs; the original leaves it unchanged")
        if meta.get("stale") and not self.ref.stale:
            raise Verdict(Status.REJECTED, f"trust: {where}: the result returned by the previous call "
                                           f"({meta['stale'][0]}) changed when the wrapper was called again "
                                           "(a shared output buffer)")
        streams = set(meta.get("streams") or []) - self.ref.streams
        if streams:
            raise Verdict(Status.REJECTED, f"trust: {where}: launches on a CUDA stream the original does not use")

    def _check_neutral(self, h: str, meta: dict[str, Any], tree: Any) -> None:
        if meta.get("error"):
            return  # the harness notices that nothing was computed: the launches matter
        if self.ref.neutral_raised.get(h):
            raise Verdict(Status.REJECTED, f"trust: {h}: with its Triton launches neutralised the variant still passes "
                                           "the harness's own checks, which fail for the original: Triton does not "
                                           "produce the result")
        task = self._require_task()
        reason = checks.unproduced(self.ref.outputs[(h, task.seeds[0])], self.ref.masks.get(h, {}), tree)
        if reason:
            raise Verdict(Status.REJECTED, f"trust: {h}: {reason}")

    def _check_precision(self, h: str, seed: int, tree: Any) -> None:
        task = self._require_task()
        high = self.ref.high.get(h)
        if not high or seed != task.seeds[0] or not isinstance(tree, dict):
            return
        for key, values in high.items():
            outs = tree.get("written", {}).get(key, [])
            for j, value in enumerate(values):
                if value is None or j >= len(outs):
                    continue
                reason = checks.precision_reason(f"{key}[{j}]", outs[j].dtype, self.ref.high_error[(h, key, j)],
                                                 checks.error_against(value, outs[j]))
                if reason:
                    raise Verdict(Status.MISMATCH, f"precision: {h}, seed {seed}: {reason}")

    # ------------------------------------------------------------------ timing
    def op_paired(self, req: dict[str, Any]) -> dict[str, Any]:
        """Original and candidate in one fresh process, both replay-checked, timed A B A B."""
        task = self._require_task()
        simulated = os.environ.get(_TEST_PAIRED_FAILURE_ENV)
        if simulated:  # tests only: the failure path of a re-measurement, which real variants no longer reach
            raise RuntimeError(simulated)
        s0 = task.seeds[0]
        steps = [
            {"op": "run", "module": "o", "harness": task.harness, "seed": s0, "mode": "check", "keep": "o"},
            {"op": "replay_check", "key": "o"},
            {"op": "run", "module": "v", "harness": task.harness, "seed": s0, "mode": "check", "keep": "v"},
            {"op": "replay_check", "key": "v"},
            {"op": "paired", "a": "o", "b": "v", "rounds": int(req.get("rounds", 10))},
        ]
        rounds = int(req.get("rounds", 10))
        job = self._job({"o": task.source, "v": req["source"]}, steps, 4 + rounds, trusted=False)
        ref = self.ref.outputs[(task.harness, s0)]
        try:
            for frame in job.frames():
                if frame.kind == "error":
                    raise RuntimeError(f"variant {req.get('variant_id')} no longer passes: {frame.meta.get('message')}")
                if frame.kind == "outputs":
                    verdict = compare_outputs(ref, frame.tree)
                    if not verdict.ok and (frame.meta.get("mode") != "replay" or self.ref.replay_valid):
                        raise RuntimeError(f"variant {req.get('variant_id')} no longer passes in the paired run: "
                                           f"{verdict.message}")
                if frame.kind == "paired":
                    return paired_statistics(frame.meta["a_ms"], frame.meta["b_ms"], frame.meta["clock"]).to_dict()
        except JobFailed as e:
            raise RuntimeError(f"paired timing failed ({e.end.kind}): {e}") from None
        finally:
            job.close()
        raise RuntimeError("paired timing ended without a result")

    def op_retime(self, req: dict[str, Any]) -> dict[str, Any]:
        """Time the original exactly as a candidate's timing step runs (a fresh process, a
        kept run, its replay check, then frozen replays), without re-running every check:
        the baseline that per-candidate ratios divide by."""
        task = self._require_task()
        s0 = task.seeds[0]
        steps = [{"op": "run", "module": "o", "harness": task.harness, "seed": s0, "mode": "check", "keep": "o"},
                 {"op": "replay_check", "key": "o"},
                 {"op": "time", "key": "o"}]
        job = self._job({"o": task.source}, steps, 3, trusted=True)
        try:
            for frame in job.frames():
                if frame.kind == "error":
                    raise RuntimeError(f"the original no longer runs: {frame.meta.get('message')}")
                if frame.kind == "outputs" and frame.meta.get("mode") != "replay":
                    verdict = compare_outputs(self.ref.outputs[(task.harness, s0)], frame.tree)
                    if not verdict.ok:
                        raise RuntimeError(f"the original no longer gives its references: {verdict.message}")
                if frame.kind == "timing":
                    return {"timing": frame.meta["timing"]}
        except JobFailed as e:
            raise RuntimeError(f"re-timing the original failed ({e.end.kind}): {e}") from None
        finally:
            job.close()
        raise RuntimeError("re-timing the original ended without a timing")

    def op_profile(self, req: dict[str, Any]) -> dict[str, Any]:
        """Profile the original (source None) or a variant at a tier."""
        task = self._require_task()
        source = req.get("source") or task.source
        tier = int(req.get("tier", 2))
        steps = [{"op": "run", "module": "m", "harness": task.harness, "seed": task.seeds[0], "mode": "check", "keep": "m"},
                 {"op": "time", "key": "m"},
                 {"op": "profile", "key": "m", "tier": tier, "facts": req.get("facts") or {}, "source": source}]
        job = self._job({"m": source}, steps, 3, trusted=req.get("source") is None)
        out: dict[str, Any] = {}
        try:
            for frame in job.frames():
                if frame.kind == "error":
                    raise RuntimeError(f"cannot profile: {frame.meta.get('message')}")
                if frame.kind == "outputs" and req.get("source") is not None:
                    verdict = compare_outputs(self.ref.outputs[(task.harness, task.seeds[0])], frame.tree)
                    if not verdict.ok:
                        raise RuntimeError(f"cannot profile a failing variant: {verdict.message}")
                if frame.kind == "timing":
                    out["timing"] = frame.meta["timing"]
                if frame.kind == "profile":
                    out["profile"] = frame.meta.get("profile")
        except JobFailed as e:
            raise RuntimeError(f"profiling failed ({e.end.kind}): {e}") from None
        finally:
            job.close()
        return out

    def op_device_facts(self, req: dict[str, Any]) -> Optional[dict[str, Any]]:
        try:
            from .device_facts import measure_device_facts
        except ImportError:
            return None
        return measure_device_facts()

    def op_sync(self, req: dict[str, Any]) -> None:
        if _gpu():
            torch.cuda.synchronize()

    def op_sanitize(self, req: dict[str, Any]) -> dict[str, Any]:
        """Run a candidate's correctness harnesses once under compute-sanitizer memcheck
        (each tensor its own allocation, so an access past any tensor is reported): the
        out-of-bounds reads and writes that comparisons cannot see. GPU only."""
        task = self._require_task()
        tool = find_compute_sanitizer()
        if not _gpu():
            return {"ran": False, "ok": True, "reason": "no GPU: the interpreter has no memcheck"}
        if tool is None:
            return {"ran": False, "ok": True, "reason": "compute-sanitizer not found (CUDA's bin folder or PATH)"}
        harnesses = [h for h in task.check_harnesses if h != task.harness] or [task.harness]
        steps = [{"op": "run", "module": "v", "harness": h, "seed": task.seeds[0], "mode": "check"} for h in harnesses]
        assert self.workdir is not None
        log = self.workdir / f"memcheck-{os.getpid()}-{time.monotonic_ns()}.log"
        job = VariantJob(
            {"task": task.to_dict(), "modules": {"v": req["source"]}, "steps": steps, "interpreted": False,
             "writes": self.ref.writes},
            timeout_s=float(req.get("run_timeout_s", 300.0)), trusted_cache=self.workdir / "triton-cache-trusted",
            device=None, on_log=self.on_log,
            # the sanitizer talks to its target over loopback: both run in one private network
            wrapper=[sys.executable, "-m", "kernelband.worker.sandbox",
                     tool, "--tool", "memcheck", "--error-exitcode", "86", "--print-limit", "8", "--log-file", str(log)],
            extra_env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
        )
        job.start(None)
        ended = "ok"
        try:
            for frame in job.frames():
                if frame.kind == "error":
                    ended = f"error: {frame.meta.get('message', '')[:300]}"
            code = job.proc.wait(timeout=60)
        except JobFailed as e:
            ended, code = f"{e.end.kind}: {e}", None
        finally:
            job.close()
        report = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        log.unlink(missing_ok=True)
        findings = [l.strip("= ").strip() for l in report.splitlines()
                    if "Invalid" in l or "out of bounds" in l.lower() or "ERROR SUMMARY" in l][:6]
        failed = code == 86 or any(l.startswith("Invalid") for l in findings)
        return {"ran": True, "ok": not failed, "exit_code": code, "job": ended, "findings": findings,
                "harnesses": harnesses}

    def op_sandbox(self, req: dict[str, Any]) -> dict[str, Any]:
        """What the sandbox could do on this machine (network isolation), for reports."""
        return {"network": self.network}


class _SetupProblem(Exception):
    pass


def find_compute_sanitizer() -> Optional[str]:
    import shutil

    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and os.path.exists(os.path.join(base, "bin", "compute-sanitizer")):
            return os.path.join(base, "bin", "compute-sanitizer")
    return None


def _tree_bytes(tree: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in checks.leaves(tree) if isinstance(t, torch.Tensor))


def _add(phases: dict[str, float], name: str, seconds: float) -> None:
    phases[name] = round(phases.get(name, 0.0) + max(seconds, 0.0), 6)


def _phase_of(frame: Frame) -> str:
    """Which check a frame's seconds belong to (for the cost-of-defences report)."""
    mode = frame.meta.get("mode")
    if frame.kind == "timing":
        return "timing"
    if frame.kind == "profile":
        return "profile"
    if mode == "neutral":
        return "neutralised_runs"
    if mode == "replay":
        return "replay_check"
    if frame.meta.get("again"):
        return "recheck_after_timing"
    return "correctness_runs"


def _triton_version() -> str:
    import triton

    return triton.__version__


def _setup_message(task: Task, meta: dict[str, Any]) -> str:
    phase, message = meta.get("phase"), meta.get("message", "")
    if phase in ("import", "compile") and meta.get("step") is None:
        return f"the original module does not import: {message}"
    h = meta.get("harness") or task.harness
    if phase == "assert":
        return f"the harness {h} fails its own check on the original kernel: {message}"
    return f"the harness {h} fails on the original kernel: {message}"


def _error_verdict(meta: dict[str, Any]) -> tuple[Status, str]:
    phase, message = meta.get("phase"), str(meta.get("message", ""))
    where = f"{meta['harness']}, seed {meta['seed']}: " if meta.get("harness") is not None else ""
    if phase == "tampered":
        return Status.REJECTED, f"trust: {message}"
    if phase == "assert":
        return Status.MISMATCH, f"{where}the harness's own check failed: {message}"
    if phase in ("import", "compile"):
        prefix = "does not import: " if meta.get("step") is None else where
        return Status.COMPILE_ERROR, f"{prefix}{message}"
    suffix = " (CUDA context corrupted: the variant process was replaced)" if meta.get("fatal") else ""
    return Status.RUNTIME_ERROR, f"{where}{message}{suffix}"
