"""Containers of devices: honest checks that inputs share one device pass, while every way
to get a device's identity back out of a container (its item as text, its text, hash,
order, a return, a global) is refused. What is made of a container of devices is judged
as what is made of a device; len(), bool(), truth tests and comparisons end the flow
(builtins and methods that carry the devices on: test_screen_device_container_calls.py)."""
from __future__ import annotations

import pytest

from helpers.screening import FIRST_DEVICE_HELPER, ORIG, every_reason, in_wrapper, screen, with_definitions

DEVICE_RULE = "can recognise the judge"

CONTAINERS_ALLOWED = {
    "the size of a set comprehension": "ok = len({t.device for t in (x, y)}) == 1\n",
    "all of a comparison": "assert all(t.device == x.device for t in (x, y))\n",
    "a named set, then its size": "devices = {x.device, y.device}\nassert len(devices) == 1\n",
    "a set display's size": "k = len({x.device, y.device})\n",
    "iterating a tuple of devices": "assert all(d == x.device for d in (x.device, y.device))\n",
    "its text in an assert message": "devices = {t.device for t in (x, y)}\nassert len(devices) == 1, f'on {devices}'\n",
    "its items placing tensors": "for d in [x.device, y.device]:\n    y2 = torch.empty(n, device=d)\n",
    "a membership test": "if x.device in {y.device}:\n    n = n + 0\n",
    "a membership test in a tuple": "if x.device in (y.device,):\n    n = n + 0\n",
    "not in, then raise": "if x.device not in (y.device,):\n    raise ValueError(f'{x.device} and {y.device}')\n",
    "its one item placing tensors": "device = next(iter({t.device for t in (x, y)}))\ny2 = torch.empty(n, device=device)\n",
    "bool of a list": "ok = bool([x.device])\n",
    "set() of a generator": "k = len(set(t.device for t in (x, y)))\n",
    "sets compared": "same = {x.device} == {y.device}\n",
    "a dict by device, its size": "by_device = {t.device: t for t in (x, y)}\nassert len(by_device) == 1\n",
    "a list of lists": "k = len([[x.device], [y.device]])\n",
    "a tuple's item placing a tensor": "pair = (x.device, y.device)\ny2 = torch.empty(n, device=pair[0])\n",
}

CONTAINERS_LAUNDERED = {
    "a list's item as text": ("s = str([x.device][0])\n", "turns a device into text"),
    "a dict's keys as text": ("s = str(list({x.device: 1})[0])\n", "turns a device into text"),
    "keys iterated into an f-string": ("k = [d for d in {x.device: 1}]\ns = f'{k[0]}'\n", "turns a device into text"),
    "next(iter()) into an f-string": ("s = f'{next(iter({x.device}))}'\n", "turns a device into text"),
    "sorted's first as text": ("s = str(sorted({x.device, y.device})[0])\n", "turns a device into text"),
    "sorted by text": ("s = sorted({x.device, y.device}, key=str)\n", "passes a device to sorted"),
    "max by text": ("s = max([x.device], key=str)\n", "passes a device to max"),
    "map to text": ("s = list(map(str, [x.device]))\n", "passes a device to map"),
    "joined text": ("s = '-'.join(str(d) for d in {x.device})\n", "turns a device into text"),
    "repr of a list": ("s = repr([x.device])\n", "turns a device into text"),
    "an f-string of a set": ("s = f'{list({x.device})}'\n", "turns a device into text"),
    "print of a set": ("print({x.device})\n", "passes a device to print"),
    "hash of a frozenset": ("k = hash(frozenset({x.device}))\n", "hashes a device"),
    "a returned list": ("return [x.device]\n", "returns a device"),
    "a returned comprehension": ("return {t.device for t in (x, y)}\n", "returns a device"),
    "a dict method's item as text": ("k = str(list({x.device: 1}.keys())[0])\n", "turns a device into text"),
    "a set method's item as text": ("devices = {x.device}\nd = devices.pop()\ns = f'{d}'\n", "turns a device into text"),
    "a union": ("k = {x.device} | {y.device}\n", "computes with a device"),
    "enumerate's item as text": ("for i, d in enumerate([x.device]):\n    s = str(d)\n", "turns a device into text"),
    "iter with a sentinel": ("k = list(iter(lambda: 0, x.device))\n", "passes a device to iter"),
    "next's default as text": ("k = next(iter([]), x.device)\ns = str(k)\n", "turns a device into text"),
    "a nested item as text": ("k = [[x.device]][0][0]\ns = str(k)\n", "turns a device into text"),
    "a container as a key": ("seen = {}\nseen[(x.device,)] = 1\n", "uses a device as a key"),
    "stored in an item": ("seen = {}\nseen['d'] = [x.device]\n", "stores a device in an item"),
    "a lambda default": ("f = lambda v=[x.device]: 0\n", "uses a device as a default argument"),
    "a tuple hashed by a dict lookup": ("k = {(x.device,): 1}[(y.device,)]\n", "uses a device as a key"),
    "min of a set by hash": ("k = min({x.device, y.device}, key=hash)\n", "passes a device to min"),
    "a helper given a container": ("k = _first([x.device])\n", "passes a device to _first"),
}


@pytest.mark.parametrize("case", sorted(CONTAINERS_ALLOWED))
def test_a_container_of_devices_that_is_only_counted_compared_or_iterated_is_allowed(case: str):
    assert screen(in_wrapper(CONTAINERS_ALLOWED[case])) is None, case


@pytest.mark.parametrize("case", sorted(CONTAINERS_LAUNDERED))
def test_a_device_laundered_through_a_container_is_refused(case: str):
    code, what = CONTAINERS_LAUNDERED[case]
    reason = screen(in_wrapper(code, with_definitions(FIRST_DEVICE_HELPER)))
    assert reason and what in reason and DEVICE_RULE in reason, (case, reason)


@pytest.mark.parametrize("builtin", ["len", "set", "bool", "next"])
def test_a_trusted_builtin_bound_in_the_module_is_no_longer_trusted(builtin: str):
    """``len(devices)`` passes only where ``len`` is the builtin: a local of that name is
    any function, which would receive the container."""
    code = f"{builtin} = lambda v: str(v)\nk = {builtin}([x.device])\n"
    assert any(f"passes a device to {builtin}" in r for r in every_reason(in_wrapper(code))), builtin


def test_a_device_or_a_container_of_one_bound_to_a_global_is_refused():
    """Another definition would read the global with no device in sight."""
    for code in ("global _SEEN\n_SEEN = {x.device}\n", "global _SEEN\n_SEEN = x.device\n",
                 "global _SEEN\nfor _SEEN in [x.device]:\n    pass\n"):
        variant = in_wrapper(code, "_SEEN = None\n" + ORIG)
        assert any("stores a device in a global" in r for r in every_reason(variant, "_SEEN = None\n" + ORIG)), code


_EQ_CLASS = """
class Tag:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return str(other) == self.name

    def __contains__(self, item):
        return str(item) == self.name
"""


@pytest.mark.parametrize("code", ["ok = x.device == Tag('cuda:' + '0')\n", "ok = x.device in Tag('c')\n",
                                  "ok = Tag('c') in [x.device]\n", "devices = {x.device}\n"])
def test_a_device_that_may_reach_the_modules_own_eq_or_contains_is_refused(code: str):
    """``d == obj`` calls ``obj.__eq__(d)`` when torch's gives up; a set or a list search
    compares so too: with such a class in the module, none of them is a comparison only."""
    module = with_definitions(_EQ_CLASS)
    reason = screen(in_wrapper(code, module), module)
    assert reason and ("the module's own comparison" in reason or "puts a device in a container" in reason), reason


def test_comparisons_stay_allowed_where_the_module_defines_no_eq():
    module = with_definitions(_EQ_CLASS.replace("__eq__", "same").replace("__contains__", "holds"))
    assert screen(in_wrapper("assert x.device == y.device and x.device in {y.device}\n", module), module) is None


def test_a_device_use_is_not_licensed_by_the_same_call_on_another_value():
    """The original's ``str(d)`` of a string licenses no ``str(d)`` of a device."""
    original = in_wrapper("d = 'cuda'\ns = str(d)\n")
    reason = screen(in_wrapper("d = x.device\ns = str(d)\n"), original)
    assert reason and "turns a device into text (str(d))" in reason, reason
