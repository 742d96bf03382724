"""A device handed to a tensor method by name (``obj.to(d)``, ``obj.new_empty(device=d)``)
reaches torch's method on a tensor, but the module's own class may define one: each such
method is followed like a helper, and one the module can swap for other code is refused.
A changed helper or method is followed from unchanged callers too."""
from __future__ import annotations

import ast

import pytest

from helpers.screening import in_wrapper, screen, with_definitions
from kernelband.screen_device_calls import module_code, parameters

HONEST = """
class Pair:
    def __init__(self, t):
        self.t = t

    def to(self, device):
        return Pair(self.t.to(device))

    def new_empty(self, n, device=None):
        return torch.empty(n, device=device)
"""
LAUNDERING = {
    "text of it": "        return Pair(self.t.to(torch.float32 if str(device)[-1] == '0' else torch.float16))\n",
    "returns it": "        return device\n",
    "a key": "        return {device: self}[device]\n",
    "into a helper that makes text": "        return _name(device)\n",
}
_NAME = "def _name(device):\n    return len(str(device))\n"


def _laundering(body: str) -> str:
    return with_definitions(_NAME + HONEST.replace("        return Pair(self.t.to(device))\n", body))


CALLS_ALLOWED = ["y2 = y.to(x.device)\n", "p = Pair(y).to(x.device)\n", "y2 = y.to(device=x.device, dtype=x.dtype)\n",
                 "y2 = y.cuda(x.device)\n", "e = Pair(y).new_empty(3, device=x.device)\n"]


@pytest.mark.parametrize("code", CALLS_ALLOWED)
def test_a_device_given_to_the_modules_honest_methods_is_allowed(code: str):
    module = with_definitions(HONEST)
    assert screen(in_wrapper(code, module), module) is None, code


@pytest.mark.parametrize("case", sorted(LAUNDERING))
def test_a_changed_to_method_that_launders_the_device_is_refused(case: str):
    original = with_definitions(_NAME + HONEST)
    reason = screen(in_wrapper("y2 = y.to(x.device)\n", _laundering(LAUNDERING[case])), original)
    assert reason and "passes a device to y.to" in reason, (case, reason)


def test_a_changed_method_is_followed_from_the_unchanged_caller():
    """The wrapper is the original's: only the method it hands the device to changed."""
    original = in_wrapper("p = Pair(y).to(x.device)\n", with_definitions(_NAME + HONEST))
    variant = in_wrapper("p = Pair(y).to(x.device)\n", _laundering(LAUNDERING["text of it"]))
    reason = screen(variant, original)
    assert reason and "passes a device to Pair(y).to" in reason, reason


def test_a_changed_helper_is_followed_from_the_unchanged_caller():
    helper = "def _sm(device):\n    return torch.cuda.get_device_properties(device).multi_processor_count\n"
    original = in_wrapper("sms = _sm(x.device)\n", with_definitions(helper))
    assert screen(in_wrapper("sms = _sm(x.device)\nm = n\n", with_definitions(helper)), original) is None
    laundering = with_definitions("def _sm(device):\n    return len(str(device))\n")
    for variant in (in_wrapper("sms = _sm(x.device)\n", laundering), in_wrapper("sms = _sm(x.device)\nm = n\n", laundering)):
        reason = screen(variant, original)
        assert reason and "passes a device to _sm" in reason, reason


def test_a_laundering_new_empty_is_refused_by_keyword_too():
    original = with_definitions(HONEST)
    variant = with_definitions(HONEST.replace("return torch.empty(n, device=device)", "return len(f'{device}')"))
    reason = screen(in_wrapper("e = Pair(y).new_empty(3, device=x.device)\n", variant), original)
    assert reason and "passes a device to Pair(y).new_empty" in reason, reason


@pytest.mark.parametrize("code", ["y2 = Pair.to(x.device, 1)\n", "k = [Pair][0].to(x.device)\n"])
def test_a_method_called_on_the_class_object_is_refused(code: str):
    """``Pair.to(d, ...)`` binds the device to ``self``: no longer the parameter followed."""
    module = with_definitions(HONEST)
    reason = screen(in_wrapper(code, module), module)
    assert reason and "passes a device to" in reason, reason


def test_a_to_attribute_set_on_an_instance_is_refused():
    original = with_definitions(_NAME + HONEST.replace("    def to(self, device):\n        return Pair(self.t.to(device))\n",
                                                       ""))
    variant = original.replace("        self.t = t\n", "        self.t = t\n        self.to = _name\n")
    reason = screen(in_wrapper("p = Pair(y).to(x.device)\n", variant), original)
    assert reason and "passes a device to Pair(y).to" in reason, reason


METHODS_UNFOLLOWABLE = {
    "a class attribute": "class A:\n    to = staticmethod(str)\n",
    "an instance attribute": "class A:\n    def __init__(self):\n        self.to = str\n",
    "a property": "class A:\n    @property\n    def to(self):\n        return str\n",
    "__getattr__": "class A:\n    def __getattr__(self, name):\n        return str\n",
    "the class as a value": "class A:\n    def to(self, d):\n        return self\n\n\nB = A\n",
    "a classmethod returning cls": ("class A:\n    def to(self, d):\n        return self\n\n"
                                    "    @classmethod\n    def me(cls):\n        return cls\n"),
    "type() of an instance": "class A:\n    def to(self, d):\n        return self\n\n\ndef f(a):\n    return type(a)\n",
    "a subclass as a value": ("class A:\n    def to(self, d):\n        return self\n\n\nclass B(A):\n    pass\n\n\n"
                              "C = B\n"),
}


@pytest.mark.parametrize("case", sorted(METHODS_UNFOLLOWABLE))
def test_a_to_the_module_can_swap_for_other_code_is_not_followed(case: str):
    assert module_code(ast.parse(METHODS_UNFOLLOWABLE[case])).methods["to"] is None, case


def test_the_class_used_as_constructor_annotation_base_or_isinstance_is_still_followed():
    code = ("class A:\n    def to(self, d):\n        return self\n\n    @classmethod\n    def make(cls):\n"
            "        return cls()\n\n\nclass B(A):\n    pass\n\n\ndef f(a: A) -> A:\n"
            "    return A() if isinstance(a, (A, B)) else A.make()\n")
    methods = module_code(ast.parse(code)).methods["to"]
    assert methods is not None and [fn.name for fn, _ in methods] == ["to"]
    assert module_code(ast.parse("def f(x):\n    return x\n")).methods["to"] == ()


FORWARDING = """
class Pair:
    def __init__(self, t):
        self.t = t

    def to(self, *args, **kwargs):
        return Pair(self.t.to(*args, **kwargs))
"""
FORWARDED = ["p = Pair(y).to(x.device)\n", "p = Pair(y).to(device=x.device)\n",
             "p = Pair(y).to(x.device, torch.float16)\n", "p = Pair(y).to(x.device, non_blocking=True)\n"]
FORWARDING_LAUNDERS = {
    "text of *args": "return Pair(self.t.to(torch.float16 if str(args[0])[-1] == '0' else torch.float32))",
    "text of **kwargs": "return Pair(self.t.to(torch.float16 if len(repr(kwargs)) == 30 else torch.float32))",
    "*args returned": "return args",
    "*args into a helper that makes text": "return _name(*args)",
    "**kwargs into a helper that makes text": "return _name(**kwargs)",
    "*args kept in a list": "return self.t.tolist().append(args)",
}


@pytest.mark.parametrize("code", FORWARDED)
def test_a_to_that_only_forwards_its_arguments_is_followed(code: str):
    """``*args``/``**kwargs`` hold the device (a container of it): handing them on to a
    tensor's ``.to`` keeps it within the allow-list."""
    module = with_definitions(FORWARDING)
    assert screen(in_wrapper(code, module), module) is None, code


@pytest.mark.parametrize("case", sorted(FORWARDING_LAUNDERS))
def test_a_forwarding_to_that_launders_its_arguments_is_refused(case: str):
    original = with_definitions(_NAME + FORWARDING)
    variant = original.replace("return Pair(self.t.to(*args, **kwargs))", FORWARDING_LAUNDERS[case])
    for code in ("p = Pair(y).to(x.device)\n", "p = Pair(y).to(device=x.device)\n"):
        if ("kwargs" in case) == ("device=" in code):
            reason = screen(in_wrapper(code, variant), original)
            assert reason and "passes a device to Pair(y).to" in reason, (case, reason)


def test_an_argument_may_bind_every_parameter_an_unpacked_call_could_reach():
    fn = ast.parse("def f(a, b, *rest, c=1, **kw):\n    pass\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    call = ast.parse("f(1, *xs, 2, c=3, **more)", mode="eval").body
    assert isinstance(call, ast.Call)
    one, xs, two = call.args
    c, more = (k.value for k in call.keywords)
    assert parameters(fn, call, one) == ("a",)
    assert parameters(fn, call, xs) == ("b", "rest")
    assert parameters(fn, call, two) == ("b", "rest")  # after *xs, its position is unknown
    assert parameters(fn, call, c) == ("c",)
    assert parameters(fn, call, more) == ("a", "b", "c", "kw")
    assert parameters(fn, call, one, skip=1) == ("b",)
    bare = ast.parse("def g(a):\n    pass\n").body[0]
    assert isinstance(bare, ast.FunctionDef) and parameters(bare, call, two) is None
