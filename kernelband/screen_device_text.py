"""Where a device value may go in changed code: an allow-list, not a list of text sinks.

Every call the judge makes runs on one device ("cuda:0"), so code that makes anything of
a device but a place for tensors (its text, a hash, a key, a branch, a value handed to a
helper) is never tested for a user's other GPUs and can recognise the judge. The
grammar's ``device_by_number`` sees numbers and "cuda:N" literals; this module follows
the device itself, however it is laundered (a list, a tuple unpacked, a helper, a lambda).

A device value (a *source*) is ``<expr>.device``, ``torch.device(...)`` under any import
alias or a bare ``device(...)``, Triton's ``get_active_torch_device()``, or
``getattr(<expr>, "device")``. A name bound to a value holding one (by ``=``, ``:=``, an
annotated or augmented assignment, unpacking, a ``for`` or comprehension target, ``with
... as``) holds one too; conservative: a name tainted anywhere in the top-level definition
counts everywhere in it. Every expression built from a device (a container of it, its
text, a call's result) holds one as well.

A device may appear directly only as: the ``device=`` keyword (or a ``**`` mapping) of a
torch or Triton call or of a tensor method (``.to``, ``.new_empty``...); the argument of
``.to(...)``, ``.cuda(...)`` or a torch device API (``torch.cuda.device``,
``get_device_properties``...); a ``with`` context; an operand of ``==``, ``!=``, ``is``,
``is not``, ``in`` or ``not in``; the receiver of ``.type`` (the text "cuda", the same on
every GPU) or of ``.index`` (``device_by_number``'s to judge); the value a plain name is
bound to or a ``for`` iterates; the argument of ``len()`` or ``bool()``; a truth test
(``if devices:``, ``not d``: a device is always true, a container true when not empty);
anything in the message of an ``assert`` or a ``raise`` (the call ends there: no ``try``
in changed code). A container of devices (a display, a comprehension, what
``screen_device_containers`` lets carry one: ``list``, ``enumerate``, ``zip``,
``sorted``, ``min``, ``max``, ``.pop()``, ``.items()``, ``.get(k, default)``...) holds a
device and is judged as one: ``len({t.device for t in ts}) == 1``, ``all(d == x.device
for d in devices)`` and ``devices.count(d)`` pass, its item turned into text, its text,
hash, a ``key=`` function's sort (other than ``len``) or return do not; each of those builtins, methods and truth tests only
where the module cannot answer it with its own code. Anything else is a use: returned,
stored (an item, an attribute, a global), a key, text, a hash, an operand, an argument of
any other call (a helper or lambda of the changed code too, so a device never reaches a
parameter unseen), except where ``screen_device_calls`` follows it into the module's own
code: a plain function whose parameter goes only where this list allows and is not
returned (``_sm_count(x.device)`` reading ``get_device_properties(device)``), and the
module's own methods named like the tensor methods above, which ``obj.to(d)`` may reach
instead of torch's (``*args``/``**kwargs`` are followed as containers of it, so a ``to``
that only forwards them passes).
"""

from __future__ import annotations

import ast
from typing import Callable, NamedTuple, Optional

from .screen_device_calls import TENSOR_DEVICE_METHODS, Follower, ModuleCode, module_code
from .screen_device_containers import (
    ALLOW,
    KEY,
    METHODS,
    PASS,
    SIZE_BUILTINS,
    carried,
    iterated_parts,
    method_argument,
    method_receiver,
    truth_trusted,
)

Qualify = Callable[[ast.expr], Optional[str]]

WHY = (
    'every call of the judge runs on one device ("cuda:0"), so code that makes anything of a device but a place '
    "for tensors (device=, .to(), torch.cuda.device), a comparison with another device or its .type is never "
    "tested for a user's other GPUs and can recognise the judge: allowed only where the original does the same"
)

TEXT = "turns a device into text"
_TEXT_BUILTINS = frozenset({"str", "repr", "ascii", "format"})
_SOURCES = frozenset({"torch.device", "triton.runtime.driver.active.get_active_torch_device"})
# a torch call beside a tensor of a class with __torch_function__ hands the hook its arguments
_TO_HOOK = "gives a device to torch beside the module's own torch hook (__torch_function__ or __torch_dispatch__)"
# torch APIs that take a device positionally and give back no text of it
_DEVICE_APIS = frozenset(
    {
        "torch.device",
        *(
            f"torch.cuda.{n}"
            for n in (
                "device",
                "set_device",
                "get_device_properties",
                "get_device_capability",
                "get_device_name",
                "synchronize",
                "mem_get_info",
                "memory_allocated",
                "current_stream",
                "default_stream",
                "Stream",
            )
        ),
    }
)
_SAME_DEVICE = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)

GLOBAL = "stores a device in a global"
BRANCH = "branches on a device"


class DeviceUse(NamedTuple):
    """A use of a device outside the allow-list: ``label`` is its kind (a licence is per
    kind: the original's ``str(x.device)`` licenses a variant's f-string of a device)."""

    node: ast.AST
    label: str

    @property
    def what(self) -> str:
        return f"{self.label} ({_snippet(self.node)})"


def device_uses(
    node: ast.AST, qualified: Qualify, outer: frozenset[str] = frozenset(), module: ModuleCode = ModuleCode()
) -> list[DeviceUse]:
    """The uses of a device under ``node`` (a top-level statement or definition) that the
    allow-list does not hold, in source order. ``qualified`` resolves the module's import
    aliases (``ModuleContext.qualified``); ``outer`` are module-level names bound to a device;
    ``module`` what of the module a call or an operator reaches (``module_code``): a device
    passed to a helper or a method of its own is allowed where, followed into it, it goes
    only where the allow-list holds."""
    return _Flow(node, qualified, outer, module).uses()


def module_device_names(tree: ast.Module, qualified: Qualify) -> frozenset[str]:
    """Names the module's own statements (not its definitions) bind to a device."""
    stmts = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return frozenset(_Flow(ast.Module(body=stmts, type_ignores=[]), qualified, frozenset()).names)


def module_device_uses(tree: ast.Module, qualified: Qualify) -> list[DeviceUse]:
    """Every use of a device in a whole module (what the original licenses)."""
    outer, module = module_device_names(tree, qualified), module_code(tree)
    return [u for s in tree.body for u in device_uses(s, qualified, outer, module)]


class _Flow:
    """The device values of one top-level node and where each goes."""

    def __init__(
        self,
        root: ast.AST,
        qualified: Qualify,
        outer: frozenset[str],
        module: ModuleCode = ModuleCode(),
        follower: Optional[Follower] = None,
    ) -> None:
        self.root = root
        self.qualified = qualified
        self.module = module
        self.follower = follower or Follower(
            module, lambda fn, param: not _Flow(fn, qualified, outer | {param}, module, self.follower).uses()
        )
        self.parents = {id(c): p for p in ast.walk(root) for c in ast.iter_child_nodes(p)}
        self.ends = {id(n) for s in ast.walk(root) for part in _final_messages(s) for n in ast.walk(part)}
        self.names: set[str] = set(outer)
        self.memo: dict[int, bool] = {}
        grew = True
        while grew:  # names only grow: a fixed point
            before = len(self.names)
            self.memo = {}
            for target, value in _bindings(root):
                if self.holds(value):
                    self.bind(target, value)
            grew = len(self.names) > before
        self.memo = {}
        # a global bound to a device (or a container of one) reaches other definitions unseen
        declared = {name for n in ast.walk(root) if isinstance(n, ast.Global) for name in n.names}
        self.globals = [
            value
            for target, value in _bindings(root)
            if _target_names(target) & declared and isinstance(value, ast.expr) and self.holds(value)
        ]

    # ------------------------------------------------------------------ which values hold a device
    def holds(self, e: ast.AST) -> bool:
        if id(e) not in self.memo:
            self.memo[id(e)] = self._holds(e)
        return self.memo[id(e)]

    def _holds(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Name):
            return isinstance(e.ctx, ast.Load) and e.id in self.names
        if isinstance(e, ast.Attribute) and e.attr == "device":
            return self.qualified(e) is None  # torch.device is the type, x.device a device
        if isinstance(e, ast.Call) and self.source(e):
            return True
        return any(self.holds(c) and self.role(c, via)[0] != ALLOW for c, via in _flowing_children(e))

    def source(self, e: ast.Call) -> bool:
        if self.qualified(e.func) in _SOURCES or (isinstance(e.func, ast.Name) and e.func.id == "device"):
            return True
        return (
            isinstance(e.func, ast.Name)
            and e.func.id == "getattr"
            and len(e.args) > 1
            and isinstance(e.args[1], ast.Constant)
            and e.args[1].value == "device"
        )

    def bind(self, target: ast.AST, value: ast.AST) -> None:
        parts = self.iterated(target, value)
        if isinstance(target, ast.Name):
            self.names.add(target.id)
        elif parts is not None:  # for i, d in enumerate(devices): the counter is no device
            assert isinstance(target, (ast.Tuple, ast.List))
            for t, source in zip(target.elts, parts):
                if source is not None and self.holds(source):
                    self.names |= _target_names(t)
        elif _parallel(target, value):
            assert isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            for t, v in zip(target.elts, value.elts):
                if self.holds(v):
                    self.bind(t, v)
        else:  # unpacked, starred or stored into a container: every name it binds
            self.names |= _target_names(target)

    def iterated(self, target: ast.AST, value: ast.AST) -> Optional[list[Optional[ast.expr]]]:
        """The parts of each item where ``target`` takes apart the items a ``for`` or a
        comprehension iterates of ``enumerate``/``zip`` (``iterated_parts``)."""
        loop = self.parents.get(id(value))
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.comprehension)) or loop.iter is not value:
            return None
        parts = iterated_parts(self.module, value)
        if parts is None or not isinstance(target, (ast.Tuple, ast.List)) or len(target.elts) != len(parts):
            return None
        return parts if not any(isinstance(t, ast.Starred) for t in target.elts) else None

    # ------------------------------------------------------------------ where a device goes
    def uses(self) -> list[DeviceUse]:
        found: dict[tuple[int, str], tuple[tuple[int, ...], DeviceUse]] = {}
        for n in ast.walk(self.root):
            if not isinstance(n, ast.expr) or isinstance(getattr(n, "ctx", None), (ast.Store, ast.Del)):
                continue
            if id(n) in self.ends or not self.holds(n):
                continue
            parent = self.parents.get(id(n))
            if parent is None:
                continue
            verdict, at = self.role(n, parent)
            if verdict not in (ALLOW, PASS):  # where a device first goes, first: by where it ends, inner first
                found.setdefault((id(at), verdict), ((*_ends(at), at is n), DeviceUse(at, verdict)))
        for value in self.globals:
            found.setdefault((id(value), GLOBAL), ((*_ends(value), True), DeviceUse(value, GLOBAL)))
        return [u for _, u in sorted(found.values(), key=lambda f: f[0])]

    def role(self, e: ast.expr, p: ast.AST) -> tuple[str, ast.AST]:  # noqa: C901 - one branch per parent
        """What ``p`` does with the device ``e`` (one of its children): ALLOW, PASS, or the
        label of a use, with the node to report it at."""
        if isinstance(p, ast.keyword):
            call = self.parents.get(id(p))
            return (self.keyword(p, call), call) if isinstance(call, ast.Call) else ("uses a device in a class", e)
        if isinstance(p, ast.Call):
            return self.argument(e, p), p
        if isinstance(p, ast.Attribute):
            return self.attribute(p), p
        if isinstance(p, ast.Subscript):
            return (PASS if e is p.value else KEY), p
        if isinstance(p, (ast.Tuple, ast.List, ast.Dict, ast.Set, *_COMPREHENSIONS)):
            # a container of devices holds one: what is made of it is judged as of a device. Where
            # the module defines __eq__, a set, a dict or list.index could hand a device to it
            equal = "__eq__" in self.module.dunders and not self.unpacked(e, p)
            return ("puts a device in a container" if equal else PASS), p
        if isinstance(p, (ast.Starred, ast.NamedExpr, ast.BoolOp, ast.JoinedStr)):
            return PASS, p
        if isinstance(p, ast.IfExp):
            return (PASS if e is not p.test else self.truth(BRANCH)), p
        if isinstance(p, ast.Compare):
            return self.compared(p), p
        if isinstance(p, ast.FormattedValue):
            return TEXT, p
        if isinstance(p, ast.BinOp):
            return (TEXT if isinstance(p.op, ast.Mod) and e is p.right else "computes with a device"), p
        if isinstance(p, ast.UnaryOp):
            return (self.truth("computes with a device") if isinstance(p.op, ast.Not) else "computes with a device"), p
        if isinstance(p, ast.comprehension):
            return (ALLOW if e is p.iter else self.truth(BRANCH)), e
        if isinstance(p, (ast.Assign, ast.AnnAssign)):
            targets = p.targets if isinstance(p, ast.Assign) else [p.target]
            return (ALLOW if all(_plain(t) for t in targets) else "stores a device in an item or attribute"), e
        if isinstance(p, (ast.For, ast.AsyncFor, ast.withitem, ast.Expr)):
            return ALLOW, e  # iterated, a context (torch.device is one), or dropped
        if isinstance(p, (ast.Return, ast.Lambda)):
            return "returns a device", e
        if isinstance(p, (ast.If, ast.While, ast.Assert)):
            return self.truth(BRANCH), e  # its test: an assert's message ends the flow before
        if isinstance(p, ast.AugAssign):
            return "computes with a device", e
        if isinstance(p, ast.arguments):
            return "uses a device as a default argument", e
        return f"uses a device in {type(p).__name__.lower()}", e

    def attribute(self, p: ast.Attribute) -> str:
        """A device's ``.type`` and ``.index`` (its number: ``device_by_number``'s to judge),
        or a container method called on devices (``screen_device_containers``)."""
        call = self.parents.get(id(p))
        if p.attr in METHODS and isinstance(call, ast.Call) and call.func is p:
            return method_receiver(self.module, p, call) or f"reads .{p.attr} of a device value"
        return ALLOW if p.attr in ("type", "index") else f"reads .{p.attr} of a device value"

    def truth(self, otherwise: str) -> str:
        """A truth test of devices tells only whether there are any, where Python's answers."""
        return ALLOW if truth_trusted(self.module) else otherwise

    def compared(self, p: ast.Compare) -> str:
        """``==``, ``!=``, ``is`` and ``in`` tell only whether devices are the same one,
        unless they call a dunder method of the module's own (``obj.__eq__(d)``)."""
        if not all(isinstance(o, (*_SAME_DEVICE, ast.In, ast.NotIn)) for o in p.ops):
            return "compares a device other than by ==, !=, is or in"
        called = {"__eq__", "__ne__"} if any(not isinstance(o, (ast.Is, ast.IsNot)) for o in p.ops) else set()
        if any(isinstance(o, (ast.In, ast.NotIn)) for o in p.ops):
            called.add("__contains__")
        return "hands a device to the module's own comparison" if called & self.module.dunders else ALLOW

    def unpacked(self, e: ast.expr, p: ast.AST) -> bool:
        """A display only taken apart again: ``a, b = x.device, 3``, the arguments of a ``%``
        template, ``{"device": d}`` or ``{**kw}`` (keywords for a later call)."""
        outer = self.parents.get(id(p))
        if isinstance(outer, ast.BinOp) and isinstance(outer.op, ast.Mod) and outer.right is p:
            return True
        if isinstance(p, ast.Dict):
            return any(
                v is e and (k is None or isinstance(k, ast.Constant) and k.value == "device")
                for k, v in zip(p.keys, p.values)
            )
        return isinstance(outer, ast.Assign) and all(_parallel(t, p) for t in outer.targets)

    def argument(self, e: ast.expr, call: ast.Call) -> str:
        if e is call.func:
            return PASS  # a lambda or helper that gives back a device: its result is one
        func = call.func
        if self.qualified(func) in _DEVICE_APIS:
            return ALLOW
        if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda"):
            if self.module.hooks_torch:
                return _TO_HOOK
            return ALLOW if self.follower.method(call, e) else f"passes a device to {_snippet(func, 40)}"
        builtin = func.id if isinstance(func, ast.Name) and func.id not in self.module.rebound else None
        if builtin in SIZE_BUILTINS and len(call.args) == 1 and not call.keywords:
            return ALLOW  # how many, or whether any: no device's identity
        # the same devices in another container (judged as one), or compared with its items
        verdict = carried(self.module, call, e) or (
            method_argument(self.module, call, e)
            if isinstance(func, ast.Attribute) and self.holds(func.value)
            else None
        )
        if verdict is not None:
            return verdict
        if (
            isinstance(func, ast.Name)
            and func.id in _TEXT_BUILTINS
            or isinstance(func, ast.Attribute)
            and func.attr in ("format", "format_map")
        ):
            return TEXT
        if isinstance(func, ast.Name) and func.id == "hash":
            return "hashes a device"
        if self.follower.helper(call, e):
            return ALLOW
        return f"passes a device to {_snippet(func, 40)}"

    def keyword(self, k: ast.keyword, call: ast.Call) -> str:
        if k.arg not in ("device", None):
            return self.argument(k.value, call)
        func, root = call.func, (self.qualified(call.func) or "").split(".")[0]
        method = isinstance(func, ast.Attribute) and func.attr in TENSOR_DEVICE_METHODS
        if self.module.hooks_torch and (root == "torch" or method):
            return _TO_HOOK
        if root in ("torch", "triton"):
            return ALLOW
        if method:
            return ALLOW if self.follower.method(call, k.value) else f"passes a device to {_snippet(func, 40)}"
        if isinstance(func, ast.Name) and func.id == "dict":
            return PASS  # dict(device=d): keywords for a later call, a device itself
        return self.argument(k.value, call)


Binding = tuple[ast.AST, ast.AST]


def _bindings(root: ast.AST) -> list[Binding]:
    """(target, value) of every binding under ``root``; a ``for`` or comprehension target
    is bound to its iterable, a ``with`` target to its context."""
    out: list[Binding] = []
    for n in ast.walk(root):
        if isinstance(n, ast.Assign):
            out += [(t, n.value) for t in n.targets]
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and n.value is not None:
            out.append((n.target, n.value))
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            out.append((n.target, n.iter))
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            out.append((n.optional_vars, n.context_expr))
    return out


def _flowing_children(e: ast.AST) -> list[tuple[ast.expr, ast.AST]]:
    """(child, its parent) of the expressions under ``e`` whose value may flow into
    ``e``'s: its own, a keyword's value, a comprehension's conditions (not its iterable,
    whose items reach the element through the target's name)."""
    out: list[tuple[ast.expr, ast.AST]] = []
    for c in ast.iter_child_nodes(e):
        if isinstance(c, ast.keyword):
            out.append((c.value, c))
        elif isinstance(c, ast.comprehension):
            out += [(x, c) for x in c.ifs]
        elif isinstance(c, ast.expr) and isinstance(e, ast.expr):
            out.append((c, e))
    return out


def _final_messages(s: ast.AST) -> list[ast.expr]:
    """The message of an ``assert`` and what a ``raise`` raises: evaluated only as the call
    fails, so nothing in them is branched on (changed code has no ``try``)."""
    if isinstance(s, ast.Assert) and s.msg is not None:
        return [s.msg]
    if isinstance(s, ast.Raise):
        return [x for x in (s.exc, s.cause) if x is not None]
    return []


def _plain(t: ast.expr) -> bool:
    """A binding target made only of names (``d``, ``d, n``, ``[*ds]``)."""
    if isinstance(t, ast.Name):
        return True
    if isinstance(t, (ast.Tuple, ast.List)):
        return all(_plain(x) for x in t.elts)
    return isinstance(t, ast.Starred) and _plain(t.value)


def _parallel(target: ast.AST, value: ast.AST) -> bool:
    """``a, b = x.device, 3``: element by element, nothing starred."""
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(value, (ast.Tuple, ast.List)):
        return False
    return len(target.elts) == len(value.elts) and not any(
        isinstance(x, ast.Starred) for x in (*target.elts, *value.elts)
    )


def _target_names(t: ast.AST) -> set[str]:
    """The names a target binds, and the container an item is stored into (``cache`` of
    ``cache[k] = d``); an attribute store is a use of its own."""
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(x) for x in t.elts))
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    if isinstance(t, ast.Subscript):
        root = t.value
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        return {root.id} if isinstance(root, ast.Name) else set()
    return set()


def _ends(node: ast.AST) -> tuple[int, int, int, int]:
    """Source order by where a node ends: a use inside another comes first."""
    return (
        getattr(node, "lineno", 0),
        getattr(node, "end_lineno", 0) or 0,
        getattr(node, "end_col_offset", 0) or 0,
        -getattr(node, "col_offset", 0),
    )


def _snippet(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
