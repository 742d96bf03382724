"""Module-level sites. The trust layer keeps module-level statements as they are (the
harness may read them), so a literal there is changed in a copy bound to a new name,
right after the original, and the wrappers, their helpers and the kernel's decorators
read the copy."""

from __future__ import annotations

import functools
from typing import Iterable, Optional

import libcst as cst

from .dataflow import DataFlow
from .edits import Edits, merge, walk


class ModuleShadows(DataFlow):
    def __init__(self, source: str, kernel: str) -> None:
        super().__init__(source, kernel)
        self._shadow_cache: dict[str, Edits] = {}  # module-level name -> the edits of its copy, made once

    @functools.cached_property
    def _module_statements(self) -> dict[int, tuple[cst.SimpleStatementLine | cst.BaseCompoundStatement, str]]:
        """id of every node of a module-level statement (functions and classes left out) ->
        (that statement, the name it assigns; "" when it cannot be copied). Built once."""
        out: dict[int, tuple[cst.SimpleStatementLine | cst.BaseCompoundStatement, str]] = {}
        for stmt in self.module.body:
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                a = stmt.body[0]
                target = (
                    a.targets[0].target
                    if isinstance(a, cst.Assign) and len(a.targets) == 1
                    else a.target
                    if isinstance(a, cst.AnnAssign)
                    else None
                )
                if isinstance(target, cst.Name):
                    for n in walk(stmt):
                        out[id(n)] = (stmt, target.value)
            elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                for n in walk(stmt):
                    out[id(n)] = (stmt, "")  # compound statement: cannot be copied
        return out

    def _fresh_name(self, name: str) -> str:
        taken = {n.value for n in walk(self.module) if isinstance(n, cst.Name)}
        base = f"{name}_TUNED" if name.isupper() else f"{name}_tuned"
        new, i = base, 2
        while new in taken:
            new, i = f"{base}{i}", i + 1
        return new

    def _reader_scopes(self) -> list[cst.CSTNode]:
        """Where a module-level tunable is read on the way to the launch: the functions
        that launch the kernel, the module functions they call, the kernel's decorators."""
        fns = [fn for _c, fn in self.launches() if fn is not None]
        called = {
            n.func.value for fn in fns for n in walk(fn) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
        }
        for stmt in self.module.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in called and stmt.name.value != self.kernel:
                fns.append(stmt)
        uniq: dict[int, cst.CSTNode] = {id(f): f for f in fns}
        return [*uniq.values(), *(d.decorator for d in self.kdef.decorators)]

    def shadow_edits(self, nodes: Iterable[cst.CSTNode]) -> Optional[Edits]:
        """Edits that copy the module-level statements holding ``nodes`` under new names
        and point their readers at the copies; {} when none is module-level; None when
        one is in a statement that cannot be copied."""
        stmts = self._module_statements
        out: Edits = {}
        for node in nodes:
            hit = stmts.get(id(node))
            if hit is None:
                continue
            stmt, name = hit
            if not name:
                return None
            assert isinstance(stmt, cst.SimpleStatementLine)  # only a simple assignment carries a name
            if name not in self._shadow_cache:
                self._shadow_cache[name] = self._make_shadow(stmt, name)
            out = merge(out, self._shadow_cache[name])
        return out

    def _make_shadow(self, stmt: cst.SimpleStatementLine, name: str) -> Edits:
        new = self._fresh_name(name)

        def copy(n: cst.SimpleStatementLine, stmt: cst.SimpleStatementLine = stmt) -> cst.FlattenSentinel:
            a = n.body[0]
            if isinstance(a, cst.Assign):
                a = a.with_changes(targets=[a.targets[0].with_changes(target=cst.Name(new))])
            else:
                a = a.with_changes(target=cst.Name(new))
            return cst.FlattenSentinel([stmt, n.with_changes(body=[a], leading_lines=[])])

        def rename(_n: cst.CSTNode) -> cst.CSTNode:
            return cst.Name(new)

        edits: Edits = {id(stmt): [copy]}
        for scope in self._reader_scopes():
            if isinstance(scope, cst.FunctionDef) and self.assignments(scope.body, name):
                continue  # a local of that name: not the module's
            skip = set()
            for n in walk(scope):
                if isinstance(n, cst.Arg) and n.keyword is not None:
                    skip.add(id(n.keyword))
                elif isinstance(n, cst.Attribute):
                    skip.add(id(n.attr))
                elif isinstance(n, (cst.Param, cst.FunctionDef)):
                    skip.add(id(n.name))
            for n in walk(scope):
                if isinstance(n, cst.Name) and n.value == name and id(n) not in skip:
                    edits[id(n)] = [rename]
        return edits
