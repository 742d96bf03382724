"""The judge <-> variant process and judge <-> fork server messages (kernelband/worker/messages.py):
each survives the wire unchanged, a malformed one is refused with a one-line reason, the
variant process answers a malformed step with an error frame, and a frame of the (untrusted)
variant process whose meta has a wrong-typed field ends the candidate as a trust refusal."""
from __future__ import annotations

import dataclasses
import io
import json
import re
import socket
import threading
from pathlib import Path

import pytest

from helpers.kernels import AXPY, axpy_task
from kernelband.model import LaunchRecord, Status, Task, Timing
from kernelband.profile.schema import DeviceFacts
from kernelband.worker.call_spec import DerivedCall, RecordedCall, ValueArg
from kernelband.worker.messages import (FRAMES, STEPS, Command, Derived, DerivedOutputs, DoneFrame, ErrorFrame,
                                        FrameMeta, Job, Kill, Killed, MalformedMessage, Mark, MarkFrame, ProfileFrame,
                                        ProfileStep, Reap, Reaped, Ready, Release, ReplayCheck, ReplayOutputs, Run,
                                        RunOutputs, Sample, SampleFrame, Samples, SamplesFrame, Spawn, Spawned, Step,
                                        Time, TimingFrame, Warm, ZygoteRequest, decode_frame)

TASK = Task(module_path="/tmp/k.py", source="def k(): pass\n", kernel="k", harness="bench_k", seeds=[0, 7])

# one of each, fields away from their defaults where it has any
STEP_SAMPLES: list[Step] = [
    Run("v", "bench_k", 7, "upcast", keep="v", again=True, record=["wrap"], skip_over=1 << 30),
    Run("o", "test_k", 0),
    ReplayCheck("v"),
    Time("v"),
    Sample("o", held_by_judge=True, rep_ms=25, min_reps=1),
    Samples("v", rounds=4),
    ProfileStep("m", "src", tier=2, facts=DeviceFacts(copy_gbs=900.0), time_ms=0.25),
    Derived([DerivedCall(fn="wrap", args=(ValueArg(2),), kwargs={}, flavour="repeat", seed=3, sizes={"4": 2},
                         repeats=14)], module="o", which="b"),
    Release("v"),
    Warm([DerivedCall(fn="wrap", args=(ValueArg(2),), kwargs={}, flavour="sizes", seed=1, sizes={})], "o",
         compile_threads=3),
    Mark(),
]

LAUNCH = LaunchRecord("k", [4, 1, 1], {"BLOCK": 128}, 4, 2, 4096)
FRAME_SAMPLES: list[FrameMeta] = [
    RunOutputs("bench_k", 7, "check", launches=[LAUNCH], written={"k": ["out"]}, changed_inputs=["k.x"],
               streams=[0, 7], upcast={"k.out": [True, False]}, again=True, kept=True, cuda_peak=1 << 20,
               calls=[RecordedCall(fn="wrap", args=(), kwargs={})], pre_state=["k.x"], seconds=0.5, timeline={"seconds": {"import": 0.1}}),
    RunOutputs("bench_k", 1, "check", skipped=True, output_bytes=1 << 33),
    RunOutputs("test_k", 0, "neutral", error="AssertionError: nothing computed"),
    ReplayOutputs("v", 3, True, seconds=0.01),
    DerivedOutputs(2, "b", allocs=[[64, 128]], seconds=0.2),
    DerivedOutputs(0, "a", error="ValueError: bad shape"),
    TimingFrame("v", Timing(1.0, 0.9, 1.1, "cuda-events", 3), seconds=2.0),
    SampleFrame("o", 0.125, "cuda-events"),
    SamplesFrame("v", [0.5, 0.25], "cpu-interpreter"),
    ProfileFrame({"kernel": "k", "tiers": {}}),
    MarkFrame(),
    ErrorFrame("run", "RuntimeError: boom", "run", "bench_k", 0, "check", fatal=True),
    ErrorFrame("import", "SyntaxError: x"),
    DoneFrame(timeline={"counts": {"compiles": 1}}),
]


def _over_the_wire(body: object) -> object:
    return json.loads(json.dumps(body))


# ---------------------------------------------------------------- round trips
def test_every_step_and_frame_kind_has_a_sample() -> None:
    assert {type(s) for s in STEP_SAMPLES} == set(STEPS.values())
    assert {type(f) for f in FRAME_SAMPLES} == set(FRAMES.values()) | {RunOutputs, ReplayOutputs, DerivedOutputs}


@pytest.mark.parametrize("step", STEP_SAMPLES, ids=lambda s: s.OP)
def test_a_step_round_trips_and_decodes_to_its_own_class(step: Step) -> None:
    wire = _over_the_wire(step.to_wire())
    assert isinstance(wire, dict) and wire["op"] == step.OP
    assert set(wire) == {"op"} | {f.name for f in dataclasses.fields(step)}
    assert Step.from_wire(wire) == step  # the family decodes whichever op the body names
    assert type(step).from_wire(wire) == step


@pytest.mark.parametrize("meta", FRAME_SAMPLES, ids=lambda f: f"{type(f).__name__}")
def test_a_frame_meta_round_trips(meta: FrameMeta) -> None:
    wire = _over_the_wire(meta.to_wire())
    assert isinstance(wire, dict)
    assert decode_frame(meta.KIND, wire) == meta


def test_a_job_and_a_command_round_trip_with_their_steps() -> None:
    job = Job(TASK, {"v": "x = 1\n"}, STEP_SAMPLES, interpreted=True, writes={"k": ["out"]}, transport="cuda_ipc",
              interactive=True, nonce="ab12")
    wire = _over_the_wire(job.to_wire())
    assert isinstance(wire, dict) and wire["task"] == TASK.to_dict() and wire["steps"][0]["op"] == "run"
    assert Job.from_wire(wire) == job
    assert Command.from_wire(_over_the_wire(Command(STEP_SAMPLES).to_wire())) == Command(STEP_SAMPLES)


@pytest.mark.parametrize("msg", [Spawn("/tmp/job", {"PATH": "/bin"}), Reap(12), Kill(13)], ids=lambda m: m.OP)
def test_a_fork_server_request_round_trips(msg: ZygoteRequest) -> None:
    assert ZygoteRequest.from_wire(_over_the_wire(msg.to_wire())) == msg


def test_fork_server_replies_round_trip() -> None:
    for reply in (Ready(True), Spawned(41), Reaped(None), Reaped(-9), Killed(2)):
        assert type(reply).from_wire(_over_the_wire(reply.to_wire())) == reply


def test_every_step_has_a_handler_in_the_variant_process() -> None:
    from kernelband.worker.variant import STEP_OPS

    assert set(STEP_OPS) == set(STEPS.values())


# ---------------------------------------------------------------- malformed messages
@pytest.mark.parametrize("body, says", [
    ({"op": "warp", "key": "v"}, "malformed step: unknown op 'warp' (known: run, replay_check,"),
    ({"key": "v"}, "malformed step: unknown op None"),
    (["run"], "malformed step: must be an object, got list"),
    ({"op": "run", "module": "v", "harness": "h", "seed": "0"}, "malformed run step: seed must be int, got str ('0')"),
    ({"op": "run", "module": "v", "harness": "h", "seed": True}, "seed must be int, got bool"),
    ({"op": "run", "module": "v", "harness": "h", "seed": 0, "mode": "fast"},
     "mode must be 'check' or 'neutral' or 'upcast' or 'sanitize', got str ('fast')"),
    ({"op": "run", "module": "v", "seed": 0}, "malformed run step: missing required field 'harness'"),
    ({"op": "run", "module": "v", "harness": "h", "seed": 0, "kept": "v"}, "unknown field(s) 'kept' (known: module,"),
    ({"op": "sample", "key": "v", "held_by_judge": 1}, "malformed sample step: held_by_judge must be bool, got int"),
    ({"op": "derived", "calls": {"fn": "f"}}, "calls must be a list of an object, got dict"),
    ({"op": "profile", "key": "v", "source": "s", "facts": []}, "facts must be an object, got list"),
])
def test_a_malformed_step_is_refused_with_one_line(body: object, says: str) -> None:
    with pytest.raises(MalformedMessage) as e:
        Step.from_wire(body)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_leaf_class_refuses_another_op_and_a_job_says_which_step() -> None:
    with pytest.raises(MalformedMessage, match=r"^malformed step: unknown op 'run' \(known: mark\)$"):
        Mark.from_wire({"op": "run"})
    body = _over_the_wire(Job(TASK, {}, [Mark(), Run("v", "h", 0)]).to_wire())
    assert isinstance(body, dict)
    body["steps"][1]["seed"] = "0"
    with pytest.raises(MalformedMessage, match=re.escape("malformed Job: steps[1]: malformed run step: seed must be")):
        Job.from_wire(body)
    with pytest.raises(MalformedMessage, match=re.escape("malformed Job: task.seeds[0] must be int, got str")):
        Job.from_wire(dict(body, task=dict(TASK.to_dict(), seeds=["0"]), steps=[]))
    with pytest.raises(MalformedMessage, match=re.escape("malformed Command: steps must be a list of an object")):
        Command.from_wire({"steps": {"op": "mark"}})


# what a variant process could send: every field of the wrong type is refused where it is read
@pytest.mark.parametrize("kind, meta, says", [
    ("outputs", {"harness": "h", "seed": "0", "mode": "check"}, "malformed outputs frame: seed must be int, got str"),
    ("outputs", {"harness": "h", "seed": 0, "mode": "check", "launches": [{"kernel": "k", "grid": ["4"]}]},
     "launches[0].grid[0] must be int, got str"),
    ("outputs", {"harness": "h", "seed": 0, "mode": "check", "streams": "0"}, "streams must be a list of int"),
    ("outputs", {"harness": "h", "seed": 0, "mode": "check", "kept": "yes"}, "kept must be bool, got str"),
    ("outputs", {"harness": "h", "seed": 0, "mode": "check", "verdict": "ok"}, "unknown field(s) 'verdict'"),
    ("outputs", {"harness": "h", "seed": 0, "mode": "timed"}, "mode must be 'check' or 'neutral' or 'upcast'"),
    ("outputs", {"harness": "h", "seed": 0, "mode": ["replay"]}, "mode must be 'check' or 'neutral' or 'upcast'"),
    ("outputs", {"mode": "replay", "key": "v", "launches": [], "restored": True}, "launches must be int, got list"),
    ("outputs", {"mode": "derived", "index": "0", "which": "a"}, "malformed outputs frame: index must be int"),
    ("outputs", {"mode": "derived", "index": 0, "which": "a", "allocs": [["64", 8]]}, "allocs[0][0] must be int"),
    ("timing", {"key": "v", "timing": {"median_ms": "fast"}}, "timing.median_ms must be float, got str"),
    ("sample", {"key": "v", "ms": None, "clock": "c"}, "malformed sample frame: ms must be float, got NoneType"),
    ("samples", {"key": "v", "ms": [0.1, "0.2"], "clock": "c"}, "ms[1] must be float, got str"),
    ("error", {"phase": None, "message": "x"}, "malformed error frame: phase must be str, got NoneType"),
    ("error", {"phase": "run", "seed": "0"}, "seed must be int or null, got str"),
    ("done", {"timeline": []}, "malformed done frame: timeline must be an object, got list"),
    ("paired", {}, "malformed frame: unknown kind 'paired'"),
])
def test_a_forged_frame_meta_is_refused(kind: str, meta: dict, says: str) -> None:
    with pytest.raises(MalformedMessage) as e:
        decode_frame(kind, meta)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_absent_fields_take_the_defaults_the_receiver_assumes() -> None:
    assert Step.from_wire({"op": "run", "module": "v", "harness": "h", "seed": 0}) == Run("v", "h", 0, "check")
    assert Step.from_wire({"op": "sample", "key": "o"}) == Sample("o", False, 10, 5)  # a search round's
    assert decode_frame("mark", {}) == MarkFrame()
    assert decode_frame("sample", {"key": "v", "ms": 1, "clock": "c"}).ms == 1.0  # one JSON number type


# ---------------------------------------------------------------- through the channel
class _FakeZygote:
    """Stands in for the fork server of a ZygoteChild whose pipes are in memory."""

    def request(self, msg: ZygoteRequest, reply: type) -> object:
        return Reaped(0) if reply is Reaped else reply()  # exited; no strays


def _job_reading(frames: list[tuple[str, dict]], tmp_path: Path):
    """A VariantJob whose variant process's stdout holds ``frames`` (written with its nonce)."""
    from kernelband.worker.jobs import VariantJob, ZygoteChild
    from kernelband.worker.wire import write_frame

    job = VariantJob(Job(axpy_task(tmp_path), {"v": AXPY}, [Mark()]), timeout_s=30)
    out = io.BytesIO()
    for kind, meta in frames:
        write_frame(out, job.nonce, kind, meta)
    out.seek(0)
    job.proc = ZygoteChild(_FakeZygote(), -1, io.BytesIO(), out, None)  # type: ignore[arg-type]
    return job


def test_a_frame_with_a_wrong_typed_field_ends_the_job_as_malformed(tmp_path: Path) -> None:
    from kernelband.worker.jobs import JobEndKind, JobFailed

    job = _job_reading([("sample", {"key": "v", "ms": 0.5, "clock": "c"}), ("sample", {"key": "v", "ms": "fast"})],
                       tmp_path)
    first = job.next_frame()
    assert first.meta == SampleFrame("v", 0.5, "c")  # typed from here on
    with pytest.raises(JobFailed) as e:
        job.next_frame()
    assert e.value.end.kind is JobEndKind.MALFORMED
    assert "sent a malformed frame (malformed sample frame: ms must be float, got str" in str(e.value)


def test_a_job_end_kind_reads_as_its_word_in_messages() -> None:
    from kernelband.worker.jobs import JobEnd, JobEndKind, JobFailed

    assert [str(k) for k in JobEndKind] == ["timeout", "crashed", "protocol", "malformed"]
    e = JobFailed(JobEnd(JobEndKind.TIMEOUT, "no result within 5 s"))
    assert f"paired timing failed ({e.end.kind}): {e}" == "paired timing failed (timeout): no result within 5 s"


def test_a_candidate_whose_frame_has_a_wrong_typed_field_is_a_trust_refusal(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.worker.judge import JudgeService
    from kernelband.worker.judge_candidate import evaluate
    from kernelband.worker.requests import Evaluate

    judge = JudgeService(interpreted=True)
    judge.task, judge.workdir = axpy_task(tmp_path), tmp_path
    forged = {"harness": "harness_axpy", "seed": "0", "mode": "check", "kept": True}
    monkeypatch.setattr(judge, "job", lambda *a, **k: _job_reading([("outputs", forged)], tmp_path))
    ev = evaluate(judge, Evaluate(source=AXPY, time=False))
    assert ev["status"] == Status.REJECTED.value
    assert ev["message"].startswith("trust: the variant process sent a malformed frame (malformed outputs frame: "
                                    "seed must be int, got str ('0'))")


def test_the_variant_process_answers_a_malformed_step_with_an_error_frame(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A real variant process: a job whose steps do not decode, and a command that does not,
    each end in an error frame (never a crash: no traceback, the judge reads why)."""
    from kernelband.worker.jobs import VariantJob

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = axpy_task(tmp_path)
    bad = Run("v", "harness_axpy", "0")  # type: ignore[arg-type]  # the dataclass does not check; the receiver does
    job = VariantJob(Job(task, {"v": AXPY}, [bad], interpreted=True), timeout_s=120)
    try:
        (frame,) = list(job.frames())
    finally:
        job.close()
    assert isinstance(frame.meta, ErrorFrame) and frame.meta.phase == "protocol"
    assert frame.meta.message == "malformed Job: steps[0]: malformed run step: seed must be int, got str ('0')"

    job = VariantJob(Job(task, {"v": AXPY}, [Mark()], interpreted=True, interactive=True), timeout_s=120)
    try:
        assert job.next_frame().kind == "mark"
        job.command([Release("v"), bad], 60)
        frame = job.next_frame()
    finally:
        job.close()
    assert isinstance(frame.meta, ErrorFrame) and frame.meta.phase == "protocol"
    assert frame.meta.message.startswith("a command that does not decode: malformed Command: steps[1]: malformed run "
                                         "step: seed must be int")


def test_the_fork_server_refuses_a_malformed_request_and_goes_on() -> None:
    from kernelband.worker import zygote

    judge_end, server_end = socket.socketpair()
    served = threading.Thread(target=zygote._serve, args=(server_end,), daemon=True)
    served.start()
    reader = judge_end.makefile("rb")
    try:
        for line, answer in ((b'{"op": "reap", "pid": "12"}', "malformed reap fork server request: pid must be int"),
                             (b'{"op": "fork"}', "malformed fork server request: unknown op 'fork'")):
            judge_end.sendall(line + b"\n")
            assert answer in json.loads(reader.readline())["error"]
        judge_end.sendall(b'{"op": "reap", "pid": 2147480000}\n')  # no such child: still running as far as it knows
        assert Reaped.from_wire(json.loads(reader.readline())) == Reaped(None)
    finally:
        reader.close()
        judge_end.close()
        served.join(5)
        server_end.close()
    assert not served.is_alive()


def test_the_judge_refuses_a_fork_server_reply_of_the_wrong_shape() -> None:
    from kernelband.worker.zygote_handle import Zygote

    handle = object.__new__(Zygote)
    handle.sock, server = socket.socketpair()
    handle._buf, handle.lock = b"", threading.Lock()
    try:
        server.sendall(b'{"status": "done"}\n{"strays": 3}\n')
        with pytest.raises(OSError, match="malformed Reaped: status must be int or null, got str"):
            handle.request(Reap(5), Reaped)
        assert handle.request(Kill(5), Killed) == Killed(3)
        assert json.loads(server.recv(1 << 16).decode().splitlines()[0]) == {"op": "reap", "pid": 5}
    finally:
        handle.sock.close()
        server.close()


def test_a_search_round_samples_shorter_than_a_paired_round() -> None:
    """Every lane's search rounds run in series under the exclusive GPU turn: their samples
    are the short ones; the paired re-measurement, which decides a verdict, keeps its own."""
    from kernelband.worker.judge_core import sample_step
    from kernelband.worker.messages import PAIRED_SAMPLE_MS, SEARCH_SAMPLE_MIN_REPS, SEARCH_SAMPLE_MS

    search, paired = sample_step("v", True), sample_step("o", True, paired=True)
    assert (search.rep_ms, search.min_reps) == (SEARCH_SAMPLE_MS, SEARCH_SAMPLE_MIN_REPS) == (Sample("v").rep_ms,
                                                                                          Sample("v").min_reps)
    assert (paired.rep_ms, paired.min_reps) == (PAIRED_SAMPLE_MS, 1) and SEARCH_SAMPLE_MS < PAIRED_SAMPLE_MS
