"""A module whose class defines ``__torch_function__`` (or ``__torch_dispatch__``) receives
whatever a torch call is given beside one of its instances: ``b.to(d)``,
``torch.empty_like(b, device=d)``, and ``d == b`` (a device's ``__eq__`` gives way to the
tensor's, which torch routes to that hook). There, no device is trusted to a torch call, a
comparison or a container search in changed code: each is refused. Without such a class
the same calls pass, as before."""
from __future__ import annotations

import pytest

from helpers.screening import in_wrapper, screen, with_definitions

DEVICE_RULE = "can recognise the judge"
_HOOKED = '''
class _Hooked(torch.Tensor):
    @classmethod
    def {hook}(cls, func, types, args=(), kwargs=None):
        return super().{hook}(func, types, args, kwargs or {{}})

'''
_UNSEEN = '''
class _Hooked(torch.Tensor):
    pass


setattr(_Hooked, "__torch_function__", classmethod(lambda cls, func, types, args=(), kwargs=None: None))
'''
# each hands the device to the hook where ``y`` is one of the module's hooked tensors
REACHING = {
    "to": "z = y.to(x.device)\n",
    "a tensor method's device=": "z = y.new_empty(3, device=x.device)\n",
    "a torch function's device=": "z = torch.empty_like(y, device=x.device)\n",
    "compared": "same = x.device == y\n",
    "compared, not equal": "other = x.device != y\n",
    "searched": "found = x.device in [y]\n",
}


@pytest.mark.parametrize("hook", ["__torch_function__", "__torch_dispatch__"])
@pytest.mark.parametrize("case", sorted(REACHING))
def test_a_device_given_to_torch_beside_the_modules_torch_hook_is_refused(hook: str, case: str) -> None:
    module = with_definitions(_HOOKED.format(hook=hook))
    reason = screen(in_wrapper(REACHING[case], module), module)
    assert reason and DEVICE_RULE in reason, (case, reason)


@pytest.mark.parametrize("case", sorted(REACHING))
def test_a_torch_hook_given_other_than_in_a_class_body_counts_too(case: str) -> None:
    module = with_definitions(_UNSEEN)
    reason = screen(in_wrapper(REACHING[case], module), module)
    assert reason and DEVICE_RULE in reason, (case, reason)


@pytest.mark.parametrize("case", ["to", "a tensor method's device=", "a torch function's device=", "compared"])
def test_the_same_calls_pass_where_no_class_of_the_module_hooks_torch(case: str) -> None:
    assert screen(in_wrapper(REACHING[case])) is None, case


_DYNAMIC = {  # a hook whose name no text of the module shows, on a tensor class
    "setattr of a built name": "class _Hooked(torch.Tensor):\n    pass\n\n\nsetattr(_Hooked, '__torch_' + 'function__', "
                               "classmethod(lambda *a, **k: None))\n",
    "a class made by type()": "_Hooked = type('_Hooked', (torch.Tensor,), {'__torch_' + 'function__': "
                              "classmethod(lambda *a, **k: None)})\n",
    "bases not written out": "_BASES = (torch.Tensor,)\n_Hooked = type('_Hooked', _BASES, dict())\n",
}


@pytest.mark.parametrize("how", sorted(_DYNAMIC))
def test_a_torch_hook_named_by_no_text_of_the_module_counts_where_a_tensor_class_is_made(how: str) -> None:
    module = with_definitions(_DYNAMIC[how])
    reason = screen(in_wrapper(REACHING["a torch function's device="], module), module)
    assert reason and DEVICE_RULE in reason, (how, reason)


def test_a_module_binding_names_unseen_without_a_tensor_class_still_places_tensors() -> None:
    """``setattr`` alone (no tensor subclass anywhere) gives torch no hook: a variant's
    ``torch.empty_like(y, device=x.device)`` passes there as elsewhere."""
    module = with_definitions("class _Config:\n    pass\n\n\nsetattr(_Config, 'block', 128)\n")
    assert screen(in_wrapper(REACHING["a torch function's device="], module), module) is None
