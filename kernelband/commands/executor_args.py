"""--executor / --workers / --ray-address (defined in kernelband/options.py, for
``optimize`` and ``optimize-all``): the executor they ask for."""

from __future__ import annotations

import argparse
from typing import Any

from .common import UsageError


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
