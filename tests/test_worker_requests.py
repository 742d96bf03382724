"""The session -> judge requests (kernelband/worker/requests.py): each survives the wire
unchanged, the judge refuses a malformed one with a one-line reason before anything runs,
and every judge op has exactly one request type."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from kernelband.model import Task
from kernelband.profile.schema import DeviceFacts
from kernelband.worker.requests import (REQUESTS, ErrorKind, Evaluate, Hello, MalformedRequest, MeasureDevice, Paired,
                                        Prepare, ProfileRun, Request, Retime, SandboxInfo, Sanitize, Sync, WideCalls,
                                        decode)

TASK = Task(module_path="/tmp/k.py", source="def k(): pass\n", kernel="k", harness="bench_k", harness_path="/tmp/h.py",
            seeds=[0, 7], timeout_s=9.5, check_harnesses=["test_k"])

# one of each, its fields away from their defaults where it has any
SAMPLES: list[Request] = [
    Hello(),
    Prepare(task=TASK, workdir="/tmp/w", time=False, profile_tier=2, facts=DeviceFacts(copy_gbs=900.0, sm_count=132)),
    Evaluate(source="x = 1\n", variant_id="v1", time=False, profile_tier=1, facts=DeviceFacts(matmul_tflops={"bf16": 1.0, "fp32": None}), screen=True,
             rounds=3),
    Retime(),
    Paired(source="x = 2\n", variant_id="v2", rounds=40),
    ProfileRun(source=None, tier=3, facts=DeviceFacts(name="GPU")),
    ProfileRun(source="x = 3\n"),
    MeasureDevice(),
    Sync(),
    Sanitize(source="x = 4\n", run_timeout_s=12.5),
    WideCalls(source="x = 5\n", min_elements=1 << 17),
    SandboxInfo(),
]


def test_every_request_type_has_a_sample() -> None:
    assert {type(r) for r in SAMPLES} == set(REQUESTS.values())


@pytest.mark.parametrize("request_", SAMPLES, ids=lambda r: f"{r.OP}")
def test_a_request_round_trips_through_json(request_: Request) -> None:
    body = json.loads(json.dumps(request_.to_wire()))
    assert set(body) == {f.name for f in dataclasses.fields(request_)}  # every field, by name
    assert decode(request_.OP, body) == request_


def test_the_wire_shape_is_the_one_the_judge_read_before() -> None:
    """The keys the session sent before these types existed (the Ray path and old tests send them too)."""
    assert set(SAMPLES[2].to_wire()) == {"source", "variant_id", "time", "profile_tier", "facts", "screen", "rounds"}
    wire = SAMPLES[1].to_wire()
    assert set(wire) == {"task", "workdir", "time", "profile_tier", "facts"}
    assert wire["task"] == TASK.to_dict()
    assert Retime().to_wire() == {}
    assert Evaluate(source="s").to_wire()["facts"] == {}  # no facts: an empty object, as before


def test_absent_fields_take_the_defaults_the_judge_assumed() -> None:
    ev = decode("evaluate", {"source": "s"})
    assert isinstance(ev, Evaluate)
    assert (ev.variant_id, ev.time, ev.profile_tier, ev.facts, ev.screen, ev.rounds) == ("variant", True, 0, DeviceFacts(), False,
                                                                                          None)
    assert decode("paired", {"source": "s"}) == Paired(source="s", variant_id=None, rounds=10)
    assert decode("profile", {}) == ProfileRun(source=None, tier=2, facts=DeviceFacts())
    # JSON has one number type: an integer is a float field's value
    assert decode("sanitize", {"source": "s", "run_timeout_s": 3}) == Sanitize(source="s", run_timeout_s=3.0)


# ---------------------------------------------------------------- malformed requests, one test per kind
@pytest.mark.parametrize("op, body, says", [
    ("evaluate", {"source": 1}, "evaluate request: source must be str, got int"),
    ("evaluate", {"source": "s", "rounds": "3"}, "rounds must be int or null, got str"),
    ("evaluate", {"source": "s", "time": 1}, "time must be bool, got int"),
    ("evaluate", {"source": "s", "profile_tier": True}, "profile_tier must be int, got bool"),  # a bool is no number
    ("evaluate", {"source": "s", "facts": [1]}, "facts must be an object, got list"),
    ("prepare", {"task": TASK.to_dict(), "workdir": None}, "workdir must be str, got NoneType"),
    ("prepare", {"task": [], "workdir": "/w"}, "task must be an object, got list"),
    ("prepare", {"task": {**TASK.to_dict(), "seeds": [0, "1"]}, "workdir": "/w"}, "task.seeds[1] must be int, got str"),
    ("paired", {"source": "s", "rounds": 2.5}, "rounds must be int, got float"),
])
def test_a_field_of_the_wrong_type_is_refused(op: str, body: dict, says: str) -> None:
    with pytest.raises(MalformedRequest, match=r"^malformed .*" + re.escape(says)) as e:
        decode(op, body)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("op, body, says", [
    ("evaluate", {"source": "s", "src": "s"}, "unknown field(s) 'src' (known: source, variant_id,"),
    ("retime", {"rounds": 3}, "unknown field(s) 'rounds' (known: none)"),
    ("prepare", {"task": {**TASK.to_dict(), "seedz": [1]}, "workdir": "/w"}, "unknown field(s) 'seedz' in task"),
    ("prepare", {"task": TASK.to_dict(), "workdir": "/w", "restore": True}, "unknown field(s) 'restore'"),
])
def test_an_unknown_field_is_refused(op: str, body: dict, says: str) -> None:
    with pytest.raises(MalformedRequest) as e:
        decode(op, body)
    assert says in str(e.value) and str(e.value).startswith(f"malformed {op} request: ")


@pytest.mark.parametrize("op, body, missing", [
    ("evaluate", {"variant_id": "v"}, "source"),
    ("prepare", {"task": TASK.to_dict()}, "workdir"),
    ("prepare", {"task": {k: v for k, v in TASK.to_dict().items() if k != "kernel"}, "workdir": "/w"}, "task.kernel"),
    ("sanitize", {}, "source"),
])
def test_a_missing_required_field_is_refused(op: str, body: dict, missing: str) -> None:
    with pytest.raises(MalformedRequest, match=rf"^malformed {op} request: missing required field '{missing}'$"):
        decode(op, body)


def test_a_body_that_is_no_object_and_an_unknown_op_are_refused() -> None:
    with pytest.raises(MalformedRequest, match="^malformed evaluate request: the body must be an object, got list$"):
        decode("evaluate", ["source"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown worker op 'evaluat'"):
        decode("evaluat", {})


# ---------------------------------------------------------------- the judge's side
def test_every_judge_op_has_one_request_type() -> None:
    from kernelband.worker.judge import OPS

    assert set(OPS) == set(REQUESTS.values())
    assert len({cls.OP for cls in OPS}) == len(OPS)


def test_the_judge_refuses_a_malformed_request_before_running_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.worker import judge as judge_mod
    from kernelband.worker.judge import JudgeService

    ran: list[object] = []
    monkeypatch.setitem(judge_mod.OPS, Evaluate, lambda judge, req: ran.append(req))
    judge = JudgeService(interpreted=True)
    with pytest.raises(MalformedRequest, match="unknown field"):
        judge.serve(decode("evaluate", {"source": "s", "time_it": False}))
    assert ran == []
    judge.serve(decode("evaluate", {"source": "s", "time": False}))
    assert ran == [Evaluate(source="s", time=False)]  # the op gets the typed request


def test_a_malformed_request_comes_back_from_the_worker_as_an_error() -> None:
    """Through the real channel: the worker answers with the one-line reason, and goes on."""
    from kernelband.worker.client import WorkerClient, WorkerError

    with WorkerClient("cpu") as client:
        with pytest.raises(WorkerError) as e:
            client.request("paired", 30, source="s", rounds="ten")
        assert e.value.kind is ErrorKind.ERROR
        assert str(e.value) == "MalformedRequest: malformed paired request: rounds must be int, got str ('ten')"
        assert client.send(SandboxInfo(), 30)["network"] is not None  # the judge still serves
