"""Tier 2 accounting: which tensors a launch reads and writes (AST + replay), the
bytes counted, and FLOPs from tl.dot operand shapes (kernelband/profile/traffic.py)."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

from kernelband.profile.traffic import analyze_kernel, classify, matmul_flops, peak_key, span_bytes
from kernelband.worker.traffic_replay import launch_traffic, tensor_args
from kernelband.worker.capture import CapturedLaunch, recording

HEAD = "import triton\nimport triton.language as tl\n\n"


def src(body: str) -> str:
    return HEAD + textwrap.dedent(body)


COPY = src("""
    @triton.jit
    def copy_k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
""")
INPLACE = src("""
    @triton.jit
    def inc_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ptrs = x_ptr + o
        x = tl.load(ptrs)
        ptrs2 = ptrs
        tl.store(ptrs2, x + tl.load(y_ptr + o))
""")
UNUSED = src("""
    @triton.jit
    def k(x_ptr, unused_ptr, out_ptr):
        o = tl.arange(0, 16)
        tl.store(out_ptr + o, tl.load(x_ptr + o) * 2)
""")
GATHER = src("""
    @triton.jit
    def gather_k(x_ptr, idx_ptr, out_ptr):
        o = tl.arange(0, 16)
        i = tl.load(idx_ptr + o)
        tl.store(out_ptr + o, tl.load(x_ptr + i))
""")
HELPERS = src("""
    @triton.jit
    def _put(p, v):
        tl.store(p, v)

    @triton.jit
    def _acc(p, v):
        tl.atomic_add(p, v)

    @triton.jit
    def k(a_ptr, c_ptr, out_ptr, sum_ptr, M, N):
        bp = tl.make_block_ptr(base=a_ptr, shape=(M, N), strides=(N, 1), offsets=(0, 0), block_shape=(16, 16), order=(1, 0))
        a = tl.load(bp)
        desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[16, 16])
        desc.store([0, 0], a)
        _put(out_ptr + tl.arange(0, 16), tl.sum(a, axis=1))
        _acc(sum_ptr, tl.sum(a))
""")
UNKNOWN = src("""
    from somewhere import external

    @triton.jit
    def k(x_ptr, out_ptr):
        external(out_ptr, x_ptr)
""")
MATMUL = src("""
    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, K, BLOCK_K: tl.constexpr):
        acc = tl.zeros((16, 16), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc += tl.dot(tl.load(a_ptr), tl.load(b_ptr), input_precision="ieee")
        tl.store(c_ptr, acc)
""")
TWO_DOTS = src("""
    @triton.jit
    def attn(q_ptr, k_ptr, v_ptr, o_ptr):
        s = tl.dot(tl.load(q_ptr), tl.load(k_ptr))
        tl.store(o_ptr, tl.dot(s, tl.load(v_ptr)))
""")


def test_ast_loads_and_stores():
    a = analyze_kernel(COPY, "copy_k")
    assert a.found and a.params["x_ptr"].loads and not a.params["x_ptr"].stores
    assert a.params["out_ptr"].stores and not a.params["out_ptr"].loads
    assert not a.params["n"].loads and a.dots == 0
    a = analyze_kernel(INPLACE, "inc_k")  # through two assignments
    assert a.params["x_ptr"].loads and a.params["x_ptr"].stores
    a = analyze_kernel(UNUSED, "k")
    u = a.params["unused_ptr"]
    assert not (u.loads or u.stores or u.unknown)
    a = analyze_kernel(GATHER, "gather_k")
    assert a.params["idx_ptr"].loads and a.params["x_ptr"].loads and not a.params["idx_ptr"].stores


def test_ast_follows_helpers_block_pointers_descriptors_and_atomics():
    a = analyze_kernel(HELPERS, "k")
    assert a.params["a_ptr"].loads and not a.params["a_ptr"].stores
    assert a.params["c_ptr"].stores
    assert a.params["out_ptr"].stores and not a.params["out_ptr"].unknown
    assert a.params["sum_ptr"].loads and a.params["sum_ptr"].stores  # atomics read and write
    a = analyze_kernel(UNKNOWN, "k")
    assert a.params["out_ptr"].unknown and a.params["x_ptr"].unknown


def test_ast_dots():
    a = analyze_kernel(MATMUL, "mm")
    assert (a.dots, a.dot_in_loop, a.ieee_dot) == (1, True, True)
    assert analyze_kernel(TWO_DOTS, "attn").dots == 2
    assert not analyze_kernel(COPY, "missing").found
    assert not analyze_kernel("def broken(:", "k").found


def test_span_bytes():
    assert span_bytes([4, 8], [8, 1], 4) == 128
    assert span_bytes([4, 8], [0, 1], 2) == 16  # broadcast rows count once
    assert span_bytes([4, 8], [16, 1], 4) == 128  # padded rows: the elements, not the padding
    assert span_bytes([0, 8], [8, 1], 4) == 0


class FakeKernel:
    """Stands in for a JITFunction: arg_names and run(); the body does the work in torch."""

    def __init__(self, names, body):
        self.arg_names = names
        self.body = body

    def run(self, *args, grid, warmup, **kwargs):
        self.body(*args, **kwargs)


def launch(names, body, *args, **kwargs):
    return CapturedLaunch(FakeKernel(names, body), args, {"grid": (1,), "warmup": False, **kwargs}, "k")


def _by_name(rows):
    return {r["name"]: r for r in rows}


def test_copy_counts_input_read_once_output_written_once():
    x, out = torch.randn(1000), torch.zeros(1000)
    out.copy_(x)  # the harness already ran: the output holds the result, replay is idempotent
    tr = launch_traffic(launch(["x_ptr", "out_ptr", "n"], lambda x, o, n: o.copy_(x), x, out, 1000),
                        analyze_kernel(COPY, "copy_k"))
    rows = _by_name(tr["tensors"])
    assert rows["x_ptr"]["read"] and not rows["x_ptr"]["written"]
    assert rows["out_ptr"]["written"] and not rows["out_ptr"]["read"]
    assert (tr["bytes_read"], tr["bytes_written"]) == (4000, 4000)
    assert torch.equal(out, x)  # arguments restored after the replays


def test_in_place_counts_twice():
    x, y = torch.randn(500), torch.randn(500)
    before = x.clone()
    tr = launch_traffic(launch(["x_ptr", "y_ptr", "n"], lambda x, y, n: x.add_(y), x, y, 500),
                        analyze_kernel(INPLACE, "inc_k"))
    rows = _by_name(tr["tensors"])
    assert rows["x_ptr"]["read"] and rows["x_ptr"]["written"] and rows["x_ptr"]["bytes_moved"] == 4000
    assert "in place" in rows["x_ptr"]["how"]
    assert tr["bytes_read"] == 4000 and tr["bytes_written"] == 2000
    assert torch.equal(x, before)


def test_idempotent_in_place_found_through_the_ast():
    x = torch.rand(64)  # relu in place: a replay changes nothing, the poison shows the write
    tr = launch_traffic(launch(["x_ptr", "y_ptr", "n"], lambda x, y, n: x.copy_(torch.nan_to_num(x, nan=0.0).clamp_(min=0)),
                               x, torch.zeros(64), 64), analyze_kernel(INPLACE, "inc_k"))
    rows = _by_name(tr["tensors"])
    assert rows["x_ptr"]["written"] and rows["x_ptr"]["read"]  # written (poison) + loaded (AST)


def test_unused_and_integer_index_tensors():
    x, unused, out = torch.randn(16), torch.randn(16), torch.zeros(16)
    tr = launch_traffic(launch(["x_ptr", "unused_ptr", "out_ptr"], lambda x, u, o: o.copy_(x * 2), x, unused, out),
                        analyze_kernel(UNUSED, "k"))
    rows = _by_name(tr["tensors"])
    assert not rows["unused_ptr"]["read"] and rows["unused_ptr"]["bytes_moved"] == 0
    idx = torch.randint(0, 16, (16,))
    saved_idx = idx.clone()
    seen = []

    def body(x, i, o):
        seen.append(i.clone())
        o.copy_(x[i])

    tr = launch_traffic(launch(["x_ptr", "idx_ptr", "out_ptr"], body, x, idx, out), analyze_kernel(GATHER, "gather_k"))
    rows = _by_name(tr["tensors"])
    assert rows["idx_ptr"]["read"] and not rows["idx_ptr"]["written"]
    assert all(torch.equal(s, saved_idx) for s in seen)  # an index tensor is never poisoned
    assert rows["out_ptr"]["written"] and rows["x_ptr"]["read"]


def test_same_tensor_twice_and_broadcast_views():
    x = torch.randn(8, 1).expand(8, 32)
    ta = tensor_args(launch(["a", "b", "c"], lambda *a: None, x, x, 3))
    assert len(ta) == 1 and ta[0].names == ["a", "b"] and ta[0].nbytes == 32


def test_without_replay_the_ast_decides():
    x, out = torch.randn(10), torch.zeros(10)
    tr = launch_traffic(launch(["x_ptr", "out_ptr", "n"], lambda x, o, n: o.copy_(x), x, out, 10),
                        analyze_kernel(COPY, "copy_k"), replay=False)
    rows = _by_name(tr["tensors"])
    assert rows["out_ptr"]["written"] and not rows["out_ptr"]["read"] and rows["x_ptr"]["read"]


def test_failing_replay_falls_back_and_restores():
    x, out = torch.randn(10), torch.zeros(10)
    calls = []

    def body(x, o, n):
        calls.append(1)
        o.fill_(1.0)
        raise RuntimeError("boom")

    tr = launch_traffic(launch(["x_ptr", "out_ptr", "n"], body, x, out, 10), analyze_kernel(COPY, "copy_k"))
    assert "failed on replay" in tr["write_detection"]
    assert torch.equal(out, torch.zeros(10))
    assert _by_name(tr["tensors"])["out_ptr"]["written"]  # from the AST


def _rows(*specs):
    return [{"name": n, "shape": s, "dtype": d, "read": r, "written": w, "bytes": 0} for n, s, d, r, w in specs]


def test_matmul_flops_from_operand_shapes():
    acc = analyze_kernel(MATMUL, "mm")
    rows = _rows(("a", [96, 64], "float16", True, False), ("b", [64, 80], "float16", True, False),
                 ("c", [96, 80], "float16", False, True))
    flops, note, dtype = matmul_flops(rows, acc)
    assert flops == 2 * 96 * 80 * 64 and dtype == "float16" and "2*M*N*K" in note
    rows_t = _rows(("a", [4, 96, 64], "float32", True, False), ("bt", [4, 80, 64], "float32", True, False),
                   ("c", [4, 96, 80], "float32", False, True))  # batched, B stored N x K
    assert matmul_flops(rows_t, acc)[0] == 2 * 4 * 96 * 80 * 64
    assert matmul_flops(rows, analyze_kernel(TWO_DOTS, "attn"))[0] is None
    flops, note, _ = matmul_flops(rows, analyze_kernel(COPY, "copy_k"))
    assert flops is None and "no tl.dot" in note
    bad = _rows(("a", [96, 64], "float16", True, False), ("c", [96, 80], "float16", False, True))
    assert matmul_flops(bad, acc)[0] is None


def test_peak_key():
    assert peak_key("float16", False) == "bf16" and peak_key("bfloat16", False) == "bf16"
    assert peak_key("float32", False) == "tf32" and peak_key("float32", True) == "fp32"
    assert peak_key("int8", False) is None and peak_key(None, False) is None


def test_real_interpreted_launch(tmp_path, monkeypatch):
    """A Triton kernel under the interpreter: an in-place update and a plain output."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    mod_src = src("""
        import torch

        @triton.jit
        def inc_k(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = o < n
            x = tl.load(x_ptr + o, mask=m) + tl.load(y_ptr + o, mask=m)
            tl.store(x_ptr + o, x, mask=m)
            tl.store(out_ptr + o, x * 2, mask=m)

        def harness_inc():
            x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
            inc_k[(2,)](x, y, out, 300, BLOCK=256)
            return x, out
    """)
    path = tmp_path / "inc_mod.py"
    path.write_text(mod_src)
    spec = importlib.util.spec_from_file_location("inc_mod_profile_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with recording() as rec:
        mod.harness_inc()
    (launch,) = rec.launches
    tr = launch_traffic(launch, analyze_kernel(mod_src, "inc_k"))
    rows = _by_name(tr["tensors"])
    assert rows["x_ptr"]["read"] and rows["x_ptr"]["written"]
    assert rows["y_ptr"]["read"] and not rows["y_ptr"]["written"]
    assert rows["out_ptr"]["written"] and not rows["out_ptr"]["read"]
    assert tr["bytes_read"] == 2 * 1200 and tr["bytes_written"] == 2 * 1200


def test_classify_uses_replay_evidence_over_the_ast():
    x = torch.zeros(4)
    ta = tensor_args(launch(["out_ptr"], lambda o: None, x))
    acc = analyze_kernel(COPY.replace("x_ptr, out_ptr", "x_ptr, out_ptr"), "copy_k")
    # the AST says out_ptr is stored to, but the poison was kept: this launch did not write it
    rows = classify(ta, [{"changed": False, "written": False, "poisoned": True}], acc)
    assert rows[0]["read"] and not rows[0]["written"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.bool])
def test_poison_round_trip_restores_every_dtype(dtype):
    t = (torch.arange(8) % 2).to(dtype)
    before = t.clone()
    out = torch.zeros(8, dtype=dtype)
    tr = launch_traffic(launch(["x_ptr", "out_ptr", "n"], lambda x, o, n: o.copy_(x), t, out, 8),
                        analyze_kernel(COPY, "copy_k"))
    assert torch.equal(t, before)
    assert _by_name(tr["tensors"])["out_ptr"]["written"]
