"""--executor / --workers / --ray-address: where the evaluation workers run (issue 15).

A separate block so that the options module can absorb it: the same three flags for
``optimize`` and ``optimize-all``.
"""
from __future__ import annotations

import argparse
from typing import Any

from .common import UsageError


def add_executor_arguments(p: Any) -> None:
    g = p.add_argument_group("workers (where candidates are evaluated)")
    g.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: one worker process per visible GPU on this machine (default); ray: one Ray actor per "
                        "GPU of a Ray cluster (pip install 'kernelband[ray]'; see docs/RAY.md)")
    g.add_argument("--workers", type=int,
                   help="number of workers (default: one per GPU; 1 under the CPU interpreter)")
    g.add_argument("--ray-address",
                   help="Ray cluster address for --executor ray, e.g. ray://head:10001 or auto (default: a local Ray "
                        "instance)")


def executor_from_args(args: argparse.Namespace) -> Any:
    """The executor the flags ask for, or a UsageError with a one-line reason."""
    from ..executor import ExecutorOptions, ExecutorUnavailable, make_executor

    name = getattr(args, "executor", "local") or "local"
    address = getattr(args, "ray_address", None)
    if address and name != "ray":
        raise UsageError("--ray-address needs --executor ray")
    workers = getattr(args, "workers", None)
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    try:
        return make_executor(ExecutorOptions(name=name, workers=workers, ray_address=address))
    except ExecutorUnavailable as e:
        raise UsageError(str(e)) from None
