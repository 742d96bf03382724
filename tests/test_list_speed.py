"""What keeps `kernelband list` fast on a big file (linear, <= 1 s at 1,200
kernels): the CLI imports neither libcst nor triton, detection pauses the cyclic GC and
restores it, the walk skips kernel bodies without changing what is found, and twice the
kernels cost twice the work (benchmarks/results/lsp_latency.md has the times)."""
from __future__ import annotations

import gc
import subprocess
import sys

from kernelband import model
from kernelband.detect import detect, gc_paused

from helpers.blocked import env_without


def _loaded(tmp_path, module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(m for m in ('libcst', 'triton', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env_without(tmp_path),
                         timeout=120, check=True).stdout
    return set(out.split())


def test_the_cli_imports_no_heavy_package(tmp_path):
    assert _loaded(tmp_path, "kernelband.cli") == set()
    # the check can fail: the rules generator does import them
    assert "libcst" in _loaded(tmp_path, "kernelband.generators.rules")


def test_detection_pauses_gc_and_restores_it():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one leaves the outer pause alone
    assert gc.isenabled()
    detect("import triton\n@triton.jit\ndef k(x):\n    pass\n")
    assert gc.isenabled()
    gc.disable()
    try:
        detect("x = 1\n")
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()


def test_skipping_kernel_bodies_keeps_every_launch_and_call():
    src = ("import triton as tr\nimport triton.language as tl\n\n"
           "@tr.jit\ndef helper(x):\n    return x + 1\n\n"
           "@tr.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    v = helper(tl.load(x_ptr))\n    tl.store(x_ptr, v)\n\n"
           "def not_a_kernel(x):\n    k[(1,)](x, 1, BLOCK=8)\n    return helper\n\n"
           "def harness_k():\n    return not_a_kernel(None)\n")
    r = detect(src)
    assert [k.name for k in r.kernels] == ["helper", "k"]
    assert [s.enclosing_function for s in r.kernel("k").launch_sites] == ["not_a_kernel"]
    assert r.function("not_a_kernel").launches == ["k"] and r.function("harness_k").calls == ["not_a_kernel"]


def test_the_fast_dict_makers_match_the_generic_path():
    """SourceRange, Param, LaunchSite and KernelInfo (60,000 of them in a 1,200-kernel
    listing) have their own dict makers: the same keys, in the same order, as every field
    through the generic path."""
    import dataclasses

    r = model.SourceRange(1, 2, 3, 4)
    site = model.LaunchSite("k", r, "grid", ["x", "n"], {"BLOCK": "128"}, "wrapper")
    samples = {model.SourceRange: r, model.Param: model.Param("x", "int", "3", True), model.LaunchSite: site,
               model.KernelInfo: model.KernelInfo("k", r, r, r, [model.Param("x")], ["triton.jit"], True, False, [site])}
    assert set(samples) == set(model._FAST_TO_DICT)
    for cls, obj in samples.items():
        generic = {f.name: model._to_dict(getattr(obj, f.name)) for f in dataclasses.fields(cls)}
        assert list(model._to_dict(obj).items()) == list(generic.items()), cls
    assert samples[model.KernelInfo].to_dict() == {**model._to_dict(samples[model.KernelInfo]), "constexpr_params": []}


def _module(n: int) -> str:
    """n kernels, each with a wrapper and a harness (the shape of benchmarks/lsp_latency.py)."""
    head = "import torch\nimport triton\nimport triton.language as tl\n\n"
    block = ('@triton.jit\ndef kernel_{i}(x_ptr, n, BLOCK: tl.constexpr):\n'
             '    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n'
             '    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * {i}, mask=offs < n)\n\n\n'
             'def launch_{i}(x):\n    kernel_{i}[(triton.cdiv(x.numel(), 128),)](x, x.numel(), BLOCK=128)\n    return x\n\n\n'
             'def harness_{i}():\n    return launch_{i}(torch.randn(4099))\n\n\n')
    return head + "".join(block.format(i=i) for i in range(n))


def _lines_executed(tmp_path, n: int) -> int:
    """Python lines of kernelband/ that `kernelband list --json` runs on an n-kernel file:
    a count of work that does not depend on how busy the machine is."""
    import contextlib
    import io
    import os

    from kernelband.cli import main

    f = tmp_path / f"k{n}.py"
    f.write_text(_module(n), encoding="utf-8")
    pkg = os.path.dirname(model.__file__)
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(pkg) else None

    main(["list", str(f), "--json"])  # imports and caches warm, as in a fresh process they would be
    out = io.StringIO()
    sys.settrace(tracer)
    try:
        with contextlib.redirect_stdout(out):
            main(["list", str(f), "--json"])
    finally:
        sys.settrace(None)
    assert out.getvalue().count('"kernel": {') == n
    return count


def test_list_is_linear_in_the_file(tmp_path):
    """Twice the kernels must cost twice the Python work, not four times: a per-kernel
    look-up over every function of the file is quadratic (14 s at 600 kernels, 67 s at
    1,200)."""
    small, big = _lines_executed(tmp_path, 100), _lines_executed(tmp_path, 200)
    assert big / small < 2.15, (small, big)
