"""Code rewrites (pipeline loops -> tl.range(num_stages), grouped program ids): each
recognises its pattern, passes the screen, keeps comments, and gives a correct variant
under the Triton interpreter through the trust layer."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.evaluate import Evaluator
from kernelband.generators import triton_features
from kernelband.generators.code import persistent as persistent_rewrite
from kernelband.generators.code import pipeline
from kernelband.generators.analysis import KernelAnalyzer
from kernelband.model import Task, Variant
from kernelband.screen import screen_variant
from helpers.paths import example_source

CORPUS = Path(__file__).parent / "data" / "realstyle"


def rewrites(source: str, kernel: str, family: str) -> dict[str, str]:
    an = KernelAnalyzer(source, kernel).analyse()
    return {r.key: an.source_of(r) for r in an.rewrites if r.family == family}


def evaluate(tmp_path: Path, name: str, kernel: str, harness: str, sources: list[str]):
    src = (CORPUS / name).read_text(encoding="utf-8")
    path = tmp_path / name
    path.write_text(src, encoding="utf-8")
    with Evaluator(Task(module_path=str(path), source=src, kernel=kernel, harness=harness, device="cpu",
                        timeout_s=120.0)) as ev:
        base = ev.prepare()
        assert base.ok
        return [ev.evaluate(Variant(s)) for s in sources]


def test_pipeline_and_swizzle_are_recognised_and_screened():
    src = (CORPUS / "matmul_rowmajor.py").read_text(encoding="utf-8")
    pipe = rewrites(src, "matmul_kernel", "pipeline_loop")
    swz = rewrites(src, "matmul_kernel", "pid_swizzle")
    assert {"tl_range:2", "tl_range:3", "tl_range:4"} <= set(pipe) <= {
        "tl_range:2", "tl_range:3", "tl_range:4", "tl_range_unroll:2", "tl_range_unroll:4"}
    assert "for k in tl.range(0, K, BLOCK_K, num_stages=3):" in pipe["tl_range:3"]
    assert set(swz) == {"pid_swizzle:4", "pid_swizzle:8"}
    assert "group_size_m = min(num_pid_m - first_pid_m, 8)" in swz["pid_swizzle:8"]
    for out in [*pipe.values(), *swz.values()]:
        assert screen_variant(src, out, "matmul_kernel", "harness_matmul") is None
        assert "# row-major over tiles" in out


def test_patterns_not_present_are_not_offered(monkeypatch):
    grouped = example_source("matmul.py")  # already grouped: no swizzle
    assert rewrites(grouped, "matmul_kernel", "pid_swizzle") == {}
    elementwise = (CORPUS / "grid_literal.py").read_text(encoding="utf-8")  # no loop
    assert rewrites(elementwise, "scale_kernel", "pipeline_loop") == {}
    # a Triton whose tl.range takes no num_stages: nothing
    monkeypatch.setattr(pipeline, "tl_range_params", lambda: set())
    assert rewrites(grouped, "matmul_kernel", "pipeline_loop") == {}


# slow tier: each rewrite also runs the calls beyond the harness, one with M grown past 2**16, and
# interpreted K loops take minutes. Recognition and screening stay in the default tier (above).
@pytest.mark.slow
@pytest.mark.timeout(2400)  # every rewrite also runs the derived calls: matmul K loops are slow interpreted
def test_matmul_code_rewrites_are_correct_under_the_interpreter(tmp_path: Path):
    src = (CORPUS / "matmul_rowmajor.py").read_text(encoding="utf-8")
    pipe = rewrites(src, "matmul_kernel", "pipeline_loop")
    picks = [pipe["tl_range:3"], *([pipe["tl_range_unroll:2"]] if "tl_range_unroll:2" in pipe else []),
             *rewrites(src, "matmul_kernel", "pid_swizzle").values()]  # 5 x 3 tiles: a partial group of 4
    evs = evaluate(tmp_path, "matmul_rowmajor.py", "matmul_kernel", "harness_matmul", picks)
    assert evs and all(e.ok for e in evs), [e.message for e in evs]


@pytest.mark.slow
def test_layernorm_loops_pipelined_are_correct_under_the_interpreter(tmp_path: Path):
    src = (CORPUS / "layernorm_loop.py").read_text(encoding="utf-8")
    out = rewrites(src, "layer_norm_fwd", "pipeline_loop")["tl_range:2"]
    assert out.count("tl.range(0, N, BLOCK_SIZE, num_stages=2)") == 3
    (ev,) = evaluate(tmp_path, "layernorm_loop.py", "layer_norm_fwd", "harness_layer_norm", [out])
    assert ev.ok, ev.message


def persistent(name: str, kernel: str, programs: int) -> str:
    src = (CORPUS / name).read_text(encoding="utf-8")
    an = KernelAnalyzer(src, kernel)
    ((_key, _desc, edits),) = persistent_rewrite.rewrites(an, programs=(programs,))
    out = an.render(edits)
    assert screen_variant(src, out, kernel, None) is None
    return out


def test_a_kernel_written_on_its_def_line_gets_no_persistent_rewrite_and_no_crash():
    src = (CORPUS / "grid_literal.py").read_text(encoding="utf-8")
    one_line = src.replace(
        "def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):\n    pid = tl.program_id(0)\n"
        "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n    m = offs < n\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)\n",
        "def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr): pid = tl.program_id(0); "
        "offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE); m = offs < n; "
        "tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)\n", 1)
    assert one_line != src
    assert rewrites(one_line, "scale_kernel", "persistent") == {}


def test_persistent_is_offered_for_1d_kernels_only():
    src = (CORPUS / "grid_literal.py").read_text(encoding="utf-8")
    assert set(rewrites(src, "scale_kernel", "persistent")) == {"persistent:264", "persistent:528", "persistent:1056"}
    assert rewrites((CORPUS / "matmul_rowmajor.py").read_text(encoding="utf-8"), "matmul_kernel", "persistent") == {}
    out = persistent("grid_literal.py", "scale_kernel", 4)
    assert "for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK_SIZE), tl.num_programs(0)):" in out
    assert "grid = (min(triton.cdiv(n, 256), 4),)" in out
    inline = persistent("helper_kwargs.py", "gelu_kernel", 2)
    assert "offs = pid * BLOCK + tl.arange(0, BLOCK)" in inline  # the inline program_id became the loop variable
    assert "(min(triton.cdiv(n, meta[\"BLOCK\"]), 2),)" in inline


@pytest.mark.slow
def test_persistent_variants_loop_over_every_tile_under_the_interpreter(tmp_path: Path):
    """12 tiles on 4 programs (3 iterations each) and 3 tiles on 2 programs: correct,
    and the launch grid is the capped one."""
    (a,) = evaluate(tmp_path, "grid_literal.py", "scale_kernel", "harness_scale",
                    [persistent("grid_literal.py", "scale_kernel", 4)])
    assert a.ok and a.launches[0].grid == [4], a.message
    (b,) = evaluate(tmp_path, "helper_kwargs.py", "gelu_kernel", "harness_gelu",
                    [persistent("helper_kwargs.py", "gelu_kernel", 2)])
    assert b.ok and b.launches[0].grid == [2], b.message


def test_rows_per_program_refuses_kernels_that_mutate_parameters():
    # layer norm's ``X += row * stride`` would accumulate across rows of one program
    src = (CORPUS / "layernorm_loop.py").read_text(encoding="utf-8")
    assert rewrites(src, "layer_norm_fwd", "rows_per_program") == {}
    soft = (CORPUS / "conditional_warps_softmax.py").read_text(encoding="utf-8")
    got = rewrites(soft, "softmax_kernel", "rows_per_program")
    assert set(got) == {"rows:2", "rows:4", "rows:8"}
    assert "for row in range(tl.program_id(0), n_rows_kb, tl.num_programs(0)):" in got["rows:4"]
    assert "softmax_kernel[((n_rows + 3) // 4,)](" in got["rows:4"] and "n_rows_kb=n_rows)" in got["rows:4"]


@pytest.mark.slow
def test_rows_per_program_variants_are_correct_under_the_interpreter(tmp_path: Path):
    soft = (CORPUS / "conditional_warps_softmax.py").read_text(encoding="utf-8")
    (a,) = evaluate(tmp_path, "conditional_warps_softmax.py", "softmax_kernel", "harness_softmax",
                    [rewrites(soft, "softmax_kernel", "rows_per_program")["rows:2"]])
    assert a.ok and a.launches[0].grid == [3], a.message  # 5 rows, 2 per program
    rmax = (CORPUS / "heuristics_all.py").read_text(encoding="utf-8")
    (b,) = evaluate(tmp_path, "heuristics_all.py", "rowmax_kernel", "harness_rowmax",
                    [rewrites(rmax, "rowmax_kernel", "rows_per_program")["rows:4"]])
    assert b.ok and b.launches[0].grid == [2], b.message  # 6 rows, 4 per program


def test_block_pointers_follow_the_installed_triton(monkeypatch):
    src = (CORPUS / "dtype_dict_matmul.py").read_text(encoding="utf-8")
    detected = triton_features.block_pointers_supported()
    try:
        triton_features.assume_block_pointers(False)
        assert rewrites(src, "mm_kernel", "block_ptr") == {}
        triton_features.assume_block_pointers(True)
        assert triton_features.block_pointers_supported()
    finally:
        triton_features.assume_block_pointers(None)
    assert triton_features.block_pointers_supported() == detected


@pytest.mark.skipif(not triton_features.block_pointers_supported(),
                    reason="this Triton removed block pointers (3.9: tensor descriptors only)")
def test_block_pointers_for_a_dot_kernel_are_correct_under_the_interpreter(tmp_path: Path):
    src = (CORPUS / "dtype_dict_matmul.py").read_text(encoding="utf-8")
    got = rewrites(src, "mm_kernel", "block_ptr")
    assert list(got) == ["block_ptr"]
    out = got["block_ptr"]
    assert "a_ptrs = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak)" in out
    assert 'tl.load(b_ptrs, boundary_check=(0, 1), padding_option="zero")' in out
    assert screen_variant(src, out, "mm_kernel", "harness_matmul") is None
    # 48 x 40 @ 40 x 36 with 32-wide fp32 tiles: partial tiles on every edge, zero padded
    (ev,) = evaluate(tmp_path, "dtype_dict_matmul.py", "mm_kernel", "harness_matmul", [out])
    assert ev.ok, ev.message
    # pointer arithmetic written inline in the loads is not this pattern
    assert rewrites((CORPUS / "matmul_rowmajor.py").read_text(encoding="utf-8"), "matmul_kernel", "block_ptr") == {}
