"""--executor / --workers / --ray-address: where the evaluation workers run (issue 15).

A separate block so that the options module can absorb it: the same three flags for
``optimize`` and ``optimize-all``.
"""
from __future__ import annotations

import argparse
from typing import Any

from .common import UsageError


def add_executor_arguments(p: Any) -> None:
    """--executor, --ray-address, --workers as kernelband/options.py defines them (for
    optimize-all; optimize gets them with its other options)."""
    from ..options import BY_NAME

    g = p.add_argument_group("workers (where candidates are evaluated)")
    for name in ("executor", "ray_address", "workers"):
        BY_NAME[name].add_to(g)


def executor_from_args(args: argparse.Namespace) -> Any:
    """The executor the flags ask for, or a UsageError with a one-line reason."""
    from ..executor import ExecutorOptions, ExecutorUnavailable, make_executor

    name = getattr(args, "executor", "local") or "local"
    address = getattr(args, "ray_address", None) or None  # "" (the option's default): a local instance
    if address and name != "ray":
        raise UsageError("--ray-address needs --executor ray")
    workers = getattr(args, "workers", None) or None  # 0: one per GPU (options.py)
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1 (0: one per visible GPU)")
    try:
        return make_executor(ExecutorOptions(name=name, workers=workers, ray_address=address))
    except ExecutorUnavailable as e:
        raise UsageError(str(e)) from None
