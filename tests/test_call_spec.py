"""The call of a kernel's wrapper as typed data (kernelband/worker/call_spec.py): the same
session seed derives the same calls as before the specs were typed (tests/data/
derived_calls.json, written by the dict-based derive), a spec survives the wire unchanged,
and a malformed or forged one from the wire is refused where it is decoded (by the messages'
decoder, kernelband/decode.py), in one line naming the key."""
from __future__ import annotations

import json
import types

import pytest

from helpers.paths import REPO
from kernelband.worker import derived
from kernelband.worker.call_spec import DerivedCall, RecordedCall, TensorArg, ValueArg
from kernelband.worker.derived import DefaultedParam
from kernelband.worker.judge_derived import calls_to_derive
from kernelband.worker.messages import Derived, MalformedMessage, RunOutputs, Step, decode_frame

GOLDEN = json.loads((REPO / "tests" / "data" / "derived_calls.json").read_text(encoding="utf-8"))


def _text(body: object) -> str:
    return json.dumps(body, sort_keys=True)  # 4096 and 4096.0 differ here, not under ==


@pytest.mark.parametrize("name", sorted(GOLDEN["cases"]))
def test_the_same_seed_derives_the_same_calls_as_the_dict_based_derive(name: str) -> None:
    case = GOLDEN["cases"][name]
    recorded = RecordedCall.from_dict(case["recorded"])
    optional = {fn: [DefaultedParam(*p) for p in params] for fn, params in (case["optional"] or {}).items()}
    for draw in case["draws"]:
        calls = calls_to_derive([recorded], draw["seed"], draw["interpreted"], optional or None)
        # the scalars and empty calls came later and are drawn last: what the golden holds is drawn unchanged
        later = ("scalars", "empty")
        assert [_text(c.to_dict()) for c in calls if c.flavour not in later] == [_text(c) for c in draw["calls"]]


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


# ---------------------------------------------------------------- forged calls
TENSOR = {"t": "tensor", "shape": [4], "dtype": "float32", "device": "cpu", "contiguous": True, "id": 0, "floating": True}


def _recorded(arg: object = TENSOR, **changes: object) -> dict:
    return dict({"fn": "f", "args": [arg], "kwargs": {}, "returns": None}, **changes)


# what a variant process (or a forged step) could send: each is refused, in one line naming the key;
# a bool is no int and an int no bool, as the call specs' own checks had it
@pytest.mark.parametrize("body, says", [
    ([TENSOR], "malformed RecordedCall: the body must be an object, got list"),
    (_recorded({**TENSOR, "t": "Tensor"}), "args[0] must be an object whose t is 'tensor' or 'value', got dict"),
    (_recorded({**TENSOR, "t": ["tensor"]}), "args[0] must be an object whose t is 'tensor' or 'value'"),
    (_recorded({k: v for k, v in TENSOR.items() if k != "t"}), "args[0] must be an object whose t is"),
    (_recorded({**TENSOR, "t": "value"}), "unknown field(s) 'contiguous', 'device', 'dtype'"),
    (_recorded({"t": "tensor", "v": 1}), "unknown field(s) 'v' in args[0] (known: shape,"),
    (_recorded({**TENSOR, "strides": [1]}), "unknown field(s) 'strides' in args[0]"),
    (_recorded({**TENSOR, "shape": "4"}), "args[0].shape must be a list of int, got str ('4')"),
    (_recorded({**TENSOR, "shape": ["4"]}), "args[0].shape[0] must be int, got str ('4')"),
    (_recorded({**TENSOR, "shape": [True]}), "args[0].shape[0] must be int, got bool (True)"),
    (_recorded({**TENSOR, "shape": [4.0]}), "args[0].shape[0] must be int, got float (4.0)"),
    (_recorded({**TENSOR, "shape": [[4]]}), "args[0].shape[0] must be int, got list ([4])"),
    (_recorded({**TENSOR, "id": False}), "args[0].id must be int, got bool (False)"),
    (_recorded({**TENSOR, "contiguous": 1}), "args[0].contiguous must be bool, got int (1)"),
    (_recorded({**TENSOR, "contiguous": None}), "args[0].contiguous must be bool, got NoneType"),
    (_recorded({**TENSOR, "max": True}), "args[0].max must be int or null, got bool (True)"),
    (_recorded({**TENSOR, "pad": [0]}), "args[0].pad must be a list [int, int], got list ([0])"),
    (_recorded({**TENSOR, "pad": [0, 1, 2]}), "args[0].pad must be a list [int, int], got list ([0, 1, 2])"),
    (_recorded({**TENSOR, "pad": [0, True]}), "args[0].pad[1] must be int, got bool (True)"),
    (_recorded({**TENSOR, "pad": {"0": 1}}), "args[0].pad must be a list [int, int], got dict"),
    (_recorded({"t": "value", "v": {"x": 1}}), "args[0].v must be null or bool or int or float or str, got dict"),
    (_recorded({"t": "value"}), "missing required field 'args[0].v'"),
    (_recorded([TENSOR]), "args[0] must be an object whose t is 'tensor' or 'value', got list"),
    (_recorded(args=TENSOR), "args must be a list of an object whose t is 'tensor' or 'value', got dict"),
    (_recorded(kwargs=[TENSOR]), "kwargs must be an object, got list"),
    (_recorded(kwargs={"x": "tensor"}), "kwargs['x'] must be an object whose t is 'tensor' or 'value', got str"),
    (_recorded(returns="tensor"), "returns must be an object whose t is 'tensor' or 'value' or null, got str"),
    (_recorded(returns={"t": "value", "v": 1, "extra": {"deep": [1]}}), "unknown field(s) 'extra' in returns"),
    (_recorded(fn=None), "fn must be str, got NoneType"),
    (_recorded(fn=["f"]), "fn must be str, got list"),
    ({"args": [], "kwargs": {}}, "missing required field 'fn'"),
])
def test_a_forged_recorded_call_is_refused(body: object, says: str) -> None:
    with pytest.raises(MalformedMessage) as e:
        RecordedCall.from_dict(body)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("malformed RecordedCall: ")


@pytest.mark.parametrize("changes, says", [
    ({"seed": True}, "seed must be int, got bool (True)"),
    ({"seed": 7.0}, "seed must be int, got float (7.0)"),
    ({"sizes": {"4096": False}}, "sizes['4096'] must be int, got bool (False)"),
    ({"sizes": {"4096": "7"}}, "sizes['4096'] must be int, got str ('7')"),
    ({"sizes": [7]}, "sizes must be an object, got list"),
    ({"sizes": {4096: 7}}, "sizes must be an object, got dict"),  # keys are strings on the wire
    ({"scale": True}, "scale must be float or null, got bool (True)"),
    ({"scale": "100"}, "scale must be float or null, got str ('100')"),
    ({"split_shape": [2, "x"]}, "split_shape[1] must be int, got str ('x')"),
    ({"split_shape": 2}, "split_shape must be a list of int, got int (2)"),
    ({"repeats": [3]}, "repeats must be int or null, got list ([3])"),
    ({"returns": None}, "unknown field(s) 'returns'"),  # a recorded call's key is no derived call's
    ({"t": "tensor"}, "unknown field(s) 't'"),  # nor is an argument's tag
])
def test_a_forged_derived_call_is_refused(changes: dict, says: str) -> None:
    body = dict(GOLDEN["cases"]["scale"]["draws"][0]["calls"][0], **changes)
    with pytest.raises(MalformedMessage) as e:
        DerivedCall.from_dict(body)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_tagged_argument_decoded_alone_checks_its_own_tag() -> None:
    assert TensorArg.from_dict(TENSOR) == TensorArg((4,), "float32", "cpu", True, 0, True)
    with pytest.raises(MalformedMessage, match=r"^malformed TensorArg: t must be 'tensor', got 'value'$"):
        TensorArg.from_dict({**TENSOR, "t": "value"})
    with pytest.raises(MalformedMessage, match=r"^malformed ValueArg: t must be 'value', got None$"):
        ValueArg.from_dict({"v": 1})


def test_values_keep_their_json_type_and_only_types_are_checked() -> None:
    """An int stays an int (4096, not 4096.0: a derived size is drawn from it), a bool a bool, a
    float scale from an int a float. The decoder checks types, not ranges, as the call specs'
    own checks did: a negative or huge size passes it."""
    args = [{"t": "value", "v": v} for v in (True, 4096, 1.5, None, "s", -(2**70))]
    call = RecordedCall.from_dict(_recorded(args=args + [{**TENSOR, "shape": [-1, 2**63]}]))
    assert [type(a.v) for a in call.args[:6] if isinstance(a, ValueArg)] == [bool, int, float, type(None), str, int]
    assert call.tensors()[0].shape == (-1, 2**63)
    assert _text(call.to_dict()) == _text(_recorded(args=args + [{**TENSOR, "shape": [-1, 2**63]}]))
    body = dict(GOLDEN["cases"]["scale"]["draws"][0]["calls"][0], scale=100)
    scale = DerivedCall.from_dict(body).scale
    assert scale == 100.0 and isinstance(scale, float)


def test_the_config_twin_fields_survive_the_wire_and_are_type_checked() -> None:
    """``Derived.configs`` (the original's job asks for its config twins) and
    ``DerivedOutputs.config`` (the config a twin ran pinned to) decode with their types;
    absent, they are a plain step and a plain run."""
    from kernelband.worker.messages import DerivedOutputs

    calls = [DerivedCall.from_dict(GOLDEN["cases"]["scale"]["draws"][0]["calls"][0])]
    step = Derived(calls, module="o", which="a", configs=True)
    assert Step.from_wire(json.loads(json.dumps(step.to_wire()))) == step
    assert Step.from_wire(_derived_body()).configs is False  # type: ignore[attr-defined]
    meta = DerivedOutputs(3, "a", allocs=[[64, 45]], config=1)
    assert decode_frame("outputs", json.loads(json.dumps(meta.to_wire()))) == meta
    plain = {"mode": "derived", "index": 3, "which": "a"}
    assert decode_frame("outputs", plain) == DerivedOutputs(3, "a")
    for bad, says in ((dict(_derived_body(), configs=1), "malformed derived step: configs must be bool, got int"),
                      (dict(_derived_body(), configs="yes"), "configs must be bool, got str")):
        with pytest.raises(MalformedMessage) as e:
            Step.from_wire(bad)
        assert says in str(e.value) and "\n" not in str(e.value)
    for value, says in ((True, "config must be int or null, got bool"), (1.0, "config must be int or null, got float"),
                        ("0", "config must be int or null, got str")):
        with pytest.raises(MalformedMessage) as e:
            decode_frame("outputs", dict(plain, config=value))
        assert says in str(e.value) and "\n" not in str(e.value)
