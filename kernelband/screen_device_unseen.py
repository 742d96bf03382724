"""Builtins and dunder methods a module may rebind or define where no binding of that name
can be read: the device rule trusts a builtin with a device only where the module binds
its name nowhere, and an operator only where no class of the module defines its dunder,
so a binding it cannot read by name counts as one of every name it could be.

- a builtin stored as an attribute (``builtins.max = f``, ``sys.modules[m].max = f``):
  that builtin; a dunder stored as an attribute (``Box.__gt__ = f``): that dunder;
- a binding by a name held in a string or a namespace's mapping (``globals()["max"] =
  f``, ``vars()``, ``setattr``, ``__builtins__``, ``f.__globals__``, ``obj.__dict__``,
  ``exec``...) or a star import (``from torch import *``): every builtin and every dunder;
- a class made other than by a class body (``type(name, bases, namespace)``, a metaclass
  called, ``make_dataclass``): every dunder. ``type(x)`` or ``x.__class__`` is trusted
  only to be compared or to have its name read;
- a class whose base or class decorator the module does not show (imported from
  elsewhere, or given a metaclass or class keywords): every dunder. What that base's
  dunders, or what the decorator adds, do cannot be read here, and an inherited ``__lt__``
  or ``__getattr__`` may call any method the class defines with what it is given. Builtin
  types, a few library bases whose dunders call no method of a subclass's
  (``_PLAIN_BASES``) and decorators whose dunders compare only instances of the class
  itself (``_PLAIN_DECORATORS``) are read as what they are.

Only the user's original can hold any of these (the grammar refuses them in changed
code); its device uses are still judged with the variant's calls in it.
"""

from __future__ import annotations

import ast
import builtins
from typing import NamedTuple

from .detect import import_bindings, resolve_chain

BUILTIN_NAMES = frozenset(dir(builtins))
# every dunder a builtin type answers, and those the rule looks for that none of them defines
ALL_DUNDERS = frozenset(n for t in (object, int, list, dict, type) for n in dir(t) if n.startswith("__")) | {
    "__getattr__",
    "__contains__",
    "__bool__",
    "__len__",
    "__index__",
    "__iter__",
    "__next__",
}
# the hooks through which torch hands a call's every argument to a tensor subclass's own code
TORCH_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})

_NAMESPACE_NAMES = frozenset(
    {
        "globals",
        "vars",
        "locals",
        "setattr",
        "delattr",
        "exec",
        "eval",
        "compile",
        "__import__",
        "__builtins__",
        "attrgetter",
        "methodcaller",
    }
)
_NAMESPACE_ATTRIBUTES = frozenset(
    {"__builtins__", "__globals__", "__dict__", "__setattr__", "__delattr__", "attrgetter", "methodcaller"}
)
_CLASS_MAKERS = frozenset({"make_dataclass", "new_class", "ABCMeta", "EnumMeta", "EnumType"})
_CLASS_NAME_READS = frozenset({"__name__", "__qualname__", "__module__"})
# builtin types: their dunders are C code that calls no method a subclass defines
_BUILTIN_TYPES = frozenset(n for n in BUILTIN_NAMES if isinstance(getattr(builtins, n), type) and n != "type")
# library bases whose instances' dunders are object's or a builtin type's (not torch.nn.Module:
# its __getattr__ hands out whatever was registered under a name)
_PLAIN_BASES = frozenset(
    {
        "torch.autograd.Function",
        "typing.NamedTuple",
        "typing.Generic",
        "typing.Protocol",
        "enum.Enum",
        "enum.IntEnum",
        "abc.ABC",
    }
)
# a dataclass's comparisons return NotImplemented for anything but the class's own
# instances; total_ordering derives from an ordering the class body shows
_PLAIN_DECORATORS = frozenset({"dataclasses.dataclass", "functools.total_ordering", "typing.final"})


class Unseen(NamedTuple):
    """What of a module no binding by name shows (``unseen``)."""

    rebound: frozenset[str]  # builtins it may rebind
    dunders: frozenset[str]  # dunder methods it may give a class other than in its body
    hooks_torch: bool  # a tensor class of it may define a torch hook (then it answers every operator)


def unseen(tree: ast.Module, nodes: list[ast.AST]) -> Unseen:
    """The builtins and dunders a module (``nodes``: its ``ast.walk``) may bind unseen, and
    whether a class of it may define a torch hook: one named anywhere (a class body, an
    attribute, a string), or a tensor class where names held in strings are bound or
    classes made unseen."""
    parents = _parents(nodes)
    by_string, makes = _namespaces(nodes, parents), _makes_classes(nodes, parents)
    stored = [n.attr for n in nodes if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)]
    hooks = _hook_named(nodes) or (by_string or makes) and _tensor_class(nodes)
    rebound = BUILTIN_NAMES if by_string else frozenset(a for a in stored if a in BUILTIN_NAMES)
    dunders = (
        ALL_DUNDERS
        if by_string or makes or hooks or _inherits_unseen(tree, nodes)
        else frozenset(a for a in stored if a.startswith("__") and a.endswith("__"))
    )
    return Unseen(rebound, dunders, hooks)


def _inherits_unseen(tree: ast.Module, nodes: list[ast.AST]) -> bool:
    """Whether a class of the module has a base it does not show, class keywords (a
    metaclass, ``__init_subclass__``'s arguments) or a class decorator that is neither
    one of its own functions (what that stores is read: ``cls.__lt__ = f``) nor one of
    ``_PLAIN_DECORATORS``."""
    aliases, _, conflicts = import_bindings(tree)
    assigned = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    unsure = assigned | set(aliases)  # a name the module binds otherwise too
    classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
    own_classes = {c.name for c in classes} - unsure
    own_functions = {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} - unsure
    builtin_types = _BUILTIN_TYPES - unsure

    def plain(e: ast.expr, own: set[str], known: frozenset[str], builtin: frozenset[str]) -> bool:
        if isinstance(e, ast.Subscript):  # Generic[T]
            e = e.value
        if isinstance(e, ast.Name) and (e.id in own or e.id in builtin):
            return True
        root = e
        while isinstance(root, ast.Attribute):
            root = root.value
        qualified = resolve_chain(e, aliases)
        return qualified in known and isinstance(root, ast.Name) and root.id not in conflicts

    return any(
        c.keywords
        or not all(plain(b, own_classes, _PLAIN_BASES, builtin_types) for b in c.bases)
        or not all(
            plain(d.func if isinstance(d, ast.Call) else d, own_functions, _PLAIN_DECORATORS, frozenset())
            for d in c.decorator_list
        )
        for c in classes
    )


def _hook_named(nodes: list[ast.AST]) -> bool:
    for n in nodes:
        name = (
            n.name
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            else n.attr
            if isinstance(n, ast.Attribute)
            else n.id
            if isinstance(n, ast.Name)
            else n.value
            if isinstance(n, ast.Constant)
            else None
        )
        if isinstance(name, str) and name in TORCH_HOOKS:
            return True
    return False


def _tensor_class(nodes: list[ast.AST]) -> bool:
    """Whether a class of the module subclasses a tensor, or a call may make one."""
    return any(
        isinstance(n, ast.ClassDef)
        and any(_tensor_base(b) for b in n.bases)
        or isinstance(n, ast.Call)
        and len(n.args) >= 2
        and _tensor_bases(n)
        for n in nodes
    )


def _tensor_bases(call: ast.Call) -> bool:
    """Whether a call shaped as a class's making may make a tensor class: ``type`` or a
    maker of classes given bases it cannot read or a tensor among them, or a callable no
    builtin names (a metaclass) given a tuple of bases with a tensor among them."""
    func, bases = call.func, call.args[1]
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    listed = isinstance(bases, ast.Tuple) and any(_tensor_base(b) for b in bases.elts)
    if name == "type" or name in _CLASS_MAKERS:
        return listed or not isinstance(bases, (ast.Tuple, ast.Constant))
    return isinstance(func, ast.Name) and name not in BUILTIN_NAMES and len(call.args) >= 3 and listed


def _tensor_base(base: ast.expr) -> bool:
    """A base class named as a tensor (``torch.Tensor``, ``Tensor``, ``nn.Parameter``), or not
    by a plain name at all (a call, a subscript: what it is cannot be read)."""
    if isinstance(base, ast.Attribute):
        return base.attr in ("Tensor", "Parameter")
    if isinstance(base, ast.Name):
        return base.id in ("Tensor", "Parameter")
    return True


def _namespaces(nodes: list[ast.AST], parents: dict[int, ast.AST]) -> bool:
    """Whether the module may bind a name it holds in a string: through a namespace, by
    ``setattr``, ``getattr`` of a name not written out, running code, a star import."""
    for n in nodes:
        if (
            isinstance(n, ast.Name)
            and n.id in _NAMESPACE_NAMES
            or isinstance(n, ast.ImportFrom)
            and any(a.name == "*" for a in n.names)
        ):
            return True
        if (
            isinstance(n, ast.Attribute)
            and n.attr in _NAMESPACE_ATTRIBUTES
            or isinstance(n, ast.Constant)
            and (n.value in _NAMESPACE_ATTRIBUTES)
        ):
            return True
        if isinstance(n, ast.Name) and n.id == "getattr" and not _public_getattr(parents.get(id(n)), n):
            return True
    return False


def _public_getattr(call: object, name: ast.Name) -> bool:
    """``getattr(x, "name")`` of a public name written out."""
    return (
        isinstance(call, ast.Call)
        and call.func is name
        and len(call.args) > 1
        and isinstance(call.args[1], ast.Constant)
        and isinstance(call.args[1].value, str)
        and not call.args[1].value.startswith("_")
    )


def _makes_classes(nodes: list[ast.AST], parents: dict[int, ast.AST]) -> bool:
    """Whether the module may make a class whose dunders no class body shows: ``type`` or
    a class's class used other than on one object, compared, named or called as a
    constructor, a metaclass defined, or a maker of classes."""
    for n in nodes:
        if (
            isinstance(n, ast.Name)
            and n.id in _CLASS_MAKERS
            or isinstance(n, ast.Attribute)
            and n.attr in _CLASS_MAKERS
        ):
            return True
        if isinstance(n, ast.Name) and n.id == "type":
            call = parents.get(id(n))
            if not (isinstance(call, ast.Call) and call.func is n and len(call.args) == 1 and not call.keywords):
                return True  # type(name, bases, namespace), class Meta(type), type as a value
            if not _inert(parents.get(id(call)), call):
                return True
        elif isinstance(n, ast.Attribute) and n.attr == "__class__" and not _inert(parents.get(id(n)), n):
            return True
    return False


def _inert(parent: object, n: ast.AST) -> bool:
    """A class object (of ``type(x)`` or ``x.__class__``) that makes no class: compared,
    named (``.__name__``), ``isinstance``'s class, or called with fewer arguments than
    a class is made with (``type(self)(a, b)``)."""
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, ast.Attribute):
        return parent.attr in _CLASS_NAME_READS
    if not isinstance(parent, ast.Call):
        return False
    if parent.func is n:
        return (
            len(parent.args) < 3
            and not any(isinstance(a, ast.Starred) for a in parent.args)
            and all(k.arg is not None for k in parent.keywords)
        )
    return (
        isinstance(parent.func, ast.Name)
        and parent.func.id in ("isinstance", "issubclass")
        and (len(parent.args) > 1 and parent.args[1] is n)
    )


def _parents(nodes: list[ast.AST]) -> dict[int, ast.AST]:
    return {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
