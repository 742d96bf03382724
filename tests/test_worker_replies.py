"""The judge -> session replies (kernelband/worker/requests.py): built by the judge in one
place (worker/main.py), decoded once by the session (worker/client.py). A reply survives
the wire unchanged; a malformed one is a one-line protocol error, never a KeyError; the
error's kind is an ErrorKind, and a setup failure's message carries no exception class."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from typing import Any

import pytest
from helpers.kernels import AXPY, axpy_task

from kernelband.evaluate import Evaluator, SetupError
from kernelband.model import Baseline, Status, Variant
from kernelband.worker import main as judge_main
from kernelband.worker import client as client_mod
from kernelband.worker.client import WorkerClient, WorkerError, WorkerInfo, _result, decode_info
from kernelband.worker.judge_derivation import OriginalUnusable
from kernelband.worker.requests import (ErrorKind, ErrorReply, Evaluate, MalformedReply, Reply, Request, SandboxInfo,
                                        decode_reply, encode_reply)

BEYOND = "the original kernel could not be run on inputs beyond its harness (timeout): no result within 1 s"

ANSWERS = [
    Reply(),
    Reply(result={"status": "ok", "timing": {"median_ms": 1.5}, "notes": ["a", None]}, wall_s=2.25),
    Reply(result=[1, 2.5, "three"], wall_s=0),
    ErrorReply(ErrorKind.ERROR, "RuntimeError: paired timing failed", "Traceback ...", 0.5),
    ErrorReply(ErrorKind.SETUP, BEYOND, "Traceback ...\nOriginalUnusable: ...", 61.0),
]


def _wire(line: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(line))


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: type(a).__name__)
def test_a_reply_round_trips_through_json(answer: Any) -> None:
    line = _wire(encode_reply(7, answer))
    assert line["id"] == 7 and line["ok"] is isinstance(answer, Reply)
    assert decode_reply(line) == answer


def test_the_wire_shape_of_each_reply() -> None:
    assert encode_reply(3, Reply(result={"a": 1}, wall_s=0.5)) == {"id": 3, "ok": True, "result": {"a": 1},
                                                                   "wall_s": 0.5}
    line = _wire(encode_reply(4, ErrorReply(ErrorKind.SETUP, "why", "trace", 1.0)))
    assert line == {"id": 4, "ok": False, "kind": "setup", "message": "why", "trace": "trace", "wall_s": 1.0}


@pytest.mark.parametrize("line, says", [
    ({"id": 1}, "ok must be true or false, got None"),
    ({"id": 1, "ok": "yes"}, "ok must be true or false, got 'yes'"),
    ({"id": 1, "ok": False, "message": "m"}, "missing required field 'kind'"),
    ({"id": 1, "ok": False, "kind": "error"}, "missing required field 'message'"),
    ({"id": 1, "ok": False, "kind": "error", "message": 12}, "message must be str, got int"),
    ({"id": 1, "ok": True, "wall_s": "1 s"}, "wall_s must be float, got str"),
    ({"id": 1, "ok": False, "kind": "exploded", "message": "m"},
     "kind must be 'crashed' or 'timeout' or 'protocol' or 'error' or 'setup', got str ('exploded')"),
    ({"id": 1, "ok": False, "kind": "crashed", "message": "m"}, "kind must be 'error' or 'setup', got 'crashed'"),
    ({"id": 1, "ok": False, "kind": 3, "message": "m"}, "kind must be"),
    ({"id": 1, "ok": True, "result": 1, "error": "x"}, "unknown field(s) 'error'"),
], ids=["no-ok", "ok-str", "no-kind", "no-message", "message-int", "wall-str", "unknown-kind", "session-kind",
        "kind-int", "unknown-field"])
def test_a_malformed_reply_is_a_one_line_protocol_error(line: dict[str, Any], says: str) -> None:
    with pytest.raises(MalformedReply) as e:
        decode_reply(line)
    assert str(e.value).startswith("malformed judge reply: ") and says in str(e.value), str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(WorkerError) as w:  # as the client meets it: a WorkerError of its own kind
        _result(line)
    assert w.value.kind is ErrorKind.PROTOCOL and str(w.value) == str(e.value)
    assert not w.value.worker_gone


def test_the_client_turns_each_reply_into_a_result_or_a_typed_error() -> None:
    assert _result(_wire(encode_reply(1, ANSWERS[1]))) == ANSWERS[1].result
    for answer in ANSWERS[3:]:
        with pytest.raises(WorkerError) as e:
            _result(_wire(encode_reply(1, answer)))
        assert e.value.kind is answer.kind and str(e.value) == answer.message
        assert e.value.stderr_tail == answer.trace and not e.value.worker_gone


def test_a_worker_error_keeps_its_kind_when_pickled() -> None:
    """A Ray actor's WorkerError reaches the driver pickled."""
    again = pickle.loads(pickle.dumps(WorkerError(ErrorKind.TIMEOUT, "no reply within 9 s", "tail")))
    assert (again.kind, str(again), again.stderr_tail, again.worker_gone) == (ErrorKind.TIMEOUT, "no reply within 9 s",
                                                                              "tail", True)


HELLO = {"device_name": "cpu", "triton_version": "3.0", "torch_version": "2.4", "interpreted": True, "gpu_count": 0,
         "pid": 42, "gpu_uuid": "", "driver": ""}


def test_the_hello_decodes_to_worker_info_passing_over_keys_it_does_not_use() -> None:
    assert decode_info(_wire({**HELLO, "later": 1})) == WorkerInfo("cpu", "3.0", "2.4", True, 0, 42)
    assert decode_info({k: v for k, v in HELLO.items() if k not in ("gpu_uuid", "driver")}).driver == ""


@pytest.mark.parametrize("hello, says", [
    ({k: v for k, v in HELLO.items() if k != "pid"}, "missing required field 'pid'"),
    ({**HELLO, "gpu_count": "1"}, "gpu_count must be int, got str ('1')"),
    ({**HELLO, "interpreted": 1}, "interpreted must be bool, got int (1)"),
    (["cpu"], "the body must be an object, got list"),
], ids=["no-pid", "count-str", "interpreted-int", "not-an-object"])
def test_a_malformed_hello_is_a_one_line_protocol_error(hello: object, says: str) -> None:
    with pytest.raises(WorkerError) as e:
        decode_info(hello)
    assert e.value.kind is ErrorKind.PROTOCOL and str(e.value) == f"malformed judge hello: {says}"


# a judge that answers its hello without a pid, then waits to be stopped
_NO_PID_JUDGE = f"""
import json, sys
req = json.loads(sys.stdin.readline())
hello = {({k: v for k, v in HELLO.items() if k != "pid"})!r}
print(json.dumps({{"id": req["id"], "ok": True, "result": hello}}), flush=True)
sys.stdin.read()
"""


def test_a_judge_with_a_malformed_hello_is_stopped_and_the_start_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    popen = subprocess.Popen

    def fake_judge(args: list[str], **kwargs: Any) -> subprocess.Popen:
        return popen([sys.executable, "-c", _NO_PID_JUDGE], **kwargs)

    monkeypatch.setattr(client_mod.subprocess, "Popen", fake_judge)
    client = WorkerClient("cpu", start_timeout_s=30)
    with pytest.raises(WorkerError) as e:
        client.start()
    assert e.value.kind is ErrorKind.PROTOCOL and str(e.value) == "malformed judge hello: missing required field 'pid'"
    assert not client.alive and client.info is None


# ---------------------------------------------------------------------- the judge's side
def _answer(serve: Any, op: object, body: dict[str, object]) -> Any:
    return decode_reply(_wire(encode_reply(1, judge_main._answer(serve, op, body))))


def test_the_judge_answers_a_setup_failure_without_the_exception_class() -> None:
    def serve(request: Request) -> object:
        raise OriginalUnusable(BEYOND)

    answer = _answer(serve, "evaluate", {"source": "s"})
    assert isinstance(answer, ErrorReply) and answer.kind is ErrorKind.SETUP
    assert answer.message == BEYOND and "OriginalUnusable" in answer.trace


def test_the_judge_answers_an_error_with_its_class_and_a_result_as_is() -> None:
    served: list[Request] = []

    def serve(request: Request) -> object:
        served.append(request)
        if isinstance(request, SandboxInfo):
            return {"network": "none"}
        raise KeyError("timing")

    assert _answer(serve, "sandbox", {}) == Reply(result={"network": "none"})
    failed = _answer(serve, "evaluate", {"source": "s", "time": False})
    assert isinstance(failed, ErrorReply) and failed.kind is ErrorKind.ERROR and failed.message == "KeyError: 'timing'"
    assert served == [SandboxInfo(), Evaluate(source="s", time=False)]  # each decoded once, typed
    refused = _answer(serve, "evaluate", {"source": "s", "time_it": False})
    assert isinstance(refused, ErrorReply) and refused.kind is ErrorKind.ERROR
    assert refused.message.startswith("MalformedRequest: malformed evaluate request: unknown field(s) 'time_it'")
    unknown = _answer(serve, 12, {})
    assert isinstance(unknown, ErrorReply) and unknown.message == "ValueError: unknown worker op None"
    assert len(served) == 2  # nothing ran for either


# ---------------------------------------------------------------------- the session's side
class _Answers:
    """A client that is alive and answers every request with ``error``."""

    alive = True
    info = None

    def __init__(self, error: WorkerError) -> None:
        self.error = error

    def send(self, request: Request, timeout_s: float) -> object:
        raise self.error

    def stop(self) -> None:
        pass


def _evaluator(tmp_path: Any, error: WorkerError) -> Evaluator:
    ev = Evaluator(axpy_task(tmp_path, AXPY), workdir=str(tmp_path / "w"))
    ev.baseline = Baseline(ok=True, message="")
    ev.client = _Answers(error)  # type: ignore[assignment]
    return ev


def test_a_setup_reply_ends_the_search_with_the_judges_own_words(tmp_path: Any) -> None:
    ev = _evaluator(tmp_path, WorkerError(ErrorKind.SETUP, BEYOND, "trace"))
    with pytest.raises(SetupError) as e:
        ev.evaluate(Variant(AXPY.replace("alpha * x + y", "y + alpha * x")), time_it=False)
    assert str(e.value) == BEYOND


def test_a_malformed_reply_ends_the_search_blaming_no_candidate(tmp_path: Any) -> None:
    ev = _evaluator(tmp_path, WorkerError(ErrorKind.PROTOCOL, "malformed judge reply: missing required field 'kind'"))
    with pytest.raises(SetupError, match="^the judge's reply could not be read: malformed judge reply: missing"):
        ev.evaluate(Variant(AXPY.replace("alpha * x + y", "y + alpha * x")), time_it=False)


def test_an_error_reply_is_the_candidates_runtime_error(tmp_path: Any) -> None:
    ev = _evaluator(tmp_path, WorkerError(ErrorKind.ERROR, "RuntimeError: boom"))
    out = ev.evaluate(Variant(AXPY.replace("alpha * x + y", "y + alpha * x")), time_it=False)
    assert out.status == Status.RUNTIME_ERROR and out.message == "RuntimeError: boom"
