"""The typed search space: knobs found by data flow in real-style code, grids that move
with their blocks (or blocks left alone), configs that know Triton's defaults; variants
run under the Triton interpreter through the trust layer."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernelband.evaluate import Evaluator
from kernelband.generators.analysis import KernelAnalyzer
from kernelband.generators.rules import RulesGenerator
from kernelband.generators.space import DEFAULT_WARPS, Config
from kernelband.model import Task, Variant

CORPUS = Path(__file__).parent / "data" / "realstyle"


def corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def knobs_of(source: str, kernel: str) -> dict[str, tuple[str, int, tuple[int, ...]]]:
    return {k.name: (k.origin, k.current, k.domain) for k in KernelAnalyzer(source, kernel).knobs()}


def variant(source: str, kernel: str, name: str, value: int) -> str:
    """The source of the rewrite that sets knob ``name`` to ``value``."""
    an = KernelAnalyzer(source, kernel).analyse()
    rw = next(r for r in an.rewrites if r.key.split(":")[1] == name and r.key.split(":")[-1] == str(value))
    return an.source_of(rw)


# (file, kernel, {knob: origin}) — where real code keeps its tunables
EXPECTED = [
    ("dtype_dict_matmul.py", "mm_kernel",
     {"BLOCK_SIZE_M": "dict", "BLOCK_SIZE_N": "dict", "BLOCK_SIZE_K": "dict", "GROUP_SIZE_M": "dict",
      "num_warps": "default", "num_stages": "default"}),
    ("conditional_warps_softmax.py", "softmax_kernel", {"num_warps": "conditional"}),
    ("helper_kwargs.py", "gelu_kernel", {"BLOCK": "helper", "num_warps": "helper"}),
    ("helper_block.py", "silu_kernel", {"BLOCK_SIZE": "helper", "num_warps": "default"}),
    ("autotune_module_list.py", "add_kernel", {"BLOCK_SIZE": "autotune", "num_warps": "autotune"}),
    ("autotune_helper_list.py", "transpose_kernel",
     {"BLOCK_M": "autotune", "BLOCK_N": "autotune", "num_warps": "autotune", "num_stages": "autotune"}),
    ("module_constant.py", "square_kernel", {"BLOCK_SIZE": "variable", "num_warps": "default"}),
    ("attention_branches.py", "attn_fwd",
     {"BLOCK_M": "conditional", "BLOCK_N": "conditional", "num_warps": "conditional", "num_stages": "launch"}),
    ("dict_call_kwargs.py", "axpby_kernel", {"BLOCK_SIZE": "dict", "num_warps": "dict"}),
    ("dtype_conditional.py", "cast_kernel", {"BLOCK": "conditional", "num_warps": "default"}),
    ("tuple_assign.py", "add2d_kernel", {"BLOCK_M": "variable", "BLOCK_N": "variable", "num_warps": "default"}),
    ("layernorm_loop.py", "layer_norm_fwd", {"num_stages": "default"}),  # the rest is computed from the data
    ("autograd_function.py", "mul_kernel", {"BLOCK_SIZE": "launch", "num_warps": "launch"}),
]


@pytest.mark.parametrize("name, kernel, expected", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_knobs_are_found_where_real_code_keeps_them(name, kernel, expected):
    got = knobs_of(corpus(name), kernel)
    assert {n: o for n, (o, _c, _d) in got.items()} == expected
    for _o, cur, dom in got.values():
        assert cur in dom and len(dom) > 1


def test_no_more_than_one_in_ten_corpus_kernels_has_an_empty_space():
    from kernelband.detect import detect

    empty = []
    files = sorted(CORPUS.glob("*.py"))
    for p in files:
        src = p.read_text(encoding="utf-8")
        kernel = detect(src).kernels[0].name
        if math.prod(len(k.domain) for k in KernelAnalyzer(src, kernel).knobs()) <= 1:
            empty.append(p.name)
    assert len(files) >= 15 and len(empty) <= len(files) // 10, empty


def test_data_sized_values_are_left_alone():
    src = corpus("conditional_warps_softmax.py")
    for v in RulesGenerator(seed=0, enumerate_limit=100).enumerate_space(Variant(src), "softmax_kernel"):
        assert "BLOCK_SIZE = triton.next_power_of_2(n_cols)" in v.source
    # both arms of the conditional move by the same ratio
    assert "num_warps = 8 if BLOCK_SIZE < 2048 else 16" in variant(src, "softmax_kernel", "num_warps", 8)


def test_dtype_indexed_dict_moves_every_dtype_entry():
    src = corpus("dtype_dict_matmul.py")
    out = variant(src, "mm_kernel", "BLOCK_SIZE_M", 128)
    assert 'torch.float16: {"BLOCK_SIZE_M": 128,' in out and 'torch.float32: {"BLOCK_SIZE_M": 64,' in out


def test_grid_literal_moves_with_the_block():
    src = corpus("grid_literal.py")
    knob = next(k for k in KernelAnalyzer(src, "scale_kernel").knobs() if k.name == "BLOCK_SIZE")
    assert knob.ties and 16 in knob.domain and 1024 in knob.domain  # free in both directions now
    out = variant(src, "scale_kernel", "BLOCK_SIZE", 1024)
    assert "grid = (triton.cdiv(n, 1024),)" in out and "BLOCK_SIZE=1024)" in out
    hand = variant(corpus("floordiv_grid.py"), "neg_kernel", "BLOCK", 2048)
    assert "neg_kernel[((n + 2047) // 2048,)](x, y, n, BLOCK=2048)" in hand


AMBIGUOUS = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def k2d(x_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(x_ptr + rm[:, None] * N + rn[None, :], 1.0, mask=(rm[:, None] < M) & (rn[None, :] < N))


def fill(x):
    M, N = x.shape
    k2d[(triton.cdiv(M, 64), triton.cdiv(N, 64))](x, M, N, BLOCK_M=64, BLOCK_N=64)
    return x
'''


def test_a_grid_literal_two_blocks_could_own_is_refused():
    names = {k.name for k in KernelAnalyzer(AMBIGUOUS, "k2d").knobs()}
    assert "BLOCK_M" not in names and "BLOCK_N" not in names and "num_warps" in names
    distinct = AMBIGUOUS.replace("BLOCK_N=64", "BLOCK_N=32").replace("cdiv(N, 64)", "cdiv(N, 32)")
    out = variant(distinct, "k2d", "BLOCK_N", 64)
    assert "(triton.cdiv(M, 64), triton.cdiv(N, 64))" in out and "BLOCK_N=64" in out


def test_config_equality_knows_defaults():
    an = KernelAnalyzer(corpus("grid_literal.py"), "scale_kernel")
    knobs = an.knobs()
    warps = next(k for k in knobs if k.name == "num_warps")
    assert warps.default == DEFAULT_WARPS and not warps.sites
    a = Config.of(knobs)
    b = Config.of(knobs, {warps.ident: DEFAULT_WARPS})
    c = Config.of(knobs, {warps.ident: 8})
    assert a == b and hash(a) == hash(b) and a != c
    assert c.delta(a) == {warps.ident: (DEFAULT_WARPS, 8)}
    # a config that leaves warps out compares at the default
    partial = Config(tuple(kv for kv in a.values if kv[0] != warps.ident), a.defaults)
    assert partial == a


def _evaluate(tmp_path: Path, name: str, kernel: str, harness: str, sources: list[str]):
    path = tmp_path / name
    original = corpus(name)
    path.write_text(original, encoding="utf-8")
    ev = Evaluator(Task(module_path=str(path), source=original, kernel=kernel, harness=harness, device="cpu",
                        timeout_s=60.0))
    try:
        base = ev.prepare()
        assert base.ok, base
        return base, [ev.evaluate(Variant(s)) for s in sources]
    finally:
        ev.close()


def test_grid_following_block_runs_correct_with_the_right_grid(tmp_path: Path):
    """BLOCK 256 -> 1024 with the grid left at cdiv(n, 256) would launch 4x the programs
    (and pass the checks): the grid follows the block, 3000 elements -> 3 programs."""
    src = corpus("grid_literal.py")
    big = variant(src, "scale_kernel", "BLOCK_SIZE", 1024)
    small = variant(src, "scale_kernel", "BLOCK_SIZE", 128)
    base, (e_big, e_small) = _evaluate(tmp_path, "grid_literal.py", "scale_kernel", "harness_scale", [big, small])
    assert base.launches[0].grid == [12]
    assert e_big.ok and e_big.launches[0].grid == [3], e_big.message
    assert e_small.ok and e_small.launches[0].grid == [24], e_small.message


@pytest.mark.slow  # a matmul run under the interpreter with its calls beyond the harness: minutes
def test_data_flow_variants_run_correct(tmp_path: Path):
    """Knobs reached through a dtype-indexed dict: the float32 entry (the one the harness
    uses) moves by the knob's ratio, and the variants are correct under the interpreter."""
    src = corpus("dtype_dict_matmul.py")
    an = KernelAnalyzer(src, "mm_kernel")
    knobs = {k.name: k for k in an.knobs()}
    picks = [an.render(knobs["BLOCK_SIZE_M"].edits(32)), an.render(knobs["BLOCK_SIZE_N"].edits(128))]
    assert 'torch.float32: {"BLOCK_SIZE_M": 16,' in picks[0]
    base, evs = _evaluate(tmp_path, "dtype_dict_matmul.py", "mm_kernel", "harness_matmul", picks)
    assert all(e.ok for e in evs), [e.message for e in evs]
    assert base.launches[0].constexprs["BLOCK_SIZE_M"] == 32
    assert evs[0].launches[0].constexprs["BLOCK_SIZE_M"] == 16
    assert evs[1].launches[0].constexprs["BLOCK_SIZE_N"] == 64


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.py")), ids=lambda p: p.name)
def test_every_corpus_rewrite_passes_the_screen(path: Path):
    """Module-level tunables (dict constants, autotune lists) are edited in a copy under
    a new name, since the trust layer keeps module-level statements unchanged."""
    from kernelband.detect import detect
    from kernelband.screen import screen_variant

    src = path.read_text(encoding="utf-8")
    kernel = detect(src).kernels[0].name
    an = KernelAnalyzer(src, kernel).analyse()
    for rw in an.rewrites:
        out = an.source_of(rw)
        assert out != src and screen_variant(src, out, kernel, None) is None, rw.description


def test_other_divisions_by_the_block_value_are_not_tied():
    src = corpus("grid_literal.py").replace(
        "    grid = (triton.cdiv(n, 256),)\n",
        "    grid = (triton.cdiv(n, 256),)\n    chunks = n // 256  # unrelated to the launch\n")
    out = variant(src, "scale_kernel", "BLOCK_SIZE", 1024)
    assert "grid = (triton.cdiv(n, 1024),)" in out and "chunks = n // 256" in out
