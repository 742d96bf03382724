"""Local executor (the default): one judge process per visible GPU, pinned to it with
CUDA_VISIBLE_DEVICES; under the interpreter a number of CPU slots (default 1).

``--device auto`` (the default) gives one worker per visible GPU; ``cuda`` the first GPU
unless ``--workers`` asks for more; ``cuda:N`` that GPU. One worker is started exactly as
before the executor existed, so a single-GPU session behaves as it always did.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional

from ..model import Task
from .base import Evaluator, ExecutorOptions, Slot


def visible_gpus() -> list[str]:
    """Physical ids of the GPUs this process may use, without importing torch:
    CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists; [] when there are none."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [x.strip() for x in env.split(",") if x.strip()]
        out: list[str] = []
        for x in ids:  # CUDA stops at the first invalid entry (e.g. -1)
            if x.startswith("-"):
                break
            out.append(x)
        return out
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        res = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if res.returncode != 0:
        return []
    return [line.strip() for line in res.stdout.splitlines() if line.strip().isdigit()]


def _timing_lock(gpu: str) -> dict[str, str]:
    """A KERNELBAND_TIMING_LOCK file set by the user guards one GPU: with a worker per GPU
    each gets its own (``PATH-gpuN``), or the workers would take turns timing on different
    GPUs. Unset, each judge picks the file of its GPU's UUID by itself; ``off`` stays off."""
    path = os.environ.get("KERNELBAND_TIMING_LOCK")
    if not path or path.lower() in ("off", "0", "none"):
        return {}
    return {"KERNELBAND_TIMING_LOCK": f"{path}-gpu{gpu}"}


class LocalExecutor:
    name = "local"

    def __init__(self, options: Optional[ExecutorOptions] = None) -> None:
        self.options = options or ExecutorOptions()
        self.options.validate()

    def slots(self, device: str) -> list[Slot]:
        wanted = self.options.workers
        if device.startswith("cuda:"):  # an explicit GPU: that one, as before
            return [Slot(device, device, gpu=True)]
        gpus = [] if device == "cpu" else visible_gpus()
        # auto (the default) takes every visible GPU; an explicit "cuda" keeps meaning the
        # first one unless --workers asks for more (scripts that pass it run as before)
        default = len(gpus) if device == "auto" else 1
        if len(gpus) >= 2 and (wanted or default) > 1:
            n = min(wanted or default, len(gpus))
            return [
                Slot(f"gpu {g}", "cuda", {"CUDA_VISIBLE_DEVICES": g, **_timing_lock(g)}, gpu=True) for g in gpus[:n]
            ]
        if gpus or device == "cuda":  # one GPU: the worker starts unpinned, exactly as before
            return [Slot("gpu", device, gpu=True)]
        # the interpreter: CPU slots (each its own judge process)
        return [Slot(f"cpu {i}", device) for i in range(wanted or 1)]

    def evaluator(self, slot: Slot, task: Task, workdir: Optional[str], profile_tier: int) -> Evaluator:
        from dataclasses import replace

        from ..evaluate import Evaluator as LocalEvaluator

        if slot.device != task.device:
            task = replace(task, device=slot.device)
        return LocalEvaluator(task, workdir=workdir, profile_tier=profile_tier, env=dict(slot.env))

    def close(self) -> None:
        pass
