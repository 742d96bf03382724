"""The call of a kernel's wrapper as typed data (kernelband/worker/call_spec.py): the same
session seed derives the same calls as before the specs were typed (tests/data/
derived_calls.json, written by the dict-based derive), a spec survives the wire unchanged,
and a malformed or forged one from the wire is refused where it is decoded (by the messages'
decoder, kernelband/worker/decode.py), in one line naming the key."""
from __future__ import annotations

import json
import types

import pytest

from helpers.paths import REPO
from kernelband.worker import derived
from kernelband.worker.call_spec import DerivedCall, RecordedCall, TensorArg, ValueArg
from kernelband.worker.judge_derived import calls_to_derive
from kernelband.worker.messages import Derived, MalformedMessage, RunOutputs, Step, decode_frame

GOLDEN = json.loads((REPO / "tests" / "data" / "derived_calls.json").read_text(encoding="utf-8"))


def _text(body: object) -> str:
    return json.dumps(body, sort_keys=True)  # 4096 and 4096.0 differ here, not under ==


@pytest.mark.parametrize("name", sorted(GOLDEN["cases"]))
def test_the_same_seed_derives_the_same_calls_as_the_dict_based_derive(name: str) -> None:
    case = GOLDEN["cases"][name]
    recorded = RecordedCall.from_dict(case["recorded"])
    optional = {fn: [tuple(p) for p in params] for fn, params in (case["optional"] or {}).items()}
    for draw in case["draws"]:
        calls = calls_to_derive([recorded], draw["seed"], draw["interpreted"], optional or None)
        assert [_text(c.to_dict()) for c in calls] == [_text(c) for c in draw["calls"]]


def test_the_recording_describes_calls_as_before() -> None:
    import torch

    mod = types.ModuleType("m")

    def wrap(x, idx, factor, *, out=None, name="n"):  # noqa: ANN001, ANN202
        return x * factor

    mod.wrap, mod.opaque = wrap, lambda x: object()
    with derived.record_calls(mod, ["wrap", "opaque", "absent"]) as calls:
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, :3]
        idx = torch.tensor([5, 1, 9])
        mod.wrap(x, idx, 2.0, out=x, name="a")
        mod.opaque(torch.tensor([0, 3, 3, 7], dtype=torch.int32))
        mod.wrap(x, idx, 1, name=None)  # past MAX_CALLS_RECORDED
    assert [_text(c.to_dict()) for c in calls] == [_text(c) for c in GOLDEN["recorded"]]
    assert mod.wrap is wrap


def test_a_call_survives_the_wire_in_its_message() -> None:
    case = GOLDEN["cases"]["bucket"]
    calls = [DerivedCall.from_dict(c) for c in case["draws"][0]["calls"]]
    assert [c.to_dict() for c in calls] == case["draws"][0]["calls"]
    step = Derived(calls, module="o", which="b")
    assert Step.from_wire(json.loads(json.dumps(step.to_wire()))) == step
    meta = RunOutputs("h", 0, "check", calls=[RecordedCall.from_dict(case["recorded"])])
    assert decode_frame("outputs", json.loads(json.dumps(meta.to_wire()))) == meta
    assert isinstance(calls[0].args[0], TensorArg) and calls[0].args[0].pad is not None


def _derived_body(**changes: object) -> dict:
    call = dict(GOLDEN["cases"]["scale"]["draws"][0]["calls"][0], **changes)
    return {"op": "derived", "calls": [call]}


@pytest.mark.parametrize("changes, says", [
    ({"seed": "1"}, "malformed derived step: calls[0].seed must be int, got str ('1')"),
    ({"flavour": None}, "calls[0].flavour must be str, got NoneType"),
    ({"args": [{"t": "tensor", "shape": [4]}]}, "missing required field 'calls[0].args[0].dtype'"),
    ({"args": [{"t": "tensor", "shape": [4, "x"], "dtype": "float32", "device": "cpu", "contiguous": True, "id": 0,
                "floating": True}]}, "calls[0].args[0].shape[1] must be int, got str ('x')"),
    ({"args": [{"t": "array"}]}, "calls[0].args[0] must be an object whose t is 'tensor' or 'value'"),
    ({"kwargs": {"eps": {"t": "value", "v": [1]}}}, "calls[0].kwargs['eps'].v must be null or bool or int or float"),
    ({"twin": 1.5}, "calls[0].twin must be int or null, got float"),
    ({"colour": "red"}, "unknown field(s) 'colour' in calls[0] (known: fn, args,"),
])
def test_a_malformed_call_is_refused_where_the_step_is_decoded(changes: dict, says: str) -> None:
    with pytest.raises(MalformedMessage) as e:
        Step.from_wire(_derived_body(**changes))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_spec_omits_what_it_lacks_and_keeps_split_shape() -> None:
    arg = TensorArg(shape=(3,), dtype="int64", device="cpu", contiguous=True, id=0, floating=False, distinct=False)
    assert arg.to_dict() == {"t": "tensor", "shape": [3], "dtype": "int64", "device": "cpu", "contiguous": True,
                             "id": 0, "floating": False, "distinct": False}
    call = DerivedCall(fn="f", args=(arg, ValueArg(None)), kwargs={}, flavour="sizes", seed=1, sizes={})
    assert call.to_dict()["split_shape"] is None and "twin" not in call.to_dict()
    assert DerivedCall.from_dict(call.to_dict()) == call
    with pytest.raises(MalformedMessage, match="must be an object"):
        RecordedCall.from_dict([])

