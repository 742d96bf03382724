"""Tier 3, counters: Nsight Compute around a one-shot re-run of the harness.

``kernelband.worker.counters.collect_counters(task)`` runs

    ncu --clock-control none --profile-from-start off --target-processes all
        --csv --page raw --print-units base --log-file OUT.csv
        --kernel-name regex:^NAME(_\\w+)?$ --launch-skip 0 --launch-count N
        --metrics <METRICS> python -m kernelband.worker.ncu_target SPEC.json

where the target runs the harness once outside the profiled range (compilation,
autotuning) and then replays the kernel's launches between cudaProfilerStart/Stop,
so only those are profiled. The raw CSV is parsed into the 9-dim vector phi of
DESIGN section 2 (``PHI_NAMES`` in assemble.py) plus a few extras. Results are
cached in the store by a hash of the code (module source, harness, kernel), the GPU,
Triton, ncu and the metric list.

When ncu is missing or may not read the counters (ERR_NVGPUCTRPERM, a profiler that
cannot load), the result says why, once, and profiling carries on with tiers 1-2.
This module is pure (the command, the CSV, the metric names); running ncu, which
runs module code, is ``kernelband.worker.counters``. Nothing here imports torch.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Optional, TypedDict

METRICS_VERSION = 1
# name -> candidate ncu metrics, first that this ncu knows is used (older ncu / chips
# differ in a few names; an unknown metric fails the whole run, so we fall back).
METRICS: dict[str, tuple[str, ...]] = {
    "l2_hit_rate": ("lts__t_sector_hit_rate.pct",),
    "dram_throughput": (
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "sm_throughput": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "threads_per_inst": (
        "smsp__average_thread_inst_executed_per_inst_executed.ratio",
        "smsp__thread_inst_executed_per_inst_executed.ratio",
    ),
    "achieved_occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "shared_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",),
    "shared_ld_inst": ("smsp__inst_executed_op_shared_ld.sum",),
    "shared_st_inst": ("smsp__inst_executed_op_shared_st.sum",),
    "ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "ld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "tensor_core_utilisation": (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
    ),
    "l2_throughput": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "load_efficiency": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",),
    "duration_ns": ("gpu__time_duration.sum",),
    "dram_bytes": ("dram__bytes.sum",),
}

NO_PERMISSION = (
    "no permission to read GPU performance counters (ERR_NVGPUCTRPERM); allow it for all users "
    "(NVreg_RestrictProfilingToAdminUsers=0) or run as admin"
)
INTERPRETER = "interpreter: no compiled binary"
_announced: set[str] = set()


def announce_once(reason: str, log: Callable[[str], None]) -> None:
    """Say why counters are unavailable, once per process and reason."""
    if reason not in _announced:
        _announced.add(reason)
        log(f"counters unavailable: {reason}; carrying on with tiers 1-2")


# --------------------------------------------------------------------------- finding ncu


def find_ncu() -> Optional[str]:
    """Path of ncu: $KERNELBAND_NCU, PATH, CUDA's bin folders, Nsight Compute installs."""
    env = os.environ.get("KERNELBAND_NCU")
    if env:
        return env if os.path.exists(env) else None
    found = shutil.which("ncu")
    if found:
        return found
    cands = [os.path.join(os.environ[v], "bin", "ncu") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    cands += ["/usr/local/cuda/bin/ncu"] + sorted(glob.glob("/usr/local/cuda-*/bin/ncu"), reverse=True)
    cands += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    return next((c for c in cands if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def ncu_version(ncu: str, run: Callable[..., Any] = subprocess.run) -> str:
    try:
        out = run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout or ""
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1).strip() if m else out.strip().splitlines()[-1] if out.strip() else ""


# --------------------------------------------------------------------------- command


def kernel_regex(kernel: str) -> str:
    """Triton names the binary's entry after the function (older releases add a
    ``_0d1d2d`` specialization suffix)."""
    return f"regex:^{re.escape(kernel)}(_[0-9a-zA-Z]+)?$"


def metric_list(chosen: Optional[dict[str, str]] = None) -> dict[str, str]:
    """name -> the ncu metric used (the first candidate unless told otherwise)."""
    return {name: (chosen or {}).get(name, cands[0]) for name, cands in METRICS.items()}


def build_command(
    ncu: str,
    spec_path: str,
    csv_path: str,
    kernel: str,
    metrics: dict[str, str],
    launch_skip: int = 0,
    launch_count: int = 1,
    python: Optional[str] = None,
) -> list[str]:
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
        csv_path,
        "--kernel-name",
        kernel_regex(kernel),
        "--launch-skip",
        str(launch_skip),
        "--launch-count",
        str(launch_count),
        "--metrics",
        ",".join(sorted(set(metrics.values()))),
        python or sys.executable,
        "-m",
        "kernelband.worker.ncu_target",
        spec_path,
    ]


# --------------------------------------------------------------------------- parsing


def _number(text: str) -> Optional[float]:
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A", "nan"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


class NcuRow(TypedDict):
    """One profiled launch from ncu's CSV."""

    id: int
    kernel: str
    metrics: dict[str, Optional[float]]


def parse_csv(text: str) -> list[NcuRow]:
    """ncu --csv output -> one row per profiled launch: {"kernel": name, "id": n,
    "metrics": {metric: float|None}}. Understands the raw page (one row per launch,
    a row of units under the header) and the details page (one row per metric with
    "Metric Name" / "Metric Value" columns); ignores lines around the table."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"')))))
    header = rows[0]
    col = {h: i for i, h in enumerate(header)}
    out: dict[str, NcuRow] = {}
    if "Metric Name" in col:  # details page: long format
        for r in rows[1:]:
            if len(r) < len(header) or r[0] == "ID":
                continue
            lid = r[col["ID"]]
            entry = out.setdefault(
                lid, {"id": int(_number(lid) or 0), "kernel": r[col.get("Kernel Name", 0)], "metrics": {}}
            )
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            value = _number(r[col["Metric Value"]])
            if value is not None and unit:
                value *= _UNIT_SCALE.get(unit, 1.0)
            entry["metrics"][r[col["Metric Name"]]] = value
        return sorted(out.values(), key=lambda e: e["id"])
    units: dict[int, str] = {}
    result: list[NcuRow] = []
    for r in rows[1:]:
        if len(r) < len(header):
            continue
        if r[0] == "":  # the units row
            units = {i: u for i, u in enumerate(r)}
            continue
        metrics: dict[str, Optional[float]] = {}
        for i, h in enumerate(header):
            if "__" not in h:
                continue
            v = _number(r[i])
            if v is not None and units.get(i):
                v *= _UNIT_SCALE.get(units[i], 1.0)
            metrics[h] = v
        result.append(
            {
                "id": int(_number(r[col["ID"]]) or 0) if "ID" in col else len(result),
                "kernel": r[col["Kernel Name"]] if "Kernel Name" in col else "",
                "metrics": metrics,
            }
        )
    return result


# auto-scaled units (when --print-units base is not honoured) back to base units
_UNIT_SCALE = {
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "usecond": 1e3,
    "msecond": 1e6,
    "second": 1e9,
    "Kbyte/second": 1e3,
    "Mbyte/second": 1e6,
    "Gbyte/second": 1e9,
}


def derive(metrics: dict[str, Optional[float]], used: dict[str, str]) -> dict[str, Optional[float]]:
    """ncu metrics of one launch -> named values (phi and extras)."""
    g = {name: metrics.get(m) for name, m in used.items()}
    tpi = g.get("threads_per_inst")
    sh_inst = (g.get("shared_ld_inst") or 0.0) + (g.get("shared_st_inst") or 0.0)
    conflicts = g.get("shared_conflicts")
    req = g.get("ld_requests")
    ld_sectors = g.get("ld_sectors")
    return {
        "l2_hit_rate": g.get("l2_hit_rate"),
        "dram_throughput": g.get("dram_throughput"),
        "sm_throughput": g.get("sm_throughput"),
        "warp_efficiency": tpi / 32.0 * 100.0 if tpi is not None else None,
        "achieved_occupancy": g.get("achieved_occupancy"),
        "registers_per_thread": g.get("registers_per_thread"),
        "shared_bank_conflicts": (conflicts / sh_inst if sh_inst else 0.0) if conflicts is not None else None,
        "sectors_per_request": ld_sectors / req if req and ld_sectors is not None else None,
        "tensor_core_utilisation": g.get("tensor_core_utilisation"),
        "l2_throughput": g.get("l2_throughput"),
        # 0 means no LDG ran (Triton loads through cp.async / TMA instead), not 0% used
        "load_efficiency": g.get("load_efficiency") or None,
        "duration_ns": g.get("duration_ns"),
        "dram_bytes": g.get("dram_bytes"),
    }


def aggregate(per_launch: list[dict[str, Optional[float]]]) -> dict[str, Optional[float]]:
    """Several launches -> one: time-weighted means (sums for durations and bytes)."""
    if len(per_launch) == 1:
        return dict(per_launch[0])
    out: dict[str, Optional[float]] = {}
    weights = [v.get("duration_ns") or 1.0 for v in per_launch]
    for key in per_launch[0]:
        vals = [(x, w) for v, w in zip(per_launch, weights) if (x := v.get(key)) is not None]
        if not vals:
            out[key] = None
        elif key in ("duration_ns", "dram_bytes"):
            out[key] = sum(x for x, _ in vals)
        else:
            out[key] = sum(x * w for x, w in vals) / sum(w for _, w in vals)
    return out


def explain_failure(rc: int, text: str) -> str:
    """One line saying why an ncu run gave no counters."""
    if "ERR_NVGPUCTRPERM" in text or "does not have permission" in text:
        return NO_PERMISSION
    m = re.search(r"Failed to initialize the profiler[^\n]*", text) or re.search(r"LibraryNotLoaded[^\n]*", text)
    if m:
        return f"ncu cannot start its profiler here ({m.group(0).strip()})"
    if "No kernels were profiled" in text:
        return "ncu profiled no launch of the kernel (name filter or profiling range matched nothing)"
    errs = [ln.strip() for ln in text.splitlines() if "==ERROR==" in ln or "Error" in ln]
    tail = errs[-1] if errs else (text.strip().splitlines()[-1] if text.strip() else "")
    return f"ncu failed (exit {rc}): {tail[:200]}"


def unknown_metrics(text: str, used: dict[str, str]) -> list[str]:
    if "Failed to find metric" not in text and "invalid metric" not in text.lower():
        return []
    return [name for name, m in used.items() if m.split(".")[0] in text]


# --------------------------------------------------------------------------- cache


def cache_key(task: Any, gpu: str, triton_version: str, ncu_ver: str, launches: int) -> str:
    harness_text = ""
    if getattr(task, "harness_path", None):
        try:
            harness_text = Path(task.harness_path).read_text(encoding="utf-8")
        except OSError:
            harness_text = str(task.harness_path)
    blob = json.dumps(
        {
            "source": hashlib.sha256(task.source.encode()).hexdigest(),
            "harness": task.harness,
            "harness_text": hashlib.sha256(harness_text.encode()).hexdigest(),
            "kernel": task.kernel,
            "gpu": gpu,
            "triton": triton_version,
            "ncu": ncu_ver,
            "metrics": METRICS_VERSION,
            "metric_names": sorted(METRICS),
            "launches": launches,
        },
        sort_keys=True,
    )
    return "ncu:" + hashlib.sha256(blob.encode()).hexdigest()
