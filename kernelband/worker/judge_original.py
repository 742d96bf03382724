"""The judge's ``prepare`` op: run the original in a variant process and keep what the
judge needs of it (``Reference``): its outputs per (harness, seed), which outputs its
Triton launches produce, a float64 rerun for the precision check, what it writes, and
whether it is deterministic; the Baseline says what was found."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch

from ..model import Baseline, LaunchRecord, Task, Timing
from . import checks
from .compare import bitwise_equal, compare_outputs, count_tensors, to_device
from .jobs import Frame, JobFailed
from .judge_core import GPU_MARGIN_BYTES, JudgeCore, Reference, count_runs, timed_frames, timed_steps

_REF_GPU_FRACTION = 0.4  # references stay on the GPU while they take at most this share of free memory
# Host memory the references of one harness may take across its seeds (DESIGN section 4:
# host memory stays under about 2 GiB plus one copy of the outputs). A harness whose
# outputs per call are bigger than this share keeps the reference of its first seed only:
# its other seeds are not run (the small correctness harnesses still run every seed).
_REF_HOST_BYTES_ENV = "KERNELBAND_REF_HOST_BYTES"
_REF_HOST_BYTES = 2 << 30


class _SetupProblem(Exception):
    pass


def ref_host_bytes() -> int:
    try:
        return max(int(os.environ.get(_REF_HOST_BYTES_ENV, _REF_HOST_BYTES)), 0)
    except ValueError:
        return _REF_HOST_BYTES


def reference_steps(judge: JudgeCore, time_it: bool, tier: int, facts: dict[str, Any]) -> list[dict[str, Any]]:
    task = judge.require_task()
    s0, rest = task.seeds[0], task.seeds[1:]
    harnesses = judge.harnesses()
    steps: list[dict[str, Any]] = []
    for h in harnesses[1:]:
        steps += [{"op": "run", "module": "o", "harness": h, "seed": s, "mode": "upcast" if s == s0 else "check"}
                  for s in task.seeds]
    steps.append({"op": "run", "module": "o", "harness": task.harness, "seed": s0, "mode": "upcast", "keep": "o"})
    steps += timed_steps("o", time_it, tier, facts, task.source)
    # the timing harness's other seeds only while their references fit the host budget
    per_seed = ref_host_bytes() // max(len(task.seeds), 1)
    steps += [{"op": "run", "module": "o", "harness": task.harness, "seed": s, "mode": "check", "skip_over": per_seed}
              for s in rest]
    steps += [{"op": "run", "module": "o", "harness": h, "seed": s0, "mode": "check", "again": True} for h in harnesses]
    steps += [{"op": "run", "module": "o", "harness": h, "seed": s0, "mode": "neutral"} for h in harnesses]
    return steps


def prepare(judge: JudgeCore, req: dict[str, Any]) -> dict[str, Any]:
    """Run the original in a variant process and keep what the judge needs of it."""
    task = Task.from_dict(req["task"])
    judge.task = task
    judge.workdir = Path(req["workdir"])
    judge.workdir.mkdir(parents=True, exist_ok=True)
    judge.ref = Reference()
    judge.refs_on_gpu = False
    base = Baseline(ok=False, interpreted=judge.interpreted, device_name=judge.device_name(),
                    triton_version=_triton_version())
    notes: list[str] = []
    if not _run_original(judge, task, req, base, notes) or not base.deterministic:
        return base.to_dict()
    base.phases["output_bytes"] = decoded_bytes(judge.ref.outputs.get((task.harness, task.seeds[0])))
    move_references(judge)
    notes += _baseline_notes(judge, task, base)
    base.ok = True
    base.launches = judge.ref.launches
    base.message = "; ".join(f"note: {n}" for n in notes)
    return base.to_dict()


def _run_original(judge: JudgeCore, task: Task, req: dict[str, Any], base: Baseline, notes: list[str]) -> bool:
    """The reference job, its frames absorbed into the judge's Reference; False (with
    ``base.message`` saying why) when the original cannot serve as a reference."""
    steps = reference_steps(judge, bool(req.get("time", True)), int(req.get("profile_tier", 0)), req.get("facts") or {})
    judge.preparing = True
    t0 = time.perf_counter()
    job = judge.job({"o": task.source}, steps, count_runs(steps), trusted=True)
    try:
        for frame in timed_frames(job, base.phases, t0):
            if frame.kind == "error":
                base.message = _setup_message(task, frame.meta)
                return False
            _absorb_reference(judge, frame, base, notes)
            if base.message and not base.ok and not base.deterministic:
                return False
        judge.keep_trusted_cache(job)
    except JobFailed as e:
        base.message = f"the original kernel could not be run ({e.end.kind}): {e}"
        if e.end.stderr_tail:
            base.message += f" (last output: {' | '.join(e.end.stderr_tail.splitlines()[-3:])})"
        return False
    except _SetupProblem as e:
        base.message = str(e)
        return False
    finally:
        judge.preparing = False
        base.phases["variant_process_total"] = round(time.perf_counter() - t0, 6)
        job.close()
        base.phases.update(job.timeline_phases())
        judge.network = job.network
    return True


def _baseline_notes(judge: JudgeCore, task: Task, base: Baseline) -> list[str]:
    """What the Baseline should say about how far the checks can go (a weak harness is
    flagged on ``base``)."""
    ref, notes = judge.ref, []
    n_masked = sum(checks.count_changed(m) for m in ref.masks.values())
    if n_masked == 0 and not any(ref.neutral_raised.values()):
        base.weak_harness = True
        base.weak_reason = "with the kernel's launches skipped the harness still returns the same outputs"
    if len(task.seeds) > 1 and bitwise_equal(ref.outputs.get((task.harness, task.seeds[0])),
                                             ref.outputs.get((task.harness, task.seeds[1]))):
        notes.append("outputs are identical for every seed: the harness does not draw seeded random inputs, "
                     "so correctness is checked on one input only")
    if not ref.high:
        notes.append("no float64 rerun of the original was possible: precision is checked by tolerance only")
    if ref.skipped:
        seeds = sorted({s for h, s in ref.skipped})
        size = max((decoded_bytes(v) for v in ref.outputs.values()), default=0)
        notes.append(f"{task.harness} returns {size / 2**30:.1f} GiB per call: it is checked on seed {task.seeds[0]} "
                     f"only, not seeds {seeds} (the references of every seed would not fit "
                     f"{ref_host_bytes() / 2**30:.1f} GiB of host memory, {_REF_HOST_BYTES_ENV}); "
                     "smaller harnesses run every seed")
    if not ref.replay_valid:
        notes.append("replays of the original do not reproduce its outputs (an in-place or accumulating kernel): "
                     "timed replays are checked by launch count and grid only")
    return notes


def _absorb_reference(judge: JudgeCore, frame: Frame, base: Baseline, notes: list[str]) -> None:
    task, ref, meta = judge.require_task(), judge.ref, frame.meta
    if frame.kind == "timing":
        base.timing = Timing.from_dict(meta["timing"])
        return
    if frame.kind == "profile":
        base.profile = meta.get("profile")
        return
    if frame.kind != "outputs":
        return
    ref.cuda_peak = max(ref.cuda_peak, int(meta.get("cuda_peak") or 0))
    mode = meta.get("mode")
    if meta.get("skipped"):
        ref.skipped.add((meta["harness"], int(meta["seed"])))
        return
    if mode == "replay":
        ref.replay_valid = compare_outputs(ref.outputs[(task.harness, task.seeds[0])], frame.tree).ok
        return
    h, seed = meta["harness"], int(meta["seed"])
    if mode == "neutral":
        if meta.get("error"):
            ref.neutral_raised[h] = True
        else:
            ref.masks[h] = checks.change_masks(ref.outputs[(h, seed)], frame.tree)
        return
    launches = [LaunchRecord.from_dict(x) for x in meta.get("launches", [])]
    if task.kernel not in {l.kernel for l in launches}:
        seen = ", ".join(sorted({l.kernel for l in launches})) or "no Triton kernel"
        raise _SetupProblem(f"the harness {h} never launches {task.kernel} (it launched: {seen})")
    ref.stale = ref.stale or bool(meta.get("stale"))
    if mode == "check" and meta.get("again"):
        _absorb_rerun(ref.outputs[(h, seed)], frame.tree, base, notes)
        return
    _absorb_outputs(judge, h, seed, frame, launches)


def _absorb_rerun(first: Any, tree: Any, base: Baseline, notes: list[str]) -> None:
    """A second run of the original under the same seed: it must reproduce the first."""
    if bitwise_equal(first, tree):
        return
    verdict = compare_outputs(first, tree)
    if not verdict.ok:
        base.deterministic = False
        base.message = ("the original is not deterministic under a fixed seed "
                        f"({verdict.message}); seed the harness's inputs and avoid racy atomics")
        return
    if "not bitwise reproducible" not in " ".join(notes):
        notes.append("the original is not bitwise reproducible (within tolerance)")


def _absorb_outputs(judge: JudgeCore, h: str, seed: int, frame: Frame, launches: list[LaunchRecord]) -> None:
    """A checked run of the original: its outputs become the reference of (h, seed)."""
    task, ref, meta, tree = judge.require_task(), judge.ref, frame.meta, frame.tree
    high = tree.pop("upcast", None) if isinstance(tree, dict) else None
    if count_tensors(tree.get("returned")) + count_tensors(tree.get("written")) == 0:
        raise _SetupProblem(f"the harness {h} returns no tensors and its launches write none")
    ref.outputs[(h, seed)] = tree
    for kernel, names in (meta.get("written") or {}).items():
        have = ref.writes.setdefault(kernel, [])
        have += [n for n in names if n not in have]
    ref.changed_inputs |= set(meta.get("changed_inputs") or [])
    ref.streams |= set(meta.get("streams") or [])
    if h == task.harness and seed == task.seeds[0]:
        ref.launches = launches
    if high:
        _absorb_high(ref, h, tree, high, meta.get("upcast") or {})


def _absorb_high(ref: Reference, h: str, tree: Any, high: dict[str, list[Any]], present: dict[str, list[bool]]) -> None:
    kept: dict[str, list[Any]] = {}
    for key, values in high.items():
        flags = present.get(key, [])
        refs = tree["written"].get(key, [])
        kept[key] = []
        for j, value in enumerate(values):
            if j < len(flags) and flags[j] and j < len(refs) and isinstance(refs[j], torch.Tensor) \
                    and refs[j].is_floating_point() and value.shape == refs[j].shape:
                kept[key].append(value)
                ref.high_error[(h, key, j)] = checks.error_against(value, refs[j])
            else:
                kept[key].append(None)
    if any(v is not None for vs in kept.values() for v in vs):
        ref.high[h] = kept


def move_references(judge: JudgeCore) -> None:
    """Move the references to the GPU when they fit comfortably beside what the
    harness itself needs there (comparisons on the GPU are far faster); else they stay
    on the host, where they arrived, and large candidate frames are rebuilt on the GPU
    instead (``JudgeCore._frame_device``)."""
    if judge.ref_device != "cuda":
        return
    ref = judge.ref
    total = sum(decoded_bytes(tree) for tree in ref.outputs.values()) + decoded_bytes(ref.high)
    free, _ = torch.cuda.mem_get_info()
    if total <= _REF_GPU_FRACTION * free and total + ref.cuda_peak + GPU_MARGIN_BYTES <= free:
        judge.refs_on_gpu = True
        ref.outputs = {k: to_device(v, "cuda") for k, v in ref.outputs.items()}
        ref.masks = {h: {p: to_device(m, "cuda") for p, m in ms.items()} for h, ms in ref.masks.items()}
        ref.high = to_device(ref.high, "cuda")


def decoded_bytes(tree: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in checks.leaves(tree) if isinstance(t, torch.Tensor))


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
