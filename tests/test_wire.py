"""The variant-to-judge channel: data round-trips; anything malformed or forged is refused."""
from __future__ import annotations

import gc
import io
import json
import struct
import weakref
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from kernelband.worker.wire import MAX_HEADER_BYTES, WireError, WireObject, read_frame, write_frame

NONCE = "n" * 32


@dataclass
class Buffer:  # an object wrapping a tensor, as some APIs return
    data: torch.Tensor
    name: str


def roundtrip(tree):
    fh = io.BytesIO()
    write_frame(fh, NONCE, "outputs", {"seed": 1}, tree)
    fh.seek(0)
    kind, meta, out = read_frame(fh, NONCE)
    assert kind == "outputs" and meta == {"seed": 1}
    assert read_frame(fh, NONCE) is None  # clean end of stream
    return out


def test_trees_roundtrip_with_every_dtype_and_structure():
    tree = {
        "a": torch.randn(3, 5),
        "b": (torch.arange(7, dtype=torch.int64), [torch.ones(2, dtype=torch.bool), None]),
        "h": torch.randn(4).to(torch.bfloat16),
        "t": torch.randn(6, 4).t(),  # non-contiguous
        "e": torch.empty(0, 3),
        "x": 1.5, "n": float("nan"), "i": 3, "s": "ok",
        "obj": Buffer(torch.full((2,), 7.0), "kv"),
    }
    out = roundtrip(tree)
    assert torch.equal(out["a"], tree["a"]) and torch.equal(out["b"][0], tree["b"][0])
    assert torch.equal(out["h"], tree["h"]) and out["h"].dtype == torch.bfloat16
    assert torch.equal(out["t"], tree["t"]) and out["e"].shape == (0, 3)
    assert out["x"] == 1.5 and out["n"] != out["n"] and out["i"] == 3 and out["s"] == "ok"
    assert isinstance(out["b"], tuple) and out["b"][1][1] is None
    assert isinstance(out["obj"], WireObject) and out["obj"].type_name == "Buffer"
    assert torch.equal(out["obj"]["data"], tree["obj"].data)


def test_a_tensor_seen_twice_crosses_once_and_stays_one_tensor():
    out_buf = torch.randn(1000)
    view = out_buf[10:20]
    fh = io.BytesIO()
    write_frame(fh, NONCE, "outputs", {}, {"returned": out_buf, "written": [out_buf, view], "locals": {"out": out_buf}})
    assert len(fh.getvalue()) < 2 * 4000  # one copy of the 4000 bytes (plus the small view)
    fh.seek(0)
    _, _, tree = read_frame(fh, NONCE)
    assert tree["written"][0] is tree["returned"] and tree["locals"]["out"] is tree["returned"]
    assert torch.equal(tree["written"][1], view)


def test_a_reference_to_a_tensor_not_yet_sent_is_refused():
    with pytest.raises(WireError, match="reference"):
        read_frame(frame({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": {"t": "ref", "i": 0}}), NONCE)


def frame(header: dict, payload: bytes = b"") -> io.BytesIO:
    raw = json.dumps(header).encode()
    return io.BytesIO(struct.pack("<Q", len(raw)) + raw + payload)


def test_forged_or_stale_nonce_is_refused():
    fh = io.BytesIO()
    write_frame(fh, "other-job", "outputs", {}, torch.ones(2))
    fh.seek(0)
    with pytest.raises(WireError, match="nonce"):
        read_frame(fh, NONCE)


@pytest.mark.parametrize("header,payload,needle", [
    ({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": {"t": "tensor", "dtype": "float32", "shape": [4]}},
     struct.pack("<Q", 8) + b"\0" * 8, "byte count"),  # 8 bytes for 4 floats
    ({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": {"t": "tensor", "dtype": "object", "shape": [1]}},
     b"", "not allowed"),
    ({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": {"t": "tensor", "dtype": "float32", "shape": [-1]}},
     b"", "shape"),
    ({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": {"t": "pickle", "v": "cos\nsystem\n"}}, b"", "unknown"),
    ({"nonce": NONCE, "kind": "outputs", "meta": [], "tree": None}, b"", "malformed"),
    ({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": {"t": "tensor", "dtype": "float32", "shape": [4]}},
     struct.pack("<Q", 16) + b"\0" * 5, "closed its channel"),  # truncated
])
def test_malformed_frames_are_refused(header, payload, needle):
    with pytest.raises(WireError, match=needle):
        read_frame(frame(header, payload), NONCE)


def test_oversized_header_and_deep_nesting_are_refused():
    with pytest.raises(WireError, match="over the limit"):
        read_frame(io.BytesIO(struct.pack("<Q", MAX_HEADER_BYTES + 1)), NONCE)
    deep: dict = {"t": "value", "v": 1}
    for _ in range(100):
        deep = {"t": "list", "items": [deep]}
    with pytest.raises(WireError, match="malformed"):
        read_frame(frame({"nonce": NONCE, "kind": "outputs", "meta": {}, "tree": deep}), NONCE)


def _frame_sent_then_dropped(encoder: Any) -> bool:
    """Send a frame holding a tensor, drop every reference of ours, and say whether the
    tensor is still alive, with the cycle collector off (as between its runs)."""
    t = torch.arange(1000, dtype=torch.float32)
    alive = weakref.ref(t)
    buf = io.BytesIO()
    gc.disable()
    try:
        encoder(buf, {"returned": t, "written": {"k.Y": [t]}, "nested": [[t], (t,)]})
        del t
        return alive() is not None
    finally:
        gc.enable()


def test_a_sent_frame_keeps_no_tensor_alive():
    # a frame's tensors must go as soon as the sender drops them: the variant process runs
    # the next harness call right after, and at production size one leaked output is
    # 16 GiB more on the GPU (the recursive-closure encoder kept them until a gc pass)
    assert not _frame_sent_then_dropped(lambda fh, tree: write_frame(fh, "n", "outputs", {}, tree))


def test_the_leak_check_sees_a_cycle_that_holds_the_tensors():
    # the attack on the check above: the old encoder's shape (a recursive inner function,
    # so a cycle through its cell) keeps the tensors alive, and the check says so
    def cyclic_encoder(fh: Any, tree: Any) -> None:
        held: list[Any] = []

        def walk(x: Any) -> None:
            if isinstance(x, torch.Tensor):
                held.append(x)
            elif isinstance(x, dict):
                for v in x.values():
                    walk(v)
            elif isinstance(x, (list, tuple)):
                for v in x:
                    walk(v)

        walk(tree)
        write_frame(fh, "n", "outputs", {}, tree)

    assert _frame_sent_then_dropped(cyclic_encoder)
