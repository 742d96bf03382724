"""Executors: where evaluation workers run (see base.py). ``make_executor(options)``.

- ``local`` (default): one judge process per visible GPU on this machine (local.py).
- ``ray``: one Ray actor per GPU of a Ray cluster (ray_executor.py; needs ``kernelband[ray]``).
"""

from __future__ import annotations

from typing import Callable, Optional

from .base import Executor, ExecutorOptions, ExecutorUnavailable, Slot


def _local(options: ExecutorOptions) -> Executor:
    from .local import LocalExecutor

    return LocalExecutor(options)


def _ray(options: ExecutorOptions) -> Executor:
    from .ray_executor import RayExecutor  # imports ray lazily; ExecutorUnavailable without it

    return RayExecutor(options)


EXECUTORS: dict[str, Callable[[ExecutorOptions], Executor]] = {"local": _local, "ray": _ray}
EXECUTOR_NAMES = tuple(EXECUTORS)


def make_executor(options: Optional[ExecutorOptions] = None) -> Executor:
    options = options or ExecutorOptions()
    factory = EXECUTORS.get(options.name)
    if factory is None:
        raise ExecutorUnavailable(f"unknown executor {options.name!r}; known: {', '.join(EXECUTOR_NAMES)}")
    try:
        options.validate()
    except ValueError as e:
        raise ExecutorUnavailable(str(e)) from None
    return factory(options)


__all__ = ["EXECUTORS", "EXECUTOR_NAMES", "Executor", "ExecutorOptions", "ExecutorUnavailable", "Slot", "make_executor"]
