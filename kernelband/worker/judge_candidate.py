"""The judge's ``evaluate`` op: run a candidate in a variant process and judge each frame
it sends against the Reference (the checks of DESIGN section 6, listed in judge.py); the
first check that fails is the verdict.

The candidate's steps come in two batches around its timing: first the kept run of the
timing harness (seed 0, full size) and its replay check, then the timing (interleaved
with the reference lane under one exclusive GPU turn, or alone), then every other run
(other seeds and harnesses, neutralised launches, the re-check after timing). The judge
reads every output itself (in place over CUDA IPC while the variant process waits, or
from bytes): the facts of a verdict are the judge's own observations.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Optional

from ..model import Evaluation, Status
from ..profile.schema import DeviceFacts, Profile, ProfileError, TimingTier
from ..trace import mark
from . import checks, warm
from .compare import describe
from .gpu_lock import gpu_lock
from .jobs import Frame, JobEndKind, JobFailed, VariantJob
from .deadlines import search_run_timeout_s
from .judge_derivation import wait_for_references
from .judge_derived import candidate_steps
from .judge_core import (
    JudgeCore,
    Lane,
    Reference,
    add_frame_phase,
    add_phase,
    count_runs,
    deadline_s,
    gpu,
    sample_step,
    timed_phase,
)
from .lane_turns import Turn, timed_turns
from .matched_runs import MatchedRuns
from .messages import (
    Derived,
    DerivedOutputs,
    ErrorFrame,
    FrameMeta,
    Mark,
    ProfileFrame,
    ProfileStep,
    Release,
    ReplayCheck,
    ReplayOutputs,
    Run,
    RunOutputs,
    Sample,
    SampleFrame,
    Step,
    Time,
    TimingFrame,
)
from .observe import CallHistory, comparable, condense_locals
from .requests import Evaluate
from .stats import median_timing, paired_statistics

SEARCH_ROUNDS_GPU = 5  # interleaved rounds (candidate, original) per candidate during the search
SEARCH_ROUNDS_CPU = 1
SLOW_FRAME_S = 0.2  # a frame the judge takes longer on is traced (KERNELBAND_TRACE)
FAR_SLOWER = 10.0  # a search's candidate this much slower in each of its first two rounds or more stops timing


class Refusal(Exception):
    """A check failed: the evaluation ends with this status and message."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


def first_steps(judge: JudgeCore) -> list[Step]:
    task = judge.require_task()
    return [Run("v", task.harness, task.seeds[0], "check", keep="v"), ReplayCheck("v")]


def rest_steps(judge: JudgeCore) -> list[Step]:
    task, skipped = judge.require_task(), judge.ref.skipped
    s0, rest = task.seeds[0], task.seeds[1:]
    harnesses = judge.harnesses()
    steps: list[Step] = []
    for h in harnesses[1:]:
        steps += [Run("v", h, s, "check") for s in task.seeds if (h, s) not in skipped]
    steps += [Run("v", task.harness, s, "check") for s in rest if (task.harness, s) not in skipped]
    steps += [Run("v", h, s0, "neutral") for h in harnesses]
    steps.append(Run("v", task.harness, s0, "check", again=True))
    return steps


def _timing_steps(
    judge: JudgeCore, lane: bool, tier: int, facts: DeviceFacts, source: str, time_ms: Optional[float]
) -> list[Step]:
    """After the kept run: its timing alone (no lane), its profile, its release."""
    steps: list[Step] = [] if lane else [Time("v")]
    if tier > 0:
        steps.append(ProfileStep("v", source, tier, facts, time_ms))
    return steps + [Release("v")]


class CandidateRun:
    """One candidate's evaluation: its job, the judge's view of its calls, the verdict."""

    def __init__(self, judge: JudgeCore, req: Evaluate) -> None:
        self.judge = judge
        self.req = req
        self.ev = Evaluation(status=Status.OK, interpreted=judge.interpreted, variant_id=req.variant_id or "variant")
        self.worst: Any = None
        self.history = CallHistory()
        self.matched = (
            MatchedRuns()
        )  # its runs that matched, by the judge's hash: a bit-equal rerun is not compared again
        self.t0 = time.perf_counter()
        self.expected: list[str] = []  # what each coming frame is (a crash is reported as during the next one)
        self.first_run: Optional[list[tuple[int, int]]] = None  # fingerprints of the kept run's outputs
        task = judge.require_task()
        # a search's candidate many times slower than the original's slowest run is no contender
        self.run_timeout_s = (
            search_run_timeout_s(task.timeout_s, judge.ref.slowest_run_s) if req.screen else task.timeout_s
        )
        self.far_slower = False  # the timing stopped early: FAR_SLOWER times slower in every round
        self.siblings: list[VariantJob] = []  # compiling its calls beyond the harness ahead of it (warm)
        self.first_run_s = 0.0  # its first run of the harness (its first compile included)
        self.seed0_deviation: dict[str, float] = {}  # harness -> written outputs' distance from the original at seed 0

    def run(self) -> dict[str, Any]:
        judge, req, ev = self.judge, self.req, self.ev
        tier, facts, time_it = req.profile_tier, req.facts, req.time
        task = judge.require_task()
        runs = count_runs(first_steps(judge) + rest_steps(judge)) + judge.ref.derived_runs() + 2
        # the first batch (the kept run and its replay) has its own deadline; the rest gets
        # one when it is sent (``_check_the_rest``)
        first_runs = count_runs(first_steps(judge)) + 1 if req.screen else runs
        job = judge.job(
            {"v": req.source},
            first_steps(judge) + [Mark()],
            first_runs,
            trusted=False,
            interactive=True,
            run_timeout_s=self.run_timeout_s,
        )
        if judge.ref.derived_ready.is_set():
            self._start_sibling(job, judge.ref)
        self.expected = frame_labels(first_steps(judge))
        try:
            self._judge_frames(job.until_mark())
            lane = judge.lane if (time_it and judge.lane is not None and judge.lane.alive) else None
            if lane is not None:
                self._time_against_lane(job, lane)
            if not (req.screen and self._screened_out()):
                self._check_the_rest(job, lane is not None, tier if time_it or tier else 0, facts)
        except Refusal as v:
            ev.status, ev.message = v.status, v.args[0]
            ev.errors = self.worst if v.status != Status.MISMATCH else (ev.errors or self.worst)
            ev.timing = None
            ev.reference_ms = ev.speedup_ci = None
        except JobFailed as e:
            ev.status = Status.TIMEOUT if e.end.kind == JobEndKind.TIMEOUT else Status.CRASHED
            tail = [line for line in e.end.stderr_tail.splitlines() if line.strip()][-3:]
            during = f" during {self.expected[0]}" if self.expected else ""
            ev.message = str(e) + during + (f" (last output: {' | '.join(tail)})" if tail else "")
            if e.end.kind == JobEndKind.TIMEOUT and req.screen and self.run_timeout_s < task.timeout_s:
                ev.message += (
                    f"; a search's candidate may take {self.run_timeout_s:.0f} s a run, ten times the "
                    "original's slowest"
                )
            if (
                e.end.kind == JobEndKind.MALFORMED
            ):  # a frame the judge cannot read as its kind: the variant's word, refused
                ev.status, ev.message = Status.REJECTED, f"trust: {e}{during}"
            ev.timing = None
            ev.reference_ms = ev.speedup_ci = None
        finally:
            warm.close(self.siblings)
            job.close()
            ev.phases.update(job.timeline_phases())
        if judge.ref.derived_ready.is_set():  # the derivation's notes, where it ran after prepare
            ev.notes = list(judge.ref.derived_notes)
        ev.phases["variant_process_total"] = round(time.perf_counter() - self.t0, 6)
        if job.strays_killed:
            ev.message += f"; {job.strays_killed} leftover process(es) of the variant killed"
        return ev.to_dict()

    def _check_the_rest(self, job: VariantJob, laned: bool, tier: int, facts: DeviceFacts) -> None:
        """After the timing: its profile, every other harness and seed, the neutralised
        launches and the re-check after timing; then, once the original's references beyond
        the harness are made (in the background, while the first candidates get this far),
        the calls beyond the harness."""
        judge, ev, req = self.judge, self.ev, self.req
        self._start_sibling(job, judge.ref)  # now that its first run shows how it compiles
        steps = (
            _timing_steps(judge, laned, tier, facts, req.source, ev.timing.median_ms if ev.timing else None)
            if (req.time or tier)
            else [Release("v")]
        )
        self._command(job, steps + rest_steps(judge))
        t_wait = time.perf_counter()
        ref = wait_for_references(judge, lambda r: self._start_sibling(job, r))
        add_phase(ev.phases, "wait_for_references", time.perf_counter() - t_wait)
        if req.screen:  # the derivation's runs count among the original's slowest now
            self.run_timeout_s = search_run_timeout_s(judge.require_task().timeout_s, ref.slowest_run_s)
        calls_beyond = candidate_steps(judge)
        if calls_beyond:
            self._command(job, calls_beyond)
        _check_roofline(ev, facts, _written_bytes(judge))
        ev.errors = self.worst
        beyond = f" and {len(judge.ref.derived)} calls beyond the harness" if judge.ref.derived else ""
        ev.message = f"matches the original on {checked_runs(judge)}{beyond} ({describe(self.worst)})"

    def _command(self, job: VariantJob, steps: list[Step]) -> None:
        """Send ``steps`` (and a mark) and judge their frames as they come."""
        job.command(steps + [Mark()], deadline_s(self.run_timeout_s, count_runs(steps) + 1))
        self.expected = frame_labels(steps)
        self._judge_frames(job.until_mark())

    def _start_sibling(self, job: VariantJob, ref: Reference) -> None:
        """A sibling compiling the candidate's calls beyond the harness ahead of it, once,
        where it pays off (``warm.pays_off``)."""
        if not self.siblings and warm.pays_off(ref, self.first_run_s, self.judge.lanes):
            self.siblings = warm.start(self.judge, job, ref.calls_ahead(), "v")

    def _screened_out(self) -> bool:
        """A search's candidate whose paired rounds put it slower than the original at 95%
        confidence ends here (``Status.SLOWER``): it can be neither labelled faster nor a
        parent, so the checks on every other input, which cost most of an evaluation (new
        sizes mean new compiles), go only to candidates that could be faster. Its kept run
        and the replay of its timed launches were checked."""
        ev, ci = self.ev, self.ev.speedup_ci
        if ev.timing is None or not ci or not (ci[1] < 1.0 or self.far_slower):
            return False
        task = self.judge.require_task()
        speedup = ev.reference_ms / ev.timing.median_ms if ev.reference_ms and ev.timing.median_ms > 0 else ci[1]
        how = (
            f"more than {FAR_SLOWER:g}x slower in each of its first rounds, so timed no further"
            if self.far_slower
            else f"[{ci[0]:.3f}, {ci[1]:.3f}] over the search's paired rounds"
        )
        ev.status = Status.SLOWER
        ev.errors = self.worst
        ev.message = (
            f"slower than the original: {speedup:.3f}x {how}; matches it on {task.harness}, seed "
            f"{task.seeds[0]}, not checked on other inputs (only a candidate that could be faster is)"
        )
        return True

    def _judge_frames(self, frames: Iterator[Frame[FrameMeta]]) -> None:
        for frame in frames:
            if self.expected and frame.kind != "error":
                self.expected.pop(0)
            if not self.first_run_s and isinstance(frame.meta, RunOutputs):
                self.first_run_s = frame.meta.seconds
            add_frame_phase(self.ev.phases, frame, self.t0)
            self.matched.new_frame()
            t_wait = time.perf_counter()
            with reading_gpu():
                t_judge = time.perf_counter()  # the lock's wait apart: timed regions of others
                add_phase(self.ev.phases, "judge.gpu_lock_wait", t_judge - t_wait)
                self.worst = judge_frame(self.judge, frame, self.ev, self.worst, self.history, self.matched)
                t_compared = time.perf_counter()
                phases = self.ev.phases
                with timed_phase(phases, "judge.across.reproducible"):
                    self._check_reproducible(frame)
                with timed_phase(phases, "judge.across.consistent"):
                    self._check_consistent(frame)
                with timed_phase(phases, "judge.across.consistent_beyond"):
                    _check_consistent_beyond(self.judge, frame, self.seed0_deviation)
            t_end = time.perf_counter()
            # the comparison with the reference, then the checks across frames (reproducible,
            # as precise as the original): where a large output's seconds go
            add_phase(self.ev.phases, "judge.compare", t_compared - t_judge)
            add_phase(self.ev.phases, "judge.across_frames", t_end - t_compared)
            add_phase(self.ev.phases, "judge", t_end - t_judge)
            if t_end - t_judge > SLOW_FRAME_S:
                mark(
                    "judge.slow_frame",
                    variant=self.ev.variant_id,
                    kind=frame.kind,
                    mode=getattr(frame.meta, "mode", None),
                    compare_s=round(t_compared - t_judge, 4),
                    across_s=round(t_end - t_compared, 4),
                )

    def _check_consistent(self, frame: Frame[FrameMeta]) -> None:
        """Precision is measured against a float64 rerun, on the tensors the kernel wrote, at
        each seed that has one. Everywhere else (what the harness returns, a seed whose rerun
        did not fit the memory budget) a candidate must be no farther from the original than
        its written outputs at seed 0 and the original's own error allow: a result rounded
        only in a returned copy, or only for some inputs, is not as precise as the original."""
        judge, meta = self.judge, frame.meta
        task = judge.require_task()
        if not isinstance(meta, RunOutputs) or meta.mode != "check" or meta.error:
            return
        h, seed = meta.harness, meta.seed
        # the original's error at seed 0, or at this seed where it was larger
        original_error = judge.ref.original_error(h, {task.seeds[0], seed})
        if original_error is None:
            return  # no float64 rerun of the original for this harness: tolerances only
        ref = judge.ref.outputs.get((h, seed))
        devs = checks.deviations(ref, comparable(frame.tree))
        if seed == task.seeds[0] and not meta.again:
            written = [d for p, (_, d) in devs.items() if p.startswith("output['written']")]
            self.seed0_deviation[h] = max(written, default=0.0)
        _refuse_if_inconsistent(
            devs, self.seed0_deviation.get(h, 0.0), original_error, f"{h}, seed {seed}", task.seeds[0]
        )

    def _check_reproducible(self, frame: Frame[FrameMeta]) -> None:
        """A candidate is as deterministic as the original: where the original's two runs of
        seed 0 were bit-identical, the candidate's kept run and its re-check after timing
        must be too (a race whose last writer varies, a non-deterministic atomic order)."""
        task, meta = self.judge.require_task(), frame.meta
        if (
            not isinstance(meta, RunOutputs)
            or meta.mode != "check"
            or meta.harness != task.harness
            or meta.seed != task.seeds[0]
            or not self.judge.ref.bitwise_reproducible
        ):
            return
        tree = frame.tree if isinstance(frame.tree, dict) else {}
        fps = _output_fingerprints(tree, self.matched)
        if meta.kept:
            self.first_run = fps
        elif meta.again and self.first_run is not None and fps != self.first_run:
            raise Refusal(
                Status.MISMATCH,
                f"{task.harness}, seed {task.seeds[0]}: two runs under the same seed give "
                "different bits, where the original's do not (a race, or an atomic "
                "whose order varies)",
            )

    def _time_against_lane(self, job: VariantJob, lane: Lane) -> None:
        """Interleaved rounds under one exclusive GPU turn: the candidate, then the original
        (alternating which goes first), each one sample in its own process; on a GPU the
        turn is taken again where the original ran off its level in it (``lane_turns``)."""
        # the interpreter's times are no speed claim: one round, unless the request asks for more
        rounds = SEARCH_ROUNDS_GPU if gpu() else max(1, self.req.rounds or SEARCH_ROUNDS_CPU)
        level = lane.level if gpu() else None
        turn, taken = timed_turns(lambda: self._turn(job, lane, rounds), level, settled=lambda _: self.far_slower)
        if level is not None and taken > 1:
            self.ev.phases["timing.turns"] = float(taken)
            mark(
                "lane.disturbed",
                variant=self.ev.variant_id,
                turns=taken,
                original_ms=turn.original_median,
                level_ms=level.ms,
            )
        launches = len(self.ev.launches) or 1
        self.ev.timing = median_timing(turn.candidate_ms, turn.clock, launches)
        paired = paired_statistics(turn.original_ms, turn.candidate_ms, turn.clock)
        self.ev.reference_ms = paired.baseline_ms
        self.ev.speedup_ci = [paired.ci_low, paired.ci_high]

    def _turn(self, job: VariantJob, lane: Lane, rounds: int) -> Turn:
        cand: list[float] = []
        orig: list[float] = []
        clock = ""
        t_wait = time.perf_counter()
        with lane.lock.turn(self.t0), gpu_lock(exclusive=True) if gpu() else contextlib.nullcontext():
            # the wait for the lane and the exclusive turn apart from the turn itself: the
            # turns of all lanes are the one part of an evaluation that runs in series
            t0 = time.perf_counter()
            add_phase(self.ev.phases, "timing.wait", t0 - t_wait)
            for r in range(rounds):
                order = ("v", "o") if r % 2 == 0 else ("o", "v")
                for who in order:
                    if who == "o":
                        ms, clock = lane.sample(True, deadline_s(self.run_timeout_s, 1))
                        orig.append(ms)
                    else:
                        job.command([sample_step("v", True)], deadline_s(self.run_timeout_s, 1))
                        frame = job.next_frame()
                        if isinstance(frame.meta, ErrorFrame):
                            raise Refusal(*error_verdict(frame.meta))
                        if not isinstance(frame.meta, SampleFrame):
                            raise Refusal(
                                Status.REJECTED,
                                f"trust: the variant process answered a timing request with a {frame.kind} frame",
                            )
                        cand.append(frame.meta.ms)
                if (
                    self.req.screen
                    and (gpu() or self.req.rounds)
                    and 1 <= r < rounds - 1
                    and min(cand) > FAR_SLOWER * max(orig)
                ):
                    self.far_slower = True  # more rounds cannot make it faster than the original
                    break
        add_phase(self.ev.phases, "timing", time.perf_counter() - t0)
        return Turn(cand, orig, clock)


def _check_consistent_beyond(judge: JudgeCore, frame: Frame[FrameMeta], seed0_deviation: dict[str, float]) -> None:
    """The consistency rule on calls beyond the harness whose values are plain draws: a
    candidate no farther from the original than its written outputs at seed 0 (each
    harness's, ``seed0_deviation``) and the original's own error allow (a result rounded
    only for some inputs shows wherever those inputs come)."""
    if not isinstance(frame.meta, DerivedOutputs):
        return
    from .derived import describe_call
    from .judge_derived import plain_deviations

    original_error = judge.ref.original_error()
    if original_error is None:
        return  # no float64 rerun of the original: tolerances only
    devs = plain_deviations(judge, Frame(frame.meta, frame.tree))
    if devs:
        where = f"beyond the harness, {describe_call(judge.ref.derived[frame.meta.index][0])}"
        _refuse_if_inconsistent(
            devs, max(seed0_deviation.values(), default=0.0), original_error, where, judge.require_task().seeds[0]
        )


def _refuse_if_inconsistent(
    devs: dict[str, tuple[Any, float]], at_seed0: float, original_error: float, where: str, seed0: int
) -> None:
    """The consistency rule: every output no farther from the original than the candidate's
    written outputs at seed 0 and the original's own error allow (``checks.consistency_bound``)."""
    for path, (dtype, dev) in devs.items():
        if dev > checks.consistency_bound(dtype, at_seed0, original_error):
            raise Refusal(
                Status.MISMATCH,
                f"precision: {where}: {path} is {dev:.3g} from the original's (relative L2), "
                f"more than its written outputs at seed {seed0} ({at_seed0:.3g}) and the "
                f"original's own error ({original_error:.3g}) allow",
            )


def _written_bytes(judge: JudgeCore) -> int:
    """Bytes the timing harness's kernel launches change (the judge's own copy of the
    original's, less the elements whose bits they left as found): the least any variant's
    timed launches move."""
    from .observe import tree_bytes

    if judge.ref.changed_bytes is not None:
        return judge.ref.changed_bytes
    task = judge.require_task()
    ref = judge.ref.outputs.get((task.harness, task.seeds[0]))
    return tree_bytes(ref.get("written")) if isinstance(ref, dict) else 0


def _output_fingerprints(tree: dict[str, Any], matched: MatchedRuns) -> list[tuple[int, int]]:
    """The returned and written tensors' fingerprints (the ones this frame's comparison
    took already are not taken again)."""
    from .observe import _tensors, fingerprint

    tensors: list[Any] = []
    _tensors(tree.get("returned"), tensors)
    _tensors(tree.get("written"), tensors)
    return [matched.fingerprint(t) or fingerprint(t) for t in tensors]


_LABELS: dict[type[Step], str] = {
    ReplayCheck: "the replay check",
    Time: "timing",
    ProfileStep: "profiling",
    Sample: "timing",
}


def frame_labels(steps: list[Step]) -> list[str]:
    """What each frame a batch of steps sends is, in order (a release sends none)."""
    from .derived import describe_call

    labels: list[str] = []
    for step in steps:
        if isinstance(step, Run):
            labels.append(f"{step.harness}, seed {step.seed} ({step.mode} run)")
        elif isinstance(step, Derived):
            labels += [f"a call beyond the harness, {describe_call(c)}" for c in step.calls]
        elif type(step) in _LABELS:
            labels.append(_LABELS[type(step)])
    return labels


def reading_gpu() -> contextlib.AbstractContextManager[object]:
    """The judge's reads of a candidate's outputs are GPU work: they wait for a timed
    region of another session or candidate to end, as harness runs do."""
    return gpu_lock(exclusive=False) if gpu() else contextlib.nullcontext()


def evaluate(judge: JudgeCore, req: Evaluate) -> dict[str, Any]:
    return CandidateRun(judge, req).run()


def checked_runs(judge: JudgeCore) -> str:
    """Which harnesses ran under which seeds, for the verdict's message."""
    task = judge.require_task()
    skipped = {h for h, _ in judge.ref.skipped}
    if not skipped:
        return f"seeds {task.seeds} of {', '.join(judge.harnesses())}"
    parts = [
        f"{h} (seed {task.seeds[0]} only: outputs too large for every seed's reference)"
        if h in skipped
        else f"{h} (seeds {task.seeds})"
        for h in judge.harnesses()
    ]
    return ", ".join(parts)


def judge_frame(
    judge: JudgeCore,
    frame: Frame[FrameMeta],
    ev: Evaluation,
    worst: Any,
    history: Optional[CallHistory] = None,
    matched: Optional[MatchedRuns] = None,
) -> Any:
    """Judge one frame (raises Refusal on a failed check); returns the worst error
    statistics of the outputs compared so far."""
    matched = matched or MatchedRuns()
    task, ref, meta = judge.require_task(), judge.ref, frame.meta
    if isinstance(meta, ErrorFrame):
        raise Refusal(*error_verdict(meta))
    if isinstance(meta, TimingFrame):
        ev.timing = meta.timing
        return worst
    if isinstance(meta, ProfileFrame):
        try:
            ev.profile = Profile.from_wire(meta.profile)
        except ProfileError as e:  # the worker's own code built it: a malformed one was tampered with
            raise Refusal(Status.REJECTED, f"trust: the variant process sent a malformed profile ({e})") from None
        return worst
    if isinstance(meta, DerivedOutputs):
        from .judge_derived import verdict_of

        with timed_phase(ev.phases, "judge.compare.derived"):
            failed = verdict_of(judge, Frame(meta, frame.tree))
        if failed is not None:
            raise Refusal(*failed)
        return worst
    if not isinstance(meta, (RunOutputs, ReplayOutputs)):
        return worst
    with timed_phase(ev.phases, "judge.compare.condense"):
        tree = condense_locals(frame.tree)
    if isinstance(meta, ReplayOutputs):
        if ref.replay_valid:
            with timed_phase(ev.phases, "judge.compare.replay"):
                verdict = matched.compare(ref.outputs[(task.harness, task.seeds[0])], tree)
            if not verdict.ok:
                raise Refusal(
                    Status.REJECTED,
                    "trust: a replay of the timed launches does not reproduce the "
                    f"outputs ({verdict.message}): the timing would not be of the checked work",
                )
        return worst
    if meta.mode == "neutral":
        with timed_phase(ev.phases, "judge.compare.neutral"):
            _check_neutral(judge, meta.harness, meta, tree)
        return worst
    stats = _judge_outputs(judge, meta, tree, ev, history or CallHistory(), matched)
    return stats if worst is None or stats.rel_l2 >= worst.rel_l2 else worst


def _judge_outputs(
    judge: JudgeCore, meta: RunOutputs, tree: Any, ev: Evaluation, history: CallHistory, matched: MatchedRuns
) -> Any:
    """A checked run of the candidate: it launches the kernel, has no side effect the
    original lacks, matches the reference and is as precise; its error statistics."""
    task = judge.require_task()
    h, seed = meta.harness, meta.seed
    where = f"{h}, seed {seed}"
    launches = meta.launches
    if task.kernel not in {launch.kernel for launch in launches}:
        seen = ", ".join(sorted({launch.kernel for launch in launches})) or "no Triton kernel"
        raise Refusal(
            Status.REJECTED,
            f"the variant never launches {task.kernel} in {h} (it launched: {seen}); a torch fallback is not a kernel",
        )
    _check_streams(judge, meta, where)
    with timed_phase(ev.phases, "judge.compare.launch_inputs"):
        _check_inputs_of_launches(judge, tree, meta, where)
    with timed_phase(ev.phases, "judge.compare.stale"):
        _check_stale(judge, history, h, tree, where, meta.kept)
    with timed_phase(ev.phases, "judge.compare.outputs"):
        verdict = matched.compare(judge.ref.outputs[(h, seed)], tree)
    if not verdict.ok:
        ev.errors = verdict.stats
        prefix = "after timing, " if meta.again else ""
        local = _local_name(verdict.message)
        if local is not None:  # the outputs matched: what differs is a tensor of the caller's
            raise Refusal(
                Status.REJECTED,
                f"trust: {prefix}{where}: the harness's tensor {local} was modified "
                f"(the original leaves it as it is): {verdict.message}",
            )
        raise Refusal(Status.MISMATCH, f"{prefix}{where}: {verdict.message}")
    if h == task.harness and seed == task.seeds[0] and not meta.again:
        ev.launches = launches
    with timed_phase(ev.phases, "judge.compare.precision"):
        _check_precision(judge, h, seed, tree)
    return verdict.stats


ROOFLINE_SLACK = 1.15  # measured peaks are a copy's and a library matmul's: a kernel may exceed them a little


def _check_roofline(ev: Evaluation, facts: DeviceFacts, output_floor_bytes: int) -> None:
    """A time that implies more bytes per second than the GPU's measured copy bandwidth, or
    more FLOP/s than its measured matrix rate, is not a real kernel's: the timed launches
    are not all the work (it was done elsewhere, or cached)."""
    if ev.timing is None or ev.interpreted:
        return
    tm = (ev.profile.tiers.timing if ev.profile else None) or TimingTier()
    peak_bw = tm.copy_peak_gbs or facts.copy_gbs
    # at least its outputs are written once: bytes the judge saw itself, less what the L2
    # cache holds (writes that fit there can end before they reach memory: an embedding's
    # 32 MiB of gathered rows came out at 5.5 TB/s on an H200 whose copies reach 4.2)
    l2 = facts.l2_bytes or 0
    floor_bytes = max(0, output_floor_bytes - l2)
    # only the judge's own lower bound refuses: the profile's bytes follow the roofline
    # convention (every argument moved whole), which a scatter into a large cache or a
    # gather from a large table does not (a kv-cache scatter's rewrites were refused at an
    # implied 12 TB/s), and they come from the variant's process
    bw = floor_bytes / (ev.timing.median_ms * 1e-3) / 1e9 if ev.timing.median_ms > 0 else 0.0
    if bw and peak_bw and bw > ROOFLINE_SLACK * float(peak_bw):
        raise Refusal(
            Status.REJECTED,
            f"trust: its time implies {bw:.0f} GB/s of memory traffic (the "
            f"{floor_bytes / 2**20:.1f} MiB whose bits the original's launches change, "
            f"less the L2), above the GPU's measured copy bandwidth "
            f"({float(peak_bw):.0f} GB/s): the timed launches cannot be all the work",
        )
    tflops, peak = tm.tflops, tm.compute_peak_tflops
    if tflops and peak and tflops > ROOFLINE_SLACK * float(peak):
        raise Refusal(
            Status.REJECTED,
            f"trust: its time implies {tflops:.0f} TFLOP/s, above the GPU's measured "
            f"matrix rate ({float(peak):.0f} TFLOP/s): the timed launches cannot be all "
            "the work",
        )


def _local_name(message: str) -> Optional[str]:
    """The harness-local tensor a comparison failed on ("output['harness_locals']['x']...")."""
    marker = "output['harness_locals']["
    if not message.startswith(marker):
        return None
    rest = message[len(marker) :]
    return rest.split("]", 1)[0].strip("'\"")


def _check_inputs_of_launches(judge: JudgeCore, tree: Any, meta: RunOutputs, where: str) -> None:
    """Every tensor the kept run's launches found must be one the original's launches or its
    harness also had (by content), fresh memory or a constant: a tensor computed outside
    Triton in the wrapper (torch doing the work, a result cached from an earlier call) and
    handed to the timed launches means they are not all the work."""
    if not isinstance(tree, dict):
        return
    pre_state = tree.pop("pre_state", None)
    if not pre_state or not judge.ref.known_inputs or (meta.harness, meta.seed) not in judge.ref.inputs_seen:
        return
    from .observe import content_key, is_constant

    labels = meta.pre_state
    for i, t in enumerate(pre_state):
        if not hasattr(t, "dtype") or is_constant(t) or content_key(t) in judge.ref.known_inputs:
            continue
        label = labels[i] if i < len(labels) else "a launch argument"
        raise Refusal(
            Status.REJECTED,
            f"trust: {where}: {label} reads a tensor that neither the original's launches "
            "nor its harness had (computed outside Triton, or kept from an earlier call): "
            "the timed launches are not all the work",
        )


def _check_streams(judge: JudgeCore, meta: RunOutputs, where: str) -> None:
    streams = set(meta.streams) - judge.ref.streams
    if streams:
        raise Refusal(Status.REJECTED, f"trust: {where}: launches on a CUDA stream the original does not use")


def _check_stale(judge: JudgeCore, history: CallHistory, h: str, tree: Any, where: str, kept: bool) -> None:
    """Every earlier result this harness returned must be as the judge first saw it (the
    variant process shows them again with each call); the original's own may change."""
    if not isinstance(tree, dict):
        return
    previous = tree.pop("previous", [])
    if kept:  # a kept run's outputs are rewritten by its replays: not tracked
        return
    changed = history.changed(h, previous)
    if changed and not judge.ref.stale:
        raise Refusal(
            Status.REJECTED,
            f"trust: {where}: a result returned by an earlier call changed when the "
            f"wrapper was called again ({changed}: a shared output buffer)",
        )
    history.record(h, tree.get("returned"))


def _check_neutral(judge: JudgeCore, h: str, meta: RunOutputs, tree: Any) -> None:
    if meta.error:
        return  # the harness notices that nothing was computed: the launches matter
    ref = judge.ref
    if ref.neutral_raised.get(h):
        raise Refusal(
            Status.REJECTED,
            f"trust: {h}: with its Triton launches neutralised the variant still passes "
            "the harness's own checks, which fail for the original: Triton does not "
            "produce the result",
        )
    task = judge.require_task()
    if isinstance(tree, dict):
        tree.pop("previous", None)
    reason = checks.unproduced(ref.outputs[(h, task.seeds[0])], ref.masks.get(h, {}), tree)
    if reason:
        raise Refusal(Status.REJECTED, f"trust: {h}: {reason}")


def _check_precision(judge: JudgeCore, h: str, seed: int, tree: Any) -> None:
    """The tensors the kernel wrote against the original's float64 rerun of this seed's
    inputs (every seed whose references fit the memory budget has one): no more error
    than the original's own there (``checks.precision_reason``)."""
    ref = judge.ref
    high = ref.high.get((h, seed))
    if not high or not isinstance(tree, dict):
        return
    for key, values in high.items():
        outs = tree.get("written", {}).get(key, [])
        for j, value in enumerate(values):
            if value is None or j >= len(outs):
                continue
            reason = checks.precision_reason(
                f"{key}[{j}]", outs[j].dtype, ref.high_error[(h, seed, key, j)], checks.error_against(value, outs[j])
            )
            if reason:
                raise Refusal(Status.MISMATCH, f"precision: {h}, seed {seed}: {reason}")


def error_verdict(meta: ErrorFrame) -> tuple[Status, str]:
    phase, message = meta.phase, meta.message
    where = f"{meta.harness}, seed {meta.seed}: " if meta.harness is not None else ""
    if phase == "tampered":
        return Status.REJECTED, f"trust: {message}"
    if phase == "assert":
        return Status.MISMATCH, f"{where}the harness's own check failed: {message}"
    if phase in ("import", "compile"):
        prefix = "does not import: " if meta.step is None else where
        return Status.COMPILE_ERROR, f"{prefix}{message}"
    suffix = " (CUDA context corrupted: the variant process was replaced)" if meta.fatal else ""
    return Status.RUNTIME_ERROR, f"{where}{message}{suffix}"
