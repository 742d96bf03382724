"""Job events are typed payloads (kernelband/events.py): written by the engine, decoded once
where they are read, and used by class by the server, the agent tools and the progress bar.
A line whose fields do not decode is refused in one line naming the field, and a job that
sends one ends with that message, not with a half-read event."""
from __future__ import annotations

import asyncio
import io
import json
import sys

import pytest

from kernelband.decode import MalformedMessage
from kernelband.events import (PAYLOADS, Baseline, Candidate, Event, EventEmitter, Finished, JobError, Log,
                               ProfileReady, Progress, Started, jsonl_sink)
from kernelband.model import Result, ResultStatus
from kernelband.profile.schema import Profile

EXAMPLES = [
    Started(kernel="axpy_kernel", file="/w/axpy.py", source_hash="ab12", budget={"evaluations": 16, "seconds": None},
            generator="rules", search="kernelband", session_id="s1"),
    Baseline(time_ms=0.642, clock="cuda-events", interpreted=False, speed_claim=True, device="NVIDIA H200",
             deterministic=True, message="", prepare_ms=0.64, setup_s={"prepare": 3.2}),
    Candidate(index=3, variant_id="v3", parent="v0", strategy="tiling", generator="rules", status="ok", time_ms=0.5,
              speedup=1.284, message="ok", description="BLOCK 1024", phases={"judge": 0.8}, speed_claim=True),
    Progress(done=3, total=16, best_ms=0.5, best_speedup=1.284, message="tiling: ok", speed_claim=True),
    ProfileReady(Profile(kernel="axpy_kernel", time_ms=0.42)),
    Finished(Result(status=ResultStatus.IMPROVED, kernel="axpy_kernel", speedup=1.28)),
    JobError("no GPU and no interpreter", kind="setup"),
    Log("measuring device peaks...", level="info"),
]


def test_every_event_type_has_one_payload_class():
    assert sorted(PAYLOADS) == sorted({type(p).TYPE for p in EXAMPLES})


@pytest.mark.parametrize("payload", EXAMPLES, ids=lambda p: type(p).__name__)
def test_a_payload_survives_the_jsonl_stream_as_its_own_class(payload):
    out = io.StringIO()
    EventEmitter(jsonl_sink(out)).emit(payload)
    line = out.getvalue()
    wire = json.loads(line)
    assert wire["type"] == payload.TYPE and isinstance(wire["t"], float)
    back = Event.from_json(line)
    assert type(back.payload) is type(payload)
    assert back.payload.to_wire() == payload.to_wire()


def test_an_optional_field_left_unset_is_left_off_the_wire():
    wire = json.loads(Event(Candidate(index=1, status="compile_error")).to_json())
    assert "parent" not in wire and "speedup" not in wire and wire["index"] == 1


@pytest.mark.parametrize("line,field", [
    ('{"type": "candidate", "index": "3", "status": "ok"}', "index"),
    ('{"type": "progress", "done": 1, "total": "16"}', "total"),
    ('{"type": "progress", "done": true}', "done"),
    ('{"type": "started", "kernel": "k", "budget": {"evaluations": "16"}}', "budget"),
    ('{"type": "baseline", "time_ms": "fast"}', "time_ms"),
    ('{"type": "log", "message": "x", "level": 3}', "level"),
    ('{"type": "candidate", "index": 1, "speedup": 9.9, "verified": true}', "verified"),
    ('{"type": "started"}', "kernel"),
    ('{"type": "result", "result": [1, 2]}', "result"),
    ('{"type": "profile", "profile": {"kernel": 5}}', "profile"),
    ('{"type": "error", "message": "x", "t": "soon"}', "t"),
])
def test_a_field_that_does_not_decode_is_refused_in_one_line_naming_it(line, field):
    with pytest.raises(MalformedMessage) as e:
        Event.from_json(line)
    assert "\n" not in str(e.value) and field in str(e.value)


def test_a_line_that_is_no_event_is_no_malformed_event():
    """Other output of an engine (not JSON, another type) is kept as output, not an error."""
    for line in ("progress: 3/16", '{"type": "telemetry", "x": 1}', "[1, 2]"):
        with pytest.raises(ValueError) as e:
            Event.from_json(line)
        assert not isinstance(e.value, MalformedMessage)


def test_emission_scrubs_the_payload_it_hands_on():
    from kernelband.redact import register_secret

    register_secret("sk-test-abcdefghijklmnopqrstuvwxyz123456")
    got: list[Event] = []
    EventEmitter(got.append).emit(Log("the key was sk-test-abcdefghijklmnopqrstuvwxyz123456", level="warning"))
    assert isinstance(got[0].payload, Log) and "sk-test" not in got[0].payload.message


def test_a_job_that_sends_a_malformed_event_ends_with_that_message(tmp_path):
    """The server's reader (kernelband_lsp/jobio.py) on a real process: the well-formed
    events reach the job as their classes, the malformed one becomes the job's error."""
    from kernelband_lsp.jobio import read_stdout
    from kernelband_lsp.jobmodel import Job, JobSpec

    lines = ['{"type": "started", "t": 0.1, "kernel": "k"}', "a line of other output",
             '{"type": "progress", "t": 0.2, "done": "many"}', '{"type": "progress", "t": 0.3, "done": 2}']
    script = tmp_path / "engine.py"
    script.write_text("import sys\n" + "".join(f"print({line!r})\n" for line in lines), encoding="utf-8")
    job = Job(id="j1", spec=JobSpec(kind="optimize", path=str(tmp_path / "k.py"), kernel="k", source=""))
    seen: list[Event] = []

    async def run() -> None:
        proc = await asyncio.create_subprocess_exec(sys.executable, str(script), stdout=asyncio.subprocess.PIPE)
        await read_stdout(proc, job, lambda _job, ev: seen.append(ev))
        await proc.wait()

    asyncio.run(run())
    assert [type(ev.payload) for ev in seen] == [Started, Progress]
    assert job.error is not None and "malformed progress event" in job.error and "done" in job.error
    assert "a line of other output" in job.stdout_other
