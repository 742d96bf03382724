"""Checks on the code's shape, by reading it (ast), never importing it: no import
circles, profile/ stays pure analysis, no class over 300 lines, test modules import
helpers, never each other."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.imports import class_sizes, find_cycle, scan
from helpers.paths import REPO

ROOTS = {"kernelband": REPO / "kernelband", "kernelband_lsp": REPO / "server" / "kernelband_lsp"}
MAX_CLASS_LINES = 300


@pytest.fixture(scope="module")
def graph():
    return scan(ROOTS)


def _show(cycle: list[str], deferred: dict[str, set[str]]) -> str:
    hops = [f"{a} -> {b}" + (" (in a function)" if b in deferred.get(a, ()) else "") for a, b in zip(cycle, cycle[1:])]
    return "; ".join(hops)


def test_the_scan_sees_both_packages(graph):
    assert {"kernelband.session", "kernelband.search.registry", "kernelband_lsp.server", "kernelband_lsp.service"} <= set(graph)
    assert "kernelband.search.base" in graph["kernelband.search.baselines"].top
    assert "kernelband.worker.profiling" in graph["kernelband.worker.variant"].deferred


def test_no_import_cycle_at_module_level(graph):
    cycle = find_cycle({n: m.top for n, m in graph.items()})
    assert cycle is None, "import cycle: " + _show(cycle, {})


def test_no_import_cycle_even_through_imports_inside_functions(graph):
    """A circle hidden in a function is still a circle (it was how three of them hid)."""
    deferred = {n: m.deferred for n, m in graph.items()}
    cycle = find_cycle({n: m.top | m.deferred for n, m in graph.items()})
    assert cycle is None, "import cycle: " + _show(cycle, deferred)


def test_profile_is_pure_analysis(graph):
    """In-worker collection lives under kernelband/worker/; profile/ never imports it."""
    bad = sorted(f"{n} -> {t}" for n, m in graph.items() if n.startswith("kernelband.profile")
                 for t in m.top | m.deferred if t.startswith("kernelband.worker"))
    assert not bad, bad


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    root = tmp_path / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {"pkg": root}


def test_a_planted_cycle_is_found(tmp_path):
    g = scan(_package(tmp_path, {"a.py": "from . import b\n", "b.py": "def f():\n    from .a import x\n",
                                 "c.py": "import pkg.a\n"}))
    assert g["pkg.a"].top == {"pkg", "pkg.b"} and g["pkg.b"].deferred == {"pkg.a"} and g["pkg.c"].top == {"pkg.a"}
    assert find_cycle({n: m.top for n, m in g.items()}) is None
    assert find_cycle({n: m.top | m.deferred for n, m in g.items()}) == ["pkg.a", "pkg.b", "pkg.a"]


def test_an_import_from_a_package_counts_as_an_import_of_the_package(tmp_path):
    """`from .. import sibling` runs the package's __init__: when that __init__ imports
    (even in a function) a module that leads back here, it is a circle. `from ..sibling
    import name` does not go through the package."""
    g = scan(_package(tmp_path, {"__init__.py": "def make():\n    from .top import T\n",
                                 "top.py": "from .sub import leaf\n", "feature.py": "X = 1\n",
                                 "sub/__init__.py": "", "sub/leaf.py": "from .. import feature\n"}))
    assert g["pkg.sub.leaf"].top == {"pkg", "pkg.feature"}
    assert find_cycle({n: m.top | m.deferred for n, m in g.items()}) == ["pkg", "pkg.top", "pkg.sub.leaf", "pkg"]
    fixed = scan(_package(tmp_path / "fixed", {"__init__.py": "def make():\n    from .top import T\n",
                                               "top.py": "from .sub import leaf\n", "feature.py": "X = 1\n",
                                               "sub/__init__.py": "", "sub/leaf.py": "from ..feature import X\n"}))
    assert fixed["pkg.sub.leaf"].top == {"pkg.feature"}
    assert find_cycle({n: m.top | m.deferred for n, m in fixed.items()}) is None


def test_a_type_checking_import_counts_as_module_level(tmp_path):
    g = scan(_package(tmp_path, {"a.py": "from .b import B\n",
                                 "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"}))
    assert find_cycle({n: m.top for n, m in g.items()}) == ["pkg.a", "pkg.b", "pkg.a"]


def _sources() -> list[Path]:
    return sorted((REPO / "kernelband").rglob("*.py")) + sorted((REPO / "server").rglob("*.py"))


def test_no_class_over_300_lines():
    over = [f"{path.relative_to(REPO).as_posix()}: class {name} is {lines} lines"
            for path, name, lines in class_sizes(_sources()) if lines > MAX_CLASS_LINES]
    assert not over, over


def test_a_long_class_is_flagged(tmp_path):
    p = tmp_path / "big.py"
    p.write_text("class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES + "\nclass Small:\n    pass\n")
    assert [(n, k) for _, n, k in class_sizes([p])] == [("Big", MAX_CLASS_LINES + 1), ("Small", 2)]


def _imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def imports_of_test_modules(test_dir: Path) -> list[str]:
    """'file imports module' for every import of a test module or of conftest."""
    bad = []
    for path in sorted(test_dir.rglob("*.py")):
        for mod in sorted(_imported_modules(path)):
            last = mod.rpartition(".")[2]
            if last.startswith("test_") or last == "conftest":
                bad.append(f"{path.relative_to(test_dir).as_posix()} imports {mod}")
    return bad


def test_no_test_module_imports_another():
    """Shared code lives in tests/helpers, fixtures in conftest.py."""
    assert imports_of_test_modules(REPO / "tests") == []


def test_an_import_of_a_test_module_is_flagged(tmp_path):
    (tmp_path / "test_a.py").write_text("from test_b import helper\nimport os\n")
    (tmp_path / "test_c.py").write_text("def f():\n    from tests" + ".conftest import REPO\n")
    (tmp_path / "test_d.py").write_text("from helpers.kernels import AXPY\n")
    assert imports_of_test_modules(tmp_path) == ["test_a.py imports test_b", "test_c.py imports tests.conftest"]
