"""The language service's shape, read from its modules (ast): collaborators that depend
in one direction (service.py declares the order; each module may use the ones below it,
never one above it, and no constructor gets the whole service), no mixins, no class over
300 lines; and the server's package never imports torch or triton through the typed
Result or the options."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "server" / "kernelband_lsp"
SERVICE = sorted(PACKAGE.glob("service*.py"))
MAX_CLASS_LINES = 300
# the collaborators, lowest first (service.py's docstring draws the same order)
ORDER = ("service_client", "service_variants", "service_documents", "service_jobs", "service_background",
         "service_verify", "service_features", "service_actions")
# what no collaborator may name: the service that holds them all (its module, its class, an
# attribute reaching it, e.g. ls.service)
WHOLE_SERVICE = {"service", "KernelBandService"}


def long_classes(source: str, limit: int = MAX_CLASS_LINES) -> list[tuple[str, int]]:
    tree = ast.parse(source)
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef) and n.end_lineno - n.lineno + 1 > limit]


def _names(tree: ast.AST) -> Iterator[str]:
    """Every name a module uses: imported modules and names, variables, attributes,
    parameters, and names inside strings that are not docstrings (quoted annotations)."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.alias):
            yield from node.name.split(".")
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield from node.module.split(".")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            try:
                yield from _names(ast.parse(node.value.strip(), mode="eval"))
            except SyntaxError:
                pass


def upward_references(modules: list[tuple[str, str]]) -> list[str]:
    """``modules``: (name, source), lowest first. What each uses of one above it: the
    module or a class it defines, or the whole service; and constructors taking the service."""
    trees = [(name, ast.parse(source)) for name, source in modules]
    classes = [{n.name for n in tree.body if isinstance(n, ast.ClassDef)} for _, tree in trees]
    out = []
    for i, (name, tree) in enumerate(trees):
        above = {m for m, _ in trees[i + 1:]}.union(*classes[i + 1:])
        out += [f"{name} uses {n}, above it" for n in sorted(set(_names(tree)) & above)]
        out += [f"{name} names the whole service ({n})" for n in sorted(set(_names(tree)) & WHOLE_SERVICE)]
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for init in (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"):
                for arg in init.args.args[1:] + init.args.kwonlyargs:
                    if {arg.arg, *(_names(arg.annotation) if arg.annotation else ())} & WHOLE_SERVICE:
                        out.append(f"{name}: {cls.name}() receives the whole service ({arg.arg})")
    return out


def _module(name: str) -> tuple[str, str]:
    return name, (PACKAGE / f"{name}.py").read_text(encoding="utf-8")


def test_the_order_names_every_collaborator_module():
    assert sorted(ORDER) == sorted(p.stem for p in SERVICE if p.stem != "service")


def test_collaborators_depend_downwards_only():
    assert upward_references([_module(m) for m in ORDER]) == []


def test_each_collaborator_is_one_class_of_its_own_and_the_service_only_wires_them():
    """No mixins: one class per module, with no base class; the service builds them in the
    declared order and sets nothing on them (no reference handed down after construction)."""
    built = []
    for m in (*ORDER, "service"):
        tree = ast.parse(_module(m)[1])
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        assert [len(c.bases) for c in classes if not c.decorator_list] == [0], m  # dataclass records aside
        if m == "service":
            init = next(f for f in classes[0].body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            built = [c.func.id for c in ast.walk(init) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
            targets = [t for a in ast.walk(init) if isinstance(a, ast.Assign) for t in a.targets]
            assert all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) for t in targets)
    defined = [next(n.name for n in ast.parse(_module(m)[1]).body if isinstance(n, ast.ClassDef) and not n.decorator_list)
               for m in ORDER]
    assert [c for c in built if c in defined] == defined


def test_the_direction_check_sees_upward_references():
    low = "class Low:\n    def __init__(self, n: int) -> None:\n        self.n = n\n"
    high = "from .low import Low\n\nclass High:\n    def __init__(self, low: Low) -> None:\n        self.low = low\n"
    assert upward_references([("low", low), ("high", high)]) == []
    assert upward_references([("high", high), ("low", low)]) == ["high uses Low, above it", "high uses low, above it"]
    cases = {
        "def f():\n    from .high import make\n": ["low uses high, above it"],  # an import hidden in a function
        "def f(x: 'Optional[High]') -> None:\n    pass\n": ["low uses High, above it"],  # a quoted annotation
        "def f(ls):\n    return ls.service.jobs\n": ["low names the whole service (service)"],  # a back door
        "class Low:\n    def __init__(self, svc: 'KernelBandService') -> None:\n        self.svc = svc\n":
            ["low names the whole service (KernelBandService)", "low: Low() receives the whole service (svc)"],
    }
    for source, expected in cases.items():
        assert upward_references([("low", source), ("high", high)]) == expected, source
    # a docstring may mention what is above
    assert upward_references([("low", '"""Told by High."""\n'), ("high", high)]) == []


def test_no_service_class_is_over_300_lines():
    assert len(SERVICE) >= 6
    assert {p.name: long_classes(p.read_text(encoding="utf-8")) for p in SERVICE} == {p.name: [] for p in SERVICE}


def test_the_size_check_sees_a_long_class():
    body = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(120))
    assert long_classes(f"class Big:\n{body}") == [("Big", 360)]


def test_result_and_options_do_not_pull_torch_or_triton_into_the_server():
    code = ("import sys; import kernelband.model, kernelband.options, kernelband_lsp.service, kernelband_lsp.settings; "
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": f"{ROOT}:{ROOT / 'server'}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stderr
