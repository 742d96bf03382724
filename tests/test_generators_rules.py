"""The offline ``rules`` generator: every rewrite is a valid, screened, comment-keeping
module; determinism; offered() shrinking; enumerate_space; a real interpreter run."""
from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

from kernelband.detect import detect, wrappers_of
from kernelband.generators import GenContext, GenerationOutcome, make_generator
from kernelband.generators.rules import ENUMERATE_LIMIT, RulesGenerator
from kernelband.model import Variant
from kernelband.screen import screen_variant
from helpers.paths import REPO, example_source

AUTOTUNED = '''\
"""An already autotuned kernel: launch-site tunables belong to the autotuner."""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 256}, num_warps=4), triton.Config({"BLOCK_SIZE": 512}, num_warps=8)],
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)  # one program per block
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * factor, mask=m)


def scale(x: torch.Tensor, factor: float = 2.0) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, out, n, factor)
    return out


def harness_scale():
    return scale(torch.arange(1000, dtype=torch.float32))
'''

HEURISTICS = '''\
import torch
import triton
import triton.language as tl


@triton.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr, EVEN_N: tl.constexpr):
    pid = tl.program_id(0)
    block_start = pid * BLOCK
    offs = block_start + tl.arange(0, BLOCK)  # the tutorial's two-step form
    if EVEN_N:
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs))
    else:
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def copy(src: torch.Tensor) -> torch.Tensor:
    dst = torch.empty_like(src)
    n = src.numel()
    BLOCK = 1024  # tuned by hand
    grid = (triton.cdiv(n, BLOCK),)
    copy_kernel[grid](src, dst, n, BLOCK=BLOCK)
    return dst


def harness_copy():
    return copy(torch.arange(3000, dtype=torch.float32))
'''

FROM_IMPORT_JIT = '''\
import torch
import triton.language as tl
from triton import jit


@jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # one block of elements per program
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.0), mask=offs < n)


def relu(x):
    y = torch.empty_like(x)
    n = x.numel()
    relu_kernel[lambda meta: ((n + meta["BLOCK"] - 1) // meta["BLOCK"],)](
        x, y, n,
        BLOCK=256,  # the block
        num_warps=2,  # two warps
    )
    return y


def test_relu():
    return relu(torch.randn(777))
'''

NO_LAUNCH = '''\
import triton
import triton.language as tl


@triton.jit
def lonely_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)  # read
    tl.store(x_ptr + offs, x + 1, mask=offs < n)  # write back
'''

ROWS = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def rowsum(x):
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=x.dtype)
    rowsum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=1024)
    return out


def harness_rowsum():
    return rowsum(torch.randn(8, 1000))
'''

# (name, source, kernel, harness, strategies it must offer)
CASES = [
    ("add_scale", example_source("add_scale.py"), "axpy_kernel", "harness_axpy",
     {"tiling", "vectorization", "access_layout"}),
    ("matmul", example_source("matmul.py"), "matmul_kernel", "harness_matmul",
     {"tiling", "vectorization", "pipeline", "reordering", "access_layout"}),
    ("softmax", example_source("softmax.py"), "softmax_kernel", "harness_softmax",
     {"tiling", "vectorization", "access_layout"}),  # vectorization: several rows per program
    # the decorator's configs are the space: scaled, extended or pinned (tiling)
    ("autotuned", AUTOTUNED, "scale_kernel", "harness_scale", {"tiling", "vectorization", "access_layout"}),
    ("heuristics", HEURISTICS, "copy_kernel", "harness_copy", {"tiling", "vectorization", "access_layout"}),
    ("from_import_jit", FROM_IMPORT_JIT, "relu_kernel", "test_relu", {"tiling", "vectorization", "access_layout"}),
    ("no_launch", NO_LAUNCH, "lonely_kernel", None, {"vectorization", "access_layout"}),
    ("rows", ROWS, "rowsum_kernel", "harness_rowsum", {"tiling", "vectorization", "access_layout"}),
]


def comments(source: str) -> list[str]:
    return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]


def signatures(source: str, kernel: str) -> dict[str, str]:
    tree = ast.parse(source)
    names = {w.name for w in wrappers_of(detect(source), kernel)}
    return {n.name: ast.dump(n.args) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names}


def exhaust(gen: RulesGenerator, parent: Variant, ctx: GenContext) -> list[Variant]:
    """Every variant the generator will give for one parent, strategy by strategy."""
    out: list[Variant] = []
    for _ in range(500):
        offered = gen.offered(parent, ctx.kernel)
        if not offered:
            return out
        g = gen.generate(parent, offered[0], ctx)
        assert g.variant is not None, g.message
        assert g.outcome is not GenerationOutcome.REJECTED and g.tokens == 0 and g.cost_usd == 0.0
        out.append(g.variant)
    raise AssertionError("offered() never ran dry")


@pytest.mark.parametrize("name, source, kernel, harness, strategies", CASES, ids=[c[0] for c in CASES])
def test_every_rewrite_is_valid(name, source, kernel, harness, strategies):
    gen = make_generator("rules", seed=0)
    parent = Variant(source)
    assert set(gen.offered(parent, kernel)) == strategies
    ctx = GenContext(kernel=kernel, harness=harness or "", module_path=f"{name}.py")
    variants = exhaust(gen, parent, ctx)
    assert {v.strategy for v in variants} == strategies
    sources = [v.source for v in variants]
    assert len(set(sources)) == len(sources) and source not in sources
    for v in variants:
        ast.parse(v.source)
        assert screen_variant(source, v.source, kernel, harness) is None, v.description
        assert detect(v.source).kernel(kernel) is not None
        assert signatures(v.source, kernel) == signatures(source, kernel)
        assert comments(v.source) == comments(source), v.description
        assert v.parent == parent.id and v.generator == "rules" and v.description
    if "tiling" in strategies:
        assert any("BLOCK" in v.description or "num_warps" in v.description for v in variants)


def test_add_scale_covers_every_family_with_readable_descriptions():
    src = example_source("add_scale.py")
    gen = RulesGenerator(seed=0)
    variants = exhaust(gen, Variant(src), GenContext("axpy_kernel", "harness_axpy", "add_scale.py"))
    text = "\n".join(v.description for v in variants)
    assert "BLOCK_SIZE 128 -> 1024 at axpy line 24" in text
    assert "num_warps 4 (default) -> 8 at axpy line 24" in text
    assert "tl.multiple_of" in text and "evict_first" in text and "@autotune" in text
    at = next(v for v in variants if "@autotune" in v.description).source
    assert "@triton.autotune(" in at and 'key=["n_elements"]' in at
    assert "axpy_kernel[grid](x, y, out, alpha, n)" in at  # tuned kwargs left the launch
    hinted = next(v for v in variants if "multiple_of" in v.description).source
    assert "offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)" in hinted


def _tiling_sequence(src: str, seed: int, ranking: str) -> list[str]:
    ctx = GenContext("axpy_kernel", "harness_axpy", "add_scale.py")
    gen = RulesGenerator(seed=seed, ranking=ranking)
    parent = Variant(src)
    out = []
    while "tiling" in gen.offered(parent, "axpy_kernel"):
        out.append(gen.generate(parent, "tiling", ctx).variant.description)
    return out


def test_nearest_ranking_moves_to_neighbours_first_and_is_deterministic():
    src = example_source("add_scale.py")
    a, b, c = (_tiling_sequence(src, s, "nearest") for s in (0, 0, 3))
    assert a == b
    assert sorted(a) == sorted(c) and a != c  # same rewrites, another order
    neighbours = ("-> 64 ", "-> 256 ", "-> 2 ", "-> 8 ", "@autotune")
    assert all(any(n in d for n in neighbours) for d in a[:5]), a[:5]
    assert len(a) == 9 + 4 + 1 + 3  # 9 other block sizes, 4 other warps values, autotune, 3 persistent grids


def test_model_ranking_offers_autotune_first_then_predicted_gains():
    """The default order: the shipped cost model's predicted gain, the autotune wrap first
    where legal; the seed only breaks ties."""
    from kernelband.generators.rules import cost_model

    assert cost_model() is not None
    src = example_source("add_scale.py")
    a, b = _tiling_sequence(src, 0, "model"), _tiling_sequence(src, 3, "model")
    assert sorted(a) == sorted(b) == sorted(_tiling_sequence(src, 0, "nearest"))
    launch = [d for d in a if not d.startswith("persistent")]  # code rewrites tie (no data to rank them yet)
    assert launch == [d for d in b if not d.startswith("persistent")]
    assert a[0].startswith("@autotune")
    # the landscapes say: for an elementwise kernel at BLOCK 128, bigger blocks first
    assert "BLOCK_SIZE 128 -> " in a[1] and int(a[1].split("-> ")[1].split()[0]) > 128


def test_offered_shrinks_as_rewrites_are_used():
    src = example_source("add_scale.py")
    gen = RulesGenerator(seed=1)
    parent = Variant(src)
    ctx = GenContext("axpy_kernel", "harness_axpy", "add_scale.py")
    before = gen.offered(parent, "axpy_kernel")
    assert "vectorization" in before
    g = gen.generate(parent, "vectorization", ctx)
    assert g.variant is not None
    after = gen.offered(parent, "axpy_kernel")
    assert "vectorization" not in after and len(after) == len(before) - 1
    again = gen.generate(parent, "vectorization", ctx)
    assert again.outcome is GenerationOutcome.NOTHING and "no untried" in again.message
    # a child already carries the hints: nothing for vectorization there either
    assert "vectorization" not in gen.offered(g.variant, "axpy_kernel")
    # fusion has no offline rewrite: never offered
    assert "fusion" not in before


def test_children_never_reproduce_a_seen_source():
    src = example_source("add_scale.py")
    gen = RulesGenerator(seed=0)
    ctx = GenContext("axpy_kernel", "harness_axpy", "add_scale.py")
    root = Variant(src)
    seen = {root.source}
    frontier = [root]
    for _ in range(3):  # three generations of tiling moves
        nxt = []
        for p in frontier[:3]:
            for _ in range(3):
                if "tiling" not in gen.offered(p, "axpy_kernel"):
                    break
                v = gen.generate(p, "tiling", ctx).variant
                assert v.source not in seen
                seen.add(v.source)
                nxt.append(v)
        frontier = nxt


def test_softmax_keeps_data_sized_block_and_tunes_warps():
    src = example_source("softmax.py")
    gen = RulesGenerator()
    ctx = GenContext("softmax_kernel", "harness_softmax", "softmax.py")
    variants = exhaust(gen, Variant(src), ctx)
    tiling = [v for v in variants if v.strategy == "tiling"]
    assert len(tiling) == 4 and all("num_warps 1 ->" in v.description for v in tiling)
    for v in variants:
        assert "BLOCK_SIZE = triton.next_power_of_2(n_cols)" in v.source


# an elementwise kernel whose block covers a whole row: a fixed extent, no reduction over it
ROW_SCALE = ROWS.replace("rowsum_kernel(x_ptr, out_ptr", "rowscale_kernel(x_ptr, out_ptr").replace(
    "    tl.store(out_ptr + row, tl.sum(x, axis=0))\n",
    "    tl.store(out_ptr + row * stride + cols, x * 2.0, mask=cols < n_cols)\n").replace(
    "rowsum_kernel[(rows,)]", "rowscale_kernel[(rows,)]").replace(
    "out = torch.empty(rows, device=x.device, dtype=x.dtype)", "out = torch.empty_like(x)")


def test_fixed_extent_block_only_grows():
    assert "rowscale_kernel[(rows,)]" in ROW_SCALE and "tl.sum" not in ROW_SCALE
    gen = RulesGenerator()
    ctx = GenContext("rowscale_kernel", "harness_rowsum", "rows.py")
    blocks = [v.description for v in exhaust(gen, Variant(ROW_SCALE), ctx) if v.description.startswith("BLOCK ")]
    assert blocks and all(int(d.split("-> ")[1].split()[0]) > 1024 for d in blocks), blocks


def test_the_block_of_a_one_block_reduction_is_never_moved():
    """rowsum reduces one tl.arange(0, BLOCK) per row, no loop over it: a larger block
    sums more columns of a long row, a smaller one fewer (tests/test_generators_reductions.py
    has the analysis)."""
    gen = RulesGenerator()
    ctx = GenContext("rowsum_kernel", "harness_rowsum", "rows.py")
    variants = exhaust(gen, Variant(ROWS), ctx)
    assert variants and not [v.description for v in variants if "BLOCK" in v.description.split(" at ")[0]]
    assert all("BLOCK=1024" in v.source for v in variants)


def test_variable_block_is_changed_at_its_assignment():
    gen = RulesGenerator()
    ctx = GenContext("copy_kernel", "harness_copy", "copy.py")
    v = next(v for v in exhaust(gen, Variant(HEURISTICS), ctx) if v.description.startswith("BLOCK 1024 -> 512"))
    assert "    BLOCK = 512  # tuned by hand\n" in v.source
    assert "copy_kernel[grid](src, dst, n, BLOCK=BLOCK)" in v.source


def test_multiline_launch_keeps_its_layout():
    gen = RulesGenerator()
    ctx = GenContext("relu_kernel", "test_relu", "relu.py")
    v = next(v for v in exhaust(gen, Variant(FROM_IMPORT_JIT), ctx) if "num_warps 2 -> 4" in v.description)
    assert "        BLOCK=256,  # the block\n        num_warps=4,  # two warps\n    )" in v.source
    m = RulesGenerator()
    v = next(v for v in exhaust(m, Variant(example_source("matmul.py")), GenContext("matmul_kernel", "harness_matmul", "m.py"))
             if "num_stages 3 (default) -> 4" in v.description)
    assert "BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, num_stages=4,\n    )" in v.source


def test_autotune_is_optional():
    gen = RulesGenerator(autotune=False)
    variants = exhaust(gen, Variant(example_source("add_scale.py")), GenContext("axpy_kernel", "harness_axpy", "a.py"))
    assert not any("autotune" in v.description for v in variants)


@pytest.mark.slow
def test_enumerate_space_sizes():
    gen = RulesGenerator(seed=0)
    add = gen.enumerate_space(Variant(example_source("add_scale.py")), "axpy_kernel")
    assert len(add) == 10 * 5 - 1  # block 16..8192 x num_warps 1..16, minus the original point
    soft = gen.enumerate_space(Variant(example_source("softmax.py")), "softmax_kernel")
    assert len(soft) == 4
    mm_src = example_source("matmul.py")
    mm = gen.enumerate_space(Variant(mm_src), "matmul_kernel")
    assert len(mm) == ENUMERATE_LIMIT  # 5*5*5 blocks x 5 warps x 5 stages x 4 groups, subsampled
    assert [v.source for v in mm] == [v.source for v in RulesGenerator(seed=0).enumerate_space(Variant(mm_src), "matmul_kernel")]
    assert [v.source for v in mm] != [v.source for v in RulesGenerator(seed=5).enumerate_space(Variant(mm_src), "matmul_kernel")]
    assert len(RulesGenerator(enumerate_limit=10).enumerate_space(Variant(mm_src), "matmul_kernel")) == 10
    assert gen.enumerate_space(Variant(NO_LAUNCH), "lonely_kernel") == []
    for vs, src, k, h in ((add, example_source("add_scale.py"), "axpy_kernel", "harness_axpy"),
                          (mm[:40], mm_src, "matmul_kernel", "harness_matmul")):
        assert len({v.source for v in vs}) == len(vs) and src not in {v.source for v in vs}
        for v in vs:
            assert screen_variant(src, v.source, k, h) is None
            assert v.strategy is None and v.generator == "rules" and "=" in v.description


RUNNER = r'''
import importlib.util, json, sys
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

paths = json.loads(sys.argv[1])
torch.manual_seed(0)
x = torch.randn(3001)
y = torch.randn(3001)
ref = load(paths[0], "m0").axpy(0.5, x, y)
out = []
for i, p in enumerate(paths[1:]):
    got = load(p, f"m{i + 1}").axpy(0.5, x, y)
    out.append(bool(torch.equal(got, ref)))
print(json.dumps(out))
'''


def test_add_scale_variants_run_under_the_interpreter(tmp_path: Path):
    src = example_source("add_scale.py")
    gen = RulesGenerator(seed=0, autotune=False)  # autotuning needs a GPU driver to benchmark
    variants = exhaust(gen, Variant(src), GenContext("axpy_kernel", "harness_axpy", "add_scale.py"))
    wanted = ["-> 256 ", "-> 1024 ", "num_warps 4 (default) -> 8", "tl.multiple_of", "evict_first", ".cs"]
    chosen = [next(v for v in variants if w in v.description) for w in wanted]
    paths = []
    for i, s in enumerate([src] + [v.source for v in chosen]):
        p = tmp_path / f"variant_{i}.py"
        p.write_text(s, encoding="utf-8")
        paths.append(str(p))
    (tmp_path / "run.py").write_text(RUNNER, encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), json.dumps(paths)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [True] * len(chosen)


def test_unknown_kernel_or_broken_source_offers_nothing():
    gen = RulesGenerator()
    assert gen.offered(Variant(example_source("add_scale.py")), "nope") == []
    assert gen.offered(Variant("def (:\n"), "axpy_kernel") == []
    g = gen.generate(Variant("def (:\n"), "tiling", GenContext("axpy_kernel", "", "x.py"))
    assert g.outcome is GenerationOutcome.NOTHING
    assert gen.enumerate_space(Variant(textwrap.dedent("x = 1\n")), "k") == []


def test_analyse_is_the_generators_view_and_none_when_unanalysable():
    from kernelband.generators.analysis import FAMILIES, analyse

    src = example_source("add_scale.py")
    an = analyse(src, "axpy_kernel")
    assert an is not None and {rw.family for rw in an.rewrites} <= set(FAMILIES)
    key = an.rewrites[0].key
    assert an.rewrite(key) is an.rewrites[0] and an.rewrite("no such key") is None
    assert analyse(src, "nope") is None and analyse("def (:\n", "axpy_kernel") is None
    knobs_only = analyse(src, "axpy_kernel", families={"num_warps"})
    assert knobs_only is not None and {rw.family for rw in knobs_only.rewrites} == {"num_warps"}


def test_a_shared_analysis_cache_is_used_and_must_match_the_generator():
    """A replay shares its analyses with the generator; a cache made for other families
    or another cost model would hand the generator proposals it would not make."""
    from kernelband.generators.analysis import FAMILIES, AnalysisCache, cost_model

    src = example_source("add_scale.py")
    cache = AnalysisCache(FAMILIES, cost_model())
    gen = RulesGenerator(analyses=cache)
    assert gen.offered(Variant(src), "axpy_kernel")
    assert cache.get(src, "axpy_kernel") is gen._analysis(Variant(src), "axpy_kernel")  # one analysis, shared
    with pytest.raises(ValueError):
        RulesGenerator(autotune=False, analyses=cache)  # other families
    with pytest.raises(ValueError):
        RulesGenerator(ranking="nearest", analyses=cache)  # no model


def test_ranking_model_and_screen_can_be_given():
    from kernelband.generators.costmodel import CostModel

    model = CostModel.load()
    assert model is not None and model is not RulesGenerator().model
    assert RulesGenerator(ranking_model=model).model is model
    assert RulesGenerator(ranking="nearest", ranking_model=model).model is None  # nearest ranks without one
    asked: list[str] = []

    def refuse(original, variant, kernel, harness=None):
        asked.append(kernel)
        return "refused by the test"

    gen = RulesGenerator(screen=refuse)
    g = gen.generate(Variant(example_source("add_scale.py")), "tiling", GenContext("axpy_kernel", "", "x.py"))
    assert g.variant is None and asked and set(asked) == {"axpy_kernel"}  # every proposal screened, none handed on


@pytest.mark.parametrize("name, source, kernel", [(c[0], c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_text_splicing_matches_a_full_libcst_render(name, source, kernel):
    """The fast renderer (text splices at launch sites) must equal libcst's own output."""
    import random

    from kernelband.generators.analysis import KernelAnalyzer
    from kernelband.generators.edits import Apply, merge

    an = KernelAnalyzer(source, kernel)
    knobs = an.knobs()
    rng = random.Random(0)
    for _ in range(30):
        edits: dict = {}
        for k in knobs:
            v = rng.choice(k.values)
            if v != k.current:
                edits = merge(edits, k.edits(v))
        assert an.render(edits) == an.module.visit(Apply(edits)).code
    from kernelband.generators.code import cache

    for c in cache.rewrites(an):
        assert an.render(c[2]) == an.module.visit(Apply(c[2])).code


def _kwargs_of_loads(source: str) -> list[set[str]]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load":
            out.append({k.arg for k in node.keywords if k.arg})
    return out


def test_access_layout_applied_twice_never_gives_a_load_two_modifiers():
    """evict_first on a load, then load_cg on the child, must not give a tl.load with both
    eviction_policy and cache_modifier: that fails on the GPU."""
    gen = RulesGenerator(seed=0)
    ctx = GenContext("axpy_kernel", "harness_axpy", "add_scale.py")
    frontier = [Variant(example_source("add_scale.py"))]
    produced = 0
    for _ in range(3):  # three generations of access_layout on every child
        nxt = []
        for p in frontier:
            while "access_layout" in gen.offered(p, "axpy_kernel"):
                v = gen.generate(p, "access_layout", ctx).variant
                assert v is not None
                produced += 1
                for kws in _kwargs_of_loads(v.source):
                    assert not {"eviction_policy", "cache_modifier"} <= kws, v.source
                nxt.append(v)
        frontier = nxt
    assert produced >= 4  # evict_first, evict_last, load_cg, store_cs on the root


def test_explicit_default_warps_is_the_same_config_as_none():
    """Dedup is on configs: ``num_warps=4`` (Triton's default) equals no keyword, so
    going 4 -> 8 -> 4 never re-evaluates the original."""
    from kernelband.generators.rules import DEFAULT_STAGES, DEFAULT_WARPS, config_key

    assert (DEFAULT_WARPS, DEFAULT_STAGES) == (4, 3)
    src = example_source("add_scale.py")
    explicit = src.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=128, num_warps=4)")
    assert explicit != src
    assert config_key(explicit, "axpy_kernel") == config_key(src, "axpy_kernel")
    assert config_key(src.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=128, num_warps=8)"), "axpy_kernel") != config_key(
        src, "axpy_kernel"
    )
    gen = RulesGenerator(seed=0)
    ctx = GenContext("axpy_kernel", "harness_axpy", "add_scale.py")
    root = Variant(src)
    assert "tiling" in gen.offered(root, "axpy_kernel")
    eight = Variant(src.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=128, num_warps=8)"), parent=root.id)
    children = exhaust(gen, eight, ctx)
    assert children
    assert all(config_key(c.source, "axpy_kernel") != config_key(src, "axpy_kernel") for c in children)
    assert not any("num_warps 8 -> 4" in c.description for c in children)
