"""Whether the timed replays of a module's launches are the call, replay by replay (the
round-3 cheats that keep state for a later run, and their look-alikes).

In this process, under Triton's interpreter: run the harness with the launches recorded
as the variant process records a kept run, keeping (independently of the code under
test) every storage the launches touch as the first of them found it, and what the
launches wrote as the call left it. Then the real timing loop runs with a restore that
checks, before each timed replay, that every storage is back as the call found it; and a
few replays more check that each leaves what the launches wrote as the call's launches left it (the same work
from the same state: a kernel that skipped work its earlier run marked done would start
from its marks, or end elsewhere).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

_TESTS = Path(__file__).resolve().parents[2]
_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from redteam.round3.replaying import replay_problems
item = json.load(sys.stdin)
print(json.dumps(replay_problems(item["source"], item["harness"], Path(item["folder"]))))
"""


def replay_problems_apart(source: str, harness: str, folder: Path, timeout_s: float = 600.0) -> list[str]:
    """``replay_problems`` in a throwaway process started under the interpreter (Triton
    decides at import whether its own helpers, ``tl.cdiv`` say, are interpreted: a process
    that imported it without TRITON_INTERPRET cannot run such kernels)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(_TESTS)], capture_output=True, text=True, env=env,
                          input=json.dumps({"source": source, "harness": harness, "folder": str(folder)}),
                          timeout=timeout_s)
    if proc.returncode != 0:
        return [f"the replays could not be run: {proc.stderr[-2000:]}"]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def _storage(t: torch.Tensor) -> torch.Tensor:
    s = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(s, 0, (s.nbytes(),), (1,))


def _load(source: str, folder: Path, name: str) -> Any:
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def replay_problems(source: str, harness: str, folder: Path, replays: int = 3) -> list[str]:
    """What is wrong with the replays of ``harness``'s launches (empty: each timed replay
    starts from the call's state and ends in the call's end state). Needs
    TRITON_INTERPRET=1 set before the call (Triton reads it when the module is loaded)."""
    from kernelband.worker import capture, timing
    from kernelband.worker.variant import _restorer

    assert os.environ.get("TRITON_INTERPRET") == "1"
    module = _load(source, folder, f"replayed_{abs(hash(source))}")
    found: dict[tuple[str, int], tuple[str, torch.Tensor, torch.Tensor]] = {}

    def keep(launch: Any, named: dict[str, torch.Tensor]) -> None:
        for name, t in named.items():
            key = (str(t.device), t.untyped_storage().data_ptr())
            if key not in found:
                live = _storage(t)
                found[key] = (f"{launch.name}.{name}", live, live.clone())

    with capture.recording(snapshot_bytes=1 << 30, before_launch=keep) as rec:
        getattr(module, harness)()
    # the call's end state of what its launches wrote (torch in the wrapper is not replayed)
    written = {(str(t.device), t.untyped_storage().data_ptr()) for launch in rec.launches
               for name, t in launch.named_args().items() if name in launch.written}
    end = {key: live.clone() for key, (_, live, _) in found.items() if key in written}
    restore = _restorer(rec)
    if restore is None:
        return ["the kept run's state cannot be restored"]
    problems: list[str] = []
    restores = [0]

    def checked_restore() -> None:
        restore()
        restores[0] += 1
        for label, live, first in found.values():
            if not torch.equal(live, first):
                problems.append(f"before replay {restores[0]}: {label}'s memory is not as the call found it")

    timing.time_launches(rec.launches, restore=checked_restore)  # the worker's own timing loop
    if restores[0] < 3:
        problems.append(f"the timing loop restored the state {restores[0]} times (fewer than its timed replays)")
    for i in range(replays):
        checked_restore()
        capture.replay_all(rec.launches)
        for key, (label, live, _) in found.items():
            if key in end and not torch.equal(live, end[key]):
                problems.append(f"replay {i + 1} leaves {label}'s memory other than the call left it")
    return sorted(set(problems))
