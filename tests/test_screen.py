"""The static screen of variants (DESIGN section 6, first bullet)."""
from __future__ import annotations

import textwrap

import pytest

from kernelband.screen import policy_violations, screen_variant
from helpers.paths import REPO, example_source
from tests.redteam.correct_rewrites import REWRITES

ORIG = example_source("add_scale.py")
K, H = "axpy_kernel", "harness_axpy"


def screen(variant: str, original: str = ORIG, harness: str | None = H) -> str | None:
    return screen_variant(original, variant, K, harness)


def test_original_and_legit_variant_pass():
    assert screen(ORIG) is None
    legit = ORIG.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=1024, num_warps=8)").replace(
        "mask = offsets < n_elements", "offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)\n    mask = offsets < n_elements"
    )
    assert legit != ORIG
    assert screen(legit) is None


def test_local_names_that_look_like_modules_pass():
    v = ORIG.replace("    out = torch.empty_like(x)\n", "    code, io = 1, 2\n    out = torch.empty_like(x)\n")
    assert screen(v) is None


def test_legit_variant_with_helper_and_allowed_imports_passes():
    v = ORIG.replace("import torch\n", "import math\nimport torch\nfrom triton.language.extra import libdevice\n")
    v = v.replace("\n\n@triton.jit", "\n\nCONFIGS = [1, 2]\n\n\n@triton.jit\ndef _twice(x):\n    return x * 2\n\n\n@triton.jit", 1)
    assert screen(v) is None


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda s: s.replace("import torch\n", "import os\nimport torch\n"), "imports os"),
        (lambda s: s.replace("import torch\n", "import subprocess as sp\nimport torch\n"), "imports subprocess as sp"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    open('/tmp/x', 'w').write('hi')\n    out = torch.empty_like(x)\n"), "uses open"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    eval('1')\n    out = torch.empty_like(x)\n"), "uses eval"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    __import__('os').system('true')\n    out = torch.empty_like(x)\n"), "__import__"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    getattr(torch, 'o' + 's')\n    out = torch.empty_like(x)\n"), "getattr"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    (1).__class__.__base__.__subclasses__()\n    out = torch.empty_like(x)\n"), "attribute __"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    torch.save(x, 'x.pt')\n    out = torch.empty_like(x)\n"), "torch.save"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    x.numpy().tofile('x.bin')\n    out = torch.empty_like(x)\n"), "tofile"),
        (lambda s: s.replace("import torch\n", "from socket import socket\nimport torch\n"), "imports socket from socket"),
    ],
)
def test_file_process_network_and_imports_rejected(edit, expected):
    v = edit(ORIG)
    assert v != ORIG
    reason = screen(v)
    assert reason is not None and expected in reason, reason
    assert "\n" not in reason


def test_syntax_error_rejected():
    reason = screen(ORIG.replace("def axpy(", "def axpy(("))
    assert reason and reason.startswith("variant does not parse")


def test_renamed_kernel_rejected():
    v = ORIG.replace("axpy_kernel", "axpy_kernel_v2")
    assert "no longer defined" in screen(v)
    # renamed kernel while the old one is still defined but no longer launched
    v2 = ORIG.replace("axpy_kernel[grid]", "axpy_kernel_v2[grid]").replace(
        "\n\ndef axpy(", "\n\n@triton.jit\ndef axpy_kernel_v2(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):\n    pass\n\n\ndef axpy("
    )
    assert "no longer launched" in screen(v2)


def test_kernel_without_jit_rejected():
    assert "no longer a Triton kernel" in screen(ORIG.replace("@triton.jit\n", ""))


def test_changed_wrapper_signature_rejected():
    reason = screen(ORIG.replace("def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor)", "def axpy(alpha, x, y, block=128)"))
    assert reason and "signature of wrapper axpy changed" in reason
    assert "removed" in screen(ORIG.replace("def axpy(", "def axpy2(").replace("return axpy(", "return axpy2("))


def test_modified_harness_rejected():
    v = ORIG.replace("else 50_003", "else 16")
    assert "harness harness_axpy was modified" in screen(v)
    # the same edit is not the screen's business when the harness lives elsewhere
    assert screen(v, harness=None) is None


def test_harness_redefined_or_module_state_changed_rejected():
    twice = ORIG + "\n\ndef harness_axpy():\n    return None\n"
    assert "more than once" in screen(twice)
    assert "DEVICE" in screen(ORIG.replace('DEVICE = "cuda" if', 'DEVICE = "cpu" if'))
    rebind = ORIG.replace("\n\n@triton.jit", '\n\nDEVICE = "cpu"\n\n\n@triton.jit', 1)
    assert "rebinds DEVICE" in screen(rebind)


def test_imports_the_original_already_has_are_kept_not_extended():
    orig = ORIG.replace("import torch\n", "import os\nimport torch\n").replace(
        'DEVICE = "cuda"', 'DEBUG = os.environ.get("KB_DEBUG")\nDEVICE = "cuda"'
    )
    assert screen(orig, original=orig) is None
    more = orig.replace("    out = torch.empty_like(x)\n", "    os.system('true')\n    out = torch.empty_like(x)\n")
    assert "uses os" in screen(more, original=orig)


def test_never_raises_on_garbage():
    assert screen_variant("", "", K, None)
    assert screen_variant("def (", ORIG, K, H)  # broken original: a reason, not an exception
    assert screen_variant(ORIG, "\x00", K, H)


# ----------------------------------------------------------------------------- deny by default
AXPY_BODY = "    out = torch.empty_like(x)\n"


def with_line(line: str, source: str = ORIG) -> str:
    """The original with ``line`` (indented code) added at the top of the wrapper axpy."""
    assert AXPY_BODY in source
    return source.replace(AXPY_BODY, textwrap.indent(textwrap.dedent(line), "    ") + AXPY_BODY, 1)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("t = torch\nt.empty(1)\n", "module torch as a value"),
        ("def h(m=torch):\n    return m\n", "module torch as a value"),
        ("mods = [tl]\n", "module triton.language as a value"),
        ("F = torch.nn.functional\n", "module torch.nn.functional as a value"),
        ("type(x).abs\n", "uses type"),
        ("g = hasattr\n", "uses hasattr"),
        ("torch.manual_seed(0)\n", "torch.manual_seed"),
        ("torch.compile(axpy)\n", "torch.compile"),
        ("torch.utils.collect_env.run('true')\n", "torch.utils"),
        ("torch.os.getcwd()\n", "torch.os"),
        ("torch.nn.functional.np.zeros(1)\n", "torch.nn.functional.np"),
        ("tl.core.tensor\n", "triton.language.core"),
        ("x._base\n", "private attribute _base"),
        ("out.foo = 1\n", "assignment to attribute out.foo"),
        ("del x.grad\n", "assignment to attribute x.grad"),
        ("torch.Tensor.abs = torch.Tensor.neg\n", "assignment to attribute torch.Tensor.abs"),
        ("'{0.shape}'.format(x)\n", "format field {0.shape}"),
        ("('{' + '}').format(x)\n", ".format on a computed string"),
        ("s = 'a __dict__ b'\n", "dunder text '__dict__'"),
        ("(lambda: (yield))().gi_frame\n", "attribute gi_frame"),
        ("d = dict(__builtins__=1)\n", "dunder keyword __builtins__"),
        ("id(x)\n", "builtin id"),
    ],
)
def test_deny_by_default_rejections(line, expected):
    reason = screen(with_line(line))
    assert reason is not None and expected in reason, reason
    assert "\n" not in reason and "line " in reason


@pytest.mark.parametrize(
    "line",
    [
        "n0: int = x.numel() + len(x.shape) + x.stride(0) + x.size(0)\n",
        "assert x.dtype in (torch.float32, torch.float16) and torch.float16.itemsize == 2\n",
        "y = y.contiguous().view(-1).to(x.dtype)\n",
        "z = torch.nn.functional.gelu(x).sum() + torch.where(x > 0, x, 0.0).amax()\n",
        "msg = 'n = {} ({:>8})'.format(x.numel(), 'elems')\n",
        "ok = isinstance(x, torch.Tensor) and torch.cuda.is_available() in (True, False)\n",
        "blocks = [triton.next_power_of_2(k) for k in range(1, 4)]\n",
        "tmp = {'a': 1}\ntmp['b'] = 2\n",
    ],
)
def test_tensor_ops_and_safe_builtins_pass(line):
    assert screen(with_line(line)) is None


def test_safe_imports_pass_and_others_are_new_imports():
    v = ORIG.replace("import torch\n", "import math\nfrom typing import Optional\nfrom triton.language.extra import libdevice\nimport torch\n")
    v = with_line("s: Optional[float] = math.sqrt(2.0)\n", v)
    assert screen(v) is None
    for imp, said in (("import numpy", "imports numpy"), ("import operator", "imports operator"),
                      ("from typing import get_type_hints", "imports get_type_hints from typing"),
                      ("from . import x", "imports x from ."), ("import torch.utils", "imports torch.utils"),
                      ("from triton.language import core", "imports core from triton.language")):
        reason = screen(ORIG.replace("import torch\n", imp + "\nimport torch\n"))
        assert reason and said in reason, (imp, reason)


def test_dangerous_uses_the_original_has_are_counted_per_function():
    orig = with_line("cfg = getattr(x, 'shape')\n")
    assert screen(orig, original=orig) is None
    more = with_line("cfg2 = getattr(x, 'dtype')\n", orig)
    assert "uses getattr in axpy" in screen(more, original=orig)
    moved = orig.replace("    cfg = getattr(x, 'shape')\n", "").replace(
        "def harness_axpy():\n", "def helper(x):\n    return getattr(x, 'shape')\n\n\ndef harness_axpy():\n")
    assert "uses getattr in helper" in screen(moved, original=orig)


def test_the_original_licenses_exactly_its_own_calls_anywhere():
    orig = with_line("torch.manual_seed(0)\n")
    same = orig.replace("def harness_axpy():\n", "def helper():\n    torch.manual_seed(0)\n\n\ndef harness_axpy():\n")
    assert screen(same, original=orig) is None
    assert "torch.manual_seed" in screen(same)  # not when the original lacks it
    other = same.replace("    torch.manual_seed(0)\n\n\ndef harness", "    torch.manual_seed(1)\n\n\ndef harness")
    assert "torch.manual_seed" in screen(other, original=orig)  # another call of the same target is not licensed


HOOKED = """import torch
import triton
import triton.language as tl


def _zero_out(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2, pre_hook=_zero_out)], key=["n"])
@triton.jit
def axpy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def test_the_originals_hook_keyword_licenses_only_itself_in_a_retuned_config():
    """A retuned config keeps the original's exact ``pre_hook=_zero_out``; another hook, a
    hook on a config whose original has none, or a changed hook body are refused."""
    retuned = HOOKED.replace('{"BLOCK": 64}, num_warps=2,', '{"BLOCK": 128}, num_warps=4,')
    assert screen(retuned, original=HOOKED, harness=None) is None
    added = HOOKED.replace('num_warps=2, pre_hook=_zero_out)', 'num_warps=2, pre_hook=_zero_out), '
                           'triton.Config({"BLOCK": 256}, num_warps=4, pre_hook=_zero_out)')
    assert screen(added, original=HOOKED, harness=None) is None
    other = retuned.replace("pre_hook=_zero_out", "pre_hook=print")
    assert "triton.Config(pre_hook" in screen(other, original=HOOKED, harness=None)
    post = retuned.replace("pre_hook=_zero_out", "post_hook=_zero_out")
    assert "triton.Config(post_hook" in screen(post, original=HOOKED, harness=None)
    unhooked = HOOKED.replace(", pre_hook=_zero_out", "")
    assert "triton.Config(pre_hook" in screen(HOOKED, original=unhooked, harness=None)
    body = retuned.replace('nargs["out_ptr"].zero_()', 'import os\n    os.system("id")')
    assert screen(body, original=HOOKED, harness=None) is not None
    dunder = retuned.replace("pre_hook=_zero_out", "pre_hook=_zero_out.__globals__")
    assert screen(dunder, original=HOOKED, harness=None) is not None


def test_new_classes_are_refused_original_classes_change_only_their_methods():
    cls = "\n\nclass Cfg:\n    def __init__(self, block):\n        self.block = block\n\n\n@triton.jit"
    with_class = ORIG.replace("\n\n@triton.jit", cls, 1)
    assert "new class Cfg" in screen(with_class)  # a class body is not part of the kernel language
    # an original that has the class: its __init__ may change and store on self
    changed = with_class.replace("        self.block = block\n", "        self.block = block\n        self.warps = 4\n")
    assert screen(changed, original=with_class) is None
    later = with_class.replace("        self.block = block\n", "        self.block = block\n\n    def set(self, b):\n        self.block = b\n")
    assert "assignment to attribute self.block in Cfg" in screen(later, original=with_class)
    rebind = with_class.replace("        self.block = block\n", "        self = torch.Tensor\n        self.block = block\n")
    assert "rebinding of self" in screen(rebind, original=with_class)
    based = with_class.replace("class Cfg:", "class Cfg(torch.Tensor):")
    assert "changed class Cfg" in screen(based, original=with_class)
    dunder = with_class.replace("        self.block = block\n", "        self.block = block\n\n    def __eq__(self, o):\n        return True\n")
    assert "dunder definition __eq__ in class Cfg" in screen(dunder, original=with_class)


def test_global_and_module_docstring():
    assert "global DEVICE" in screen(with_line("global DEVICE\n"))
    reworded = ORIG.replace("written the way a first version often is", "as first written")
    assert reworded != ORIG and screen(reworded) is None


def test_wildcard_namespaces_list_every_module_member():
    """triton.language, torch.nn.functional... are allowed member by member: a member
    that is itself a module (F.importlib, tl.core) must be refused, on this install too."""
    import importlib
    import types

    from kernelband.screen_policy import ALLOWED, DENIED_QUALIFIED, MODULE, NAMESPACE, chain_verdict

    for ns in (n for n, kind in ALLOWED.items() if kind == NAMESPACE):
        module = importlib.import_module(ns)
        for member in (m for m in dir(module) if not m.startswith("_")):
            value = getattr(module, member)
            status, _ = chain_verdict(f"{ns}.{member}", frozenset())
            if isinstance(value, types.ModuleType):
                allowed_sub = ALLOWED.get(f"{ns}.{member}") in (NAMESPACE, MODULE)
                assert allowed_sub or status in ("denied", "unlisted"), f"{ns}.{member} is a module"
            else:  # every other member, except the ones denied by name (inline assembly)
                assert status == "ok" or f"{ns}.{member}" in DENIED_QUALIFIED, f"{ns}.{member}: {status}"


# ----------------------------------------------------------------------------- no false rejections
def _kernel_modules() -> list[tuple[str, str, str, str]]:
    from benchmarks.suite import SUITE

    out = [(f"examples/{n}.py", k, h, (REPO / "examples" / f"{n}.py").read_text(encoding="utf-8"))
           for n, k, h in (("add_scale", "axpy_kernel", "harness_axpy"), ("matmul", "matmul_kernel", "harness_matmul"),
                           ("softmax", "softmax_kernel", "harness_softmax"))]
    out += [(f"benchmarks/suite/{e.module}.py", e.kernel, e.harness, e.path.read_text(encoding="utf-8")) for e in SUITE]
    return out


MODULES = _kernel_modules()


@pytest.mark.parametrize("name, kernel, harness, source", MODULES, ids=[m[0] for m in MODULES])
def test_every_kernel_module_and_its_generated_variants_pass(name, kernel, harness, source):
    from kernelband.generators.rules import RulesGenerator
    from kernelband.model import Variant

    assert screen_variant(source, source, kernel, harness) is None
    variants = RulesGenerator(seed=0, enumerate_limit=12).enumerate_space(Variant(source), kernel)
    assert variants
    for v in variants:
        assert screen_variant(source, v.source, kernel, harness) is None, v.description


@pytest.mark.parametrize("rewrite", REWRITES, ids=lambda r: r.name)
def test_correct_rewrites_pass(rewrite):
    assert screen_variant(rewrite.original(), rewrite.build(), rewrite.kernel, rewrite.harness) is None


def test_false_rejection_rate_is_zero():
    rejected = [r.name for r in REWRITES if screen_variant(r.original(), r.build(), r.kernel, r.harness)]
    assert len(REWRITES) >= 20 and rejected == []


@pytest.mark.parametrize(
    "line",
    [
        "tl = '{0.x}'\ntl.format(x)\n",
        "for torch in [x]:\n    pass\n",
        "def inner(triton):\n    return triton\n",
        "try:\n    pass\nexcept ValueError as tl:\n    pass\n",
    ],
)
def test_imported_names_may_not_be_shadowed(line):
    """A local named like an import would be checked as the import (tl.format looks like
    triton.language.format): every such binding is refused."""
    reason = screen(with_line(line))
    reasons = [reason, *policy_violations(ORIG, with_line(line))]
    assert reason and any("rebinding of imported name" in r for r in reasons), reasons


def test_module_level_alias_in_the_original_is_resolved():
    orig = ORIG.replace('DEVICE = "cuda"', 'F = torch.nn.functional\nDEVICE = "cuda"')
    assert screen(orig, original=orig) is None
    assert screen(with_line("z = F.gelu(x)\n", orig), original=orig) is None
    reason = screen(with_line("F.np.lib.format.open_memmap('m', mode='w+', shape=(1,))\n", orig), original=orig)
    assert reason and "torch.nn.functional.np" in reason
    # an import that gives an imported name a second meaning is refused too
    assert "rebinding of imported name tl" in screen(ORIG.replace("import torch\n", "import torch\nimport torch as tl\n"))


def test_triton_runtime_device_queries_only():
    ok = "props = triton.runtime.driver.active.utils.get_device_properties(0)\n"
    assert screen(with_line(ok)) is None
    for line, what in (("triton.runtime.driver.active.utils.load_binary\n", "triton.runtime"),
                       ("triton.runtime.cache.get_cache_manager\n", "triton.runtime"),
                       ("d = triton.runtime.driver.active\n", "triton.runtime"),
                       ("functools.reduce\n", "functools.reduce")):
        orig = ORIG.replace("import torch\n", "import functools\nimport torch\n")
        reason = screen(with_line(line, orig), original=orig)
        assert reason and what in reason, (line, reason)


def test_module_level_builtins_may_not_be_shadowed():
    for extra in ("def len(x):\n    return 3\n", "range = list\n", "class print:\n    pass\n"):
        v = ORIG.replace("\n\n@triton.jit", "\n\n" + extra + "\n\n@triton.jit", 1)
        reason = screen(v)
        assert reason and "module-level rebinding of builtin" in reason, (extra, reason)
    assert screen(with_line("len_ = len(x)\nmax_ = max(1, 2)\n")) is None


def test_tma_descriptors_allowed_rest_of_triton_tools_denied():
    v = ORIG.replace("import torch\n", "import torch\nfrom triton.tools.tensor_descriptor import TensorDescriptor\n")
    assert screen(with_line("d = TensorDescriptor.from_tensor(x, [128])\n", v)) is None
    reason = screen(ORIG.replace("import torch\n", "import torch\nfrom triton.tools import disasm\n"))
    assert reason and "imports disasm from triton.tools" in reason


def test_original_classes_keep_their_bases_and_dunders_but_gain_none():
    orig = ORIG.replace("\n\n@triton.jit", "\n\nclass Twice(torch.autograd.Function):\n    @staticmethod\n"
                        "    def forward(ctx, x):\n        return x * 2\n\n    def __repr__(self):\n        return 'T'\n\n\n@triton.jit", 1)
    assert screen(orig, original=orig) is None
    # the same name nested elsewhere with a base, or a new dunder in the original class
    nested = with_line("class Twice(torch.Tensor):\n    pass\n", orig)
    assert "class Twice(torch.Tensor) in axpy" in screen(nested, original=orig)
    more = orig.replace("    def __repr__(self):", "    def __eq__(self, o):\n        return True\n\n    def __repr__(self):")
    assert "dunder definition __eq__ in class Twice" in screen(more, original=orig)
