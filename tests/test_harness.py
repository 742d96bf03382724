"""Harness discovery and the harness stub."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kernelband.detect import detect
from kernelband.harness import find_harness, harness_stub
from helpers.paths import example_source

KERNEL = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=m), mask=m)

    def double(x):
        out = torch.empty_like(x)
        double_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
''')


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def test_examples_have_conventional_harnesses():
    for file, kernel, harness in [("add_scale.py", "axpy_kernel", "harness_axpy"),
                                  ("softmax.py", "softmax_kernel", "harness_softmax"),
                                  ("matmul.py", "matmul_kernel", "harness_matmul")]:
        h = find_harness(file, example_source(file), kernel)
        assert (h.name, h.how, h.path) == (harness, "convention", None)


def test_preference_and_reachability(tmp_path):
    text = KERNEL + textwrap.dedent('''
        def test_unrelated():
            return 1

        def bench_double():
            return double(torch.randn(10))

        def helper():
            return double(torch.randn(10))

        def harness_double():
            return helper()

        def test_double(x=None):
            return double(torch.randn(10))
    ''')
    h = find_harness(str(tmp_path / "k.py"), text, "double_kernel")
    # bench_* times (the production-size workload); every candidate checks correctness;
    # harness_double reaches the launch through a helper
    assert h.name == "bench_double"
    assert h.candidates == ["bench_double", "harness_double", "test_double"]
    assert h.checks == ["harness_double", "test_double"]
    assert "bench_double (timing and correctness)" in h.roles() and "test_double" in h.roles()
    # the timing role can be chosen among the candidates, and a wrong name is a reason
    h = find_harness(str(tmp_path / "k.py"), text, "double_kernel", timing="test_double")
    assert h.name == "test_double" and h.checks == ["bench_double", "harness_double"]
    h = find_harness(str(tmp_path / "k.py"), text, "double_kernel", timing="test_unrelated")
    assert not h.found and "timing harness 'test_unrelated'" in h.reason
    # an explicit harness is that one harness for both roles
    h = find_harness(str(tmp_path / "k.py"), text, "double_kernel", explicit="test_double")
    assert h.name == "test_double" and h.checks == []


def test_no_harness_reasons(tmp_path):
    h = find_harness(str(tmp_path / "k.py"), KERNEL, "double_kernel")
    assert not h.found and "harness_*" in h.reason
    text = KERNEL + "\ndef run_it():\n    return double(torch.randn(3))\n"
    h = find_harness(str(tmp_path / "k.py"), text, "double_kernel")
    assert "run_it" in h.reason and "rename" in h.reason
    h = find_harness(str(tmp_path / "k.py"), KERNEL.replace("double_kernel[", "other["), "double_kernel")
    assert "never launched" in h.reason
    assert "no Triton kernel named" in find_harness("k.py", KERNEL, "nope").reason
    assert "does not parse" in find_harness("k.py", "def f(:", "k").reason


def test_explicit_and_pyproject_and_companion(tmp_path):
    mod = write(tmp_path, "kern.py", KERNEL + "\ndef my_check():\n    return double(torch.randn(5))\n")
    src = mod.read_text()
    assert find_harness(str(mod), src, "double_kernel", explicit="my_check").how == "explicit"
    assert "takes arguments" in find_harness(str(mod), src, "double_kernel", explicit="double").reason

    write(tmp_path, "pyproject.toml", '[tool.kernelband.harness]\ndouble_kernel = "my_check"\n')
    h = find_harness(str(mod), src, "double_kernel")
    assert (h.name, h.how) == ("my_check", "pyproject")

    (tmp_path / "pyproject.toml").unlink()
    comp = write(tmp_path, "test_kern.py", "import torch\nfrom kern import double\n\n"
                 "def test_double_small():\n    return double(torch.randn(7))\n")
    h = find_harness(str(mod), KERNEL, "double_kernel")
    assert (h.name, h.path) == ("test_double_small", str(comp.resolve()))


def test_stub_is_a_working_harness(tmp_path):
    """The inserted stub parses, is discovered, and runs the kernel under the interpreter."""
    r = detect(KERNEL)
    stub = harness_stub(KERNEL, r.kernel("double_kernel"), r)
    text = KERNEL + stub
    mod = write(tmp_path, "kern.py", text)
    h = find_harness(str(mod), text, "double_kernel")
    assert h.name == "harness_double_kernel"
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import kern, torch; "
            "out = kern.harness_double_kernel(); assert isinstance(out, torch.Tensor) and out.numel() == 4096; print('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert res.returncode == 0, res.stderr[-2000:]


def test_stub_without_wrapper_parses_and_launches(tmp_path):
    text = KERNEL.split("def double(")[0]
    r = detect(text)
    stub = harness_stub(text, r.kernel("double_kernel"), r)
    full = text + stub
    r2 = detect(full)
    assert r2.error is None
    assert "double_kernel" in r2.function("harness_double_kernel").launches


def test_missing_or_broken_harness_files_give_reasons(tmp_path):
    mod = write(tmp_path, "kern.py", KERNEL)
    src = mod.read_text()
    missing = tmp_path / "missing.py"
    h = find_harness(str(mod), src, "double_kernel", explicit=f"{missing}:h")
    assert not h.found and "does not exist" in h.reason and str(missing) in h.reason
    write(tmp_path, "broken.py", "def h(:\n")
    h = find_harness(str(mod), src, "double_kernel", explicit=f"{tmp_path / 'broken.py'}:h")
    assert not h.found and "does not parse" in h.reason and "line 1" in h.reason

    write(tmp_path, "pyproject.toml", '[tool.kernelband.harness]\ndouble_kernel = "missing.py:h"\n')
    h = find_harness(str(mod), src, "double_kernel")
    assert not h.found and "does not exist" in h.reason
    write(tmp_path, "checks.py", "from kern import double\nimport torch\n\ndef h():\n    return double(torch.ones(3))\n")
    write(tmp_path, "pyproject.toml", '[tool.kernelband.harness]\ndouble_kernel = "checks.py:h"\n')
    h = find_harness(str(mod), src, "double_kernel")
    assert (h.name, h.how, h.path) == ("h", "pyproject", str((tmp_path / "checks.py").resolve()))
    write(tmp_path, "pyproject.toml", "[tool.kernelband.harness\ndouble_kernel = 'h'\n")
    h = find_harness(str(mod), src, "double_kernel")
    assert not h.found and "not valid TOML" in h.reason


def test_bom_harness_file_is_read(tmp_path):
    mod = write(tmp_path, "kern.py", KERNEL)
    (tmp_path / "checks.py").write_bytes(b"\xef\xbb\xbfimport torch\nfrom kern import double\n\n"
                                          b"def h():\n    return double(torch.ones(3))\n")
    h = find_harness(str(mod), KERNEL, "double_kernel", explicit=f"{tmp_path / 'checks.py'}:h")
    assert (h.name, h.how) == ("h", "explicit"), h.reason
    (tmp_path / "test_kern.py").write_bytes(b"\xef\xbb\xbfimport torch\nimport kern\n\n"
                                            b"def test_it():\n    return kern.double(torch.ones(3))\n")
    assert find_harness(str(mod), KERNEL, "double_kernel").name == "test_it"


def test_companion_matches_calls_by_ast_not_text(tmp_path):
    """``torch.double(`` / ``x.double()`` are not the wrapper; ``kern.double`` and helpers are."""
    mod = write(tmp_path, "kern.py", KERNEL)
    comp = write(tmp_path, "test_kern.py", textwrap.dedent('''
        import torch
        import kern as K
        from kern import double as dbl

        def test_a_torch_only():
            x = torch.randn(4).double()
            return torch.double, torch.add(x, x)

        def test_b_via_module_attr():
            return K.double(torch.randn(4))

        def _make():
            return dbl(torch.randn(4))

        def test_c_via_helper():
            return _make()

        def test_d_shadowed():
            # text mentions double( but the call resolves to a local lambda
            double = lambda t: t
            return double(torch.randn(4))
    '''))
    h = find_harness(str(mod), KERNEL, "double_kernel")
    assert (h.name, h.path) == ("test_b_via_module_attr", str(comp.resolve()))
    assert h.candidates == ["test_b_via_module_attr", "test_c_via_helper"]


AUTOGRAD_MODULE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return out

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


double = _Double.apply


def test_double():
    torch.manual_seed(0)
    return double(torch.randn(1000))
'''


def test_kernel_launched_from_an_autograd_function(tmp_path):
    """The common `class F(torch.autograd.Function)` + `f = F.apply` layout: the class owns its
    methods' launches, the alias reaches the class, and the harness that calls the alias is found."""
    det = detect(AUTOGRAD_MODULE)
    cls = det.function("_Double")
    assert cls is not None and cls.kind == "class" and cls.launches == ["double_kernel"]
    alias = det.function("double")
    assert alias is not None and alias.kind == "alias" and alias.calls == ["_Double"]
    assert det.kernel("double_kernel").launch_sites[0].enclosing_function == "_Double"
    path = tmp_path / "dbl.py"
    path.write_text(AUTOGRAD_MODULE)
    choice = find_harness(str(path), AUTOGRAD_MODULE, "double_kernel")
    assert (choice.name, choice.how) == ("test_double", "convention"), choice.reason
    # classes and aliases are neither wrappers (their signature is no one function's) nor harnesses
    from kernelband.detect import wrappers_of
    assert wrappers_of(det, "double_kernel") == []
    # Cls.apply(x) called directly also reaches the class
    direct = AUTOGRAD_MODULE.replace("return double(torch.randn(1000))", "return _Double.apply(torch.randn(1000))")
    assert find_harness(str(path), direct, "double_kernel").name == "test_double"


# ---------------------------------------------------------------------------- scalars in stubs
SCALED = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, s, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, s * tl.load(x_ptr + offs * stride, mask=m), mask=m)

    def scale(x, s, step, factor):
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 256),)](x, out, s * float(factor), n, step, BLOCK=256)
        return out
''')


def _run_stub(tmp_path: Path, text: str, harness: str) -> subprocess.CompletedProcess:
    mod = write(tmp_path, "kern.py", text)
    assert find_harness(str(mod), text, harness.replace("harness_", "")).name == harness
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import kern, torch; "
            f"out = kern.{harness}(); assert isinstance(out, torch.Tensor) and out.numel() == 4096; print('ok')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"})


def test_stub_infers_scalars_from_how_the_kernel_uses_them(tmp_path):
    """`scale(x, s)` with `s` a multiplier: a float, not a tensor (a tensor there fails to
    compile: IncompatibleTypeErrorImpl); `step` a stride in an address: 1; `factor` passed
    through float(): a float."""
    r = detect(SCALED)
    stub = harness_stub(SCALED, r.kernel("scale_kernel"), r)
    assert "    x = torch.randn(4096, device=DEVICE)" in stub
    assert "    s = 0.5  # TODO: a real value" in stub
    assert "    step = 1  # TODO: a real value" in stub
    assert "    factor = 0.5  # TODO: a real value" in stub
    res = _run_stub(tmp_path, SCALED + stub, "harness_scale_kernel")
    assert res.returncode == 0, res.stderr[-2000:]


def test_stub_keeps_tensors_the_wrapper_reads_and_names_decide_the_rest():
    text = textwrap.dedent('''
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def add_kernel(a_ptr, b_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(a_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)

        def add_(a, b, n_elements):
            add_kernel[(triton.cdiv(a.numel(), 256),)](a, b, n_elements, BLOCK=256)
            return a
    ''')
    r = detect(text)
    stub = harness_stub(text, r.kernel("add_kernel"), r)
    assert "    a = torch.randn(4096, device=DEVICE)" in stub  # a.numel(): a tensor
    assert "    b = torch.randn(4096, device=DEVICE)" in stub  # a pointer base in the kernel
    assert "    n_elements = 4096  # TODO: a real value" in stub  # compared with the offsets


def test_stub_without_wrapper_uses_the_kernel_roles(tmp_path):
    text = SCALED.split("def scale(")[0]
    r = detect(text)
    stub = harness_stub(text, r.kernel("scale_kernel"), r)
    assert "scale_kernel[grid](x_ptr, out_ptr, 0.5, n, n, BLOCK=1024)" in stub or \
        "scale_kernel[grid](x_ptr, out_ptr, 0.5, n," in stub, stub
