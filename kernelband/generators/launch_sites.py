"""Where a kernel is launched: the launch calls of a module (``kernel[grid](...)``), the
function around each, the statements that bind a name in a scope, and the node that
computes a launch's grid."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from .edits import KernelSource, names_in, walk


def callee_name(call: cst.Call) -> Optional[str]:
    f = call.func
    return f.value if isinstance(f, cst.Name) else f.attr.value if isinstance(f, cst.Attribute) else None


class LaunchSites(KernelSource):
    def launches(self) -> list[tuple[cst.Call, Optional[cst.FunctionDef]]]:
        out = []
        for stmt in self.module.body:
            fn = stmt if isinstance(stmt, cst.FunctionDef) else None
            if fn is not None and fn.name.value == self.kernel:
                continue
            for n in walk(stmt):
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Subscript):
                    v = n.func.value
                    name = (
                        v.value if isinstance(v, cst.Name) else v.attr.value if isinstance(v, cst.Attribute) else None
                    )
                    if name == self.kernel:
                        out.append((n, self._enclosing_def(n, fn)))
        return out

    def _enclosing_def(self, node: cst.CSTNode, top: Optional[cst.FunctionDef]) -> Optional[cst.FunctionDef]:
        """The innermost def around node (a launch in a method of a class: the method)."""
        if top is not None:
            return top
        best: Optional[cst.FunctionDef] = None
        for stmt in self.module.body:
            if isinstance(stmt, cst.ClassDef):
                for n in walk(stmt):
                    if isinstance(n, cst.FunctionDef) and any(m is node for m in walk(n)):
                        best = n
        return best

    def assignments(self, scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
        """Statements in scope that bind ``name`` (assign, aug-assign, def, for target...)."""
        out: list[cst.CSTNode] = []
        for n in walk(scope):
            if isinstance(n, cst.Assign):
                if any(name in names_in(t.target) for t in n.targets):
                    out.append(n)
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
                if name in names_in(n.target):
                    out.append(n)
            elif isinstance(n, cst.FunctionDef) and n.name.value == name:
                out.append(n)
            elif isinstance(n, (cst.For, cst.CompFor, cst.With)) and name in names_in(
                n.target if not isinstance(n, cst.With) else n
            ):
                out.append(n)
        return out

    def module_binds(self, name: str) -> list[cst.CSTNode]:
        out: list[cst.CSTNode] = []
        for stmt in self.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for s in stmt.body:
                    if isinstance(s, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                        targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]
                        if any(name in names_in(t) for t in targets):
                            out.append(s)
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == name:
                out.append(stmt)
            elif isinstance(stmt, (cst.If, cst.Try, cst.For, cst.While, cst.With)):
                out += [n for n in self.assignments(stmt, name)]
        return out

    def uses(self, fn: Optional[cst.FunctionDef], name: str) -> int:
        """How often ``name`` appears in fn as a variable (keyword names excluded)."""
        if fn is None:
            return 0
        keywords = {id(a.keyword) for a in walk(fn) if isinstance(a, cst.Arg) and a.keyword is not None}
        return sum(1 for n in walk(fn) if isinstance(n, cst.Name) and n.value == name and id(n) not in keywords)

    def grid_definition(self, call: cst.Call, fn: Optional[cst.FunctionDef]) -> tuple[cst.CSTNode, bool]:
        """(the node that computes the grid, whether it is a callable taking meta)."""
        sub = call.func
        assert isinstance(sub, cst.Subscript)
        el = sub.slice[0].slice
        grid = el.value if isinstance(el, cst.Index) else el
        if isinstance(grid, cst.Name):
            scopes = [fn.body] if fn is not None else []
            for scope in scopes + [self.module]:
                binds = self.assignments(scope, grid.value)
                if binds:
                    b = binds[-1]
                    if isinstance(b, cst.FunctionDef):
                        return b, len(b.params.params) >= 1
                    value = getattr(b, "value", None)
                    if isinstance(value, cst.Lambda):
                        return value, len(value.params.params) >= 1
                    return b, False
            return grid, False
        if isinstance(grid, cst.Lambda):
            return grid, len(grid.params.params) >= 1
        return grid, False
