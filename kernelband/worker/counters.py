"""Tier 3 around the worker: run Nsight Compute on a one-shot re-run of the harness
(``kernelband.profile.ncu`` builds the command and reads the CSV) and merge the
counters into a profile from the worker (``add_counters``, called by the session and
the profile command). The profiled program is ``kernelband.worker.ncu_target``; it
runs module code, so it gets a variant process's scrubbed environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, TypedDict, Union, cast

from ..profile import ncu as _ncu
from ..profile.assemble import attach_counters
from ..profile.schema import Profile
from .sandbox import scrubbed_env

if TYPE_CHECKING:  # types only: the variant process loads this module (through profiling) and never uses a store
    from ..model import Task
    from ..store import Store

_Run = Callable[..., subprocess.CompletedProcess[str]]  # subprocess.run, or a test's stand-in

COUNTERS_IN_SESSION = "collected by the session (kernelband.worker.counters.add_counters), not inside the worker"


class CountersOk(TypedDict):
    """Tier 3 collected: the fields of ``schema.CounterTier`` and ``ok``; stored as is in the cache."""

    ok: Literal[True]
    values: dict[str, Optional[float]]  # the launches' counters, aggregated
    per_launch: list[dict[str, Optional[float]]]
    kernel_names: list[str]
    metrics: dict[str, str]  # name -> the ncu metric used
    ncu: str  # its version
    seconds: float
    command: str
    cached: bool


class CountersFailed(TypedDict):
    ok: Literal[False]
    reason: str


CountersResult = Union[CountersOk, CountersFailed]


def collect_counters(
    task: Task,
    *,
    store: Optional[Store] = None,
    gpu: str = "",
    triton_version: str = "",
    interpreted: bool = False,
    launches: int = 1,
    timeout_s: float = 300.0,
    ncu: Optional[str] = None,
    python: Optional[str] = None,
    run: _Run = subprocess.run,
    refresh: bool = False,
    keep_dir: Optional[str] = None,
) -> CountersResult:
    """Counters of the task's kernel: {"ok": True, "values": {...}, "per_launch": [...],
    "metrics": {name: ncu metric}, "ncu": version, "cached": bool, "seconds": s,
    "command": str} or {"ok": False, "reason": why}. Never raises for ncu's failures."""
    if interpreted:
        return {"ok": False, "reason": _ncu.INTERPRETER}
    ncu = ncu or _ncu.find_ncu()
    if not ncu:
        return {
            "ok": False,
            "reason": "ncu (Nsight Compute) not found on PATH, in CUDA's bin folder or $KERNELBAND_NCU",
        }
    version = _ncu.ncu_version(ncu, run)
    key = _ncu.cache_key(task, gpu, triton_version, version, launches)
    if store is not None and not refresh:
        cached = store.get(key)
        if cached:  # what an earlier run of this function stored under the key
            return {**cast(CountersOk, cached), "cached": True}
    used = _ncu.metric_list()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kernelband-ncu-") as tmp:
        got = _run_ncu(task, tmp, ncu, used, launches, python, run, timeout_s, keep_dir)
    if isinstance(got, dict):
        return got
    rows, cmd = got
    per_launch = [_ncu.derive(r["metrics"], used) for r in rows]
    result: CountersOk = {
        "ok": True,
        "values": _ncu.aggregate(per_launch),
        "per_launch": per_launch,
        "kernel_names": sorted({r["kernel"] for r in rows}),
        "metrics": used,
        "ncu": version,
        "seconds": round(time.perf_counter() - t0, 2),
        "command": " ".join(cmd[: cmd.index("--metrics")]) + " --metrics <METRICS> ...",
        "cached": False,
    }
    if store is not None:
        store.put(key, result)
    return result


def _run_ncu(
    task: Task,
    tmp: str,
    ncu: str,
    used: dict[str, str],
    launches: int,
    python: Optional[str],
    run: _Run,
    timeout_s: float,
    keep_dir: Optional[str],
) -> Union[tuple[list[_ncu.NcuRow], list[str]], CountersFailed]:
    """(rows, command) of an ncu run over the task in ``tmp``; a metric this ncu does not
    know falls back to its next name (``used`` is updated), up to 4 tries; or the
    {"ok": False, "reason": why} of a failure."""
    spec_path = os.path.join(tmp, "spec.json")
    csv_path = os.path.join(tmp, "ncu.csv")
    spec = {
        "task": task.to_dict(),
        "seed": task.seeds[0] if task.seeds else 0,
        "launches": launches,
        "workdir": os.path.join(tmp, "work"),
    }
    Path(spec_path).write_text(json.dumps(spec), encoding="utf-8")
    for _attempt in range(4):
        cmd = _ncu.build_command(ncu, spec_path, csv_path, task.kernel, used, 0, launches, python)
        # the profiled source may be a candidate's: the same scrubbed environment as a variant process
        env = scrubbed_env(tmp)
        env.pop("TRITON_INTERPRET", None)
        try:
            proc = run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            return {"ok": False, "reason": f"ncu timed out after {timeout_s:.0f} s"}
        except OSError as e:
            return {"ok": False, "reason": f"ncu could not be started: {e}"}
        log = Path(csv_path).read_text(encoding="utf-8", errors="replace") if os.path.exists(csv_path) else ""
        if keep_dir:  # the raw output, for inspection
            os.makedirs(keep_dir, exist_ok=True)
            Path(keep_dir, f"{task.kernel}.ncu.csv").write_text(log, encoding="utf-8")
            Path(keep_dir, f"{task.kernel}.ncu.log").write_text(
                (proc.stdout or "") + (proc.stderr or ""), encoding="utf-8"
            )
        text = (proc.stdout or "") + "\n" + (proc.stderr or "") + "\n" + log
        rows = [r for r in _ncu.parse_csv(log) if r["metrics"]]
        if rows:
            return rows, cmd
        missing = _ncu.unknown_metrics(text, used)
        if not missing:
            break
        _fall_back(used, missing)
        if os.path.exists(csv_path):
            os.remove(csv_path)
    return {"ok": False, "reason": _ncu.explain_failure(proc.returncode, text)}


def _fall_back(used: dict[str, str], missing: list[str]) -> None:
    """Each metric ncu did not know: its next candidate name, or dropped."""
    for name in missing:
        cands = _ncu.METRICS[name]
        idx = cands.index(used[name]) + 1 if used[name] in cands else len(cands)
        if idx < len(cands):
            used[name] = cands[idx]
        else:
            used.pop(name)


def add_counters(
    profile: Profile,
    task: Task,
    *,
    store: Optional[Store] = None,
    gpu: str = "",
    triton_version: str = "",
    **kwargs: Any,
) -> Profile:
    """Session side of tier 3: run ncu for the task and merge its counters into a
    profile from the worker (the same profile when it already has counters or
    cannot have them)."""
    if profile.tiers.counters is not None:
        return profile
    if profile.unavailable.get("counters") not in (None, COUNTERS_IN_SESSION):
        return profile
    count = min((profile.launch.count if profile.launch else 0) or 1, 3)
    result = collect_counters(
        task,
        store=store,
        gpu=gpu,
        triton_version=triton_version,
        interpreted=profile.interpreted,
        launches=count,
        **kwargs,
    )
    return attach_counters(profile, result)


# ncu failures that the next candidate would hit too (collect_counters' reasons):
# a missing or unstartable tool, or no permission to read counters. Timeouts, a launch
# that matched nothing or odd errors may be candidate-specific and are not listed.
_LASTING_COUNTER_FAILURES = (
    _ncu.NO_PERMISSION,
    "ncu (Nsight Compute) not found",
    "ncu could not be started",
    "ncu cannot start its profiler",
)


def lasting_counter_failure(profile: Profile) -> Optional[str]:
    """The reason tier 3 failed for this profile when retrying it for other candidates
    of the same session is pointless; None when it worked or may work next time."""
    reason = profile.unavailable.get("counters")
    if reason is not None and reason.startswith(_LASTING_COUNTER_FAILURES):
        return reason
    return None
