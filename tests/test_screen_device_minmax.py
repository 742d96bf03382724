"""``min``, ``max`` and ``sorted`` over devices: the flow is followed through them (their
result is one of the devices, or all of them reordered) where the call is surely
Python's and runs no code of the module's; ``key=`` only as a literal ``None`` or a size
builtin, ``default=`` given back. Each laundering variant, and each form where the module
could answer the call itself (a rebound builtin, an ordering or ``__getattr__`` of its
own, a key that receives the devices), is still refused."""
from __future__ import annotations

import pytest

from helpers.screening import FIRST_DEVICE_HELPER, every_reason, in_wrapper, screen, with_definitions

DEVICE_RULE = "can recognise the judge"
_PLACE = "y2 = torch.empty(n, device=d)\n"

FOLLOWED = {
    "max of devices": "d = max([x.device, y.device])\n" + _PLACE,
    "min of two devices": "d = min(x.device, y.device)\n" + _PLACE,
    "min over a generator": "d = min(t.device for t in (x, y))\n" + _PLACE,
    "max, key=None": "d = max([x.device, y.device], key=None)\n" + _PLACE,
    "min of two, key=None": "d = min(x.device, y.device, key=None)\n" + _PLACE,
    "max, default": "d = max([t.device for t in (x,)], default=y.device)\n" + _PLACE,
    "min, key=None and default": "d = min({x.device}, key=None, default=y.device)\n" + _PLACE,
    "max of (size, device) pairs": "_, d = max((t.numel(), t.device) for t in (x, y))\n" + _PLACE,
    "min group by len": "group = min([[x.device], [x.device, y.device]], key=len)\nassert len(group) == 1\n",
    "max, key=bool": "d = max([x.device, y.device], key=bool)\n" + _PLACE,
    "sorted, key=None": "devices = sorted({x.device, y.device}, key=None)\nassert len(devices) == 1\n",
    "sorted, key=None, reversed order": "devices = sorted({x.device}, key=None, reverse=True)\nd = devices[0]\n" + _PLACE,
    "sorted groups by len": "groups = sorted([[x.device], [y.device]], key=len)\nassert len(groups) == 2\n",
    "max of sizes": "m = max(t.numel() for t in (x, y))\n",
    "min of two sizes": "m = min(x.numel(), y.numel())\n",
    "max of tensors by size": "t = max((x, y), key=lambda t: t.numel())\n",
}

LAUNDERED = {
    "max as text": ("s = str(max([x.device]))\n", "turns a device into text"),
    "min hashed": ("k = hash(min(x.device, y.device))\n", "hashes a device"),
    "max returned": ("return max([x.device, y.device])\n", "returns a device"),
    "sorted, key=None, as text": ("s = str(sorted([x.device], key=None))\n", "turns a device into text"),
    "key=str": ("d = max([x.device, y.device], key=str)\n", "passes a device to max"),
    "key=repr, sorted": ("s = sorted([x.device, y.device], key=repr)\n", "passes a device to sorted"),
    "key a lambda making text": ("d = min([x.device, y.device], key=lambda d: repr(d)[-2])\n",
                                 "turns a device into text"),
    "key a lambda placing a tensor on each": ("d = max([x.device, y.device], key=lambda d: x.to(d).sum())\n",
                                              "passes a device to max"),
    "key a lambda reading a tensor made there": ("d = max([x.device], key=lambda d: torch.ones(1, device=d).item())\n",
                                                 "passes a device to max"),
    "key a module helper": ("d = min([x.device], key=_first)\n", "passes a device to min"),
    "key=None through a name": ("k = None\nd = max([x.device], key=k)\n", "passes a device to max"),
    "key=None through a conditional": ("d = max([x.device], key=None if n else str)\n", "passes a device to max"),
    "key a device": ("d = max([1, 2], key=x.device)\n", "passes a device to max"),
    "key=len, its item as text": ("d = max([[x.device], [y.device]], key=len)\ns = f'{d}'\n",
                                  "turns a device into text"),
    "default as text": ("d = max([], default=x.device)\ns = f'{d}'\n", "turns a device into text"),
    "default returned": ("return min([1], default=x.device)\n", "returns a device"),
    "default beside two arguments": ("d = max([1], [2], default=x.device)\n", "passes a device to max"),
    "default alone": ("d = max(default=x.device)\n", "passes a device to max"),
    "unpacked arguments": ("d = max(*[[x.device]])\n", "passes a device to max"),
    "unpacked keywords": ("d = max([x.device], **{'key': None})\n", "passes a device to max"),
    "a keyword min lacks": ("d = min([x.device], reverse=True)\n", "passes a device to min"),
    "sorted's reverse a device": ("s = sorted([1], key=None, reverse=x.device)\n", "passes a device to sorted"),
    "sorted's default": ("s = sorted([1], default=x.device)\n", "passes a device to sorted"),
}


@pytest.mark.parametrize("case", sorted(FOLLOWED))
def test_min_max_and_sorted_over_devices_are_followed_not_refused(case: str):
    assert screen(in_wrapper(FOLLOWED[case])) is None, case


@pytest.mark.parametrize("case", sorted(LAUNDERED))
def test_a_device_laundered_through_min_max_or_sorted_is_refused(case: str):
    code, what = LAUNDERED[case]
    module = with_definitions(FIRST_DEVICE_HELPER)
    reason = screen(in_wrapper(code, module), module)
    assert reason and what in reason and DEVICE_RULE in reason, (case, reason)


_CALLS = {"min": "d = min([x.device, y.device])\n", "max": "d = max(x.device, y.device, key=None)\n",
          "sorted": "s = sorted([x.device], key=None)\n"}


@pytest.mark.parametrize("builtin", sorted(_CALLS))
def test_min_max_or_sorted_bound_in_the_wrapper_is_not_trusted(builtin: str):
    variant = in_wrapper(f"{builtin} = lambda *a, **k: str(a)\n" + _CALLS[builtin])
    assert any(f"passes a device to {builtin}" in r for r in every_reason(variant)), builtin


_REBOUND = {  # the module's own code that a call by the builtin's name reaches instead
    "a def": "def {0}(*a, **k):\n    return str(a)\n",
    "a lambda": "{0} = lambda *a, **k: str(a)\n",
    "an import under its name": "from torch import amax as {0}\n",
    "a class attribute": "class Box:\n    {0} = staticmethod(str)\n",
    "a global declared in a function": "def _set():\n    global {0}\n    {0} = str\n",
    "a loop variable": "for {0} in (str,):\n    pass\n",
}


@pytest.mark.parametrize("builtin", sorted(_CALLS))
@pytest.mark.parametrize("how", sorted(_REBOUND))
def test_min_max_or_sorted_the_module_binds_is_not_trusted(builtin: str, how: str):
    """The binding is the original's: only the wrapper's call changed."""
    module = with_definitions(_REBOUND[how].format(builtin))
    reason = screen(in_wrapper(_CALLS[builtin], module), module)
    assert reason and DEVICE_RULE in reason and f"passes a device to {builtin}" in reason, (builtin, how, reason)


@pytest.mark.parametrize("builtin", ["min", "max"])
def test_torchs_min_or_max_imported_under_the_builtins_name_is_not_trusted(builtin: str):
    module = with_definitions(f"from torch import {builtin}\n")
    reason = screen(in_wrapper(_CALLS[builtin], module), module)
    assert reason and f"passes a device to {builtin}" in reason, (builtin, reason)


@pytest.mark.parametrize("size", ["len", "bool"])
def test_a_size_key_the_module_binds_or_answers_is_not_trusted(size: str):
    code = f"d = max([[x.device], [y.device]], key={size})\n"
    for definitions in (f"{size} = lambda v: hash(str(v))\n",
                        "class Box:\n    def __len__(self):\n        return 1\n",
                        "class Box:\n    def __bool__(self):\n        return True\n"):
        module = with_definitions(definitions)
        reason = screen(in_wrapper(code, module), module)
        assert reason and "passes a device to max" in reason, (size, definitions, reason)


_BOX = "class Box:\n    def __init__(self):\n        self.items = []\n\n"
_ANSWERS = {  # a class whose instances, compared with a device, run the module's code with it
    dunder: _BOX + f"    def {dunder}(self, other):\n        return str(other) == 'cuda:' + '0'\n"
    for dunder in ("__lt__", "__gt__", "__le__", "__ge__")}
_ANSWERS["__getattr__"] = _BOX + "    def __getattr__(self, name):\n        return str\n"
_ANSWERS["__getattribute__"] = _BOX + "    def __getattribute__(self, name):\n        return str\n"
_ANSWERS["__gt__ assigned in the body"] = _BOX + "    __gt__ = lambda self, other: str(other) == 'cuda:0'\n"
_COMPARED = {"min": "d = min([x.device, Box()])\n", "max": "d = max(x.device, Box(), key=None)\n",
             "sorted": "s = sorted([x.device, Box()], key=None)\n"}


@pytest.mark.parametrize("builtin", sorted(_COMPARED))
@pytest.mark.parametrize("dunder", sorted(_ANSWERS))
def test_min_max_or_sorted_beside_the_modules_own_ordering_is_refused(builtin: str, dunder: str):
    module = with_definitions(_ANSWERS[dunder])
    reason = screen(in_wrapper(_COMPARED[builtin], module), module)
    assert reason and DEVICE_RULE in reason and f"passes a device to {builtin}" in reason, (builtin, dunder, reason)


def test_the_same_calls_pass_where_the_modules_classes_define_none_of_those_names():
    module = with_definitions(_BOX + "    def __repr__(self):\n        return 'Box'\n\n"
                              "    def push(self, v):\n        self.items.append(v)\n")
    for case in ("max of devices", "min of two devices", "max, default", "min group by len", "sorted, key=None"):
        assert screen(in_wrapper(FOLLOWED[case], module), module) is None, case


_UNSEEN_REBOUND = {  # the module rebinds the builtin without a binding of its name the rule can read
    "builtins' attribute": "import builtins\nbuiltins.{0} = lambda *a, **k: str(a)\n",
    "setattr on builtins": "import builtins\nsetattr(builtins, '{0}', lambda *a, **k: str(a))\n",
    "globals()": "globals()['{0}'] = lambda *a, **k: str(a)\n",
    "vars()": "vars()['{0}'] = lambda *a, **k: str(a)\n",
    "__builtins__": "__builtins__['{0}'] = lambda *a, **k: str(a)\n",
    "a function's __globals__": "def _f():\n    pass\n\n\n_f.__globals__['{0}'] = str\n",
    "exec": "exec('{0} = str')\n",
    "getattr of a name not written out": "import builtins\ngetattr(builtins, '__di' + 'ct__')['{0}'] = str\n",
    "a star import": "from torch import *\n",
}
_BARE = {"min": "d = min(x.device, y.device)\n", "max": "d = max(x.device, y.device, key=None)\n",
         "sorted": "s = sorted((t.device for t in (x, y)), key=None)\n"}


@pytest.mark.parametrize("builtin", sorted(_BARE))
@pytest.mark.parametrize("how", sorted(_UNSEEN_REBOUND))
def test_min_max_or_sorted_the_module_may_rebind_unseen_is_not_trusted(builtin: str, how: str):
    """The original rebinds it (the grammar refuses each of these in changed code, below)."""
    module = with_definitions(_UNSEEN_REBOUND[how].format(builtin))
    variant = in_wrapper(_BARE[builtin], module)
    assert any(f"passes a device to {builtin}" in r for r in every_reason(variant, module)), (builtin, how)


@pytest.mark.parametrize("how", sorted(_UNSEEN_REBOUND))
def test_a_variant_rebinding_max_unseen_is_refused(how: str):
    definitions = _UNSEEN_REBOUND[how].format("max")
    for variant in (with_definitions(definitions), in_wrapper(definitions)):
        assert screen(in_wrapper(_BARE["max"], variant)) is not None, (how, variant)


_GT = "lambda self, other: str(other) == 'cuda:0'"
_UNSEEN_ORDERING = {  # a class given an ordering other than in its body
    "set after the body": f"class Box:\n    pass\n\n\nBox.__gt__ = {_GT}\n",
    "set by a decorator": f"def _ordered(cls):\n    cls.__lt__ = {_GT}\n    return cls\n\n\n@_ordered\nclass Box:\n    pass\n",
    "setattr": f"class Box:\n    pass\n\n\nsetattr(Box, '__lt__', {_GT})\n",
    "type() with a namespace": f"Box = type('Box', (), {{'__gt__': {_GT}}})\n",
    "a metaclass called": f"class Meta(type):\n    pass\n\n\nBox = Meta('Box', (), {{'__lt__': {_GT}}})\n",
    "type() of a class called": f"class Base:\n    pass\n\n\nBox = type(Base)('Box', (), {{'__lt__': {_GT}}})\n",
    "a class's __class__ called": f"class Base:\n    pass\n\n\nBox = Base.__class__('Box', (), {{'__gt__': {_GT}}})\n",
    "type() kept": f"class Base:\n    pass\n\n\nM = type(Base)\nBox = M('Box', (), {{'__gt__': {_GT}}})\n",
    "make_dataclass": ("from dataclasses import make_dataclass\n"
                       f"Box = make_dataclass('Box', [], namespace={{'__gt__': {_GT}}})\n"),
}


@pytest.mark.parametrize("builtin", sorted(_COMPARED))
@pytest.mark.parametrize("how", sorted(_UNSEEN_ORDERING))
def test_min_max_or_sorted_beside_an_ordering_given_unseen_is_refused(builtin: str, how: str):
    module = with_definitions(_UNSEEN_ORDERING[how])
    variant = in_wrapper(_COMPARED[builtin], module)
    assert any(f"passes a device to {builtin}" in r for r in every_reason(variant, module)), (builtin, how)


_INTROSPECTION = """
class Box:
    def __init__(self, v):
        self._v = v

    def same(self, other):
        return type(self) is type(other) and isinstance(other, type(self)) and type(self).__name__ != ''

    def again(self):
        return type(self)(self._v) if self.__class__.__name__ else self.__class__(self._v)


def _shape(t):
    return getattr(t, "shape")
"""


def test_honest_introspection_keeps_min_max_and_sorted_trusted():
    """A class's type compared, named or constructed, and getattr of a name written out,
    make no class and rebind nothing."""
    module = with_definitions(_INTROSPECTION)
    for case in ("max of devices", "min of two devices", "max, default", "sorted, key=None"):
        assert screen(in_wrapper(FOLLOWED[case], module), module) is None, case


# A class whose base the module does not show: what its inherited dunders run cannot be
# read, and a base's __lt__ may call any method the class defines with what it is given
# (here ``key``). The base module need not exist: the screen reads only this text.
_KEY_METHOD = "    def key(self, other):\n        return str(other) == 'cuda:' + '0'\n"
_UNSEEN_BASE = {
    "imported by name": "from ordering_base import Ordered\n\n\nclass Box(Ordered):\n" + _KEY_METHOD,
    "imported module's attribute": "import ordering_base\n\n\nclass Box(ordering_base.Ordered):\n" + _KEY_METHOD,
    "imported under another name": "from ordering_base import Ordered as Base\n\n\nclass Box(Base):\n" + _KEY_METHOD,
    "a relative import": "from .ordering_base import Ordered\n\n\nclass Box(Ordered):\n" + _KEY_METHOD,
    "a base made by a call": "import ordering_base\n\n\nclass Box(ordering_base.make()):\n" + _KEY_METHOD,
    "a library container": "import collections\n\n\nclass Box(collections.UserList):\n" + _KEY_METHOD,
    "torch.nn.Module (its __getattr__)": "import torch.nn as nn\n\n\nclass Box(nn.Module):\n" + _KEY_METHOD,
    "a builtin type's name rebound": "from ordering_base import Ordered\n\nint = Ordered\n\n\nclass Box(int):\n"
                                     + _KEY_METHOD,
    "a metaclass keyword": "from ordering_base import Meta\n\n\nclass Box(metaclass=Meta):\n" + _KEY_METHOD,
    "an imported class decorator": "from ordering_base import ordered\n\n\n@ordered\nclass Box:\n" + _KEY_METHOD,
    "an imported decorator called": "import ordering_base\n\n\n@ordering_base.ordered(by='key')\nclass Box:\n"
                                    + _KEY_METHOD,
    "a relative import named like a plain base": "from .typing import NamedTuple\n\n\nclass Box(NamedTuple):\n"
                                                  + _KEY_METHOD,
    "a decorator bound by assignment": ("import ordering_base\n\nordered = ordering_base.ordered\n\n\n@ordered\n"
                                        "class Box:\n" + _KEY_METHOD),
    "a module class's name rebound": ("import ordering_base\n\n\nclass Base:\n    pass\n\n\n"
                                      "Base = ordering_base.Ordered\n\n\nclass Box(Base):\n" + _KEY_METHOD),
    "a module class over an imported base": ("from ordering_base import Ordered\n\n\nclass Base(Ordered):\n"
                                             "    pass\n\n\nclass Box(Base):\n" + _KEY_METHOD),
}


@pytest.mark.parametrize("builtin", sorted(_COMPARED))
@pytest.mark.parametrize("how", sorted(_UNSEEN_BASE))
def test_min_max_or_sorted_beside_a_class_of_an_unseen_base_is_refused(builtin: str, how: str):
    module = with_definitions(_UNSEEN_BASE[how])
    reason = screen(in_wrapper(_COMPARED[builtin], module), module)
    assert reason and DEVICE_RULE in reason, (builtin, how, reason)


@pytest.mark.parametrize("how", sorted(_UNSEEN_BASE))
def test_a_list_search_beside_a_class_of_an_unseen_base_is_refused(how: str):
    """The same class through ``__eq__``: ``[Box()].index(d)`` compares each item with ``d``."""
    module = with_definitions(_UNSEEN_BASE[how])
    reason = screen(in_wrapper("i = [Box(), y.device].index(x.device)\n", module), module)
    assert reason and DEVICE_RULE in reason, (how, reason)


_PLAIN_BASES = {  # bases whose dunders call no method of the subclass: still trusted
    "object": "class Box(object):\n" + _KEY_METHOD,
    "a builtin type": "class Box(int):\n" + _KEY_METHOD,
    "an exception": "class Box(ValueError):\n" + _KEY_METHOD,
    "torch.autograd.Function": "import torch\n\n\nclass Box(torch.autograd.Function):\n" + _KEY_METHOD,
    "Function imported by name": "from torch.autograd import Function\n\n\nclass Box(Function):\n" + _KEY_METHOD,
    "a NamedTuple": "from typing import NamedTuple\n\n\nclass Box(NamedTuple):\n    a: int\n",
    "an Enum": "import enum\n\n\nclass Box(enum.Enum):\n    A = 1\n",
    "Generic[T]": ("from typing import Generic, TypeVar\n\nT = TypeVar('T')\n\n\nclass Box(Generic[T]):\n"
                   + _KEY_METHOD),
    "a module class": "class Base:\n    pass\n\n\nclass Box(Base):\n" + _KEY_METHOD,
    "a dataclass": "from dataclasses import dataclass\n\n\n@dataclass(order=True)\nclass Box:\n    a: int = 0\n",
    "typing.final": "from typing import final\n\n\n@final\nclass Box:\n" + _KEY_METHOD,
}


@pytest.mark.parametrize("how", sorted(_PLAIN_BASES))
def test_min_max_and_sorted_stay_trusted_beside_classes_of_plain_bases(how: str):
    module = with_definitions(_PLAIN_BASES[how])
    for case in ("max of devices", "min of two devices", "max, default", "sorted, key=None"):
        assert screen(in_wrapper(FOLLOWED[case], module), module) is None, (how, case)
