"""The local and the Ray evaluators are one interface (executor/base.Evaluator): each has
every member of the Protocol, its methods with the Protocol's parameters (names, kinds,
defaults, annotations) and return annotation, so the hand-written Ray proxy cannot drift
from the Evaluator it stands for."""
from __future__ import annotations

import inspect
from typing import Any

import pytest

from kernelband.evaluate import Evaluator as LocalEvaluator
from kernelband.executor.base import Evaluator, Slot
from kernelband.executor.local import LocalExecutor
from kernelband.executor.ray_executor import RayEvaluator
from kernelband.model import Task
from kernelband.profile.schema import DeviceFacts

IMPLEMENTATIONS = [LocalEvaluator, RayEvaluator]


def _members() -> tuple[list[str], list[str], list[str]]:
    """(methods, properties, data attributes) the Protocol declares."""
    methods, properties = [], []
    for name, value in vars(Evaluator).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            properties.append(name)
        elif inspect.isfunction(value):
            methods.append(name)
    return methods, properties, list(Evaluator.__annotations__)


def _signature(fn: Any) -> list[tuple[str, Any, Any, Any]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()] + [("->", sig.return_annotation)]


def test_the_protocol_names_what_the_session_uses() -> None:
    methods, properties, data = _members()
    assert set(methods) == {"start", "device_facts", "prepare", "evaluate", "retime_original", "paired_timing",
                            "sanitize", "wide_calls", "profile", "close"}
    assert set(properties) == {"info", "interpreted", "lanes"}
    assert set(data) == {"baseline", "facts", "worker_restarts"}


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_each_method_has_the_protocols_parameters(cls: type) -> None:
    methods, properties, _ = _members()
    for name in methods:
        assert _signature(getattr(cls, name)) == _signature(getattr(Evaluator, name)), f"{cls.__name__}.{name}"
    for name in properties:  # a property, or an attribute each instance sets (the next test)
        own = inspect.getattr_static(cls, name, None)
        if isinstance(own, property):
            assert own.fget is not None
            assert _signature(own.fget) == _signature(getattr(Evaluator, name).fget), f"{cls.__name__}.{name}"
        else:
            assert own is None, f"{cls.__name__}.{name} is neither a property nor an instance attribute"


def test_both_evaluators_are_evaluators(tmp_path) -> None:
    """An instance of each has every member (data attributes included), as the executors hand them out."""
    module = tmp_path / "k.py"
    module.write_text("def k():\n    pass\n")
    task = Task(module_path=str(module), source=module.read_text(), kernel="k", harness="bench_k", device="cpu")
    local = LocalExecutor().evaluator(Slot("cpu 0", "cpu"), task, str(tmp_path / "w"), 0)
    assert type(local) is LocalEvaluator
    ray = RayEvaluator(object(), Slot("ray cpu 0", "cpu"), task, 0)  # type: ignore[arg-type] - no executor needed
    try:
        for ev in (local, ray):
            assert isinstance(ev, Evaluator)
            assert ev.baseline is None and ev.facts == DeviceFacts() and ev.worker_restarts == 0
            assert ev.info is None and ev.interpreted is False and ev.lanes == 1
    finally:
        local.close()

