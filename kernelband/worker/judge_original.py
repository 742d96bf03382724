"""The judge's ``prepare`` op: run the original in a variant process and keep what the
judge needs of it (``Reference``): its outputs per (harness, seed), which outputs its
Triton launches produce, a float64 rerun of them per (harness, seed) for the precision
check, what it writes, and whether it is deterministic; the Baseline says what was found."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Optional

import torch

from ..model import Baseline, Task
from ..profile.schema import DeviceFacts, Profile
from ..trace import mark
from . import checks, fused_checks
from .call_spec import DerivedCall
from .compare import bitwise_equal, compare_outputs, count_tensors, to_device
from .gpu_lock import gpu_lock
from .jobs import Frame, JobFailed, VariantJob
from .lane_turns import LaneLevel
from . import judge_derivation
from .judge_derived import calls_to_derive, optional_parameters
from .judge_core import (
    GPU_MARGIN_BYTES,
    MAX_LANES,
    JudgeCore,
    Lane,
    Reference,
    add_frame_phase,
    count_runs,
    deadline_s,
    gpu,
    lane_bytes,
    note_run_seconds,
    original_setup_message,
    timed_steps,
)
from .messages import (
    ErrorFrame,
    FrameMeta,
    Mark,
    ProfileFrame,
    ProfileStep,
    ReplayCheck,
    ReplayOutputs,
    Run,
    RunOutputs,
    Step,
    TimingFrame,
)
from .observe import CallHistory, comparable, condense_locals, fingerprint_tables, materialize, tree_bytes
from .requests import Prepare
from .stats import median_timing

_REF_GPU_FRACTION = 0.4  # references stay on the GPU while they take at most this share of free memory
_PINNED_HOST_FRACTION = 0.3  # ... else on the host, page-locked while they take at most this share of it
# Host memory the references of one harness may take across its seeds (DESIGN section 4:
# host memory stays under about 2 GiB plus one copy of the outputs). A harness whose
# outputs per call are bigger than this share keeps the reference of its first seed only:
# its other seeds are not run (the small correctness harnesses still run every seed). A
# seed past the first keeps its float64 rerun only while it fits that share beside its
# outputs (the first seed's is always kept).
_REF_HOST_BYTES_ENV = "KERNELBAND_REF_HOST_BYTES"
_REF_HOST_BYTES = 2 << 30


class _SetupProblem(Exception):
    pass


def ref_host_bytes() -> int:
    try:
        return max(int(os.environ.get(_REF_HOST_BYTES_ENV, _REF_HOST_BYTES)), 0)
    except ValueError:
        return _REF_HOST_BYTES


def seed_share_bytes(task: Task) -> int:
    """Host memory one seed's references of a harness may take (outputs and float64 rerun)."""
    return ref_host_bytes() // max(len(task.seeds), 1)


LANE_ENV = "KERNELBAND_LANE"  # "0": no reference lane (candidates are timed alone)
LANE_ROUNDS = 5  # samples of the original that make the baseline time (on a GPU)


def reference_steps(judge: JudgeCore, time_it: bool, tier: int, facts: DeviceFacts) -> list[Step]:
    task = judge.require_task()
    s0, rest = task.seeds[0], task.seeds[1:]
    harnesses = judge.harnesses()
    steps: list[Step] = []
    # every seed reruns the original's launches in float64: a candidate's precision is
    # judged at each seed, so rounding only for some inputs has nowhere to hide
    for h in harnesses[1:]:
        steps += [Run("o", h, s, "upcast") for s in task.seeds]
    from .judge_derived import wrapper_names

    steps.append(Run("o", task.harness, s0, "upcast", keep="o", record=wrapper_names(task.source, task.kernel)))
    steps += timed_steps("o", time_it, tier, facts, task.source)
    # the timing harness's other seeds only while their references fit the host budget
    steps += [Run("o", task.harness, s, "upcast", skip_over=seed_share_bytes(task)) for s in rest]
    steps += [Run("o", h, s0, "check", again=True) for h in harnesses]
    steps += [Run("o", h, s0, "neutral") for h in harnesses]
    return steps


def prepare(judge: JudgeCore, req: Prepare) -> dict[str, Any]:
    """Run the original in a variant process and keep what the judge needs of it; keep
    that process as the reference lane when two runs of the harness fit on the GPU."""
    try:
        return _prepare(judge, req)
    finally:  # a derivation started early judges its frames once prepare is done with the references
        judge.ref.references_final.set()


def _prepare(judge: JudgeCore, req: Prepare) -> dict[str, Any]:
    task = req.task
    judge.close_lane()
    judge.spares.close()
    judge.task = task
    judge.workdir = Path(req.workdir)
    judge.workdir.mkdir(parents=True, exist_ok=True)
    judge.ref = Reference()
    judge.refs_on_gpu = False
    base = Baseline(
        ok=False, interpreted=judge.interpreted, device_name=judge.device_name(), triton_version=_triton_version()
    )
    notes: list[str] = []
    job = _run_original(judge, task, req, base, notes)
    # a machine where the judge cannot map a variant process's memory: first without the
    # sandbox layers that CUDA IPC may not cross (the pid, then the IPC namespace), then
    # outputs as bytes (slower, the same checks)
    for skip, transport in (("pid", "cuda_ipc"), ("pid,ipc", "cuda_ipc"), ("", "bytes")):
        if job is not None or judge.transport != "cuda_ipc" or "IPC" not in base.message:
            break
        notes.append(
            f"CUDA IPC failed with the sandbox's {judge.sandbox_skip or 'every'} layer(s) "
            f"({base.message[:160]}); trying {'without ' + skip if skip else 'outputs as bytes'}"
        )
        judge.transport, judge.sandbox_skip = transport, skip
        judge.ref.references_final.set()  # its derivation, if one started, is not waited for
        judge.ref = Reference()
        base.message, base.phases = "", {}
        job = _run_original(judge, task, req, base, notes)
    if job is None or not base.deterministic:
        judge.spares.close()  # started during the reference job: no candidate will take them
        return base.to_dict()
    base.phases["output_bytes"] = tree_bytes(judge.ref.outputs.get((task.harness, task.seeds[0])))
    move_references(judge)
    judge.ref.references_final.set()
    mark("judge.references_final")
    # what the original compiled, kept once: a candidate whose kernel and launch settings
    # are the original's loads it, not compiles it
    judge.keep_trusted_cache(job)
    # the lane's five baseline samples, in one exclusive turn: behind the spares' contexts
    # (GPU work under the shared hold) made between them, the five took 0.6-2.0 s in 28 of
    # 36 sessions, about 0.1 s in the others (traces of h200x2_f1e2e02)
    lane_ok = lane_fits(judge)
    lane_note = _open_lane(judge, job, base, req.time, lane_ok)
    if lane_note:
        notes.append(lane_note)
    # then the derivation (where it did not start early), which the first verdicts wait
    # for, before any spare not started yet: the fork server serves its processes first
    derivation_notes: list[str] = []
    failure = (
        ""
        if judge.ref.derive_started
        else _derive_references(judge, base, derivation_notes, candidate_lanes(judge) + int(lane_ok))
    )
    if failure:
        judge.close_lane()
        job.close()
        judge.spares.close()
        base.message = failure
        return base.to_dict()
    if not judge.ref.spares_started:  # no timing (or no profile) to start them after
        judge.keep_spares(candidate_lanes(judge))
    notes += _baseline_notes(judge, task, base) + derivation_notes
    base.lanes = judge.lanes = candidate_lanes(judge)
    base.ok = True
    base.launches = judge.ref.launches
    base.message = "; ".join(f"note: {n}" for n in notes)
    if judge.on_gpu:  # compiled while the first candidates start (not during this setup: its seconds)
        device = torch.device("cuda", torch.cuda.current_device())
        large = {
            t.dtype
            for tree in judge.ref.outputs.values()
            for _, t in checks.leaves(tree)
            if isinstance(t, torch.Tensor) and t.numel() * t.element_size() >= fused_checks.WARM_MIN_BYTES
        }
        fused_checks.warm(device, large, fingerprint_tables(device, large))
    return base.to_dict()


def _derive_references(judge: JudgeCore, base: Baseline, notes: list[str], lanes: int) -> str:
    """The original on calls of its wrapper that the harness never makes (judge_derivation):
    started in the background where the GPU has room beside ``lanes`` runs of the harness,
    else run now (their notes join ``notes``). ``base.derived_calls`` bounds the
    candidates' deadlines. Returns why the original cannot be a reference beyond its
    harness, or ""."""
    ref = judge.ref
    if not ref.recorded_calls:
        ref.derived_ready.set()
        notes.append(
            "the harness's calls of the kernel's wrapper could not be recorded: no inputs beyond the "
            "harness are checked"
        )
        return ""
    calls = _drawn_calls(judge)
    if judge_derivation.in_background(judge, lanes):
        # a candidate may wait for the derivation, then run every kept call
        base.derived_calls = len(calls) + ref.derivation_runs
        judge_derivation.start(judge, calls)
        return ""
    judge_derivation.derive(judge, ref, calls, keep_cache=True)
    base.phases["derived_calls"] = ref.derived_s
    base.derived_calls = len(ref.derived)
    notes += ref.derived_notes
    return ref.derived_failure


def _drawn_calls(judge: JudgeCore) -> list[DerivedCall]:
    """The calls beyond the harness the original is run on, kept in ``judge.ref`` with the
    harness-run deadlines they may take."""
    task, ref = judge.require_task(), judge.ref
    calls = calls_to_derive(
        ref.recorded_calls, judge.session_seed, judge.interpreted, optional_parameters(task.source, task.kernel)
    )
    ref.drawn_calls, ref.derivation_runs = list(calls), judge_derivation.planned_runs(calls)
    return calls


def _derive_early(judge: JudgeCore, base: Baseline) -> None:
    """Start the derivation in the background as soon as the original's first run of the
    harness has recorded its calls of the wrapper, while the reference job goes on (its
    other runs, its timing, then the lane's): where the GPU has room for it beside the
    candidates' lanes and the lane (``judge_derivation.in_background``). Its processes
    start, import and compile meanwhile, its runs take the GPU between the setup's timed
    turns, and it judges its frames once the references are final. Started after the
    lane, it took 4-20 s on the way to most first verdicts (SESSION9.md); prepare starts
    it there where it did not start here (``ref.derive_started``)."""
    ref = judge.ref
    if ref.derive_started or not judge_derivation.in_background(judge, candidate_lanes(judge) + 1):
        return
    calls = _drawn_calls(judge)
    base.derived_calls = len(calls) + ref.derivation_runs
    judge_derivation.start(judge, calls)


def _spares_early(judge: JudgeCore) -> None:
    """The first wave's processes, started once the reference job has timed (and profiled)
    the original: their CUDA contexts are made beside its remaining runs. Started after
    prepare, the eight contexts were made while the first candidates waited for them: a
    median 1.4-2.8 s before their first frame, against 0.1 s when made ahead
    (benchmarks/results/eval_speed/SESSION10.md). The lane's samples, later, wait for
    any context still being made (its GPU work under the shared hold)."""
    if not judge.ref.spares_started:
        judge.ref.spares_started = True
        judge.keep_spares(candidate_lanes(judge))


def lane_fits(judge: JudgeCore) -> bool:
    """Whether the original's kept run can stay on the GPU beside a candidate's run and
    one set of its outputs read by the judge (the original's measured peak twice, its
    outputs once, a margin). Where it cannot, the winner's paired re-measurement runs in
    sequence: the 32 GiB layernorm interleaved held 65 GiB on the GPU and decoded the
    variant's 16 GiB frames on the host (34.7 GiB there, 43 s per compare)."""
    if os.environ.get(LANE_ENV, "1") == "0":
        return False
    if not gpu() or judge.ref.cuda_peak <= 0:
        return True
    free, _ = torch.cuda.mem_get_info()
    outputs = tree_bytes(judge.ref.outputs.get((judge.require_task().harness, judge.require_task().seeds[0])))
    fits = 2 * judge.ref.cuda_peak + outputs + GPU_MARGIN_BYTES <= free
    mark("judge.lane_fits", fits=fits, free=free, peak=judge.ref.cuda_peak, outputs=outputs)
    return fits


def candidate_lanes(judge: JudgeCore) -> int:
    """How many candidates may be evaluated at once on this GPU: each holds one run of the
    harness; the CPU work of the others (start-up, compilation) overlaps the GPU's."""
    wanted = os.environ.get("KERNELBAND_LANES")
    if wanted and wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    if not gpu():
        return 1  # the interpreter is CPU-bound: concurrency buys nothing
    cores = os.cpu_count() or 2
    free, _ = torch.cuda.mem_get_info()
    by_memory = int(free * 0.8 // lane_bytes(judge.ref))
    mark("judge.lanes", cores=cores, by_memory=by_memory, free=free, peak=judge.ref.cuda_peak)
    # a candidate spends most of its wall time on its own core (start-up, compile) or
    # waiting for a GPU turn: on 16 cores 6 lanes gave 17-19% more evaluations a minute
    # than 4, and 8 a median 19% more than 6 (benchmarks/results/eval_speed/h200_5d2745f_lanes)
    return max(1, min(MAX_LANES, cores // 2, by_memory))


def _open_lane(judge: JudgeCore, job: VariantJob, base: Baseline, time_it: bool, fits: bool) -> str:
    """Keep the original's process as the reference lane (a fresh kept run, checked, replay
    checked) and take the baseline time from it where it ``fits`` (``lane_fits``); else
    close it. A note when there is none."""
    task = judge.require_task()
    if not fits:
        job.close()
        return (
            "two runs of the timing harness do not fit on the GPU together: candidates are timed alone, "
            "against the original's time measured once"
        )
    steps: list[Step] = [Run("o", task.harness, task.seeds[0], "check", keep="o", again=True), ReplayCheck("o")]
    try:
        job.command(steps + [Mark()], deadline_s(task.timeout_s, 2))
        ref = judge.ref.outputs[(task.harness, task.seeds[0])]
        for frame in job.until_mark():
            if isinstance(frame.meta, ErrorFrame):
                raise RuntimeError(frame.meta.message)
            if isinstance(frame.meta, RunOutputs) or (isinstance(frame.meta, ReplayOutputs) and judge.ref.replay_valid):
                verdict = compare_outputs(ref, comparable(frame.tree))
                if not verdict.ok:
                    raise RuntimeError(f"its kept run differs from its references: {verdict.message}")
        lane = Lane(job)
        if time_it:
            # the five in one exclusive turn of the judge's: no other work of ours between them
            with gpu_lock(exclusive=True) if gpu() else contextlib.nullcontext():
                samples = [
                    lane.sample(True, deadline_s(task.timeout_s, 1))[0] for _ in range(LANE_ROUNDS if gpu() else 2)
                ]
            clock = "cuda-events" if gpu() else "cpu-interpreter"
            base.timing = median_timing(samples, clock, len(judge.ref.launches))
            lane.level = LaneLevel(base.timing.median_ms)
        judge.lane = lane
        base.reference_lane = True
        return ""
    except (JobFailed, RuntimeError) as e:
        job.close()
        return f"the original could not be kept as the reference lane ({e}): candidates are timed alone"


def _run_original(judge: JudgeCore, task: Task, req: Prepare, base: Baseline, notes: list[str]) -> Optional[VariantJob]:
    """The reference job, its frames absorbed into the judge's Reference: the job, still
    running (it may become the reference lane), or None (with ``base.message`` saying
    why) when the original cannot serve as a reference."""
    steps = reference_steps(judge, req.time, req.profile_tier, req.facts)
    judge.preparing = True
    t0 = time.perf_counter()
    job = judge.job({"o": task.source}, steps + [Mark()], count_runs(steps), trusted=True, interactive=True)
    history = CallHistory()
    profiled = any(isinstance(step, ProfileStep) for step in steps)
    ok = False
    try:
        for frame in job.until_mark():
            add_frame_phase(base.phases, frame, t0)
            note_run_seconds(judge.ref, frame)
            if isinstance(frame.meta, ErrorFrame):
                base.message = original_setup_message(task, frame.meta)
                return None
            recorded = bool(judge.ref.recorded_calls)
            _absorb_reference(judge, frame, base, notes, history)
            if not recorded and judge.ref.recorded_calls:
                _derive_early(judge, base)
            if isinstance(frame.meta, ProfileFrame) or (isinstance(frame.meta, TimingFrame) and not profiled):
                _spares_early(judge)
            if base.message and not base.ok and not base.deterministic:
                return None
        ok = True
    except JobFailed as e:
        base.message = f"the original kernel could not be run ({e.end.kind}): {e}"
        if e.end.stderr_tail:
            base.message += f" (last output: {' | '.join(e.end.stderr_tail.splitlines()[-3:])})"
        return None
    except _SetupProblem as e:
        base.message = str(e)
        return None
    finally:
        judge.preparing = False
        base.phases["variant_process_total"] = round(time.perf_counter() - t0, 6)
        base.phases.update(job.timeline_phases())
        judge.network = job.network
        if not ok:
            job.close()
    return job


def _baseline_notes(judge: JudgeCore, task: Task, base: Baseline) -> list[str]:
    """What the Baseline should say about how far the checks can go (a weak harness is
    flagged on ``base``)."""
    ref, notes = judge.ref, []
    n_masked = sum(checks.count_changed(m) for m in ref.masks.values())
    if n_masked == 0 and not any(ref.neutral_raised.values()):
        base.weak_harness = True
        base.weak_reason = "with the kernel's launches skipped the harness still returns the same outputs"
    if len(task.seeds) > 1 and bitwise_equal(
        ref.outputs.get((task.harness, task.seeds[0])), ref.outputs.get((task.harness, task.seeds[1]))
    ):
        notes.append(
            "outputs are identical for every seed: the harness does not draw seeded random inputs, "
            "so correctness is checked on one input only"
        )
    if not ref.high:
        notes.append("no float64 rerun of the original was possible: precision is checked by tolerance only")
    for h in sorted({h for h, _ in ref.high_dropped}):
        seeds = sorted(s for hh, s in ref.high_dropped if hh == h)
        notes.append(
            f"{h}: the float64 rerun of seeds {seeds} was dropped (with the outputs it would exceed one "
            f"seed's share, {seed_share_bytes(task) / 2**20:.1f} MiB, of {_REF_HOST_BYTES_ENV}): their precision "
            "is checked against the original's outputs only (the consistency rule)"
        )
    if ref.skipped:
        seeds = sorted({s for h, s in ref.skipped})
        size = max((tree_bytes(v) for v in ref.outputs.values()), default=0)
        notes.append(
            f"{task.harness} returns {size / 2**30:.1f} GiB per call: it is checked on seed {task.seeds[0]} "
            f"only, not seeds {seeds} (the references of every seed would not fit "
            f"{ref_host_bytes() / 2**30:.1f} GiB of host memory, {_REF_HOST_BYTES_ENV}); "
            "smaller harnesses run every seed"
        )
    if not ref.replay_valid:
        notes.append(
            "replays of the original do not reproduce its outputs (an in-place or accumulating kernel): "
            "timed replays are checked by launch count and grid only"
        )
    return notes


def _absorb_reference(
    judge: JudgeCore, frame: Frame[FrameMeta], base: Baseline, notes: list[str], history: CallHistory
) -> None:
    task, ref, meta = judge.require_task(), judge.ref, frame.meta
    if isinstance(meta, TimingFrame):
        base.timing = meta.timing
        return
    if isinstance(meta, ProfileFrame):
        base.profile = Profile.from_wire(meta.profile)
        return
    if isinstance(meta, RunOutputs):
        ref.cuda_peak = max(ref.cuda_peak, meta.cuda_peak)
        if meta.skipped:
            ref.skipped.add((meta.harness, meta.seed))
            return
    elif not isinstance(meta, ReplayOutputs):
        return
    tree = condense_locals(frame.tree)
    pre_state = tree.pop("pre_state", None) if isinstance(tree, dict) else None
    if meta.mode in ("check", "upcast"):
        _know_inputs(ref, pre_state, tree)
        if pre_state is not None and isinstance(meta, RunOutputs):
            ref.inputs_seen.add((meta.harness, meta.seed))
    # the kept run is an upcast run where the original is also rerun in float64
    if (
        isinstance(meta, RunOutputs)
        and meta.mode in ("check", "upcast")
        and meta.kept
        and meta.harness == task.harness
        and isinstance(tree, dict)
    ):
        ref.changed_bytes = base.floor_bytes = changed_bytes(tree.get("written"), meta.pre_state, pre_state or [])
    if isinstance(meta, ReplayOutputs):
        ref.replay_valid = compare_outputs(ref.outputs[(task.harness, task.seeds[0])], tree).ok
        return
    h, seed = meta.harness, meta.seed
    if meta.mode == "neutral":
        if meta.error:
            ref.neutral_raised[h] = True
        else:
            masks = checks.change_masks(ref.outputs[(h, seed)], tree)
            ref.masks[h] = materialize(masks, None, _pin_on_host(judge, tree_bytes(masks)))
        return
    launches = meta.launches
    if task.kernel not in {launch.kernel for launch in launches}:
        seen = ", ".join(sorted({launch.kernel for launch in launches})) or "no Triton kernel"
        raise _SetupProblem(f"the harness {h} never launches {task.kernel} (it launched: {seen})")
    if isinstance(tree, dict):
        previous = tree.pop("previous", [])
        if meta.mode in ("check", "upcast") and not meta.kept:
            if history.changed(h, previous):
                ref.stale = True
            history.record(h, tree.get("returned"))
    if meta.mode == "check" and meta.again:
        if not _absorb_rerun(ref.outputs[(h, seed)], tree, base, notes):
            ref.bitwise_reproducible = False
        return
    _absorb_outputs(judge, meta, tree)


def changed_bytes(written: Any, labels: list[str], pre_state: list[Any]) -> int:
    """Bytes of the elements the launches changed (their bits differ from what the first
    launch found): the least a faster candidate's launches must still write. A scatter
    into a large cache writes a few rows of it, not the whole cache. A written tensor
    with no matching copy of what the launches found counts whole."""
    from .observe import bitwise_changed

    before: dict[str, list[Any]] = {}
    for label, copy in zip(labels, pre_state):
        before.setdefault(label, []).append(copy)
    total, seen = 0, set()
    for key, tensors in (written or {}).items():
        copies = before.get(key, [])
        for i, post in enumerate(tensors):
            if not isinstance(post, torch.Tensor) or id(post) in seen:
                continue
            seen.add(id(post))
            pre = copies[i] if len(copies) == len(tensors) else None
            changed = bitwise_changed(pre, post) if isinstance(pre, torch.Tensor) else None
            total += (post.numel() if changed is None else changed) * post.element_size()
    return total


def _absorb_rerun(first: Any, tree: Any, base: Baseline, notes: list[str]) -> bool:
    """A second run of the original under the same seed: it must reproduce the first.
    True when it did bit for bit (then so must a candidate's)."""
    if bitwise_equal(first, tree):
        return True
    verdict = compare_outputs(first, tree)
    if not verdict.ok:
        base.deterministic = False
        base.message = (
            "the original is not deterministic under a fixed seed "
            f"({verdict.message}); seed the harness's inputs and avoid racy atomics"
        )
        return False
    if "not bitwise reproducible" not in " ".join(notes):
        notes.append("the original is not bitwise reproducible (within tolerance)")
    return False


def _absorb_outputs(judge: JudgeCore, meta: RunOutputs, tree: Any) -> None:
    """A checked run of the original: its outputs become the reference of (h, seed), a
    copy in the judge's own memory (on the GPU while the references stay small beside
    what the harness needs there)."""
    task, ref, h, seed = judge.require_task(), judge.ref, meta.harness, meta.seed
    high = tree.pop("upcast", None) if isinstance(tree, dict) else None
    if count_tensors(tree.get("returned")) + count_tensors(tree.get("written")) == 0:
        raise _SetupProblem(f"the harness {h} returns no tensors and its launches write none")
    if high and seed != task.seeds[0] and tree_bytes(tree) + tree_bytes(high) > seed_share_bytes(task):
        # its outputs fit the seed's share, not beside its float64 rerun (a half-precision
        # output's is four times its size): the seed is checked, its precision is not
        ref.high_dropped.add((h, seed))
        high = None
    nbytes = tree_bytes(tree) + tree_bytes(high)
    device = _reference_device(judge, nbytes)
    pin = device is None and _pin_on_host(judge, nbytes)
    tree = materialize(tree, device, pin)
    high = materialize(high, device, pin) if high else high
    ref.outputs[(h, seed)] = tree
    for kernel, names in meta.written.items():
        have = ref.writes.setdefault(kernel, [])
        have += [n for n in names if n not in have]
    ref.changed_inputs |= set(meta.changed_inputs)
    ref.streams |= set(meta.streams)
    if h == task.harness and seed == task.seeds[0]:
        ref.launches = meta.launches
        ref.recorded_calls = list(meta.calls)
    if high:
        _absorb_high(ref, h, seed, tree, high, meta.upcast)


def _know_inputs(ref: Reference, pre_state: Any, tree: Any) -> None:
    """What the original's launches found, and the harness's own tensors: contents a
    candidate's launches may read."""
    from .observe import _tensors, content_key

    tensors: list[Any] = []
    _tensors(pre_state, tensors)
    outputs: list[Any] = []
    if isinstance(tree, dict):
        _tensors(tree.get("returned"), outputs)
        _tensors(tree.get("written"), outputs)
        # the harness's inputs, not what the call produced (an in-place output's final value
        # is a result, which a candidate's launches may not find already computed)
        produced = {id(t) for t in outputs}
        locals_: list[Any] = []
        _tensors(tree.get("harness_locals"), locals_)
        tensors += [t for t in locals_ if id(t) not in produced]
    ref.known_inputs |= {content_key(t) for t in tensors}


def _absorb_high(
    ref: Reference, h: str, seed: int, tree: Any, high: dict[str, list[Any]], present: dict[str, list[bool]]
) -> None:
    kept: dict[str, list[Any]] = {}
    for key, values in high.items():
        flags = present.get(key, [])
        refs = tree["written"].get(key, [])
        kept[key] = []
        for j, value in enumerate(values):
            if (
                j < len(flags)
                and flags[j]
                and j < len(refs)
                and isinstance(refs[j], torch.Tensor)
                and refs[j].is_floating_point()
                and value.shape == refs[j].shape
            ):
                kept[key].append(value)
                ref.high_error[(h, seed, key, j)] = checks.error_against(value, refs[j])
            else:
                kept[key].append(None)
    if any(v is not None for vs in kept.values() for v in vs):
        ref.high[(h, seed)] = kept


def _reference_device(judge: JudgeCore, nbytes: int) -> Optional[str]:
    """Where the next reference is kept: the GPU while all references take at most
    ``_REF_GPU_FRACTION`` of its free memory, else the host."""
    if judge.ref_device != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info()
    if judge.ref.kept_bytes + nbytes <= _REF_GPU_FRACTION * (free + judge.ref.kept_bytes):
        judge.ref.kept_bytes += nbytes
        return "cuda"
    return None


def _pin_on_host(judge: JudgeCore, nbytes: int) -> bool:
    """Whether references kept on the host are page-locked: on a GPU machine, while all of
    them take at most ``_PINNED_HOST_FRACTION`` of the host's memory (counted twice over:
    torch's page-locked allocator rounds each block up to a power of two). Each comparison
    moves a host reference to the GPU: a 16 GiB one took 3 s per pass from pageable
    memory on an H200 (benchmarks/results/eval_speed/h200_8379740_probe)."""
    if judge.ref_device != "cuda" or nbytes == 0:
        return False
    if judge.ref.pinned_bytes + 2 * nbytes > _PINNED_HOST_FRACTION * _host_memory_bytes():
        return False
    judge.ref.pinned_bytes += 2 * nbytes
    return True


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def move_references(judge: JudgeCore) -> None:
    """Move the references to the GPU when they fit comfortably beside what the
    harness itself needs there (comparisons on the GPU are far faster); else they stay
    on the host, where they arrived, and large candidate frames are rebuilt on the GPU
    instead (``JudgeCore._frame_device``)."""
    if judge.ref_device != "cuda":
        return
    ref = judge.ref
    total = sum(tree_bytes(tree) for tree in ref.outputs.values()) + tree_bytes(ref.high)
    free, _ = torch.cuda.mem_get_info()
    fits = total <= _REF_GPU_FRACTION * free and total + ref.cuda_peak + GPU_MARGIN_BYTES <= free
    mark("judge.references", on_gpu=fits, bytes=total, free=free, peak=ref.cuda_peak)
    if fits:
        judge.refs_on_gpu = True
        ref.outputs = {k: to_device(v, "cuda") for k, v in ref.outputs.items()}
        ref.masks = {h: {p: to_device(m, "cuda") for p, m in ms.items()} for h, ms in ref.masks.items()}
        ref.high = to_device(ref.high, "cuda")


def _triton_version() -> str:
    import triton

    return triton.__version__
