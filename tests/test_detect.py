"""Kernel detection from source text alone."""
from __future__ import annotations

import textwrap

from kernelband.detect import detect, wrappers_of
from helpers.paths import example_source


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_examples_are_detected_with_launch_sites():
    r = detect(example_source("matmul.py"))
    assert r.error is None
    (k,) = r.kernels
    assert k.name == "matmul_kernel"
    assert k.constexpr_params == ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]
    (site,) = k.launch_sites
    assert site.enclosing_function == "matmul"
    assert site.grid == "grid"
    assert site.kwargs == {"BLOCK_M": "32", "BLOCK_N": "32", "BLOCK_K": "32", "GROUP_M": "1"}
    assert [w.name for w in wrappers_of(r, "matmul_kernel")] == ["matmul"]


def test_aliases_from_imports_and_call_forms():
    r = detect(src('''
        import triton as tr
        import triton.language as lang
        from triton import jit
        from triton import jit as J, autotune as tune, heuristics

        @jit
        def a(x_ptr, N: lang.constexpr):
            pass

        @J
        def b(x_ptr):
            pass

        @tr.jit(do_not_specialize=["n"])
        def c(x_ptr, n, BLOCK: "tl.constexpr" = 128):
            pass

        @tune(configs=[], key=["n"])
        @heuristics({"EVEN": lambda a: a["n"] % 2 == 0})
        @tr.jit
        def d(x_ptr, n, EVEN: lang.constexpr):
            pass

        def not_a_kernel(x):
            return x

        @some.other.jit
        def e(x):
            pass
    '''))
    names = [k.name for k in r.kernels]
    assert names == ["a", "b", "c", "d"]
    a, b, c, d = r.kernels
    assert a.constexpr_params == ["N"]
    assert c.constexpr_params == ["BLOCK"] and c.params[2].default == "128"
    assert d.is_autotuned and d.has_heuristics and not c.is_autotuned
    # the range starts at the first decorator, the name range is just the name
    assert d.range.start_line == d.def_range.start_line - 3
    assert d.name_range.end_col - d.name_range.start_col == 1
    # a jit from some other package is not Triton's: e stays a plain function
    assert [f.name for f in r.functions] == ["not_a_kernel", "e"]


def test_launch_sites_module_attribute_and_module_level():
    r = detect(src('''
        import triton
        import triton.language as tl
        import kernels as K

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            pass

        def run(x):
            K.k[(1,)](x, BLOCK=64)
            k[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, BLOCK=128)

        k[(4,)](None, BLOCK=32)
    '''))
    sites = r.kernels[0].launch_sites
    assert [(s.enclosing_function, s.kwargs["BLOCK"]) for s in sites] == [("run", "64"), ("run", "128"), (None, "32")]
    assert sites[1].grid.startswith("lambda m:")
    assert r.function("run").launches == ["k"]


def test_nested_launch_belongs_to_outer_function():
    r = detect(src('''
        import triton
        @triton.jit
        def k(x):
            pass
        def outer(x):
            def inner():
                k[(1,)](x)
            inner()
    '''))
    assert r.kernels[0].launch_sites[0].enclosing_function == "outer"


def test_kernels_under_import_guards_are_module_level():
    r = detect(src('''
        try:
            import triton
            HAS_TRITON = True
        except ImportError:
            HAS_TRITON = False
        if HAS_TRITON:
            @triton.jit
            def guarded(x):
                pass
        else:
            def guarded_fallback(x):
                return x
        try:
            @triton.jit
            def in_try(x):
                pass
        finally:
            pass
        def wrap(x):
            guarded[(1,)](x)
            return in_try[(2,)](x)
        def harness_wrap():
            return wrap(1)
    '''))
    assert [k.name for k in r.kernels] == ["guarded", "in_try"]
    assert r.kernels[0].launch_sites[0].enclosing_function == "wrap"
    assert (r.kernels[0].range.start_line, r.kernels[0].range.start_col) == (7, 4)  # the decorator, inside the if
    assert {f.name for f in r.functions} == {"guarded_fallback", "wrap", "harness_wrap"}
    assert r.function("harness_wrap").calls == ["wrap"]
    assert r.function("wrap").launches == ["guarded", "in_try"]


def test_unparsable_file_reports_error_without_raising():
    r = detect("import triton\n@triton.jit\ndef k(x:\n    pass\n")
    assert r.kernels == []
    assert r.error is not None and r.error.line >= 3
    nul = detect("x = 1\0\n")  # null bytes make ast.parse raise ValueError: reported, not raised
    assert nul.kernels == [] and nul.error is not None


def test_serialisation_round_trip():
    from kernelband.model import KernelInfo

    k = detect(example_source("softmax.py")).kernels[0]
    assert KernelInfo.from_dict(k.to_dict()) == k


def test_bom_and_parser_memory_error(tmp_path):
    from kernelband.detect import read_source

    text = example_source("add_scale.py")
    # decoded as plain utf-8 (an editor buffer) or read from disk: a BOM is not a parse error
    r = detect("\ufeff" + text)
    assert r.error is None and [k.name for k in r.kernels] == ["axpy_kernel"]
    assert r.kernels[0].range == detect(text).kernels[0].range
    f = tmp_path / "bom.py"
    f.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert read_source(f) == text
    # the parser raises MemoryError (not RecursionError) on 10,000 unary minus signs
    r = detect("x = " + "-" * 10_000 + "1\n")
    assert r.error is not None and "MemoryError" in r.error.message and not r.kernels
