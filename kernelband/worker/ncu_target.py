"""``python -m kernelband.worker.ncu_target SPEC_JSON``: the program ncu profiles.

SPEC_JSON is a path to (or the text of) ``{"task": Task dict, "seed": int,
"launches": int, "workdir": str}`` (a bare Task dict also works). The harness runs
once outside the profiled range (compilation and autotuning happen there), then the
kernel's first ``launches`` launches are replayed between cudaProfilerStart and
cudaProfilerStop, which is all that ``ncu --profile-from-start off`` profiles.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence


def _load_spec(arg: str) -> dict[str, Any]:
    text = arg if arg.lstrip().startswith("{") else Path(arg).read_text(encoding="utf-8")
    spec = json.loads(text)
    return spec if "task" in spec else {"task": spec}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m kernelband.worker.ncu_target SPEC_JSON", file=sys.stderr)
        return 2
    spec = _load_spec(args[0])
    os.environ.pop("TRITON_INTERPRET", None)
    import torch

    from ..model import Task
    from .runner import load_module, run_harness, synchronize

    task = Task.from_dict(spec["task"])
    if task.device.startswith("cuda:"):
        torch.cuda.set_device(int(task.device.split(":", 1)[1]))
    workdir = spec.get("workdir") or tempfile.mkdtemp(prefix="kernelband-ncu-")
    version = load_module(task, task.source, "ncu", workdir)
    _, rec = run_harness(version, int(spec.get("seed", 0)))
    launches = rec.launches
    mine = [launch for launch in launches if launch.name == task.kernel][: max(1, int(spec.get("launches", 1)))]
    if not mine:
        seen = ", ".join(sorted({launch.name for launch in launches})) or "no Triton kernel"
        print(f"ncu_target: the harness never launched {task.kernel} (it launched: {seen})", file=sys.stderr)
        return 3
    synchronize()
    torch.cuda.profiler.start()
    try:
        for launch in mine:
            launch.replay()
        synchronize()
    finally:
        torch.cuda.profiler.stop()
    print(f"ncu_target: replayed {len(mine)} launch(es) of {task.kernel}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
