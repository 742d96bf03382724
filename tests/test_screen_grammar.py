"""The screen as a grammar (issue 26): the executed text is the screened text, changed
code is a small language, and the original licenses exact call targets only. Each rule
is shown with the attack it stops and the legitimate code it keeps."""
from __future__ import annotations

import codecs
import importlib.util
import textwrap

import pytest

from helpers.paths import REPO, example_source
from kernelband.screen import SourceRefused, canonical_source, policy_violations, screen_variant
from kernelband.screen_policy import EXCLUDED_MEMBERS, HOST_VALUE_ATTRIBUTES, KERNEL_VALUE_ATTRIBUTES

ORIG = example_source("add_scale.py")
K, H = "axpy_kernel", "harness_axpy"
BODY = "    out = torch.empty_like(x)\n"
ROUND3 = REPO / "tests" / "redteam" / "round3" / "originals"


def screen(variant: str, original: str = ORIG) -> str | None:
    return screen_variant(original, variant, K, H)


def in_wrapper(code: str, source: str = ORIG) -> str:
    assert BODY in source
    return source.replace(BODY, textwrap.indent(textwrap.dedent(code), "    ") + BODY, 1)


def reasons(variant: str, original: str = ORIG) -> list[str]:
    first = screen(variant, original)
    return [first or "", *policy_violations(original, variant)]


# --------------------------------------------------------------------------- class 2: bytes
COOKIES = ["utf-7", "U7", "utf_7", "unicode_escape", "raw_unicode_escape", "latin-1", "cp1252", "utf-16"]


@pytest.mark.parametrize("cookie", COOKIES)
@pytest.mark.parametrize("line", ["# -*- coding: {} -*-\n", "#!/usr/bin/env python\n# vim: set fileencoding={} :\n",
                                  "# this file is written in coding={}\n"])
def test_any_coding_cookie_but_utf8_is_refused(cookie: str, line: str):
    text = line.format(cookie) + ORIG
    got = canonical_source(text)
    assert isinstance(got, SourceRefused) and "coding cookie" in got.reason
    reason = screen(text)
    assert reason and reason.startswith("variant refused: coding cookie"), reason


@pytest.mark.parametrize("cookie", ["utf-8", "UTF8", "utf_8", "u8"])
def test_utf8_cookies_pass_and_the_text_is_what_the_importer_reads(cookie: str, tmp_path):
    text = f"# -*- coding: {cookie} -*-\r\n" + ORIG.replace("\n", "\r\n")
    got = canonical_source(text)
    assert isinstance(got, str) and "\r" not in got
    path = tmp_path / "m.py"
    path.write_text(got, encoding="utf-8")
    assert importlib.util.decode_source(path.read_bytes()) == got
    assert screen(text) is None


def test_a_utf7_comment_that_would_run_is_refused_not_parsed_as_a_comment():
    payload = "# -*- coding: utf-7 -*-\nx = 1\n# +AAo-y = 2\n"
    assert codecs.decode(payload.encode(), "utf-7").count("\ny = 2") == 1  # what the importer would run
    assert isinstance(canonical_source(payload), SourceRefused)


def test_bom_bytes_nul_and_surrogates():
    assert canonical_source("\ufeff" + ORIG) == ORIG  # the importer drops a BOM too
    assert isinstance(canonical_source("\ufeff# coding: latin-1\nx = 1\n"), SourceRefused)
    assert isinstance(canonical_source(b"x = '\xff'\n"), SourceRefused)  # not UTF-8
    assert canonical_source(ORIG.encode("utf-8")) == ORIG
    assert isinstance(canonical_source("x = 1\0\n"), SourceRefused)
    assert isinstance(canonical_source("x = '\ud800'\n"), SourceRefused)
    assert canonical_source("x = 1\n\n# coding: utf-7 (line 3: not a cookie)\n") is not None
    assert isinstance(canonical_source("x = 1\n\n# coding: utf-7\n"), str)


# --------------------------------------------------------------------------- class 1: attributes by name
@pytest.mark.parametrize(
    "code, expected",
    [
        ("match x:\n    case object(shape=s):\n        pass\n", "match statement"),  # no dunder, still no match
        ("match axpy:\n    case object(__globals__={'torch': t}):\n        pass\n", "match statement"),
        ("y = y.contiguous()\nnp.zeros(1)\n", "uses name np"),  # neither imported, bound nor a builtin
        ("importlib.import_module('os')\n", "uses name importlib"),
        ("t = getattr(x, 'shape')\n", "uses getattr"),
        ("f = hasattr\n", "uses hasattr"),
        ("d = vars(x)\n", "uses vars"),
        ("c = type(x)\n", "uses type"),
        ("s = format(x, '')\n", "uses builtin format"),
        ("s = str.format('{0.shape}', x)\n", ".format on a computed string"),
        ("s = '{a.shape}'.format_map({'a': x})\n", "format field {a.shape}"),
        ("t = x.T.data.numpy().tofile('m')\n", "attribute tofile"),
        ("t = x.untyped_storage()\n", "attribute untyped_storage"),
        ("x.register_hook(print)\n", "attribute register_hook"),
        ("f = axpy_kernel.fn\n", "attribute fn"),
        ("axpy_kernel.add_pre_run_hook(print)\n", "attribute add_pre_run_hook"),
        ("g = (lambda: 0).f_globals\n", "attribute f_globals"),
        ("n = x.__class__\n", "dunder attribute __class__"),
        ("n = __name__\n", "dunder name __name__"),
        ("s = 'a' + '__globals__'\n", "dunder text '__globals__'"),
        ("t = torch.Tensor.storage\n", "torch.Tensor.storage"),
    ],
)
def test_attribute_access_by_name_and_unexplained_names_are_refused(code: str, expected: str):
    got = reasons(in_wrapper(code))
    assert any(expected in r for r in got), got


def test_string_named_attribute_helpers_are_refused_even_when_the_original_imports_them():
    orig = ORIG.replace("import torch\n", "import functools\n\nimport torch\n")
    for code, expected in (("functools.wraps(axpy, assigned=('shape',))(print)\n", "functools.wraps"),
                           ("functools.update_wrapper(print, axpy)\n", "functools.update_wrapper"),
                           ("functools.reduce(max, [1, 2])\n", "functools.reduce")):
        got = reasons(in_wrapper(code, orig), orig)
        assert any(expected in r for r in got), (code, got)
    assert screen(in_wrapper("f = functools.partial(max, 1)\n", orig), orig) is None
    # a new import of functools is a new import
    assert "imports functools" in screen(ORIG.replace("import torch\n", "import functools\nimport torch\n"))


# --------------------------------------------------------------------------- the grammar's statements
@pytest.mark.parametrize(
    "code, expected",
    [
        ("class Box:\n    pass\n", "class Box"),
        ("try:\n    n = 1\nexcept ValueError:\n    pass\n", "try statement"),
        ("global DEVICE\n", "global DEVICE"),
        ("def gen():\n    yield 1\n", "uses yield"),
        ("import math\n", "imports math"),  # inside a function, even a safe module
        ("@staticmethod\ndef f():\n    return 1\n", "decorator @staticmethod"),
        ("del x.grad\n", "assignment to attribute x.grad"),
        ("out = x; out.foo = 1\n", "assignment to attribute out.foo"),
        ("torch.float16 = None\n", "assignment to attribute torch.float16"),
        ("cfg = triton.Config({'BLOCK_SIZE': 128}, pre_hook=print)\n", "triton.Config(pre_hook"),
        ("cfg = triton.Config({'BLOCK_SIZE': 128}, 4, 2, 1, None, print)\n", "6 positional"),
        ("cfg = triton.Config(**{'kwargs': {}})\n", "triton.Config(**"),
    ],
)
def test_statements_outside_the_grammar_are_refused(code: str, expected: str):
    got = reasons(in_wrapper(code))
    assert any(expected in r for r in got), got


@pytest.mark.parametrize(
    "decorator, expected",
    [
        ("@triton.autotune(configs=[triton.Config({'BLOCK_SIZE': 128})], key=['n_elements'], pre_hook=print)\n",
         "triton.autotune(pre_hook"),
        ("@triton.autotune(configs=[], key=[], do_bench=print)\n", "triton.autotune(do_bench"),
        ("@torch.compile\n", "decorator @torch.compile"),
    ],
)
def test_only_triton_decorators_with_their_documented_configuration(decorator: str, expected: str):
    v = ORIG.replace("@triton.jit\ndef axpy_kernel", decorator + "@triton.jit\ndef axpy_kernel")
    got = reasons(v)
    assert any(expected in r for r in got), got
    jit = ORIG.replace("@triton.jit\ndef axpy_kernel", "@triton.jit(launch_metadata=print)\ndef axpy_kernel")
    assert any("triton.jit(launch_metadata" in r for r in reasons(jit))


def test_kernel_code_is_triton_code():
    for body, expected in (("    h = x_ptr.handle\n", "attribute handle"),
                           ("    d = {'a': 1}\n", "a dict in a Triton kernel"),
                           ("    f = lambda v: v\n", "a lambda in a Triton kernel"),
                           ("    def inner():\n        return 1\n", "functiondef statement in a Triton kernel"),
                           ("    with tl.static_range(1):\n        pass\n", "with statement in a Triton kernel"),
                           ("    t = tl.inline_asm_elementwise('mov.u32 $0, %globaltimer_lo;', '=r', [], dtype=tl.int32, "
                            "is_pure=False, pack=1)\n", "triton.language.inline_asm_elementwise")):
        v = ORIG.replace("    pid = tl.program_id(axis=0)\n", "    pid = tl.program_id(axis=0)\n" + body)
        got = reasons(v)
        assert any(expected in r for r in got), (body, got)
    fine = ORIG.replace("    mask = offsets < n_elements\n", "    mask = offsets < n_elements\n"
                        "    LOG2E: tl.constexpr = 1.4426950408889634\n"
                        "    scale = tl.exp2(alpha * LOG2E) if alpha > 0 else alpha.to(tl.float32)\n")
    assert screen(fine) is None


def test_host_code_that_kernels_and_wrappers_need_passes():
    code = ("if x.numel() == 0:\n    return torch.empty_like(x)\n"
            "sizes = {2: 4096, 4: 2048}\n"
            "block = sizes.get(x.element_size(), 1024)\n"
            "ok = all(t.is_contiguous() for t in (x, y)) and isinstance(alpha, float)\n"
            "assert ok or True, f'x is {tuple(x.shape)} {x.dtype!r}'\n"
            "with torch.no_grad():\n    scale = torch.finfo(x.dtype).eps * 0\n"
            "for i, s in enumerate(x.stride()):\n    if s < 0:\n        raise ValueError(f'negative stride {s} at {i}')\n"
            "grid_fn = lambda meta, n=x.numel(): (triton.cdiv(n, meta['BLOCK_SIZE']),)\n"
            "props = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4\n"
            "def local_helper(v: torch.Tensor) -> int:\n    return v.numel() // max(block, 1)\n"
            "count = local_helper(x) + (w := 1)\n")
    assert screen(in_wrapper(code)) is None


# --------------------------------------------------------------------------- class 3: licences
def _original(name: str) -> str:
    return (ROUND3 / name).read_text(encoding="utf-8")


def test_a_licence_is_the_exact_call_not_its_prefix():
    orig = _original("axpy_env_wrapper.py")  # the wrapper calls os.environ.get("KB_DEBUG")
    changed = orig.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=512, num_warps=4)")
    assert changed != orig and screen(changed, orig) is None  # the wrapper changed, the licensed call kept
    for new, what in (('os.environ.get("OPENAI_API_KEY")', "os.environ.get"), ('os.environ["KB_DEBUG"]', "os.environ"),
                      ('os.getenv("KB_DEBUG")', "os.getenv"), ('os.system("true")', "os.system")):
        v = changed.replace('os.environ.get("KB_DEBUG")', new)
        got = screen(v, orig)
        assert got and what in got, (new, got)
    # the same call moved to a new helper is still that call; reading a local is not
    moved = changed.replace("\n\ndef axpy(", '\n\ndef _debug() -> bool:\n    return bool(os.environ.get("KB_DEBUG"))\n\n\ndef axpy(')
    assert screen(moved, orig) is None
    local = changed.replace('    if os.environ.get("KB_DEBUG"):\n',
                            '    KB_DEBUG = "OPENAI_API_KEY"\n    if os.environ.get(KB_DEBUG):\n')
    assert "os.environ.get" in screen(local, orig)


def test_a_torch_backends_licence_is_that_statement():
    orig = _original("axpy_backends.py")  # torch.backends.cudnn.allow_tf32 = False in the wrapper
    changed = orig.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=512)")
    assert screen(changed, orig) is None
    for line, what in (("torch.backends.cudnn.allow_tf32 = True", "torch.backends"),
                       ("torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends"),
                       ('torch.backends.cudnn.os.system("true")', "torch.backends.cudnn.os.system")):
        v = changed.replace("torch.backends.cudnn.allow_tf32 = False", line)
        got = screen(v, orig)
        assert got and what in got, (line, got)


def test_unchanged_definitions_of_the_original_are_trusted_as_they_are():
    orig = in_wrapper("shape = getattr(x, 'shape')\n")  # the user's own dynamic access
    assert screen(orig, orig) is None
    tuned = orig.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=256)")
    assert "uses getattr" in screen(tuned, orig)  # a changed wrapper: the call reads a local (x)


# --------------------------------------------------------------------------- the allow-lists vs the installed versions
def _public(*types: object) -> set[str]:
    return {n for t in types for n in dir(t) if not n.startswith("_")}


def test_host_value_attributes_are_attributes_of_the_value_types():
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    props = set("multi_processor_count total_memory name major minor L2_cache_size warp_size "
                "max_threads_per_multi_processor regs_per_multiprocessor shared_memory_per_block "
                "shared_memory_per_block_optin shared_memory_per_multiprocessor uuid".split())
    config = {"kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "all_kwargs"}
    known = _public(torch.Tensor, torch.dtype, torch.device, torch.Size, torch.finfo, torch.iinfo, str, int, float,
                    bool, complex, list, tuple, dict, set, frozenset, slice, range, TensorDescriptor, triton.Config)
    known |= props | config | {"base", "shape", "strides", "block_shape"}
    assert HOST_VALUE_ATTRIBUTES - known == set()
    assert HOST_VALUE_ATTRIBUTES & EXCLUDED_MEMBERS == set()
    for hook in ("register_hook", "untyped_storage", "share_memory_", "apply_"):
        assert hook in _public(torch.Tensor) and hook not in HOST_VALUE_ATTRIBUTES


def test_kernel_value_attributes_are_attributes_of_triton_values():
    import triton.language as tl

    known = _public(tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr)
    known |= set("dtype shape type numel element_ty primitive_bitwidth int_bitwidth fp_mantissa_width exponent_bias "
                 "value address_space block_shape name".split())
    assert KERNEL_VALUE_ATTRIBUTES - known == set()
    assert "handle" not in KERNEL_VALUE_ATTRIBUTES and KERNEL_VALUE_ATTRIBUTES & EXCLUDED_MEMBERS == set()


def test_the_original_module_statements_keep_their_order():
    orig = ORIG.replace('DEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
                        'DEVICE = "cpu"\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n')
    swapped = orig.replace('DEVICE = "cpu"\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
                           'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"\nDEVICE = "cpu"\n')
    assert "was moved" in screen(swapped, orig)
    assert screen(orig.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=256)"), orig) is None


def test_imports_never_bind_a_dunder_name():
    for line in ("import math as __builtins__\n", "from math import sqrt as __loader__\n"):
        got = reasons(ORIG.replace("import torch\n", line + "import torch\n"))
        assert any("dunder access" in r for r in got), (line, got)


# --------------------------------------------------------------------------- facts the judge holds fixed
# Every call the judge makes passes fresh leaf tensors that need no gradient, in pageable
# memory, outside inference mode: a branch on those facts runs only for users. Changed
# code may read them only where the original reads the same member.
PROVENANCE = ["requires_grad", "is_leaf", "grad", "grad_dtype", "retains_grad", "output_nr", "is_pinned()",
              "is_shared()", "is_inference()"]


@pytest.mark.parametrize("member", PROVENANCE)
def test_a_branch_on_what_the_judge_never_varies_is_refused(member: str):
    variant = in_wrapper(f"if x.{member}:\n    n = n - 1  # only a user's tensors take this branch\n")
    reason = screen(variant)
    assert reason and f"reads {member.rstrip('()')}" in reason and "never vary" in reason, reason
    # hidden behind another name or a call's result: the same member
    variant = in_wrapper(f"t = x.view(-1)\nif t.{member}:\n    n = n - 1\n")
    assert screen(variant), member


def test_a_provenance_member_the_original_reads_stays_allowed():
    original = in_wrapper("assert not x.requires_grad, 'no autograd here'\n")
    variant = in_wrapper("assert not x.requires_grad, 'no autograd here'\nassert not y.requires_grad\n")
    assert screen(variant, original) is None
    assert screen(in_wrapper("assert not x.is_leaf\n"), original)  # another member is no licence


# Every call the judge makes runs on its worker's one visible device, index 0: code that
# depends on which device (an early return off device 0, an output made on the current
# device instead of the input's) is never tested for a user's other GPUs. Changed code may
# read or choose the device by number only where the original does the same.
DEVICE_BY_NUMBER = {
    "get_device": "if x.get_device() != 0:\n    return x\n",
    "index": "if x.device.index:\n    n = n - 1\n",
    "index behind a name": "d = x.device\nk = d.index\n",
    "current_device": "if torch.cuda.current_device() != 0:\n    n = n - 1\n",
    "device_count": "if torch.cuda.device_count() > 1:\n    n = n - 1\n",
    "set_device": "torch.cuda.set_device(0)\n",
    "torch.cuda.device(<number>)": "with torch.cuda.device(0):\n    y = torch.empty_like(x)\n",
    "get_current_device": "if triton.runtime.driver.active.get_current_device():\n    n = n - 1\n",
    "'cuda:0'": "y = torch.empty(x.shape, device='cuda:0')\n",
    "' cuda : 1 '": "y = x.to(' cuda : 1 ')\n",
    "torch.device(type, index)": "y = torch.empty(x.shape, device=torch.device('cuda', 0))\n",
    "torch.device(index=)": "y = torch.empty(x.shape, device=torch.device('cuda', index=0))\n",
    "device=<number>": "y = torch.empty(x.shape, device=0)\n",
    "cuda(<number>)": "y = x.cuda(0)\n",
    "to(<number>)": "y = x.to(0)\n",
    "get_device_properties(<number>)": "sms = torch.cuda.get_device_properties(0).multi_processor_count\n",
}


@pytest.mark.parametrize("case", sorted(DEVICE_BY_NUMBER))
def test_code_that_depends_on_which_device_is_refused(case: str):
    reason = screen(in_wrapper(DEVICE_BY_NUMBER[case]))
    assert reason and "device by number" in reason and "index 0" in reason, (case, reason)


def test_the_device_of_the_inputs_and_a_list_index_stay_allowed():
    for code in ("y = torch.empty(x.shape, device=x.device, dtype=x.dtype)\n",
                 "y = torch.empty(x.shape, device='cuda' if x.is_cuda else 'cpu')\n",
                 "k = [1, 2, 3].index(2)\n",
                 "with torch.cuda.device(x.device):\n    y = torch.empty_like(x)\n",  # the inputs' device: right
                 "sms = torch.cuda.get_device_properties(x.device).multi_processor_count\n"):
        assert screen(in_wrapper(code)) is None, code


def test_a_device_number_the_original_uses_stays_allowed():
    original = in_wrapper("torch.cuda.set_device(x.get_device())\n")
    variant = in_wrapper("torch.cuda.set_device(x.get_device())\nm = n\n")
    assert screen(variant, original) is None
    assert screen(in_wrapper("torch.cuda.set_device(x.get_device())\nk = torch.cuda.device_count()\n"), original)


# The device's number read without naming it: its text ("cuda:0" on every call of the
# judge) parsed, compared or hashed. Changed code may turn a device into text only where
# the original does the same.
DEVICE_AS_TEXT = {
    "str and compare": "if str(x.device) != 'cuda' + ':0':\n    return x\n",
    "str, last character": "k = int(str(x.device)[-1])\n",
    "repr": "if repr(x.device).endswith('0)'):\n    n = n - 1\n",
    "f-string": "if f'{x.device}'[-1] != chr(48):\n    n = n - 1\n",
    "format template": "s = '{}'.format(x.device)\n",
    "percent template": "s = '%s' % x.device\n",
    "percent tuple": "s = '%s %s' % (n, x.device)\n",
    "hash": "if hash(x.device) % 2:\n    n = n - 1\n",
    "behind a name": "d = x.device\ne = d\nif str(e)[-1] != chr(48):\n    n = n - 1\n",
    "walrus": "if (d := x.device) is not None and str(d)[-1] != chr(48):\n    n = n - 1\n",
    "torch.device value": "s = str(torch.device(x.device))\n",
}
DEVICE_RULE = "allowed only where the original does the same"


def test_a_torch_device_under_an_import_alias_is_a_device_too():
    reason = screen("import torch as th\n" + in_wrapper("s = str(th.device('cuda'))\n"))
    assert reason and "turns a device into text" in reason, reason


def test_a_device_through_builtins_off_the_allow_list_is_refused_too():
    for code in ("s = format(x.device)\n", "s = ascii(x.device)\n"):
        assert screen(in_wrapper(code)), code


@pytest.mark.parametrize("case", sorted(DEVICE_AS_TEXT))
def test_a_device_turned_into_text_is_refused(case: str):
    reason = screen(in_wrapper(DEVICE_AS_TEXT[case]))
    what = "hashes a device" if case == "hash" else "turns a device into text"
    assert reason and what in reason and DEVICE_RULE in reason, (case, reason)


# The same device laundered before it becomes text, a key or a branch: a device may go only
# where it places tensors (device=, .to(), torch.cuda.device...), is compared with another
# device, gives its .type, or is bound to a plain name; anything else is a use of it.
DEVICE_LAUNDERED = {
    "a list, then its item": "ds = [x.device]\nk = int(str(ds[0])[-1])\n",
    "a tuple, then an f-string of its item": "t = (x.device, 1)\ns = f'{t[0]}'\n",
    "a dict literal, then its item": "s = str({'d': x.device}['d'])\n",
    "a local helper": "def name(v):\n    return str(v)\ns = name(x.device)\n",
    "a local helper's device= parameter": "def name(device):\n    return str(device)\ns = name(device=x.device)\n",
    "a ** mapping into a local helper": "def name(device):\n    return str(device)\ns = name(**{'device': x.device})\n",
    "a lambda": "name = lambda v: str(v)\ns = name(x.device)\n",
    "a lambda called in place": "s = (lambda v: f'{v}')(x.device)\n",
    "a lambda default": "name = lambda v=x.device: str(v)\ns = name()\n",
    "a lambda that returns it": "for d in map(lambda t: t.device, (x, y)):\n    s = str(d)\n",
    "a conditional expression": "d = x.device if n else y.device\ns = str(d)\n",
    "an or": "d = x.device or None\ns = repr(d)\n",
    "tuple unpacking": "d, m = x.device, 3\ns = str(d)\n",
    "starred unpacking": "d, *rest = x.device, 1, 2\ns = str(d)\n",
    "a for loop over a tuple": "for d in (x.device,):\n    s = str(d)\n",
    "with ... as": "with x.device as d:\n    s = str(d)\n",
    "a comprehension variable": "s = ''.join([str(d) for d in [x.device]])\n",
    "a comprehension condition": "k = [t for t in (x, y) if hash(t.device) % 2]\n",
    "an annotated name": "d: torch.device = x.device\ns = str(d)\n",
    "an augmented assignment": "s = ''\ns += str(x.device)\n",
    "a walrus in a comprehension": "k = [(d := x.device) for _ in range(1)]\ns = str(d)\n",
    "dict(device=...), then its item": "s = str(dict(device=x.device)['device'])\n",
    "a {'device': ...} mapping, then its item": "kw = {'device': x.device}\ns = f\"{kw['device']}\"\n",
    "the device of a moved tensor": "s = str(x.to(y.dtype).device)\n",
    "Triton's active device": "d = triton.runtime.driver.active.get_active_torch_device()\ns = str(d)\n",
    "a dict key": "seen = {}\nseen[x.device] = 1\n",
    "stored into a dict": "seen = {}\nseen['d'] = x.device\ns = str(seen['d'])\n",
    "a branch on an item's text": "if str([x.device][0]).endswith('0'):\n    n = n - 1\n",
    "print": "print(x.device)\n",
    "returned": "return x.device\n",
    "a tuple to hash": "k = hash((x.device, 1)) % 2\n",
}


@pytest.mark.parametrize("case", sorted(DEVICE_LAUNDERED))
def test_a_laundered_device_is_refused(case: str):
    reason = screen(in_wrapper(DEVICE_LAUNDERED[case]))
    assert reason and "a device" in reason and DEVICE_RULE in reason, (case, reason)


# A device handed to a plain function of the module is followed into it: allowed where the
# parameter goes only where the allow-list holds (an honest helper counting SMs or making a
# buffer), refused where the helper does anything else with it, or where which function
# the call reaches, or which parameter the device binds, is not sure.
HELPERS_ALLOWED = {
    "an SM count": ("def _sm_count(device):\n    return torch.cuda.get_device_properties(device).multi_processor_count\n",
                    "sms = _sm_count(x.device)\n"),
    "a buffer, positionally": ("def _buffer(n, device):\n    return torch.empty(n, device=device)\n",
                               "tmp = _buffer(n, x.device)\n"),
    "a buffer, by keyword": ("def _buffer(n, device=None):\n    return torch.empty(n, device=device)\n",
                             "tmp = _buffer(n, device=x.device)\n"),
    "through a second helper": ("def _props(device):\n    return torch.cuda.get_device_properties(device)\n\n\n"
                                "def _sm_count(device):\n    return _props(device).multi_processor_count\n",
                                "sms = _sm_count(x.device)\n"),
    "its type": ("def _is_cuda(device):\n    return device.type == 'cuda'\n", "ok = _is_cuda(x.device)\n"),
    "a truth test (a device is always true)": ("def _flag(device):\n    if device:\n        return 1\n    return 0\n",
                                               "k = _flag(x.device)\n"),
    "a starred call": ("def _sm_count(device):\n    return torch.cuda.get_device_properties(device).multi_processor_count\n",
                       "sms = _sm_count(*[x.device])\n"),
}
HELPERS_REFUSED = {
    "text of it": ("def _name(device):\n    return str(device)\n", "s = _name(x.device)\n"),
    "returns it": ("def _same(device):\n    return device\n", "s = f'{_same(x.device)}'\n"),
    "branches on its text": ("def _flag(device):\n    if repr(device)[-2] == '0':\n        return 1\n    return 0\n",
                             "k = _flag(x.device)\n"),
    "into a second helper that makes text": ("def _name(device):\n    return repr(device)\n\n\n"
                                             "def _outer(device):\n    return _name(device)\n",
                                             "s = _outer(x.device)\n"),
    "recursive": ("def _loop(device, k):\n    return _loop(device, k - 1) if k else 0\n",
                  "k = _loop(x.device, 2)\n"),
    "rebound after its def": ("def _sm_count(device):\n    return torch.cuda.get_device_properties(device).multi_processor_count\n"
                              "\n\n_sm_count = str\n", "sms = _sm_count(x.device)\n"),
    "decorated": ("@functools.lru_cache\ndef _sm_count(device):\n"
                  "    return torch.cuda.get_device_properties(device).multi_processor_count\n",
                  "sms = _sm_count(x.device)\n"),
    "into *args": ("def _name(*devices):\n    return str(devices[0])\n", "s = _name(x.device)\n"),
    "into **kwargs": ("def _name(**kw):\n    return str(kw['d'])\n", "s = _name(d=x.device)\n"),
    "a starred call": ("def _name(device, n):\n    return len(str(device)) + n\n", "k = _name(*[x.device], 1)\n"),
    "a starred call reaching *args": ("def _name(n, *rest):\n    return len(str(rest)) + n\n",
                                      "k = _name(*[1, x.device])\n"),
    "stored in a global": ("_SEEN = []\n\n\ndef _keep(device):\n    global _SEEN\n    _SEEN = device\n    return 0\n",
                           "k = _keep(x.device)\n"),
    "into a container": ("def _keep(device, seen):\n    seen.append(device)\n    return 0\n",
                         "k = _keep(x.device, [])\n"),
    "rebound by an except": ("def _sm_count(device):\n"
                             "    return torch.cuda.get_device_properties(device).multi_processor_count\n\n\n"
                             "try:\n    import math\nexcept ImportError as _sm_count:\n    pass\n",
                             "sms = _sm_count(x.device)\n"),
    "declared global elsewhere": ("def _sm_count(device):\n"
                                  "    return torch.cuda.get_device_properties(device).multi_processor_count\n\n\n"
                                  "def _swap():\n    global _sm_count\n    _sm_count = str\n",
                                  "sms = _sm_count(x.device)\n"),
}
# the grammar refuses these in changed code: the helper is the original's, the call the variant's
_IN_THE_ORIGINAL = ("decorated", "stored in a global", "rebound by an except", "declared global elsewhere")


def _with_helper(helper: str, call: str) -> str:
    module = ORIG.replace("def axpy(", helper + "\n\ndef axpy(", 1)
    if "functools" in helper:
        module = "import functools\n" + module
    return in_wrapper(call, module)


@pytest.mark.parametrize("case", sorted(HELPERS_ALLOWED))
def test_a_device_given_to_a_helper_that_only_places_tensors_is_allowed(case: str):
    assert screen(_with_helper(*HELPERS_ALLOWED[case])) is None, case


@pytest.mark.parametrize("case", sorted(HELPERS_REFUSED))
def test_a_device_given_to_a_helper_that_does_more_is_refused(case: str):
    helper, call = HELPERS_REFUSED[case]
    variant = _with_helper(helper, call)
    original = _with_helper(helper, "") if case in _IN_THE_ORIGINAL else ORIG
    reason = screen(variant, original)
    assert reason and ("passes a device to" in reason or "puts a device in a container" in reason), (case, reason)


def test_a_device_bound_at_module_level_is_a_device_in_every_definition():
    module = ORIG.replace("def axpy(", "_DEV = torch.device('cuda')\n\n\ndef axpy(")
    reason = screen(in_wrapper("s = str(_DEV)\n", module))
    assert reason and "turns a device into text (str(_DEV))" in reason, reason
    assert screen(in_wrapper("out2 = torch.empty(n, device=_DEV)\n", module)) is None


def test_a_device_named_by_a_string_is_refused_by_the_grammar_first():
    for code, what in (("s = str(getattr(x, 'device'))\n", "uses getattr"),
                       ("s = str(x.__getattribute__('device'))\n", "dunder attribute __getattribute__")):
        got = reasons(in_wrapper(code))
        assert what in got[0], (code, got)
    assert any("turns a device into text" in r for r in reasons(in_wrapper("s = str(getattr(x, 'device'))\n")))


DEVICE_PLACES = [
    "y2 = torch.empty_like(x)\n",
    "y2 = y.to(x.device)\n",
    "y2 = y.to(device=x.device, dtype=x.dtype, non_blocking=True)\n",
    "y2 = x.new_zeros(x.shape, device=x.device)\n",
    "assert x.device == y.device\n",
    "assert x.device == y.device, f'inputs on {x.device} and {y.device}'\n",
    "if x.device != y.device:\n    raise ValueError(f'x is on {x.device}, y on {y.device}')\n",
    "if x.device.type == 'cuda':\n    n = n + 0\n",
    "if x.device is not None and x.device.type != 'cpu':\n    n = n + 0\n",
    "with torch.cuda.device(x.device):\n    y2 = torch.empty_like(x)\n",
    "with torch.device(x.device):\n    y2 = torch.empty(n)\n",
    "cap = torch.cuda.get_device_capability(x.device)\nbig = cap[0] >= 8\n",
    "torch.cuda.synchronize(x.device)\n",
    "dtype, device = x.dtype, x.device\ny2 = torch.empty(n, dtype=dtype, device=device)\n",
    "device = x.device if x.is_cuda else torch.device('cpu')\ny2 = torch.zeros(n, device=device)\n",
    "kw = {'device': x.device, 'dtype': x.dtype}\ny2 = torch.zeros(n, **kw)\n",
    "kw = dict(device=x.device, dtype=x.dtype)\ny2 = torch.zeros(n, **kw)\n",
    "ok = all(t.device == x.device for t in (x, y))\n",
    "for t in (x, y):\n    assert t.device == x.device, 'one device'\n",
    "g = torch.Generator(device=x.device)\n",
    "d = triton.runtime.driver.active.get_active_torch_device()\ny2 = torch.empty(n, device=d)\n",
    "def alloc(m: int, device: torch.device) -> torch.Tensor:\n    return torch.empty(m, device=device)\n",
    "if (d := x.device) is not None:\n    y2 = torch.empty(n, device=d)\n",
]


@pytest.mark.parametrize("code", DEVICE_PLACES)
def test_a_device_that_places_tensors_or_is_compared_stays_allowed(code: str):
    assert screen(in_wrapper(code)) is None, code


def test_device_comparisons_and_text_of_other_values_stay_allowed():
    for code in ("assert x.device == y.device, 'inputs on one device'\n",
                 "assert x.device.type == 'cuda'\n",
                 "s = f'{n} elements of {x.dtype}'\n",
                 "s = str(x.shape)\n",
                 "y = torch.empty(x.shape, device=x.device)\n"):
        assert screen(in_wrapper(code)) is None, code


def test_a_device_the_original_turns_into_text_stays_allowed():
    original = in_wrapper("assert str(x.device).startswith('cuda'), 'a GPU tensor'\n")
    variant = in_wrapper("assert str(x.device).startswith('cuda'), 'a GPU tensor'\nm = n\n")
    assert screen(variant, original) is None


def test_a_laundered_device_the_original_has_stays_allowed():
    code = DEVICE_LAUNDERED["a list, then its item"]
    original = in_wrapper(code)
    assert screen(in_wrapper(code + "m = n\n"), original) is None
    assert screen(in_wrapper("s = f'{x.device}'\n"), original) is None  # text of a device: the same use


def test_the_original_licenses_its_kind_of_use_of_a_device_only():
    original = in_wrapper("key = (x.shape, x.device)\n")  # a device in a container, never its text
    assert screen(in_wrapper("key = (x.shape, x.device)\nm = n\n"), original) is None
    for code, what in (("key = (x.shape, x.device)\nk = int(str(key[1])[-1])\n", "turns a device into text"),
                       ("key = (x.shape, x.device)\nif hash(key) % 2:\n    n = n - 1\n", "hashes a device")):
        reason = screen(in_wrapper(code), original)
        assert reason and what in reason, (code, reason)
