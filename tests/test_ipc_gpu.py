"""The CUDA IPC channel against variants that abuse it (GPU only; skipped elsewhere).

A variant process shows the judge its outputs by IPC handle. What it sends is untrusted:
a forged handle, a handle of an allocation that is gone, an extent beyond the allocation,
a misaligned offset, malformed strides must each be refused with a clear error and never
corrupt the judge; and a write to the outputs after the judge read them must not change
what the judge saw. Each case runs a real second process that exports real memory.
"""
from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA IPC needs a GPU")

EXPORTER = textwrap.dedent("""
    import json, sys, torch
    from kernelband.worker import cuda_ipc
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    ref = cuda_ipc.export(x)
    print(json.dumps({"handle": ref.handle, "offset": ref.offset, "numel": x.numel()}), flush=True)
    line = sys.stdin.readline()
    if line.strip() == "write":
        x.fill_(-1.0); torch.cuda.synchronize()
        print("written", flush=True)
        sys.stdin.readline()
    elif line.strip() == "free":
        del x; torch.cuda.empty_cache(); torch.cuda.synchronize()
        print("freed", flush=True)
        sys.stdin.readline()
""")


@pytest.fixture
def exporter(tmp_path):
    from helpers.paths import REPO

    proc = subprocess.Popen([sys.executable, "-c", EXPORTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    info = json.loads(proc.stdout.readline())
    yield proc, info
    proc.kill()
    proc.wait()


def _frame(tree: dict, nonce: str = "n") -> io.BytesIO:
    header = json.dumps({"nonce": nonce, "kind": "outputs", "meta": {}, "tree": tree}).encode()
    return io.BytesIO(struct.pack("<Q", len(header)) + header)


def _tensor(info: dict, **over) -> dict:
    node = {"t": "tensor", "dtype": "float32", "shape": [info["numel"]], "strides": [1], "device": "cuda",
            "ipc": {"handle": info["handle"], "offset": info["offset"]}}
    node.update(over)
    return node


def test_a_real_handle_is_read_in_place(exporter):
    from kernelband.worker.wire import IpcMaps, read_frame

    _, info = exporter
    maps = IpcMaps()
    try:
        _, _, t = read_frame(_frame(_tensor(info)), "n", ipc=maps)
        assert torch.equal(t, torch.arange(info["numel"], device="cuda", dtype=torch.float32))
    finally:
        maps.close()


@pytest.mark.parametrize("case", ["forged_handle", "beyond_allocation", "misaligned", "negative_stride",
                                  "strides_of_wrong_rank", "ipc_without_channel"])
def test_a_malformed_or_forged_reference_is_refused(exporter, case):
    from kernelband.worker.wire import IpcMaps, WireError, read_frame

    _, info = exporter
    nodes = {
        "forged_handle": _tensor(info, ipc={"handle": "ab" * 64, "offset": 0}),
        "beyond_allocation": _tensor(info, shape=[info["numel"] * 64]),
        "misaligned": _tensor(info, ipc={"handle": info["handle"], "offset": info["offset"] + 2}),
        "negative_stride": _tensor(info, strides=[-1]),
        "strides_of_wrong_rank": _tensor(info, strides=[1, 1]),
        "ipc_without_channel": _tensor(info),
    }
    maps = None if case == "ipc_without_channel" else IpcMaps()
    try:
        with pytest.raises(WireError):
            read_frame(_frame(nodes[case]), "n", ipc=maps)
    finally:
        if maps is not None:
            maps.close()
    # the judge's CUDA context is unharmed: it still computes
    assert float(torch.ones(4, device="cuda").sum()) == 4.0


def test_a_write_after_the_judge_read_does_not_change_its_copy(exporter):
    """A variant that writes its outputs after hand-over: what the judge kept is its own copy."""
    from kernelband.worker.observe import materialize
    from kernelband.worker.wire import IpcMaps, read_frame

    proc, info = exporter
    maps = IpcMaps()
    try:
        _, _, view = read_frame(_frame(_tensor(info)), "n", ipc=maps)
        kept = materialize(view, "cuda")
        proc.stdin.write("write\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "written"
        assert bool((view == -1).all())  # the live view sees the write...
        assert torch.equal(kept, torch.arange(info["numel"], device="cuda", dtype=torch.float32))  # ...the copy not
    finally:
        maps.close()


def test_a_handle_of_a_process_that_is_gone_is_refused(exporter):
    from kernelband.worker.wire import IpcMaps, WireError, read_frame

    proc, info = exporter
    proc.kill()
    proc.wait()
    maps = IpcMaps()
    try:
        with pytest.raises(WireError):
            read_frame(_frame(_tensor(info)), "n", ipc=maps)
    finally:
        maps.close()
