"""The variant process: ``python -m kernelband.worker.variant``, one job, then it exits.

It imports a module version (the user's original, or a candidate: untrusted code),
runs harnesses, replays and times the captured launches, and sends what it observed
to the judge as data frames (``wire``) on the protocol stream. It never holds the
reference outputs and never decides a verdict: the judge does (``judge.py``).

The judge starts it inside the sandbox (``sandbox.py``: scrubbed environment, private
cwd, no network where possible, resource limits) and kills its whole process tree when
the job ends, so nothing a candidate did (monkeypatches, threads, children) survives.

Its input (``messages.py``, each line decoded once on receipt): the ``Job`` (one JSON
object on stdin: the task, the module versions by tag, the first steps), then, for an
interactive job, ``Command``s with more steps, and acks (empty lines). Steps run in order,
each dispatched by its class (``STEP_OPS``); a malformed line is an error frame.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, Optional

from .call_spec import RecordedCall
from .messages import (
    Command,
    Derived,
    DoneFrame,
    ErrorFrame,
    FrameMeta,
    Job,
    MalformedMessage,
    Mark,
    MarkFrame,
    ProfileFrame,
    ProfileStep,
    Release,
    ReplayCheck,
    ReplayOutputs,
    Run,
    RunOutputs,
    Sample,
    SampleFrame,
    Samples,
    SamplesFrame,
    Step,
    Time,
    TimingFrame,
    Warm,
)

_UPCAST_MAX_BYTES = 256 << 20  # a higher-precision reference only where copies are cheap


def _protocol_stream() -> IO[bytes]:
    fd = os.dup(1)
    os.dup2(2, 1)  # user prints (and C-level writes to fd 1) go to stderr
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb", buffering=1 << 20)


def _choose_backend(interpreted: bool) -> None:
    if interpreted:
        os.environ["TRITON_INTERPRET"] = "1"


def _poison_uninitialized_memory() -> None:
    """torch.empty* returns NaN (floats) / the max value (ints) instead of whatever the
    caching allocator last held, so an output left unwritten never passes by luck."""
    import torch

    # the C switches themselves: torch.use_deterministic_algorithms also imports
    # torch._inductor (about a second of every fork server's start) to set a flag of a
    # compiler no variant process uses
    set_algorithms = getattr(torch._C, "_set_deterministic_algorithms", None)
    set_fill = getattr(torch._C, "_set_deterministic_fill_uninitialized_memory", None)
    if set_algorithms is None or set_fill is None:  # pragma: no cover - another torch
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
        return
    set_algorithms(True, warn_only=True)
    set_fill(True)


class RuntimeTampered(Exception):
    """A function the measurement relies on was replaced while the module ran."""


class Integrity:
    """Identities of the functions the checks and the timing rely on, taken before any
    module is imported; re-checked after every step. The screen already forbids
    assigning attributes of imported objects: this catches what slipped past it."""

    def __init__(self) -> None:
        import torch
        import triton
        import triton.testing

        from . import capture, wire

        owners: list[tuple[str, Any, list[str]]] = [
            (
                "torch.Tensor",
                torch.Tensor,
                [
                    "fill_",
                    "clone",
                    "to",
                    "sum",
                    "reshape",
                    "view",
                    "contiguous",
                    "data_ptr",
                    "numel",
                    "element_size",
                    "copy_",
                    "detach",
                    "__eq__",
                    "__ne__",
                    "abs",
                ],
            ),
            ("torch", torch, ["equal", "arange", "empty", "isnan", "isinf", "isfinite", "manual_seed", "float64"]),
            ("torch.cuda", torch.cuda, ["synchronize", "Event", "current_stream", "is_available"]),
            ("triton.testing", triton.testing, ["do_bench"]),
            (
                "capture",
                capture,
                ["fingerprint", "replay_all", "run_unrecorded", "_run_unwrapped", "_wrap", "_record_inner"],
            ),
            ("wire", wire, ["write_frame", "encode", "_write_tensor"]),
            ("json", json, ["dumps"]),
            ("time", time, ["perf_counter"]),
        ]
        for cls in capture._kernel_classes():
            owners.append((cls.__name__, cls, ["run"]))
        self.expected: list[tuple[str, Any, str, Any]] = []
        for label, owner, names in owners:
            for name in names:
                if hasattr(owner, name):
                    self.expected.append((label, owner, name, getattr(owner, name)))
        self.builtins = dict(vars(__builtins__) if not isinstance(__builtins__, dict) else __builtins__)

    def check(self) -> None:
        for label, owner, name, value in self.expected:
            if getattr(owner, name, None) is not value:
                raise RuntimeTampered(f"{label}.{name} was replaced while the module ran")
        current = vars(__builtins__) if not isinstance(__builtins__, dict) else __builtins__
        for name, value in self.builtins.items():
            if current.get(name) is not value:
                raise RuntimeTampered(f"builtin {name} was replaced while the module ran")


class Channel:
    """The variant process's side of the channel: frames out on the protocol stream; acks
    and commands in on stdin. A frame whose tensors the judge reads in place (CUDA IPC)
    is followed by a wait for its ack: nothing may change them before the judge is done."""

    def __init__(self, proto: IO[bytes], nonce: str, transport: str) -> None:
        self.proto = proto
        self.nonce = nonce
        self.transport = transport  # "cuda_ipc" (the judge reads tensors in place) or "bytes"
        self.sent = self.acked = 0  # frames sent / acked by the judge (await_judge)
        self.commands: list[Command] = []  # judge commands read while waiting for acks

    def send(self, meta: FrameMeta, tree: Any = None) -> None:
        from . import timeline
        from .wire import write_frame

        with timeline.span("send"):
            wire = dict(meta.to_wire(), timeline=timeline.snapshot())
            exported = write_frame(self.proto, self.nonce, meta.KIND, wire, tree, transport=self.transport)
        self.sent += 1
        if exported:  # the judge reads those tensors in place: nothing may change them before its ack
            self.await_judge()

    def await_judge(self) -> None:
        """Wait until the judge has acked every frame sent (jobs.VariantJob._ack: one line
        on stdin each, once it dropped the frame and released its GPU blocks). A run
        allocates a whole harness's memory; while the judge still holds the previous
        run's outputs decoded on the GPU, both would not fit (the paired re-measurement
        of a 32 GiB harness ran out of memory that way). EOF: the judge is gone, go on."""
        from . import timeline

        with timeline.span("await_judge"):
            self._await_acks()

    def _await_acks(self) -> None:
        while self.acked < self.sent:
            if not self.read_stdin():
                self.acked = self.sent
                return

    def read_stdin(self) -> bool:
        """One line from the judge: an ack (empty line) or a ``Command`` (decoded here:
        MalformedMessage, or ValueError when it is no JSON). False at EOF."""
        line = sys.stdin.readline()
        if not line:
            return False
        if line.strip():
            self.commands.append(Command.from_wire(json.loads(line)))
        else:
            self.acked += 1
        return True

    def next_command(self) -> Optional[Command]:
        """The judge's next command; None at EOF (the job ends)."""
        while not self.commands:
            if not self.read_stdin():
                return None
        return self.commands.pop(0)


def _run_options(
    mode: str,
    writes: dict[str, list[str]],
    learned: dict[str, list[str]],
    gpu_alone: bool,
    kernel: str,
    upcast: dict[int, dict[str, Any]],
) -> dict[str, Any]:
    """``run_harness``'s options for a run in ``mode`` (``upcast`` collects the float64
    reruns' outputs by launch)."""
    options: dict[str, Any] = {}
    if mode == "sanitize":
        return {"track_writes": False}
    if mode == "neutral":
        # the original's own job (no writes given): what its check runs wrote
        options.update(neutralise=True, writes=writes or learned)
    if mode == "upcast":
        before, after = _upcast_hooks(kernel, upcast)
        options.update(before_launch=before, after_launch=after)
    # only the original's own job learns what its launches write (by fingerprints around
    # each launch): a candidate's outputs are the arguments the original writes, and the
    # judge compares everything else it is shown itself
    options["track_writes"] = not writes
    if mode in ("check", "upcast"):
        # a kept run's replay check restores what its launches found (in-place kernels
        # too), and every checked run shows the judge what its launches read
        options["snapshot_bytes"] = _snapshot_budget()
        options["host_snapshot_bytes"] = _host_snapshot_budget()
        options["snapshot_reserve"] = _snapshot_reserve() if gpu_alone else 0
    return options


def _remember_outputs(kept: list[Any], out: Any, transport: str) -> None:
    """Keep what this call returned (in ``kept``, the harness's earlier calls), to show it
    again with every later call: a shared output buffer hands the caller a result that
    changes under it (the judge compares each call's tensors as it first saw them with
    what they are later). Over the bytes channel only while that is cheap."""
    import torch

    from .checks import leaves

    tensors = [t for _, t in leaves(out) if isinstance(t, torch.Tensor)]
    held = sum(t.numel() * t.element_size() for call in kept if call for t in call)
    size = sum(t.numel() * t.element_size() for t in tensors)
    budget = _UPCAST_MAX_BYTES if transport == "bytes" else _previous_budget()
    # over budget, a call is shown as None: the judge skips it (the calls stay aligned)
    kept.append(tensors if held + size <= budget else None)


def _free_memory() -> None:
    """Give back what a dropped run held: Python's garbage, then torch's cached GPU blocks."""
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


class Steps:
    """The job's steps, each sending frames. Runs keep their launches under a key so that
    later steps (replay check, timing, paired timing, profile) can use them."""

    def __init__(self, job: Job, proto: IO[bytes]) -> None:
        from .runner import load_module

        self.nonce = job.nonce
        self.proto = proto
        self.task = job.task
        self.interpreted = job.interpreted
        self.writes = job.writes
        self.transport: str = job.transport
        self.gpu_alone = job.gpu_alone
        self.channel = Channel(proto, self.nonce, self.transport)
        from .capture import install

        install()  # our launch recorder is in place before the identities are taken
        self.kept: dict[str, tuple[Any, Any]] = {}  # key -> (returned output, recorder)
        self.learned: dict[str, list[str]] = {}  # kernel -> argument names this job's launches wrote
        self.timed: dict[str, float] = {}  # kept run -> its median time (ms) from a time step
        self.previous: dict[str, list[Any]] = {}  # harness -> per earlier call, the tensors it returned (or None)
        self.output_bytes: dict[str, int] = {}  # harness -> bytes its last run returned or wrote
        self.integrity = Integrity()
        self.threads = threading.active_count()
        workdir = os.getcwd()
        from . import timeline

        timeline.time_triton_compiles()
        from . import autotune_clock
        from .gpu_lock import compile_outside_lock

        compile_outside_lock()
        autotune_clock.install()
        if not self.interpreted:
            import torch

            if torch.cuda.is_available():
                make_cuda_context("cuda_context")
        self.modules = {}
        self.sources = dict(job.modules)  # tag -> the module's text (kernels' access analysis)
        for tag, source in job.modules.items():
            with timeline.span("import"):
                self.modules[tag] = load_module(self.task, source, tag, workdir)
            self.integrity.check()

    # ------------------------------------------------------------------ frames
    def send(self, meta: FrameMeta, tree: Any = None) -> None:
        self.channel.send(meta, tree)

    def check_runtime(self) -> None:
        """Nothing the checks rely on was replaced, and no thread was started."""
        if threading.active_count() > self.threads:
            raise RuntimeTampered("the module started threads (nothing may run beside the checked launches)")
        self.integrity.check()

    def await_judge(self) -> None:
        self.channel.await_judge()

    def next_command(self) -> Optional[Command]:
        return self.channel.next_command()

    # ------------------------------------------------------------------ runs
    def op_run(self, step: Run) -> None:
        """Run a harness under a seed; send its returned output and every tensor its
        launches wrote (``messages.Run`` says how)."""
        import torch

        from . import autotune_clock, carryover, timeline
        from .capture import StatefulGrid, fingerprint, launch_record, tensor_key
        from .runner import HarnessError, run_harness, synchronize

        self.await_judge()
        version = self.modules[step.module]
        if version.harness_name != step.harness:
            version.harness_name = step.harness
        mode = step.mode
        if step.skip_over is not None and self.output_bytes.get(step.harness, 0) > step.skip_over:
            # outputs this large: the judge keeps one seed's reference (host memory budget)
            self.send(
                RunOutputs(step.harness, step.seed, mode, skipped=True, output_bytes=self.output_bytes[step.harness])
            )
            return
        upcast: dict[int, dict[str, torch.Tensor]] = {}
        options = _run_options(mode, self.writes, self.learned, self.gpu_alone, self.task.kernel, upcast)
        t0 = time.perf_counter()
        calls: list[RecordedCall] = []
        # a candidate's timed run: what torch does beside its launches, for the replay rules
        watch = carryover.TorchAccess() if step.keep and self.writes else None
        try:
            with (
                _recording_wrappers(version, step.record) as calls,
                watch if watch is not None else contextlib.nullcontext(),
                # under compute-sanitizer, each config of an autotuner runs once, untimed
                autotune_clock.every_config_once(synchronize) if mode == "sanitize" else contextlib.nullcontext(),
                timeline.span("harness"),
            ):
                out, rec = run_harness(version, step.seed, **options)
        except HarnessError as e:
            if isinstance(e.exc, StatefulGrid):
                raise RuntimeTampered(str(e.exc)) from None
            if mode != "neutral":
                raise
            # the harness noticed that nothing was computed: report it, go on
            self.integrity.check()
            self.send(RunOutputs(step.harness, step.seed, mode, error=str(e)[-2000:]))
            return
        seconds = time.perf_counter() - t0
        self.check_runtime()
        if mode == "sanitize":  # the tool watched the run: nothing for the judge to compare
            self.send(RunOutputs(step.harness, step.seed, mode, seconds=round(seconds, 4)))
            return
        with timeline.span("collect_written"):
            written, hp = collect_written(rec, mode, upcast, self._names)
        if watch is not None:  # before any replay: the state the launches left is the call's
            why = carryover.replay_refusal(
                rec,
                watch,
                self.sources.get(step.module, ""),
                carryover.reachable(version, out, rec.harness_locals, written),
            )
            if why:
                raise RuntimeTampered(why)
        # inputs changed outside any launch's outputs (by torch in the wrapper, say): the
        # original's own job reports them (a candidate's locals are compared by the judge)
        launch_outputs = {tensor_key(launch.named_args()[n]) for launch in rec.launches for n in launch.written}
        changed = sorted(
            {
                label
                for (t, fp, label) in rec.first_seen.values()
                if tensor_key(t) not in launch_outputs and fingerprint(t) != fp
            }
        )
        meta = RunOutputs(
            step.harness,
            step.seed,
            mode,
            seconds=round(seconds, 4),
            launches=[launch_record(launch) for launch in rec.launches],
            written=_written_names(rec),
            changed_inputs=changed,
            streams=sorted({launch.stream for launch in rec.launches}),
            upcast={k: [x is not None for x in v] for k, v in hp.items()},
            again=step.again,
            kept=bool(step.keep),
            cuda_peak=_cuda_peak(),
            calls=calls,
        )
        # earlier calls' results, shown again (a kept run's outputs are rewritten by its
        # replays on purpose: neither side tracks them). The original's upcast runs count:
        # they are most of its checked runs, which show whether its own results change
        remember = mode in ("check", "upcast") and not step.keep
        previous = list(self.previous.get(step.harness, [])) if remember else []
        if remember:
            with timeline.span("remember_outputs"):
                _remember_outputs(self.previous.setdefault(step.harness, []), out, self.transport)
        if mode != "neutral":
            for kernel, names in meta.written.items():
                have = self.learned.setdefault(kernel, [])
                have += [n for n in names if n not in have]
        tree: dict[str, Any] = {
            "returned": out,
            "written": written,
            "harness_locals": _locals_view(rec.harness_locals, written, out, self.transport),
        }
        if previous:  # what earlier calls returned, as it is now: the judge sees whether it changed
            tree["previous"] = previous
        if rec.prestate.on_device:
            # every tensor the launches found, as its memory was before the first of them: the
            # judge checks each is an input it knows, fresh memory or a constant
            with timeline.span("pre_state"):
                found = rec.prestate.view_copies()
            tree["pre_state"] = [copy for _, copy in found]
            meta = dataclasses.replace(meta, pre_state=[label for label, _ in found])
        self.output_bytes[step.harness] = _output_bytes(out, written)
        if mode == "upcast":
            tree["upcast"] = {k: [x if x is not None else torch.empty(0) for x in v] for k, v in hp.items()}
        self.send(meta, tree)
        if step.keep:
            self.kept[step.keep] = (out, rec)

    def _names(self, launch: Any, mode: str) -> list[str]:
        """The arguments whose final content is an output: the ones the original's
        launches of this kernel wrote (keys then line up with the references), or, for
        the original's own check runs, the ones this launch changed."""
        writes = self.writes or (self.learned if mode == "neutral" else {})
        if writes:
            return [n for n in writes.get(launch.name, []) if n in launch.named_args()]
        return list(launch.written)

    def op_replay_check(self, step: ReplayCheck) -> None:
        """Poison what the kept run's launches wrote, replay them once (frozen), and send
        the outputs again: the judge compares them with the references, so a replay
        that launches less than the checked run cannot pass."""
        from .capture import poison, replay_all, tensor_key
        from .runner import synchronize

        from .capture import restore_pre_state

        t0 = time.perf_counter()
        out, rec = self.kept[step.key]
        restored = restore_pre_state(rec)  # every argument as the first launch found it
        done: set[tuple[Any, ...]] = set()
        for launch in rec.launches if not restored else []:  # too large to copy: poison the outputs
            for name in self._names(launch, "check"):
                t = launch.named_args()[name]
                if not hasattr(t, "fill_"):
                    continue
                if tensor_key(t) not in done:
                    done.add(tensor_key(t))
                    poison(t)
        replay_all(rec.launches)
        synchronize()
        self.integrity.check()
        written, _ = collect_written(rec, "check", {}, self._names)
        self.send(
            ReplayOutputs(step.key, len(rec.launches), restored, seconds=round(time.perf_counter() - t0, 4)),
            {
                "returned": out,
                "written": written,
                "harness_locals": _locals_view(rec.harness_locals, written, out, self.transport),
            },
        )

    def op_release(self, step: Release) -> None:
        """Drop a kept run (its tensors) before the next full-size run: one harness in memory."""
        self.kept.pop(step.key, None)
        _free_memory()

    def op_time(self, step: Time) -> None:
        from .timing import time_launches

        _, rec = self.kept[step.key]
        t0 = time.perf_counter()
        timing = time_launches(rec.launches, restore=_restorer(rec))
        self.timed[step.key] = timing.median_ms
        self.integrity.check()
        self.send(TimingFrame(step.key, timing, seconds=round(time.perf_counter() - t0, 4)))

    def op_derived(self, step: Derived) -> None:
        """Calls of the wrapper that the harness never makes (``derived_run.run_calls``), their
        kernels compiled ahead a few at a time first (``warm_ahead``)."""
        from .derived_run import run_calls
        from .warm_ahead import warm_ahead

        module = self.modules[step.module]
        ahead_s = 0.0 if step.configs else warm_ahead(module, step.calls, step.warm_threads)
        run_calls(module, step, self, ahead_s)

    def op_warm(self, step: Warm) -> None:
        """Compile what the calls beyond the harness will need (``derived_run.warm_calls``)."""
        from .derived_run import warm_calls

        warm_calls(self.modules[step.module], step)

    def op_mark(self, step: Mark) -> None:
        """The end of a batch of steps (the judge reads frames up to it)."""
        self.send(MarkFrame())

    def op_sample(self, step: Sample) -> None:
        """One sample of a kept run's replay, a round of an interleaved measurement driven
        by the judge (which holds the GPU's timing turn while it asks)."""
        from .timing import one_sample

        _, rec = self.kept[step.key]
        ms, clock = one_sample(
            rec.launches,
            rep_ms=step.rep_ms,
            min_reps=step.min_reps,
            held_by_judge=step.held_by_judge,
            restore=_restorer(rec),
        )
        self.integrity.check()
        self.send(SampleFrame(step.key, ms, clock))

    def op_samples(self, step: Samples) -> None:
        """One kept run's samples (a block of the re-measurement in sequence)."""
        from .timing import block_samples

        _, rec = self.kept[step.key]
        ms, clock = block_samples(rec.launches, rounds=step.rounds, restore=_restorer(rec))
        self.integrity.check()
        self.send(SamplesFrame(step.key, ms, clock))

    def op_profile(self, step: ProfileStep) -> None:
        from .profiling import collect_profile

        _, rec = self.kept[step.key]
        time_ms = step.time_ms if step.time_ms is not None else self.timed.get(step.key)  # this job's own timing
        prof = collect_profile(
            rec.launches,
            time_ms,
            step.tier,
            step.facts,
            step.source,
            self.task.kernel,
            self.interpreted,
            restore=_restorer(rec),
        )
        self.send(ProfileFrame(json.loads(json.dumps(prof.to_dict(), default=str))))


# each step's handler, by its class (every class of messages.STEPS has one: a test checks)
STEP_OPS: dict[type[Step], Callable[[Steps, Any], None]] = {
    Run: Steps.op_run,
    ReplayCheck: Steps.op_replay_check,
    Release: Steps.op_release,
    Time: Steps.op_time,
    Derived: Steps.op_derived,
    Mark: Steps.op_mark,
    Sample: Steps.op_sample,
    Samples: Steps.op_samples,
    ProfileStep: Steps.op_profile,
    Warm: Steps.op_warm,
}


# larger local tensors that are no output cross as fingerprints (override: tests)
_LOCAL_DATA_MAX_BYTES = int(os.environ.get("KERNELBAND_LOCAL_DATA_MAX_BYTES", 64 << 20))


def collect_written(
    rec: Any, mode: str, upcast: dict[int, dict[str, Any]], names: Callable[[Any, str], list[str]]
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Distinct written tensors per "kernel.arg", in order of first launch, and (upcast
    mode) the higher-precision result of the last launch that wrote each; ``names`` gives a
    launch's output arguments."""
    from .capture import tensor_key

    written: dict[str, list[Any]] = {}
    hp: dict[str, list[Any]] = {}
    slots: dict[str, dict[tuple[Any, ...], int]] = {}
    for i, launch in enumerate(rec.launches):
        named = launch.named_args()
        for name in names(launch, mode):
            key, t = f"{launch.name}.{name}", named[name]
            if not hasattr(t, "data_ptr"):
                continue
            where = slots.setdefault(key, {})
            k = tensor_key(t)
            if k not in where:
                where[k] = len(written.setdefault(key, []))
                written[key].append(t)
                if mode == "upcast":
                    hp.setdefault(key, []).append(None)
            if mode == "upcast" and name in upcast.get(i, {}):
                hp[key][where[k]] = upcast[i][name]
    return written, hp


@dataclass
class InputFingerprint:
    """A large harness-local tensor that is not an output (an input): its content hash,
    so an input changed in place is seen without sending gigabytes to the judge."""

    dtype: str
    shape: list[int]
    fp: Any  # int64 tensor of the two sums


def _locals_view(
    harness_locals: dict[str, Any], written: dict[str, list[Any]], returned: Any, transport: str = "bytes"
) -> dict[str, Any]:
    import torch

    from .capture import fingerprint, tensor_key
    from .checks import leaves

    outputs = {tensor_key(t) for ts in written.values() for t in ts if isinstance(t, torch.Tensor)}
    outputs |= {tensor_key(t) for _, t in leaves(returned) if isinstance(t, torch.Tensor)}

    def view(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if (
                x.numel() * x.element_size() <= _LOCAL_DATA_MAX_BYTES
                or tensor_key(x) in outputs
                or (transport == "cuda_ipc" and x.is_cuda)
            ):  # read in place by the judge: no cost
                return x
            s1, s2 = fingerprint(x)
            as_signed = [v - (1 << 64) if v >= 1 << 63 else v for v in (s1, s2)]
            return InputFingerprint(str(x.dtype), list(x.shape), torch.tensor(as_signed, dtype=torch.int64))
        if isinstance(x, dict):
            return {k: view(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(view(v) for v in x)
        return x

    return {k: view(v) for k, v in harness_locals.items()}


def _output_bytes(returned: Any, written: dict[str, list[Any]]) -> int:
    """Bytes of the distinct tensors a run returned or its launches wrote."""
    import torch

    from .capture import tensor_key
    from .checks import leaves

    seen: dict[Any, int] = {}
    for _, t in list(leaves(returned)) + [(k, t) for k, ts in written.items() for t in ts]:
        if isinstance(t, torch.Tensor):
            seen[tensor_key(t)] = t.numel() * t.element_size()
    return sum(seen.values())


def _recording_wrappers(version: Any, names: list[str]) -> contextlib.AbstractContextManager[list[RecordedCall]]:
    """Record the wrapper's calls during a run when asked (the original's job only): in
    the module, and in a companion harness file that imported the wrapper by name."""
    from .derived import record_calls

    if not names:
        return contextlib.nullcontext([])

    @contextlib.contextmanager
    def both() -> Iterator[list[RecordedCall]]:
        with record_calls(version.module, names) as calls:
            if version.harness_module is version.module:
                yield calls
                return
            shared = [n for n in names if getattr(version.harness_module, n, None) is not None]
            with record_calls(version.harness_module, shared) as more:
                yield calls
                calls.extend(more)

    return both()


def _restorer(rec: Any) -> Any:
    """What puts a kept run's launches' starting state back before each timed replay, or
    None where the run kept no copy of a storage they changed (too large: the original's
    own job only; a candidate's is refused, ``carryover.replay_refusal``)."""
    from .capture import restore_pre_state

    if not rec.prestate.restorable:
        return None
    return lambda: restore_pre_state(rec)


def _snapshot_budget() -> int:
    """Memory a kept run may spend on device copies of the storages its launches touch
    (the replays' starting state): a quarter of the GPU's free memory, 1 GiB under the
    interpreter."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return 1 << 30
    return torch.cuda.mem_get_info()[0] // 4


def _snapshot_reserve() -> int:
    """What a job alone on its GPU leaves free when its snapshots go beyond their budget: an
    eighth of the GPU, 4 GiB at least (the judge, spares and a sibling live beside it)."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return 0
    return max(4 << 30, torch.cuda.mem_get_info()[1] // 8)


def _host_snapshot_budget() -> int:
    """Host memory for the copies the GPU's budget leaves out: a quarter of what the
    machine has available (none under the interpreter: its copies are host copies)."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return 0
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 4
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _previous_budget() -> int:
    """GPU memory that earlier calls' results may keep alive for the staleness check."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return _UPCAST_MAX_BYTES
    return torch.cuda.mem_get_info()[1] // 8


def _cuda_peak() -> int:
    """The most GPU memory this process's allocator has reserved (0 without a GPU)."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return 0
    return int(torch.cuda.max_memory_reserved())


def _written_names(rec: Any) -> dict[str, list[str]]:
    """kernel -> argument names any of its launches wrote (what neutralising must poison)."""
    out: dict[str, list[str]] = {}
    for launch in rec.launches:
        names = out.setdefault(launch.name, [])
        for n in launch.written:
            if n not in names:
                names.append(n)
    return out


def _upcast_hooks(kernel: str, sink: dict[int, dict[str, Any]]) -> tuple[Callable[..., None], Callable[..., None]]:
    """Hooks that rerun each launch of ``kernel`` on float64 copies of its pre-launch
    tensors (float32 copies when float64 does not compile): a higher-precision reference
    of the original's own computation, against which errors are measured."""
    import torch

    from .capture import run_unrecorded, same_layout_copy
    from .runner import synchronize

    pending: dict[int, dict[str, torch.Tensor]] = {}
    counter = [0]
    cap = _UPCAST_MAX_BYTES
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        cap = max(cap, min(2 << 30, torch.cuda.mem_get_info()[0] // 8))  # copies are cheap on a big GPU

    def before(launch: Any, named: dict[str, torch.Tensor]) -> None:
        index = counter[0]
        counter[0] += 1
        launch._kb_index = index
        if launch.name != kernel or sum(t.numel() * 8 for t in named.values()) > cap:
            return
        pending[index] = {n: same_layout_copy(t.detach()) for n, t in named.items()}

    def after(launch: Any, named: dict[str, torch.Tensor]) -> None:
        index = getattr(launch, "_kb_index", -1)
        saved = pending.pop(index, None)
        if saved is None or launch.inner is None or not launch.written:
            return
        floats = [t for t in saved.values() if t.is_floating_point()]
        if not floats:
            return
        for wide in (torch.float64, torch.float32):
            if wide == torch.float32 and all(t.dtype in (torch.float32, torch.float64) for t in floats):
                break
            copies = {n: same_layout_copy(t, wide if t.is_floating_point() else None) for n, t in saved.items()}
            by_id = {id(named[n]): copies[n] for n in named}
            obj, args, kwargs = launch.inner
            wargs = tuple(by_id.get(id(a), a) for a in args)
            wkw = {k: by_id.get(id(v), v) for k, v in kwargs.items()}
            try:
                run_unrecorded(obj, wargs, wkw)
                synchronize()
            except Exception:  # noqa: BLE001 - this kernel does not compile at that width
                continue
            sink[index] = {n: copies[n] for n in launch.written if n in copies}
            return

    return before, after


def main() -> int:
    from . import sandbox, timeline

    with timeline.span("sandbox"):
        report = sandbox.enter()  # before anything else is imported or run (forks: see sandbox.py)
    print(f"kernelband-sandbox: network {report.network}", file=sys.stderr, flush=True)
    print(f"kernelband-sandbox: layers {report.summary()}", file=sys.stderr, flush=True)
    proto = _protocol_stream()
    _early_cuda_context()
    raw = json.loads(sys.stdin.readline())
    try:
        job = Job.from_wire(raw)
    except MalformedMessage as e:
        return _fail(proto, str(raw.get("nonce") if isinstance(raw, dict) else ""), ErrorFrame("protocol", str(e)))
    _choose_backend(job.interpreted)
    _poison_uninitialized_memory()
    nonce = job.nonce
    from .wire import write_frame

    try:
        steps = Steps(job, proto)
    except RuntimeTampered as e:
        return _fail(proto, nonce, ErrorFrame("tampered", str(e)))
    except Exception as e:  # noqa: BLE001 - HarnessError from the import
        phase = str(getattr(e, "phase", "import"))
        return _fail(proto, nonce, ErrorFrame(phase, f"{type(e).__name__}: {e}" if not hasattr(e, "phase") else str(e)))
    batch = job.steps
    while True:
        for step in batch:
            code = _run_step(steps, step, proto, nonce)
            if code is not None:
                return code
        if not job.interactive:
            break
        # a long-lived process (the reference lane): the judge sends more steps as it needs
        try:
            command = steps.next_command()
        except ValueError as e:  # MalformedMessage, or no JSON at all
            return _fail(proto, nonce, ErrorFrame("protocol", f"a command that does not decode: {e}"))
        if command is None:
            break
        batch = command.steps
    write_frame(proto, nonce, DoneFrame.KIND, DoneFrame(timeline=timeline.snapshot()).to_wire())
    return 0


def _early_cuda_context() -> None:
    """A spare (``spares.py``) makes its CUDA context while it waits for its job, before
    any module is imported; the job's own start then finds it made."""
    from .spares import EARLY_CUDA_ENV

    if os.environ.get(EARLY_CUDA_ENV) != "1":
        return
    try:
        make_cuda_context("early_cuda_context")
    except Exception:  # noqa: BLE001 - the job makes its context itself, and reports what fails
        pass


def make_cuda_context(span: str) -> None:
    """This process's CUDA context, made inside the GPU lock's shared hold: making one is
    GPU work (memory set up on the device), and outside the lock it ran inside other
    processes' timed regions (on one H200, spares making theirs beside the lane's rounds:
    a winner's search time 0.280 ms against its measured 0.387 ms, softmax_out)."""
    import torch

    from . import timeline
    from .gpu_lock import gpu_lock

    with timeline.span(span), gpu_lock(exclusive=False):
        torch.cuda.init()
        torch.empty(1, device="cuda")


def _fail(proto: IO[bytes], nonce: str, error: ErrorFrame) -> int:
    """Send the job's last frame, ``error`` (its message capped); the exit code."""
    from ..redact import cap
    from .wire import write_frame

    try:
        write_frame(proto, nonce, error.KIND, dataclasses.replace(error, message=cap(error.message)).to_wire())
    except OSError:
        pass
    return 1


def _run_step(steps: "Steps", step: Step, proto: IO[bytes], nonce: str) -> Optional[int]:
    """Run one step; None to go on, or the exit code after a failure (sent as a frame)."""
    from .capture import HookDuringReplay

    try:
        STEP_OPS[type(step)](steps, step)
        return None
    except (RuntimeTampered, HookDuringReplay) as e:  # a trust failure, not the kernel's error
        return _fail(proto, nonce, ErrorFrame("tampered", str(e)))
    except Exception as e:  # noqa: BLE001 - every failure is a frame
        phase = str(getattr(e, "phase", "run"))  # a str whatever the module's exception holds
        text = str(e) if hasattr(e, "phase") else f"{type(e).__name__}: {e}"
        print(traceback.format_exc(limit=6), file=sys.stderr)
        error = ErrorFrame(phase, text, step.OP, fatal=_context_broken(e))
        if isinstance(step, Run):
            error = dataclasses.replace(error, harness=step.harness, seed=step.seed, mode=step.mode)
        return _fail(proto, nonce, error)


_FATAL_MARKERS = (
    "illegal memory access",
    "illegal address",
    "unspecified launch failure",
    "device-side assert",
    "CUDA error",
    "misaligned address",
    "an illegal instruction",
)


def _context_broken(exc: BaseException) -> bool:
    text = str(exc)
    return any(m in text for m in _FATAL_MARKERS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
