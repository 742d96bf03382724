"""What builtins, container methods and truth tests do with a container of devices, for
``screen_device_text``'s allow-list.

A container of devices is judged as a device: what gives back the same devices in
another container or one of them (``list``, ``enumerate``, ``zip``, ``sorted``, ``min``,
``max``, ``.pop()``, ``.keys()``, ``.get(k, default)``...) passes the flow on to its result
(PASS), and what gives back only a count, a position or a truth value (``.count(d)``,
``.index(d)``, ``if devices:``, ``not devices``) ends it (ALLOW). Each is trusted only where
it surely is Python's own:

- a builtin only where the module binds its name nowhere (``ModuleCode.rebound``);
- a method only where no class of the module defines or assigns that name, no attribute
  of that name is stored anywhere (``self.pop = f``) and no class defines ``__getattr__``
  or ``__getattribute__``: the receiver's type is unknown, and a class of the module
  could otherwise receive the devices, or a device argument;
- neither where the module defines a dunder method the call would run on what it is
  given: ``__eq__`` for ``.index``/``.count`` (a list search compares each item with the
  argument, ``Tag() == d`` reaches the module's comparison), an ordering or
  ``__getattr__`` for ``sorted``, ``min`` and ``max`` (they compare the items with each
  other), ``__index__`` where an argument is read as an integer, ``__bool__``/``__len__``
  for a truth test.

A device as a key (``.get(d)``, ``.pop(d)``) stays a use, as a subscript's key does; a
``key=`` function for ``sorted``, ``min`` or ``max`` is trusted only as a literal ``None``
(no key) or a size builtin (``len``, ``bool``: a count, no device's identity), since it
would receive every device; ``min``/``max``'s ``default=`` comes back in the result
(beside one iterable only). Unpacked arguments (``zip(*rows)``, where the positions are
unknown) and keywords other than those listed are not trusted either.
"""

from __future__ import annotations

import ast
from typing import NamedTuple, Optional

from .screen_device_calls import DYNAMIC_ATTRIBUTES, ModuleCode

ALLOW, PASS = "allow", "pass"  # stops there; flows on into the parent, no use yet
KEY = "uses a device as a key or index"
# what compares items with each other: an ordering of the module's, or any name its __getattr__ answers
_ORDERING = frozenset({"__lt__", "__gt__", "__le__", "__ge__"}) | DYNAMIC_ATTRIBUTES
TRUTH_DUNDERS = frozenset({"__bool__", "__len__"})
SIZE_BUILTINS = frozenset({"len", "bool"})  # how many, or whether any: no device's identity


class Carrier(NamedTuple):
    """A builtin that gives back the devices it is given, rearranged, and calls no code of
    the module's with them."""

    carried: Optional[int]  # how many leading positional arguments come back in its result (None: all)
    most: Optional[int]  # the most positional arguments it takes so (None: any)
    keywords: frozenset[str] = frozenset()  # keywords it may take, their values no device (key=: _trusted_key)
    dunders: frozenset[str] = frozenset()  # the module's dunder methods that would run on what it is given
    returned: frozenset[str] = frozenset()  # keywords whose value may come back, beside one positional argument


_ONE = Carrier(1, 1)
CARRIERS = {
    "list": _ONE,
    "tuple": _ONE,
    "set": _ONE,
    "frozenset": _ONE,
    "iter": _ONE,
    "reversed": _ONE,
    "next": Carrier(2, 2),  # next(it, default): the default comes back too; iter(f, d) compares f()'s values with d
    "enumerate": Carrier(1, 2, frozenset({"start"}), frozenset({"__index__"})),
    "zip": Carrier(None, None, frozenset({"strict"})),
    "sorted": Carrier(1, 1, frozenset({"reverse", "key"}), _ORDERING),
    # one iterable's largest item, or the largest of its arguments; default= where the iterable is empty
    **{name: Carrier(None, None, frozenset({"key"}), _ORDERING, frozenset({"default"})) for name in ("min", "max")},
}


class ContainerMethod(NamedTuple):
    """A method of Python's containers: what its result holds of the receiver and what
    each of its positional arguments is to it."""

    result: str  # PASS: the receiver's devices; ALLOW: a count or a position
    arguments: tuple[str, ...]  # per position: KEY, "compared" (with each item) or PASS (given back)
    dunders: frozenset[str] = frozenset()


_COMPARED = "compared"
METHODS = {
    **{name: ContainerMethod(PASS, ()) for name in ("keys", "values", "items", "copy")},
    "pop": ContainerMethod(PASS, (KEY, PASS), frozenset({"__index__"})),  # list.pop(i), dict.pop(k, default)
    "get": ContainerMethod(PASS, (KEY, PASS)),
    "index": ContainerMethod(ALLOW, (_COMPARED, KEY, KEY), frozenset({"__eq__", "__index__"})),
    "count": ContainerMethod(ALLOW, (_COMPARED,), frozenset({"__eq__"})),
}


def carried(module: ModuleCode, call: ast.Call, e: ast.expr) -> Optional[str]:
    """PASS where ``e`` is an argument a trusted builtin gives back in its result; None
    where the rule's other cases decide."""
    name = call.func.id if isinstance(call.func, ast.Name) else None
    carrier = CARRIERS.get(name) if name is not None and name not in module.rebound else None
    if carrier is None or carrier.dunders & module.dunders or _unpacks(call):
        return None
    if carrier.most is not None and len(call.args) > carrier.most:
        return None
    if not all(_keyword_trusted(module, carrier, call, k) for k in call.keywords):
        return None
    keyword = next((k for k in call.keywords if k.value is e), None)
    if keyword is not None:
        return PASS if keyword.arg in carrier.returned else None
    position = next((i for i, a in enumerate(call.args) if a is e), None)
    if position is None or carrier.carried is not None and position >= carrier.carried:
        return None
    return PASS


def iterated_parts(module: ModuleCode, value: ast.AST) -> Optional[list[Optional[ast.expr]]]:
    """Where an item of ``value``, iterated, takes its parts from: per position, the
    argument whose items fill it (None: ``enumerate``'s counter, an int). So ``for i, d in
    enumerate(devices)`` binds a device to ``d`` only, and ``for d, t in zip(devices,
    tensors)`` to ``d`` only. None where ``value`` is no trusted ``enumerate`` or ``zip``."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name) or _unpacks(value):
        return None
    name = value.func.id
    if name not in ("enumerate", "zip") or name in module.rebound or CARRIERS[name].dunders & module.dunders:
        return None
    if name == "enumerate":
        return [None, value.args[0]] if 1 <= len(value.args) <= 2 else None
    return list(value.args)


def method_receiver(module: ModuleCode, attribute: ast.Attribute, call: ast.AST) -> Optional[str]:
    """What a trusted container method called on devices (``devices.pop()``) makes of
    them: PASS or ALLOW; None where it is not one (the rule's other cases decide)."""
    method = _trusted(module, attribute.attr)
    if method is None or not isinstance(call, ast.Call) or call.func is not attribute or _unpacks(call):
        return None
    return method.result if not call.keywords else None


def method_argument(module: ModuleCode, call: ast.Call, e: ast.expr) -> Optional[str]:
    """What a trusted container method called on devices makes of the device ``e``, one
    of its arguments: PASS (given back), ALLOW (compared with the items), a key's use;
    None where it is not one."""
    func = call.func
    method = _trusted(module, func.attr) if isinstance(func, ast.Attribute) else None
    if method is None or call.keywords or _unpacks(call):
        return None
    position = next((i for i, a in enumerate(call.args) if a is e), len(method.arguments))
    if position >= len(method.arguments):
        return None
    role = method.arguments[position]
    return ALLOW if role == _COMPARED else role


def truth_trusted(module: ModuleCode) -> bool:
    """Whether a truth test of devices (``if devices:``, ``not devices``) tells only
    whether there are any: a device is always true, a container true when not empty,
    unless the module's own ``__bool__`` or ``__len__`` answers."""
    return not module.dunders & TRUTH_DUNDERS


def _keyword_trusted(module: ModuleCode, carrier: Carrier, call: ast.Call, k: ast.keyword) -> bool:
    if k.arg in carrier.returned:
        return len(call.args) == 1  # max(a, b, default=d) is an error, max(default=d) too
    return k.arg in carrier.keywords and (k.arg != "key" or _trusted_key(module, k.value))


def _trusted_key(module: ModuleCode, key: ast.expr) -> bool:
    """A ``key=`` that gives no code of the module's the devices and no text of them: a
    literal ``None`` (no key; a name bound to None could be bound to anything), or
    ``len``/``bool`` where Python's answers (a count of a container of devices)."""
    if isinstance(key, ast.Constant):
        return key.value is None
    return (
        isinstance(key, ast.Name)
        and key.id in SIZE_BUILTINS
        and key.id not in module.rebound
        and not module.dunders & TRUTH_DUNDERS
    )


def _trusted(module: ModuleCode, name: str) -> Optional[ContainerMethod]:
    method = METHODS.get(name)
    if method is None or name in module.attributes or module.dunders & (DYNAMIC_ATTRIBUTES | method.dunders):
        return None
    return method


def _unpacks(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
