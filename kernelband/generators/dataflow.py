"""Data flow from a launch argument back to the constants it can take: through the
wrapper's or the module's assignments (several are all followed), conditional
expressions, dict and list literals indexed by a constant or by the data, ``**cfg`` at
the launch, and small helper functions whose returns are such values. Values computed
from the data stop the flow (None)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from .edits import int_value, str_value, walk
from .launch_sites import LaunchSites

_MAX_DEPTH = 8  # data-flow hops followed from a launch argument
Reached = list[tuple[cst.BaseExpression, str]]  # constant expressions, each with how it was reached


@dataclass(frozen=True)
class IntSites:
    """The integer literals a launch argument can take, and how the first was reached
    (``launch``, ``variable``, ``dict``, ``conditional``, ``helper``)."""

    nodes: list[cst.Integer]
    origin: str


class DataFlow(LaunchSites):
    def _helper(self, name: str) -> Optional[cst.FunctionDef]:
        for stmt in self.module.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name and stmt.name.value != self.kernel:
                if any("jit" in self.code(d.decorator) for d in stmt.decorators):
                    return None
                return stmt
        return None

    def resolve(self, expr: cst.BaseExpression, fn: Optional[cst.FunctionDef], depth: int = 0) -> Optional[Reached]:
        """The constant expressions (Integer, Dict, List, Call) ``expr`` can evaluate to,
        each with how it was reached; None when it depends on data we do not follow."""
        if depth > _MAX_DEPTH:
            return None
        d = depth + 1
        if isinstance(expr, (cst.Integer, cst.Dict, cst.List, cst.Tuple)):
            return [(expr, "launch")]
        if isinstance(expr, cst.IfExp):
            a, b = self.resolve(expr.body, fn, d), self.resolve(expr.orelse, fn, d)
            return None if a is None or b is None else [(e, "conditional") for e, _ in a + b]
        if isinstance(expr, cst.Name):
            return self._resolve_name(expr.value, fn, d)
        if (
            isinstance(expr, cst.Subscript)
            and len(expr.slice) == 1
            and isinstance(index := expr.slice[0].slice, cst.Index)
        ):
            return self._resolve_subscript(expr, index, fn, d)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
            return self._resolve_call(expr, fn, d)
        return None

    def _resolve_name(self, name: str, fn: Optional[cst.FunctionDef], d: int) -> Optional[Reached]:
        """A variable: every assignment of it in the wrapper, else at module level."""
        binds = self.assignments(fn.body, name) if fn is not None else []
        if fn is not None and any(p.name.value == name for p in fn.params.params):
            return None  # a parameter: the caller decides
        origin = "variable"
        if not binds:
            binds, origin = self.module_binds(name), "variable"
        if not binds:
            return None
        out: Reached = []
        for b in binds:
            if isinstance(b, cst.Assign) and len(b.targets) == 1 and isinstance(b.targets[0].target, cst.Name):
                value = b.value
            elif (
                isinstance(b, cst.Assign) and len(b.targets) == 1 and (unpacked := self._unpacked(b, name)) is not None
            ):
                value = unpacked
            elif isinstance(b, cst.AnnAssign) and b.value is not None and isinstance(b.target, cst.Name):
                value = b.value
            else:
                return None
            r = self.resolve(value, fn if fn is not None and b in self.assignments(fn.body, name) else None, d)
            if r is None:
                return None
            out += [(e, o if o != "launch" else origin) for e, o in r]
        if len(binds) > 1:
            out = [(e, "conditional" if o == "variable" else o) for e, o in out]
        return out

    def _resolve_subscript(
        self, expr: cst.Subscript, index: cst.Index, fn: Optional[cst.FunctionDef], d: int
    ) -> Optional[Reached]:
        """``container[key]`` (``index``: its one subscript): the entry of each dict or list the
        container can be; a key that is not a constant (the data's dtype, say) takes every
        entry of a dict."""
        base = self.resolve(expr.value, fn, d)
        if base is None:
            return None
        key_node = index.value
        key: Optional[object] = str_value(key_node)
        if key is None:
            key = int_value(key_node)
        out: Reached = []
        for container, _o in base:
            vals = self._entries(container, key)
            if vals is None:
                return None
            for v in vals:
                r = self.resolve(v, fn, d)
                if r is None:
                    return None
                out += [(e, "dict") for e, _ in r]
        return out or None

    @staticmethod
    def _entries(container: cst.BaseExpression, key: Optional[object]) -> Optional[list[cst.BaseExpression]]:
        """The values ``container[key]`` can be ([] when a dict lacks the key: another
        dtype's entry may); None when it cannot be told."""
        if isinstance(container, cst.Dict):
            entries = [e for e in container.elements if isinstance(e, cst.DictElement)]
            if len(entries) != len(container.elements):
                return None
            if key is None:
                return [e.value for e in entries]  # indexed by the data (e.g. its dtype): every entry
            hit = [
                e.value
                for e in entries
                if (str_value(e.key) if str_value(e.key) is not None else int_value(e.key)) == key
            ]
            return hit[-1:]
        if isinstance(container, (cst.List, cst.Tuple)) and isinstance(key, int):
            if not -len(container.elements) <= key < len(container.elements):
                return None
            return [container.elements[key].value]
        return None

    def _resolve_call(self, expr: cst.Call, fn: Optional[cst.FunctionDef], d: int) -> Optional[Reached]:
        """``dict(K=v, ...)``, or a helper function of the module: all it can return."""
        assert isinstance(expr.func, cst.Name)
        if expr.func.value == "dict" and all(a.keyword is not None for a in expr.args):
            return [(expr, "dict")]
        helper = self._helper(expr.func.value)
        if helper is None:
            return None
        rets = [n for n in walk(helper.body) if isinstance(n, cst.Return)]
        values = [r.value for r in rets if r.value is not None]
        if not rets or len(values) != len(rets):  # a bare ``return``: None, not a constant
            return None
        out: Reached = []
        for v in values:
            got = self.resolve(v, helper, d)
            if got is None:
                return None
            out += [(e, "helper") for e, _ in got]
        return out

    @staticmethod
    def _unpacked(b: cst.Assign, name: str) -> Optional[cst.BaseExpression]:
        """``A, B = 32, 64``: the element bound to ``name``."""
        t, v = b.targets[0].target, b.value
        if not isinstance(t, cst.Tuple) or not isinstance(v, cst.Tuple) or len(t.elements) != len(v.elements):
            return None
        for te, ve in zip(t.elements, v.elements):
            if isinstance(te.value, cst.Name) and te.value.value == name and not isinstance(ve, cst.StarredElement):
                return ve.value
        return None

    def int_sites(self, expr: cst.BaseExpression, fn: Optional[cst.FunctionDef]) -> Optional[IntSites]:
        """The literals ``expr`` takes, each once; None unless every value it can take is one."""
        r = self.resolve(expr, fn)
        ints = [e for e, _ in r or [] if isinstance(e, cst.Integer) and int_value(e) is not None]
        if not r or len(ints) != len(r):
            return None
        seen: set[int] = set()
        nodes: list[cst.Integer] = []
        for e in ints:
            if id(e) not in seen:
                seen.add(id(e))
                nodes.append(e)
        origins = {o for _, o in r}
        origin = (
            "launch"
            if origins == {"launch"}
            else next(
                (o for o in ("autotune", "helper", "dict", "conditional", "variable") if o in origins), "variable"
            )
        )
        return IntSites(nodes, origin)

    @staticmethod
    def dict_items(d: cst.BaseExpression) -> Optional[list[tuple[str, cst.BaseExpression]]]:
        if isinstance(d, cst.Dict):
            out: list[tuple[str, cst.BaseExpression]] = []
            for e in d.elements:
                key = str_value(e.key) if isinstance(e, cst.DictElement) else None
                if not isinstance(e, cst.DictElement) or key is None:
                    return None
                out.append((key, e.value))
            return out
        if isinstance(d, cst.Call):  # dict(BLOCK=128, ...)
            return [(a.keyword.value, a.value) for a in d.args if a.keyword is not None]
        return None

    def passed_args(
        self, call: cst.Call, fn: Optional[cst.FunctionDef]
    ) -> Optional[list[tuple[str, cst.BaseExpression, bool, str]]]:
        """(parameter or keyword, value expression, given as a keyword, how reached) for
        each argument of a launch, ``**cfg`` expanded where cfg resolves to dicts."""
        out = []
        for i, a in enumerate(call.args):
            if a.star == "*":
                break
            if a.star == "**":
                got = self.resolve(a.value, fn)
                if got is None:
                    continue
                for d, origin in got:
                    items = self.dict_items(d)
                    if items is None:
                        break
                    for k, v in items:
                        out.append((k, v, True, "dict" if origin == "launch" else origin))
                continue
            if a.keyword is not None:
                out.append((a.keyword.value, a.value, True, "launch"))
            elif i < len(self.params) and not self.params[i].startswith("*"):
                out.append((self.params[i], a.value, False, "launch"))
        return out
