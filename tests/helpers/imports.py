"""Static import graphs (ast only, nothing is imported): which modules of a package
import which, at module level and inside functions, listed separately."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional


@dataclass
class ModuleImports:
    name: str
    path: Path
    top: set[str] = field(default_factory=set)  # run when the module is imported (TYPE_CHECKING blocks included)
    deferred: set[str] = field(default_factory=set)  # inside a function, run when it is called


def module_names(roots: dict[str, Path]) -> dict[str, Path]:
    """Dotted name -> file, for every .py under each package root (name -> its directory)."""
    out: dict[str, Path] = {}
    for pkg, root in roots.items():
        for p in sorted(root.rglob("*.py")):
            parts = [pkg, *p.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _targets(module: str, is_pkg: bool, node: ast.AST, known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # `from pkg import sub` imports the submodule when there is one, and runs the
        # package's __init__ first: a package that (even in a function) imports the
        # module back closes a circle
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]
        if prefix in known and known[prefix].name == "__init__.py":
            names.append(prefix)
    for name in names:
        while name and name not in known:  # `import a.b.c` of a module we know as `a.b`
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


def scan(roots: dict[str, Path]) -> dict[str, ModuleImports]:
    known = module_names(roots)
    graph: dict[str, ModuleImports] = {}
    for name, path in known.items():
        mi = ModuleImports(name, path)
        is_pkg = path.name == "__init__.py"

        def visit(node: ast.AST, deferred: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    (mi.deferred if deferred else mi.top).update(_targets(name, is_pkg, child, known))
                else:
                    visit(child, deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
        graph[name] = mi
    return graph


def find_cycle(edges: dict[str, set[str]]) -> Optional[list[str]]:
    """One cycle (a list of modules, first repeated at the end), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {n: WHITE for n in edges}
    stack: list[str] = []

    def dfs(n: str) -> Optional[list[str]]:
        colour[n] = GREY
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if colour.get(m, BLACK) == GREY:
                return stack[stack.index(m):] + [m]
            if colour.get(m) == WHITE:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        colour[n] = BLACK
        return None

    for n in sorted(edges):
        if colour[n] == WHITE:
            found = dfs(n)
            if found:
                return found
    return None


def class_sizes(paths: list[Path]) -> Iterator[tuple[Path, str, int]]:
    """(file, class name, lines from `class` to its last line) for every class."""
    for p in paths:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                yield p, node.name, node.end_lineno - node.lineno + 1  # type: ignore[operator]
