"""Which of the module's own code a device reaches through a call or an operator, and
whether, followed there, it stays within the allow-list of ``screen_device_text``.

- A plain module function (``module_helpers``) called by name with a device is followed
  into the parameter the device binds.
- A method whose name is a tensor method that places tensors (``.to``, ``.cuda``,
  ``.new_empty``...) is torch's on a tensor, but the module's own class may define one: a
  device given to ``obj.to(d)`` would reach it. Every such method of a module class is
  followed (the receiver's type is unknown) as a bound method, and it is unfollowable (a
  use) where the module can hand that method something else: a class body binding the
  name otherwise (``to = str``), an attribute stored under the name (``self.to = f``), a
  class whose object escapes to a receiver (``Cls.to(d)``, ``return Cls``, a classmethod
  returning ``cls``), ``type(...)``/``__class__`` (a class object from an instance), or
  ``__getattr__`` (any name).
- Builtins the rule trusts with a device (``len``, ``set``...) are trusted only where the
  module binds their name nowhere, in no scope, nor may bind it unseen
  (``screen_device_unseen``: ``builtins.max = f``, ``globals()[...]``, a star import).
- Dunder methods of the module's classes are called by operators: ``d == obj`` reaches
  ``obj.__eq__(d)``, ``d in obj`` reaches ``__contains__``; one set on a class after its
  body or a class made by ``type()`` counts too (``screen_device_unseen``).
"""

from __future__ import annotations

import ast
from typing import Callable, Mapping, NamedTuple, Optional

from .screen_device_unseen import unseen
from .screen_grammar import bound_directly

Helpers = Mapping[str, ast.FunctionDef]
Method = tuple[ast.FunctionDef, int]  # a method and how many leading parameters binding fills (self: 1)
MAX_HELPER_DEPTH = 3  # helpers calling helpers with a device, followed this deep
# tensor methods that take a device (positionally or as device=) and give back no text of it
TENSOR_DEVICE_METHODS = frozenset({"to", "cuda", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"})
DYNAMIC_ATTRIBUTES = frozenset({"__getattr__", "__getattribute__"})


class ModuleCode(NamedTuple):
    """What of a module a device can reach: its plain functions, its classes' methods of
    a tensor method's name (None: one that cannot be followed), the builtin names it binds
    somewhere, the dunder methods its classes define, and the attribute names it may
    give its own code under (bound in a class body, or stored anywhere: ``self.pop = f``)."""

    functions: Helpers = {}
    methods: Mapping[str, Optional[tuple[Method, ...]]] = {}
    rebound: frozenset[str] = frozenset()
    dunders: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()
    # a class of the module may define __torch_function__/__torch_dispatch__: a torch call
    # given a device beside one of its tensors, or a device compared with one, runs its code
    hooks_torch: bool = False


def module_code(tree: ast.Module) -> ModuleCode:
    nodes = list(ast.walk(tree))
    classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
    # a class body's, or one given unseen (``Box.__gt__ = f``, a class made by type())
    hidden = unseen(tree, nodes)
    dunders = hidden.dunders | frozenset(
        name for c in classes for name in bound_directly(c.body) if name.startswith("__")
    )
    return ModuleCode(
        module_helpers(tree, nodes),
        _device_methods(tree, nodes, classes, dunders),
        _bound_anywhere(nodes) | hidden.rebound,
        dunders,
        _own_attributes(nodes, classes),
        hidden.hooks_torch,
    )


def module_helpers(tree: ast.Module, nodes: Optional[list[ast.AST]] = None) -> dict[str, ast.FunctionDef]:
    """The module's top-level functions a call by name surely reaches: defined once, not
    decorated, their name bound by no other top-level statement (an assignment, import,
    class or second ``def`` of it: ``screen_grammar.bound_directly``) nor declared global
    anywhere, and binding no global themselves (what a device went into would leave the
    function unseen). ``nodes``: ``ast.walk(tree)``, where the caller has it."""
    bound: dict[str, int] = {}
    for s in tree.body:
        for name in bound_directly([s]):
            bound[name] = bound.get(name, 0) + 1
    scopes = [n for n in (ast.walk(tree) if nodes is None else nodes) if isinstance(n, (ast.Global, ast.Nonlocal))]
    declared = {name for n in scopes for name in n.names}
    return {
        s.name: s
        for s in tree.body
        if isinstance(s, ast.FunctionDef)
        and not s.decorator_list
        and bound.get(s.name) == 1
        and s.name not in declared
        and not (scopes and any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(s)))
    }


def _bound_anywhere(nodes: list[ast.AST]) -> frozenset[str]:
    """Every name the module binds in any scope (a parameter, a local, an import...)."""
    names: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
    return frozenset(names)


def _own_attributes(nodes: list[ast.AST], classes: list[ast.ClassDef]) -> frozenset[str]:
    """Attribute names under which the module may hand over code of its own: whatever a
    class body binds (a method, ``pop = f``) and every attribute stored or deleted."""
    names = {n.attr for n in nodes if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}
    for c in classes:
        names |= bound_directly(c.body)
    return frozenset(names)


def _device_methods(
    tree: ast.Module, nodes: list[ast.AST], classes: list[ast.ClassDef], dunders: frozenset[str]
) -> dict[str, Optional[tuple[Method, ...]]]:
    stored = {n.attr for n in nodes if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}
    class_objects = any(
        isinstance(n, ast.Attribute)
        and n.attr == "__class__"
        or isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "type"
        for n in nodes
    )
    out: dict[str, Optional[tuple[Method, ...]]] = {}
    for name in TENSOR_DEVICE_METHODS:
        found: list[Method] = []
        owners: set[str] = set()
        followable = name not in stored and not dunders & DYNAMIC_ATTRIBUTES
        for c in classes:
            for s in c.body:
                skip = _bound_parameters(s) if isinstance(s, ast.FunctionDef) and s.name == name else None
                if skip is not None:
                    assert isinstance(s, ast.FunctionDef)
                    found.append((s, skip))
                    owners.add(c.name)
                elif name in bound_directly([s]):
                    followable = False  # an assignment, an async or otherwise decorated def
        if found and (class_objects or _escapes(tree, classes, owners, name)):
            followable = False
        out[name] = tuple(found) if followable else None
    return out


def _bound_parameters(fn: ast.FunctionDef) -> Optional[int]:
    """How many leading parameters binding fills when the method is called on an
    instance: 1 (self, or cls of a classmethod), 0 for a staticmethod; None where another
    decorator makes it something else."""
    names = [d.id for d in fn.decorator_list if isinstance(d, ast.Name)]
    if len(names) != len(fn.decorator_list) or len(names) > 1:
        return None
    return {(): 1, ("classmethod",): 1, ("staticmethod",): 0}.get(tuple(names))


def _escapes(tree: ast.Module, classes: list[ast.ClassDef], owners: set[str], method: str) -> bool:
    """Whether a class defining ``method`` (or a subclass) may reach a call's receiver as
    the class object, where ``Cls.method(d)`` binds ``d`` to its first parameter: its name
    used other than to construct, annotate, subclass, test ``isinstance`` or read another
    attribute, or a classmethod's ``cls`` so used."""
    family = set(owners)
    grew = True
    while grew:
        before = len(family)
        family |= {c.name for c in classes if any(isinstance(b, ast.Name) and b.id in family for b in c.bases)}
        grew = len(family) > before
    safe = _inert_names(tree, method)
    for c in classes:
        if c.name in family:
            for s in c.body:
                if (
                    isinstance(s, ast.FunctionDef)
                    and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in s.decorator_list)
                    and s.args.args
                ):
                    first = s.args.args[0].arg
                    if any(isinstance(n, ast.Name) and n.id == first and id(n) not in safe for n in ast.walk(s)):
                        return True
    return any(
        isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in family and id(n) not in safe
        for n in ast.walk(tree)
    )


def _inert_names(tree: ast.Module, method: str) -> set[int]:
    """Name nodes whose class object goes nowhere a call's receiver could be: a call's
    callee, ``X.attr`` for another attribute, annotations, bases, isinstance's classes."""
    inert: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            inert.append(n.func)
            if isinstance(n.func, ast.Name) and n.func.id in ("isinstance", "issubclass") and len(n.args) == 2:
                inert += list(ast.walk(n.args[1]))
        elif isinstance(n, ast.Attribute) and n.attr != method:
            inert.append(n.value)
        elif isinstance(n, ast.ClassDef):
            inert += [x for b in (*n.bases, *n.keywords) for x in ast.walk(b)]
        elif isinstance(n, (ast.arg, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef)):
            note = n.annotation if isinstance(n, (ast.arg, ast.AnnAssign)) else n.returns
            inert += list(ast.walk(note)) if note is not None else []
    return {id(x) for x in inert if isinstance(x, ast.Name)}


Follow = Callable[[ast.FunctionDef, str], bool]  # whether a device in that parameter stays within the allow-list


class Follower:
    """The module's functions and methods a device is handed to and, once followed,
    whether a device given to that parameter stays within the allow-list there (and is
    not returned). A helper calling itself is a use (its test says so); a method is
    followed coinductively: ``self.w.to(device)`` inside a ``to`` may be a tensor's or the
    same method again, which holds unless its own body shows a use."""

    def __init__(self, module: ModuleCode, flows: Follow) -> None:
        self.module, self.flows = module, flows
        self.known: dict[tuple[int, str], bool] = {}
        self.following: set[tuple[int, str]] = set()

    def helper(self, call: ast.Call, e: ast.expr) -> bool:
        """Whether the device ``e``, an argument of ``call``, reaches a helper's parameter
        that uses it only as the allow-list holds."""
        fn = self.module.functions.get(call.func.id) if isinstance(call.func, ast.Name) else None
        params = parameters(fn, call, e) if fn is not None else None
        return fn is not None and params is not None and all(self._follow(fn, p, coinductive=False) for p in params)

    def method(self, call: ast.Call, e: ast.expr) -> bool:
        """Whether ``obj.<name>(..., e, ...)``, a tensor method by its name, keeps the
        device within the allow-list whichever of the module's methods of that name it is."""
        assert isinstance(call.func, ast.Attribute)
        methods = self.module.methods.get(call.func.attr, ())
        if methods is None:
            return False
        bound = [(fn, parameters(fn, call, e, skip)) for fn, skip in methods]
        return all(ps is not None and all(self._follow(fn, p, coinductive=True) for p in ps) for fn, ps in bound)

    def _follow(self, fn: ast.FunctionDef, param: str, coinductive: bool) -> bool:
        key = (id(fn), param)
        if key in self.known:
            return self.known[key]
        if key in self.following:
            return coinductive  # recursion: a method assumes itself, a helper is refused
        if len(self.following) >= MAX_HELPER_DEPTH:
            return False  # too deep to follow: a use
        self.following.add(key)
        try:
            ok = self.flows(fn, param)
        finally:
            self.following.discard(key)
        if not ok or not self.following:  # a result that assumed a method still followed holds only for that one
            self.known[key] = ok
        return ok


def parameters(fn: ast.FunctionDef, call: ast.Call, e: ast.expr, skip: int = 0) -> Optional[tuple[str, ...]]:
    """The parameters of ``fn`` that the argument ``e`` of ``call`` may bind, after ``skip``
    parameters binding fills (a method's self): one, or where the call unpacks (``*xs``,
    ``**kw``: positions and names unknown) every one it could reach; ``*args`` and
    ``**kwargs`` are parameters too (a tuple or dict holding the device: judged as a
    container of it), so a method that only forwards them (``self.t.to(*args, **kwargs)``)
    is followed. None where ``e`` can bind none."""
    positional = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args][skip:]]
    varargs = [fn.args.vararg.arg] if fn.args.vararg else []
    varkw = [fn.args.kwarg.arg] if fn.args.kwarg else []
    for i, a in enumerate(call.args):
        if a is e:
            if isinstance(e, ast.Starred) or any(isinstance(b, ast.Starred) for b in call.args[:i]):
                fixed = sum(not isinstance(b, ast.Starred) for b in call.args[:i])  # filled before it, at least
                return tuple(positional[fixed:] + varargs) or None
            return (positional[i],) if i < len(positional) else tuple(varargs) or None
    named = [p.arg for p in (*fn.args.args[max(0, skip - len(fn.args.posonlyargs)) :], *fn.args.kwonlyargs)]
    for k in call.keywords:
        if k.value is e:
            if k.arg is None:
                return tuple(named + varkw) or None
            return (k.arg,) if k.arg in named else tuple(varkw) or None
    return None
