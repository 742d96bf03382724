"""Detection without the syntax trees of kernel bodies (kernelband/detect.py, "skimming";
which keeps `kernelband list` <= 1 s at 1,200 kernels) gives exactly what a parse of the
whole file gives: the same DetectionResult, the same `kernelband list` output, the same
error. Checked on the examples, the real-style test files, the benchmark module, inputs
built to mislead the line-based guesses, and random splices of all of them."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import random
import sys
import textwrap
from pathlib import Path

import pytest

from kernelband import detect as detect_mod
from kernelband.detect import detect

from helpers.paths import EXAMPLES, REPO

SKIM_WORKS = detect_mod._syntax_check is not None and sys.version_info[:2] in ((3, 10), (3, 11))


def _full(source: str):
    return detect(source, "m.py", skim=False)


def _same(source: str) -> bool:
    """Asserts skimmed and full detection agree; returns whether skimming was used."""
    a, b = detect(source, "m.py"), _full(source)
    assert a.to_dict() == b.to_dict()
    assert a.module_defs == b.module_defs
    assert [(f.name, f.kind, f.calls, f.launches) for f in a.functions] == \
           [(f.name, f.kind, f.calls, f.launches) for f in b.functions]
    return detect_mod._skimmed_tree(detect_mod.strip_bom(source)) is not None


def _benchmark_module(n: int) -> str:
    spec = importlib.util.spec_from_file_location("lsp_latency_bench", REPO / "benchmarks" / "lsp_latency.py")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except ImportError as e:  # pragma: no cover - pygls missing
        pytest.skip(f"benchmarks/lsp_latency.py needs {e.name}")
    return mod.big_module(n)


def _corpus() -> list[Path]:
    return sorted(EXAMPLES.glob("*.py")) + sorted((REPO / "tests" / "data").rglob("*.py"))


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


HEAD = "import torch\nimport triton\nimport triton.language as tl\n\n"


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_examples_and_real_style_files_are_detected_the_same(path):
    used = _same(path.read_text(encoding="utf-8"))
    assert used or not SKIM_WORKS


def test_the_benchmark_module_is_skimmed_and_detected_the_same():
    source = _benchmark_module(60)
    assert _same(source) or not SKIM_WORKS
    r = detect(source)
    assert len(r.kernels) == 60 and all(len(k.launch_sites) == 1 for k in r.kernels)


def _list_output(path: Path, skim: bool, monkeypatch) -> str:
    from kernelband.cli import main

    if not skim:
        monkeypatch.setattr(detect_mod, "_skimmed_tree", lambda source, fork=False: None)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list", str(path), "--json"]) == 0
    with contextlib.redirect_stdout(out):
        assert main(["list", str(path)]) == 0
    monkeypatch.undo()
    return out.getvalue()


def test_list_output_is_byte_identical(tmp_path, monkeypatch):
    files = [tmp_path / "bench60.py"]
    files[0].write_text(_benchmark_module(60), encoding="utf-8")
    for p in sorted(EXAMPLES.glob("*.py")):
        files.append(tmp_path / p.name)
        files[-1].write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    for f in files:
        assert _list_output(f, True, monkeypatch) == _list_output(f, False, monkeypatch), f.name


# Each: (source, whether skimming must be used). Skimming may decline anything (it costs
# time, not correctness); the ones marked True are the shapes it must handle.
ADVERSARIAL = {
    "plain": (HEAD + "@triton.jit\ndef k(x_ptr, N: tl.constexpr):\n    tl.store(x_ptr, 1)\n\n\n"
              "def w(x):\n    k[(1,)](x, N=4)\n", True),
    "multi-line decorator, closing bracket at column 0": (HEAD + src('''
        @triton.autotune(
            configs=[triton.Config({"B": 32}), triton.Config({"B": 64})],
            key=["n"],
        )
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            tl.store(x_ptr, 1)

        def harness_k():
            k[(1,)](None, 4)
        '''), True),
    "blank lines and comments between decorators": (HEAD + src('''
        @triton.heuristics({"B": lambda a: 16})

        # a comment
        @triton.jit
        def k(x_ptr, B: tl.constexpr):
            tl.store(x_ptr, 1)
        '''), True),
    "multi-line header with comments and a ':' in a default": (HEAD + src('''
        @triton.jit
        def k(a_ptr, b_ptr,  # inputs: two
              s: "x: y" = ":",  # a default with ':'
              B: tl.constexpr = 4,
        ):  # the end
            tl.store(a_ptr, 1)
        '''), True),
    "header ')' at column 0 then return annotation": (HEAD + src('''
        @triton.jit
        def k(
            a_ptr,
        ) -> None:
            tl.store(a_ptr, 1)
        '''), True),
    "a string with 'def' at column 0": (HEAD + src('''
        DOC = """
        @triton.jit
        def fake(x):
            fake2[(1,)](x)
        """

        @triton.jit
        def k(x):
            tl.store(x, 1)
        '''), False),
    "a kernel body whose docstring has text at column 0": (HEAD + '@triton.jit\ndef k(x):\n    """doc\nat column 0\n'
                                                            '"""\n    tl.store(x, 1)\n\n\ndef w(x):\n    k[(1,)](x)\n', False),
    "a bracket in a kernel body closed at column 0": (HEAD + "@triton.jit\ndef k(x):\n    y = (1,\n2)\n    tl.store(x, y)\n"
                                                      "def w(x):\n    k[(1,)](x)\n", False),
    "top-level if/else with kernels inside": (HEAD + src('''
        if torch.cuda.is_available():
            @triton.jit
            def k(x):
                tl.store(x, 1)
        else:
            @triton.jit
            def k(x):
                tl.store(x, 2)

        @triton.jit
        def k2(x):
            k[(1,)](x)

        def w(x):
            k2[(1,)](x)
        '''), True),
    "async def kernel": (HEAD + "@triton.jit\nasync def k(x):\n    tl.store(x, 1)\n\n@triton.jit\ndef j(x):\n    pass\n", True),
    "class with methods around kernels": (HEAD + src('''
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                k[(1,)](x)
                return x

            @triton.jit
            def method_kernel(x):
                pass

        @triton.jit
        def k(x):
            tl.store(x, 1)
        apply = F.apply
        '''), True),
    "a column-0 statement right after the body": (HEAD + "@triton.jit\ndef k(x):\n    tl.store(x, 1)\nalias = k\n"
                                                  "w = lambda x: k[(1,)](x)\n", True),
    "trailing comments, quotes in them, column-0 comments": (HEAD + src('''
        @triton.jit
        def k(x):
            tl.store(x, 1)  # don't "quote"
            # it's done
        # column 0, too

        @triton.jit
        def j(x):
            tl.store(x, 1)  # plain
            # plain
        # plain
        '''), True),
    "a comment line that ends a string": (HEAD + '@triton.jit\ndef k(x):\n    s = """\n# not a comment"""\n\n'
                                          'def w(x):\n    k[(1,)](x)\n', True),
    "';' and backslash at the end": (HEAD + "@triton.jit\ndef k(x):\n    a = 1;\n\n@triton.jit\ndef j(x):\n"
                                     "    a = 1 + \\\n        2\n\n@triton.jit\ndef h(x):\n    a = 1 \\\n\n", True),
    "a backslash ending the file": (HEAD + "@triton.jit\ndef h(x):\n    a = 1 \\\n", False),
    "a backslash before a column-0 line": (HEAD + "@triton.jit\ndef h(x):\n    a = 1 + \\\n2\n", False),
    "non-ASCII on the last line": (HEAD + '@triton.jit\ndef k(x):\n    s = "é€😀"\n@triton.jit\ndef j(x):\n    é = 1\n', True),
    "CRLF line endings": ((HEAD + "@triton.jit\ndef k(x):\n    tl.store(x, 1)  \n\ndef w(x):\n    k[(1,)](x)\n")
                          .replace("\n", "\r\n"), True),
    "no newline at the end": (HEAD + "@triton.jit\ndef k(x):\n    tl.store(x, 1)", True),
    "a body of one docstring": (HEAD + '@triton.jit\ndef k(x):\n    """doc"""\n', True),
    "tab indentation": (HEAD + "@triton.jit\ndef k(x):\n\tif x:\n\t\ttl.store(x, 1)\n\n", True),
    "a one-line kernel": (HEAD + "@triton.jit\ndef k(x): tl.store(x, 1)\n\n@triton.jit\ndef j(x):\n    pass\n", True),
    "jit with arguments": (HEAD + '@triton.jit(do_not_specialize=["n"])\ndef k(x, n):\n    pass\n', True),
    "numba's jit (body walked)": (HEAD + "import numba\n\n@numba.jit\ndef n(x):\n    k[(1,)](x)\n    return helper(x)\n\n"
                                  "@triton.jit\ndef k(x):\n    pass\n\ndef helper(x):\n    return x\n", True),
    "jit imported inside a function only": (src('''
        import triton
        def setup():
            from triton import jit
        @jit
        def k(x):
            k2[(1,)](x)
        @triton.jit
        def k2(x):
            pass
        '''), True),
    "form feed": (HEAD + "@triton.jit\ndef k(x):\n    pass\n\x0cx = 1\n", False),
    "a lone CR": (HEAD + "@triton.jit\ndef k(x):\n    pass\rx = 1\n", False),
    "a syntax error in a kernel body": (HEAD + "@triton.jit\ndef k(x):\n    y = (\n\ndef w(x):\n    k[(1,)](x)\n", False),
    "a syntax error in a kernel body, brackets balanced": (HEAD + "@triton.jit\ndef k(x):\n    y = = 1\n", False),
    "an indentation error in a kernel body": (HEAD + "@triton.jit\ndef k(x):\n    y = 1\n      z = 2\n", False),
    "a syntax error outside the kernels": (HEAD + "@triton.jit\ndef k(x):\n    pass\n\ndef w(x:\n    pass\n", False),
    "nonlocal in a kernel (parses, fails the symbol table)": (HEAD + "@triton.jit\ndef k(x):\n    nonlocal y\n", False),
    "return outside a function in a kernel's wake": (HEAD + "@triton.jit\ndef k(x):\n    pass\nreturn 3\n", True),
    "an empty body": (HEAD + "@triton.jit\ndef k(x):\n\n# only a comment\n\ndef w():\n    pass\n", False),
    "null byte": (HEAD + "@triton.jit\ndef k(x):\n    pass\n\x00", False),
    "BOM": ("\ufeff" + HEAD + "@triton.jit\ndef k(x):\n    tl.store(x, 1)\n", True),
    "def in a kernel's last line's string": (HEAD + '@triton.jit\ndef k(x):\n    s = """\ndef j():\n    pass"""\n', False),
    "match statement": (HEAD + "@triton.jit\ndef k(x):\n    match x:\n        case 1:\n            pass\n        case _:\n"
                        "            y = 2\n", True),
    "barry_as_FLUFL": ("from __future__ import barry_as_FLUFL\n" + HEAD + "@triton.jit\ndef k(x):\n    y = 1 <> 2\n", False),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_inputs_are_detected_the_same(name):
    source, must_skim = ADVERSARIAL[name]
    used = _same(source)
    if SKIM_WORKS and must_skim:
        assert used, f"{name}: skimming declined"
    if not must_skim:
        assert not used, f"{name}: skimming used where it must decline"


def _nested(depth_of_stack: int, fn, *args):
    if depth_of_stack > 0:
        return _nested(depth_of_stack - 1, fn, *args)
    return fn(*args)


@pytest.mark.parametrize("n", [300, 1000, 2900, 2990, 3100, 6000])
def test_deep_expressions_in_a_kernel_fail_or_pass_alike(n):
    """ast.parse also fails where building the tree recurses too deep; a kernel body deep
    enough for that must give the same error, at any depth of the caller's stack."""
    source = HEAD + "@triton.jit\ndef k(x):\n    y = " + "-" * n + "1\n\ndef w(x):\n    k[(1,)](x)\n"
    for stack in (0, 50, 300):
        a = _nested(stack, detect, source, "m.py")
        b = _nested(stack, _full, source)
        assert a.to_dict() == b.to_dict(), (n, stack)


def test_random_splices_are_detected_the_same():
    """Lines of every corpus file and adversarial input, spliced at random: mostly broken
    files, some valid ones; skimming must agree with the full parse on every one."""
    pool = [p.read_text(encoding="utf-8").splitlines(keepends=True) for p in _corpus()]
    pool += [s.splitlines(keepends=True) for s, _ in ADVERSARIAL.values()]
    rng = random.Random(14)
    used = 0
    for _ in range(400):
        base = list(rng.choice(pool))
        for _ in range(rng.randint(1, 4)):
            donor = rng.choice(pool)
            if not donor:
                continue
            i = rng.randrange(len(donor))
            chunk = donor[i : i + rng.randint(1, 12)]
            at = rng.randint(0, len(base))
            if rng.random() < 0.5:
                base[at:at] = chunk
            else:
                del base[at : at + rng.randint(0, 3)]
        used += _same("".join(base))
    assert used > 40 or not SKIM_WORKS, used


def test_checking_the_bodies_in_a_forked_child_gives_the_same(monkeypatch):
    """`kernelband list` checks the kernel bodies in a child process while it parses the
    rest: the same results, also when the child fails (then they are checked here), and no
    fork at all while another thread runs."""
    import os
    import threading

    sources = [_benchmark_module(60)] + [s for s, _ in ADVERSARIAL.values()]
    for source in sources:
        assert detect(source, "m.py", fork=True).to_dict() == _full(source).to_dict()

    class Broken:
        @staticmethod
        def dumps(obj):
            raise RuntimeError("the child cannot answer")

    monkeypatch.setattr(detect_mod, "marshal", Broken)
    for source in sources[:5]:
        assert detect(source, "m.py", fork=True).to_dict() == _full(source).to_dict()
    monkeypatch.undo()

    def no_fork():
        raise AssertionError("forked with another thread running")

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        monkeypatch.setattr(os, "fork", no_fork)
        assert detect(sources[0], "m.py", fork=True).to_dict() == _full(sources[0]).to_dict()
    finally:
        stop.set()
        other.join()


EVERY_CONSTRUCT = '''
from __future__ import annotations
import os, sys as system
from . import sibling
from ..pkg.mod import a as b, c
x: int = 1
y = [1, *x, {**d, "k": v}, {1, 2}, (a := 3), f"{x!r:>{w}}", lambda p, /, q=1, *r, s=None, **t: p]
del y[0:2:1], z.attr
global G
assert x, "message"
async def coroutine(a: int = 1, *, b) -> None:
    nonlocal_not_here = 1
    async with ctx() as (m, n):
        async for i in aiter():
            await i
    yield from g()
def outer():
    v = 1
    def inner():
        nonlocal v
        global W
        return (yield v)
    return [i for i in range(3) if i for j in range(i)], {k: v for k, v in z}, (g for g in h), {s for s in t}
class C(Base, metaclass=Meta):
    attr: "C" = None
    @property
    def p(self): return -self.q ** 2 if not self.r else ~self.s
try:
    pass
except* ValueError as e:
    raise RuntimeError() from e
try:
    pass
except (A, B):
    pass
else:
    pass
finally:
    pass
with open(f) as g, other():
    while True:
        break
    else:
        continue
for i, (j, k) in enumerate(z):
    i += 1
    i @= j
match command:
    case Point(x=0, y=py) | [1, 2, *rest] if py > 0:
        pass
    case {"key": value, **others}:
        pass
    case str() as s:
        pass
    case Klass(a, b, kw=1, other=None):
        pass
    case _:
        pass
print(*args, sep="", **kwargs)
k[grid](x, n=1)
'''


def test_walked_fields_hold_only_nodes_and_nones():
    """The walk pushes what the fields it reads hold without an isinstance check: on a
    module of every construct (of Python 3.11), each is a node, None or a list of those."""
    import ast

    tree = ast.parse(EVERY_CONSTRUCT)
    seen = set()
    for node in ast.walk(tree):
        if type(node) in detect_mod._LEAVES or type(node) in detect_mod._IMPORTS:
            continue  # never looked into
        for name in type(node)._fields:
            if name in detect_mod._LEAF_FIELDS:
                continue
            seen.add((type(node).__name__, name))
            v = getattr(node, name)
            items = v if isinstance(v, list) else [v]
            assert all(x is None or isinstance(x, ast.AST) for x in items), (type(node).__name__, name, v)
    assert len(seen) > 100
    assert detect(EVERY_CONSTRUCT).error is None
    _same(EVERY_CONSTRUCT)
