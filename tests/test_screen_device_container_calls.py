"""Builtins, container methods and truth tests over a container of devices: the flow is
followed through them (what gives the devices back holds them; a count, a position or a
truth value ends it), so honest code that walks its inputs' devices passes, while each
form's laundering variant, and each form where the module could swap in its own code
(a rebound builtin, a class defining the method, ``__getattr__``, a dunder the call would
run), is still refused."""
from __future__ import annotations

import pytest

from helpers.screening import FIRST_DEVICE_HELPER, every_reason, in_wrapper, screen, with_definitions

DEVICE_RULE = "can recognise the judge"
_PLACE = "    y2 = torch.empty(n, device=d)\n"

FOLLOWED = {
    ".pop()": "devices = {x.device, y.device}\nd = devices.pop()\ny2 = torch.empty(n, device=d)\n",
    ".keys()": "for d in {x.device: 1}.keys():\n" + _PLACE,
    ".values()": "for d in {1: x.device}.values():\n" + _PLACE,
    ".items()": "for k, d in {1: x.device}.items():\n" + _PLACE,
    ".get(k, default)": "d = {1: x.device}.get(2, y.device)\ny2 = torch.empty(n, device=d)\n",
    ".copy()": "devices = [x.device].copy()\nassert len(devices) == 1\n",
    ".index(d)": "i = [x.device, y.device].index(y.device)\n",
    ".count(d)": "assert [x.device, y.device].count(x.device) == 2\n",
    "enumerate": "for i, d in enumerate([x.device, y.device]):\n" + _PLACE,
    "enumerate with a start": "for i, d in enumerate([x.device], start=1):\n" + _PLACE,
    "zip": "for d, e in zip([x.device], [y.device]):\n    assert d == e\n",
    "zip, strict": "for d, e in zip([x.device, y.device], [y.device, x.device], strict=True):\n    assert d == e\n",
    "zip's other items free": "for d, t in zip([x.device, y.device], (x, y)):\n    assert t.device == d\n",
    "enumerate's counter free": "for i, d in enumerate([x.device, y.device]):\n    n = n + i\n",
    "sorted": "devices = sorted({x.device, y.device})\nassert len(devices) == 1\n",
    "sorted, reversed order": "devices = sorted({x.device}, reverse=True)\ny2 = torch.empty(n, device=devices[0])\n",
    "reversed": "for d in reversed([x.device, y.device]):\n" + _PLACE,
    "if devices:": "devices = {x.device}\nif devices:\n    n = n - 0\n",
    "while devices: pop": "devices = {x.device}\nwhile devices:\n    d = devices.pop()\n" + _PLACE,
    "not devices": "devices = {x.device}\nok = not devices\n",
    "a conditional's test": "devices = {x.device}\nk = 1 if devices else 0\n",
    "a comprehension's condition": "k = [t for t in (x, y) if {t.device}]\n",
    "assert devices": "devices = [t.device for t in (x, y)]\nassert devices\n",
}

LAUNDERED = {
    ".pop() as text": ("devices = {x.device}\ns = str(devices.pop())\n", "turns a device into text"),
    ".values() as text": ("s = repr(list({1: x.device}.values()))\n", "turns a device into text"),
    ".items() as text": ("for k, d in {1: x.device}.items():\n    s = f'{d}'\n", "turns a device into text"),
    ".get's default as text": ("d = {1: y.device}.get(2, x.device)\ns = str(d)\n", "turns a device into text"),
    ".get on no device, its default as text": ("d = {}.get(2, x.device)\ns = str(d)\n", "passes a device to {}.get"),
    ".get by a device": ("k = {1: y.device}.get(x.device)\n", "uses a device as a key"),
    ".pop by a device": ("k = {y.device: 1}.pop(x.device, 0)\n", "uses a device as a key"),
    ".index bounded by a device": ("i = [x.device].index(x.device, y.device)\n", "uses a device as a key"),
    ".copy() returned": ("return [x.device].copy()\n", "returns a device"),
    "enumerate's item hashed": ("for i, d in enumerate([x.device]):\n    k = hash(d)\n", "hashes a device"),
    "enumerate starting at a device": ("for i, t in enumerate((x, y), x.device):\n    n = n + i\n",
                                       "passes a device to enumerate"),
    "zip into a sink": ("for d, t in zip([x.device], (x,)):\n    print(d)\n", "passes a device to print"),
    "zip into text": ("s = str(list(zip([x.device], [1])))\n", "turns a device into text"),
    "zip into a dict": ("k = dict(zip([x.device], [1]))\n", "passes a device to dict"),
    "zip unpacked": ("k = list(zip(*[[x.device]]))\n", "passes a device to zip"),
    "zip's strict a device": ("k = list(zip([1], strict=x.device))\n", "passes a device to zip"),
    "sorted by text": ("s = sorted([x.device, y.device], key=str)\n", "passes a device to sorted"),
    "sorted by an evil key": ("s = sorted([x.device, y.device], key=lambda d: repr(d)[-2])\n",
                              "passes a device to sorted"),
    "sorted by a helper": ("s = sorted([x.device], key=_first)\n", "passes a device to sorted"),
    "reversed into text": ("s = ''.join(map(str, reversed([x.device])))\n", "passes a device to map"),
    "a truth test of its text": ("if str([x.device][0])[-1] == '0':\n    n = n - 1\n", "turns a device into text"),
    "not of its text": ("ok = not str(x.device).endswith('0')\n", "turns a device into text"),
}


@pytest.mark.parametrize("case", sorted(FOLLOWED))
def test_a_container_call_over_devices_is_followed_not_refused(case: str):
    assert screen(in_wrapper(FOLLOWED[case])) is None, case


@pytest.mark.parametrize("case", sorted(LAUNDERED))
def test_a_device_laundered_through_a_container_call_is_refused(case: str):
    code, what = LAUNDERED[case]
    module = with_definitions(FIRST_DEVICE_HELPER)
    reason = screen(in_wrapper(code, module), module)
    assert reason and what in reason and DEVICE_RULE in reason, (case, reason)


@pytest.mark.parametrize("builtin", ["enumerate", "zip", "sorted", "reversed"])
def test_a_carrying_builtin_the_module_binds_is_not_trusted(builtin: str):
    """Bound in the wrapper, or at module level (``enumerate = ...`` above the wrapper):
    either is any function, which would receive the devices."""
    local = in_wrapper(f"{builtin} = lambda v: str(v)\nk = {builtin}([x.device])\n")
    assert any(f"passes a device to {builtin}" in r for r in every_reason(local)), builtin
    module = with_definitions(f"def {builtin}(v, *rest, **kw):\n    return str(v)\n")
    variant = in_wrapper(f"k = {builtin}([x.device])\n", module)
    reason = screen(variant, module)
    assert reason and f"passes a device to {builtin}" in reason, (builtin, reason)


_BOX = "class Box:\n    def __init__(self):\n        self.items = []\n\n"
_EQ = "    def __eq__(self, other):\n        return str(other) == 'cuda:' + '0'\n"
_SEARCH = "\n\nclass Pair:\n    def to(self, *args):\n        return args.{}(Box())\n"
SWAPPED = {  # the module's code that a container method on devices could reach instead of Python's
    "a class defining .pop": (_BOX + "    def pop(self, *a):\n        return str(a)\n",
                              "devices = {x.device}\nd = devices.pop()\n", "reads .pop of a device value"),
    "a class assigning .get": (_BOX + "    get = staticmethod(str)\n",
                               "d = {1: x.device}.get(1)\n", "reads .get of a device value"),
    "an attribute stored as .keys": ("class Box:\n    def __init__(self):\n        self.keys = str\n",
                                     "for d in {x.device: 1}.keys():\n" + _PLACE, "reads .keys of a device value"),
    "__getattr__": (_BOX + "    def __getattr__(self, name):\n        return str\n",
                    "for k, d in {1: x.device}.items():\n" + _PLACE, "reads .items of a device value"),
    "__getattr__ assigned": (_BOX + "    __getattr__ = lambda self, name: str\n",
                             "devices = [x.device].copy()\n", "reads .copy of a device value"),
    # a display of devices is refused beside such an __eq__ already; *args is a container of them too
    "__eq__ for .index": (_BOX + _EQ + _SEARCH.format("index"), "p = Pair(y).to(x.device)\n", "passes a device to Pair"),
    "__eq__ for .count": (_BOX + _EQ + _SEARCH.format("count"), "p = Pair(y).to(x.device)\n", "passes a device to Pair"),
    "__index__ for .pop": (_BOX + "    def __index__(self):\n        return 0\n",
                           "d = [x.device].pop(Box())\n", "reads .pop of a device value"),
    "an ordering for sorted": (_BOX + "    def __gt__(self, other):\n        return str(other) == 'cuda:' + '0'\n",
                               "s = sorted([x.device, Box()])\n", "passes a device to sorted"),
    "__index__ for enumerate": (_BOX + "    def __index__(self):\n        return 0\n",
                                "for i, d in enumerate([x.device], Box()):\n" + _PLACE, "passes a device to enumerate"),
    "__bool__ for a truth test": (_BOX + "    def __bool__(self):\n        return True\n",
                                  "devices = {x.device}\nif devices:\n    n = n - 0\n", "branches on a device"),
    "__len__ for not": (_BOX + "    def __len__(self):\n        return 1\n",
                        "ok = not [x.device]\n", "computes with a device"),
}


@pytest.mark.parametrize("case", sorted(SWAPPED))
def test_a_container_call_the_module_can_answer_itself_is_refused(case: str):
    """The class is the original's (the grammar refuses class bodies in changed code):
    only the wrapper's call changed, and it is refused where the module could answer it."""
    definitions, code, what = SWAPPED[case]
    module = with_definitions(definitions)
    reason = screen(in_wrapper(code, module), module)
    assert reason and what in reason and DEVICE_RULE in reason, (case, reason)


def test_the_same_calls_pass_where_the_modules_classes_define_none_of_those_names():
    module = with_definitions(_BOX + "    def push(self, v):\n        self.items.append(v)\n")
    for code in (FOLLOWED[".pop()"], FOLLOWED[".index(d)"], FOLLOWED["sorted"], FOLLOWED["if devices:"]):
        assert screen(in_wrapper(code, module), module) is None, code
    for search in ("index", "count"):
        module = with_definitions(_BOX + _SEARCH.format(search))
        assert screen(in_wrapper("p = Pair(y).to(x.device)\n", module), module) is None, search
