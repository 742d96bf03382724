"""The language service's collaborators call in one direction. Read from their modules
(ast): the graph of what each holds (its constructor's collaborators) and of the callbacks
each hands another (a bound method, or a function or lambda that uses ``self``, passed to
or stored on a collaborator) has no loop, and every edge goes down the order below, the
one service.py draws and builds. Then each is built alone, with fakes of only the
collaborators its constructor names, and hands none of them a callable of its own.

A one-shot piece of work handed down (a coroutine for OpenDocuments.spawn to run) is no
callback: it is not kept to be called again."""
from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest

from kernelband_lsp.service_actions import CodeActions
from kernelband_lsp.service_background import BackgroundOptimizer
from kernelband_lsp.service_client import Client
from kernelband_lsp.service_documents import OpenDocuments
from kernelband_lsp.service_features import Features
from kernelband_lsp.service_jobs import JobRunner
from kernelband_lsp.service_variants import FoundVariants
from kernelband_lsp.service_verify import Reverifier

PACKAGE = Path(__file__).resolve().parent.parent / "server" / "kernelband_lsp"
# lowest first: each may hold and call only those before it
ORDER = (Client, FoundVariants, OpenDocuments, JobRunner, BackgroundOptimizer, Reverifier, Features, CodeActions)
NAMES = tuple(c.__name__ for c in ORDER)


# ---------------------------------------------------------------------------- the reference graph
def _uses_self(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(node))


def _root(node: ast.AST) -> ast.AST:
    """``self.documents.docs.x[k]`` -> the ``self.documents`` it hangs off (else the bare name)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        inner = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Attribute) and isinstance(inner, ast.Name) and inner.id == "self":
            return node
        node = inner
    return node


class _ClassRefs:
    """What one collaborator class holds, and to whom it hands callables of its own."""

    def __init__(self, cls: ast.ClassDef, collaborators: set[str]) -> None:
        self.name = cls.name
        self.methods = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        self.holds: dict[str, str] = {}  # parameter -> the collaborator class it is
        if init is not None:
            for arg in init.args.args[1:] + init.args.kwonlyargs:
                ann = arg.annotation
                named = ann.id if isinstance(ann, ast.Name) else ann.value if isinstance(ann, ast.Constant) else None
                if isinstance(named, str) and named in collaborators:
                    self.holds[arg.arg] = named
        # self.<attr> = <parameter>: the attribute reaches that collaborator too
        self.attrs = {t.attr: self.holds[a.value.id] for a in ast.walk(cls) if isinstance(a, ast.Assign)
                      and isinstance(a.value, ast.Name) and a.value.id in self.holds
                      for t in a.targets if isinstance(t, ast.Attribute)}
        self.local_callbacks = {f.name for f in ast.walk(cls) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                                and f.name not in self.methods and _uses_self(f)}
        self.handed: set[str] = set()  # collaborators holding a callable of this class
        for node in ast.walk(cls):
            if isinstance(node, ast.Call):
                target = self._collaborator(_root(node.func))
                values: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                target = next((c for t in targets if (c := self._collaborator(_root(t)))), None)
                values = [node.value]
            else:
                continue
            if target is not None and any(self._callable(v) for v in values):
                self.handed.add(target)

    def _collaborator(self, root: ast.AST) -> str | None:
        if isinstance(root, ast.Name):
            return self.holds.get(root.id)
        if isinstance(root, ast.Attribute):
            return self.attrs.get(root.attr)
        return None

    def _callable(self, value: ast.AST) -> bool:
        """Whether the expression is, or builds, a callable of this class: ``self.m`` not
        called, a lambda using ``self``, a nested function using ``self`` not called."""
        called = {id(n.func) for n in ast.walk(value) if isinstance(n, ast.Call)}
        for n in ast.walk(value):
            if id(n) in called:
                continue
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                    and n.attr in self.methods:
                return True
            if isinstance(n, ast.Lambda) and _uses_self(n):
                return True
            if isinstance(n, ast.Name) and n.id in self.local_callbacks:
                return True
        return False


def reference_graph(sources: list[str], collaborators: set[str]) -> dict[str, set[str]]:
    """Class -> the collaborators it references: those it holds, and (reversed) those it
    hands a callable of its own, since they call back into it."""
    graph: dict[str, set[str]] = {name: set() for name in collaborators}
    for source in sources:
        for cls in (n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name in collaborators):
            refs = _ClassRefs(cls, collaborators)
            graph[cls.name] |= set(refs.holds.values())
            for holder in refs.handed:
                graph[holder].add(cls.name)
    return graph


def against_the_order(graph: dict[str, set[str]], order: tuple[str, ...]) -> list[str]:
    """Edges that do not go down the order (a loop has at least one)."""
    rank = {name: i for i, name in enumerate(order)}
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if rank[b] >= rank[a])


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [nxt])):
                return found
        state[node] = 2
        return None

    return next((c for n in sorted(graph) if n not in state and (c := visit(n, [n]))), None)


def _service_sources() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(PACKAGE.glob("service_*.py"))]


def test_the_collaborator_graph_is_acyclic_and_goes_down_the_order():
    graph = reference_graph(_service_sources(), set(NAMES))
    assert cycle_in(graph) is None and against_the_order(graph, NAMES) == []
    # the graph is not empty by accident: the layers above hold the ones below
    assert graph["CodeActions"] == {"Client", "OpenDocuments", "FoundVariants", "Features"}
    assert graph["OpenDocuments"] == {"Client", "FoundVariants"} and graph["Client"] == set()


def test_service_py_draws_and_builds_the_same_order():
    service = (PACKAGE / "service.py").read_text(encoding="utf-8")
    drawn = re.findall(r"\b(" + "|".join(NAMES) + r")\b", (ast.get_docstring(ast.parse(service)) or "").split("\n\n")[1])
    assert tuple(drawn) == NAMES
    init = next(n for n in ast.walk(ast.parse(service)) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    built = [c.func.id for c in ast.walk(init) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    assert [b for b in built if b in NAMES] == list(NAMES)


LOW = """
class Low:
    def __init__(self) -> None:
        self.listeners = []
        self.hooks = {}
        self.hook = None

    def spawn(self, coro):
        return coro
"""
HIGH = """
class High:
    def __init__(self, low: Low) -> None:
        self.low = low
        self.helper = Helper(on_event=self._heard)  # an owned helper: no collaborator
{line}

    def _heard(self, *args) -> None:
        pass

    async def _work(self) -> None:
        pass
"""


@pytest.mark.parametrize("line, loop", [
    ("        low.listeners.append(self._heard)", True),  # a subscription
    ("        self.low.hooks['mine'] = self._heard", True),  # a registered source
    ("        low.hook = lambda x: self._heard(x)", True),  # a stored lambda
    ("        def told():\n            self._heard()\n        low.listeners.append(told)", True),  # a nested function
    ("        self.low.spawn(self._work())", False),  # one-shot work to run, not kept
    ("        low.listeners.append(print)", False),  # a callable not of this class
    ("        self.low.hooks['x'] = self.helper", False),  # not a callable of High
])
def test_the_graph_sees_a_callback_handed_down(line: str, loop: bool):
    graph = reference_graph([LOW, HIGH.format(line=line)], {"Low", "High"})
    assert graph["High"] == {"Low"}
    assert (cycle_in(graph) is not None) is loop and bool(against_the_order(graph, ("Low", "High"))) is loop


# ---------------------------------------------------------------------------- built alone
class Recorder:
    """A fake of any collaborator: every attribute is another recorder, every call returns
    one; it keeps whatever it is given (arguments, attributes, items) to look at after."""

    def __init__(self, name: str, given: list[Any]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_given", given)

    def __getattr__(self, attr: str) -> "Recorder":
        child = Recorder(f"{self._name}.{attr}", self._given)
        object.__setattr__(self, attr, child)
        return child

    def __setattr__(self, attr: str, value: Any) -> None:
        self._given.append((f"{self._name}.{attr} =", value))
        object.__setattr__(self, attr, value)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._given.append((f"{self._name}[{key!r}] =", value))

    def __call__(self, *args: Any, **kwargs: Any) -> "Recorder":
        self._given.extend((f"{self._name}()", v) for v in (*args, *kwargs.values()))
        return Recorder(f"{self._name}()", self._given)


def _belongs_to(value: Any, owner: object) -> bool:
    """A callable that calls back into ``owner``: its bound method, or a function closing over it."""
    if inspect.ismethod(value):
        return value.__self__ is owner
    closure = getattr(value, "__closure__", None) or ()
    return inspect.isfunction(value) and any(c.cell_contents is owner for c in closure)


def callbacks_handed_down(cls: type) -> tuple[dict[str, str], list[str]]:
    """Build ``cls`` with a recorder for each constructor parameter: (parameter -> the
    class it names, what of its own it gave them)."""
    hints = typing.get_type_hints(cls.__init__)
    params = {name: getattr(hints[name], "__name__", str(hints[name]))
              for name in inspect.signature(cls.__init__).parameters if name != "self"}
    given: list[Any] = []
    built = cls(**{name: Recorder(name, given) for name in params})
    return params, [what for what, value in given if _belongs_to(value, built)]


@pytest.mark.parametrize("cls", ORDER, ids=NAMES)
def test_each_collaborator_is_built_alone_with_fakes_of_the_ones_below(cls: type):
    params, handed = callbacks_handed_down(cls)
    below = set(NAMES[:NAMES.index(cls.__name__)])
    # what else a constructor may take: the pygls server (the Client's) and the store view
    assert set(params.values()) <= below | {"LanguageServer", "StoreView"}, params
    assert handed == [], f"{cls.__name__} hands the ones below it callbacks of its own: {handed}"


def test_the_construction_check_sees_a_subscription():
    class Subscriber:
        def __init__(self, client: Client, documents: OpenDocuments) -> None:
            client.settings_listeners.append(self.heard)
            documents.hooks["mine"] = lambda: self.heard()

        def heard(self) -> None:
            pass

    assert sorted(callbacks_handed_down(Subscriber)[1]) == ["client.settings_listeners.append()", "documents.hooks['mine'] ="]
