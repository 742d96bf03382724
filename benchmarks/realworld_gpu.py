"""Real-world kernels under KernelBand: verdict, speedup and CI, and peak
host/GPU memory of each bench harness alone vs under a KernelBand optimize session.

    python benchmarks/realworld_gpu.py --out DIR [--budget 8] [--only rope_inplace ...]
                                       [--device cuda|cpu] [--total-seconds 430]

For each module of benchmarks/realworld/ (MODULES):
1. the bench harness ALONE in a fresh python process: torch.cuda.max_memory_allocated /
   max_memory_reserved, the device's used memory (torch.cuda.mem_get_info) before and
   after, the nvidia-smi peak polled from here, and ru_maxrss (self + children);
2. ``python -m kernelband optimize FILE --kernel K --budget N --device D --json`` as a
   subprocess under a per-kernel wall cap, while a thread polls nvidia-smi every 0.2 s
   (device used memory) and /proc for the RSS of the whole process tree.
One kernel failing (or timing out) never stops the run. Writes DIR/realworld_gpu.json and
DIR/realworld_gpu.md. Memory is measured, not estimated: every number comes from a run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from common import ROOT as REPO
from benchmarks.realworld import MODULES  # noqa: E402

RW = REPO / "benchmarks" / "realworld"
GIB = 1024 ** 3
# share of the wall budget per session: the 32 GiB layernorm needs longer per evaluation
CAP_WEIGHT: dict[str, float] = {"layernorm_large": 1.5}

# Runs the bench harness alone and prints one JSON line (the child's own view of memory).
ALONE = r"""
import importlib.util, json, resource, sys, time
import torch
path, harness, device = sys.argv[1], sys.argv[2], sys.argv[3]
res = {}
if device != "cpu":
    torch.cuda.init()
    free0, total = torch.cuda.mem_get_info()
    res["device_used_before"] = total - free0
spec = importlib.util.spec_from_file_location("rw_alone", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
torch.manual_seed(0)
t0 = time.perf_counter()
out = getattr(mod, harness)()
if device != "cpu":
    torch.cuda.synchronize()
    free1, total = torch.cuda.mem_get_info()
    res["device_used_after"] = total - free1
    res["max_allocated"] = torch.cuda.max_memory_allocated()
    res["max_reserved"] = torch.cuda.max_memory_reserved()
res["seconds"] = time.perf_counter() - t0
# ru_maxrss is in KiB on Linux
res["ru_maxrss_self"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
res["ru_maxrss_children"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print("ALONE_JSON " + json.dumps(res))
"""


def gpu_used_bytes(index: int = 0) -> Optional[int]:
    """Device used memory from nvidia-smi (MiB -> bytes); None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i",
                              str(index)], capture_output=True, text=True, timeout=10).stdout
        return int(float(out.strip().splitlines()[0])) * 1024 * 1024
    except (subprocess.SubprocessError, ValueError, IndexError):
        return None


def gpu_apps_bytes() -> dict[int, int]:
    """GPU memory per process (nvidia-smi compute apps), pid -> bytes; {} without it."""
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return {int(a): int(float(b)) * 1024 * 1024 for a, b in (ln.split(",")[:2] for ln in out.strip().splitlines()
                                                                  if ln.count(",") >= 1)}
    except (subprocess.SubprocessError, ValueError):
        return {}


def role_of(pid: int) -> str:
    """judge (python -m kernelband.worker), session (the CLI) or variant (a job's process)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "kernelband.worker.variant" in cmd or "zygote" in cmd:
        return "variant"
    if "kernelband.worker" in cmd:
        return "judge"
    if "kernelband" in cmd and "optimize" in cmd:
        return "session"
    return "variant"  # a zygote child keeps its parent's command line


def descendants(root: int) -> list[int]:
    """root and every process below it (sandboxed workers may start their own sessions,
    so killing root's process group alone can leave them holding GPU memory)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(d))
        except (OSError, ValueError):
            continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def kill_tree(root: int) -> None:
    """SIGKILL root's tree, each process by id, then its process group."""
    for pid in descendants(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(root, signal.SIGKILL)
    except OSError:
        pass


class Poller:
    """Polls device used memory (nvidia-smi) and the process tree's RSS every `period` s."""

    def __init__(self, pid: int, gpu: bool, period: float = 0.2) -> None:
        self.pid, self.gpu, self.period = pid, gpu, period
        self.peak_gpu: Optional[int] = None
        self.peak_rss = 0
        self.peak_by_role: dict[str, int] = {}  # GPU memory per process role (nvidia-smi compute apps)
        self.peak_rss_by_role: dict[str, int] = {}
        # one sample a second: (s, device used, GPU per role, processes per role, tree RSS),
        # to say which process holds what when (a peak alone does not)
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0, next_sample = time.perf_counter(), 0.0
        while not self._stop.is_set():
            tree = descendants(self.pid)  # one /proc scan per poll, shared by every measure below
            roles = {pid: role_of(pid) for pid in tree}
            rss_roles: dict[str, int] = {}
            procs: dict[str, int] = {}
            for pid, r in roles.items():
                try:
                    with open(f"/proc/{pid}/statm") as f:
                        b = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except (OSError, ValueError):
                    continue  # the process ended while we looked
                self.peak_rss_by_role[r] = max(self.peak_rss_by_role.get(r, 0), b)
                rss_roles[r] = rss_roles.get(r, 0) + b
                procs[r] = procs.get(r, 0) + 1
            rss_now = sum(rss_roles.values())
            self.peak_rss = max(self.peak_rss, rss_now)
            by_role: dict[str, int] = {}
            used = None
            if self.gpu:
                used = gpu_used_bytes()
                if used is not None:
                    self.peak_gpu = used if self.peak_gpu is None else max(self.peak_gpu, used)
                for pid, b in gpu_apps_bytes().items():
                    if pid in roles:
                        by_role[roles[pid]] = by_role.get(roles[pid], 0) + b
                for r, b in by_role.items():
                    self.peak_by_role[r] = max(self.peak_by_role.get(r, 0), b)
            now = time.perf_counter() - t0
            if now >= next_sample:
                next_sample = now + 1.0
                self.samples.append({"t": round(now, 1), "gpu_used": used, "gpu_by_role": by_role,
                                     "procs": procs, "tree_rss": rss_now, "rss_by_role": rss_roles})
            self._stop.wait(self.period)

    def __enter__(self) -> "Poller":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def run_polled(cmd: list[str], cwd: Path, timeout: float, gpu: bool, env: Optional[dict[str, str]] = None,
               grace: float = 0.0) -> tuple[int, str, str, Poller, float, bool]:
    """Run cmd in its own process group under a wall cap, polling its tree's memory. At the
    cap: SIGTERM and ``grace`` seconds to finish (when > 0), then the whole tree is killed."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env)
    timed_out = False
    with Poller(p.pid, gpu) as poll:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            if grace > 0:  # a session stops gracefully on SIGTERM: it re-measures its best and reports
                p.send_signal(signal.SIGTERM)
                try:
                    out, err = p.communicate(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
                else:
                    return p.returncode, out, err, poll, time.perf_counter() - t0, timed_out
            kill_tree(p.pid)  # our own child: the worker and its variant processes go too
            out, err = p.communicate()
    return p.returncode, out, err, poll, time.perf_counter() - t0, timed_out


@dataclass
class Row:
    module: str
    kernel: str
    timing_harness: Optional[str] = None
    status: str = "not_run"
    speedup: Optional[float] = None
    speedup_ci: Optional[list[float]] = None
    evaluations: Optional[int] = None
    seconds: Optional[float] = None
    message: str = ""
    exit_code: Optional[int] = None
    alone: dict[str, Any] = field(default_factory=dict)
    under: dict[str, Any] = field(default_factory=dict)


def env_for_cli() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def timing_harness(path: Path, kernel: str) -> Optional[str]:
    p = subprocess.run([sys.executable, "-m", "kernelband", "list", str(path), "--json"], capture_output=True,
                       text=True, env=env_for_cli(), timeout=120)
    for row in json.loads(p.stdout).get("kernels", []):
        if row["kernel"]["name"] == kernel:
            return (row.get("harness") or {}).get("timing")
    return None


def measure_alone(path: Path, harness: str, device: str, cap: float) -> dict[str, Any]:
    gpu = device != "cpu"
    base = gpu_used_bytes() if gpu else None
    env = env_for_cli()
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    rc, out, err, poll, secs, timed_out = run_polled([sys.executable, "-c", ALONE, str(path), harness, device],
                                                      REPO, cap, gpu, env)
    res: dict[str, Any] = {"exit_code": rc, "wall_seconds": round(secs, 2), "peak_tree_rss": poll.peak_rss}
    line = next((ln for ln in out.splitlines() if ln.startswith("ALONE_JSON ")), None)
    if line is None:
        res["error"] = ("timed out" if timed_out else (err.strip().splitlines() or ["no output"])[-1])[:300]
        return res
    res.update(json.loads(line[len("ALONE_JSON "):]))
    if gpu and base is not None and poll.peak_gpu is not None:
        res["smi_peak_delta"] = poll.peak_gpu - base
    return res


def parse_optimize(row: Row, rc: int, out: str, err: str, timed_out: bool) -> None:
    """Read the session's JSON-lines events: when the baseline and the first candidate
    verdict arrived, and the final result."""
    row.exit_code = rc
    res = None
    timeline: list[dict[str, Any]] = []
    for line in out.splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(e, dict):
            continue
        timeline.append(timeline_entry(e))
        if e.get("type") == "baseline" and "baseline_s" not in row.under:
            row.under["baseline_s"] = e.get("t")
            row.under["setup_s"] = e.get("setup_s")
        elif e.get("type") == "candidate" and "first_verdict_s" not in row.under:
            row.under["first_verdict_s"] = e.get("t")
            row.under["first_phases"] = e.get("phases")
        elif e.get("type") == "result":
            res = e.get("result") if isinstance(e.get("result"), dict) else {k: v for k, v in e.items() if k != "type"}
    row.under["timeline"] = timeline
    row.under["stderr_tail"] = [ln[:300] for ln in err.strip().splitlines()[-25:]]
    if timed_out and res is None:
        row.status, row.message = "capped", "killed at the per-kernel wall cap (no verdict)"
        return
    if res is None:
        row.status = "error"
        row.message = ((err.strip().splitlines() or ["no result event on stdout"])[-1])[:400]
        return
    row.status = str(res.get("status", "?"))
    row.speedup = res.get("speedup")
    row.speedup_ci = res.get("speedup_ci")
    ev = res.get("evaluations")
    if ev is None and isinstance(res.get("history"), list):
        ev = len(res["history"])
    row.evaluations = ev if isinstance(ev, int) else None
    if row.status not in ("improved", "no_improvement", "verified_correct"):
        row.message = str(res.get("message") or res.get("reason") or "")[:400]
    elif res.get("message"):
        row.message = str(res["message"])[:200]


def timeline_entry(e: dict[str, Any]) -> dict[str, Any]:
    """One event, reduced to what says where a session's time went."""
    keep = {"type": e.get("type"), "t": e.get("t")}
    if e.get("type") == "candidate":
        phases = e.get("phases") or {}
        keep.update(status=e.get("status"), strategy=e.get("strategy"), speedup=e.get("speedup"),
                    variant_s=phases.get("variant_process_total"), judge_s=phases.get("judge"))
    elif e.get("type") in ("log", "error"):
        keep["message"] = str(e.get("message", ""))[:200]
    elif e.get("type") == "result":
        r = e.get("result") if isinstance(e.get("result"), dict) else e
        keep["status"] = r.get("status")
    return keep


def gib(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x / GIB:.2f}"


def markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    lines = [
        "# Real-world kernels under KernelBand",
        "",
        f"Device: {meta['device_name']}; budget {meta['budget']} evaluations, cap {meta['cap_seconds']:.0f} s per "
        f"session; generator rules; {meta['started']}. GPU memory in GiB: *alone* = nvidia-smi peak minus the "
        "device's used memory before the run (includes the CUDA context), with torch.cuda.max_memory_allocated in "
        "brackets; *KernelBand* = nvidia-smi peak minus the same baseline during `kernelband optimize`. Host memory "
        "in GiB: peak RSS summed over the process tree (polled every 0.2 s), with the harness's ru_maxrss in "
        "brackets.",
        "",
        "The runner starts one session after the other: each had the GPU to itself (one session per GPU).",
        "",
        "| kernel | module | verdict | speedup [95% CI] | evals | GPU alone | GPU KernelBand (judge / variant) "
        "| host alone | host KernelBand (judge / variant) | baseline s | first verdict s | s | message |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        sp = "" if r.speedup is None else f"{r.speedup:.3f}x"
        if r.speedup_ci:
            sp += f" [{r.speedup_ci[0]:.3f}, {r.speedup_ci[1]:.3f}]"
        a, u = r.alone, r.under
        gpu_alone = f"{gib(a.get('smi_peak_delta'))} ({gib(a.get('max_allocated'))})"
        host_alone = f"{gib(a.get('peak_tree_rss'))} ({gib(a.get('ru_maxrss_self'))})"
        msg = (r.message or a.get("error", "")).replace("|", "\\|").replace("\n", " ")
        roles, rss_roles = u.get("gpu_by_role") or {}, u.get("rss_by_role") or {}
        gpu_under = f"{gib(u.get('smi_peak_delta'))} ({gib(roles.get('judge'))} / {gib(roles.get('variant'))})"
        host_under = f"{gib(u.get('peak_tree_rss'))} ({gib(rss_roles.get('judge'))} / {gib(rss_roles.get('variant'))})"
        t_base, t_first = u.get("baseline_s"), u.get("first_verdict_s")
        lines.append(f"| {r.kernel} | {r.module} | {r.status} | {sp} | {'' if r.evaluations is None else r.evaluations}"
                     f" | {gpu_alone} | {gpu_under} | {host_alone} | {host_under}"
                     f" | {'' if t_base is None else f'{t_base:.0f}'} | {'' if t_first is None else f'{t_first:.0f}'}"
                     f" | {'' if r.seconds is None else f'{r.seconds:.0f}'} | {msg} |")
    if meta.get("parts"):  # a merged table (--merge)
        lines += ["", "Made by these runs, one after the other on the same GPU (each row's budget and cap are its run's):",
                  ""]
        lines += [f"- `{x['command']}` ({x['started']})" for x in meta["parts"]]
    lines += ["", f"Total wall time: {meta['total_seconds']:.0f} s.", ""]
    if meta.get("command"):
        lines += [f"Command: `{meta['command']}`.", ""]
    timed = [r for r in rows if r.under.get("timeline")]
    if timed:
        lines += ["## Where each session's time went", "",
                  "Seconds since the session started: the baseline, each candidate's verdict, the result.", ""]
        for r in timed:
            marks = []
            for e in r.under["timeline"]:
                if e.get("t") is None:
                    continue
                if e["type"] == "baseline":
                    marks.append(f"baseline {e['t']:.0f}")
                elif e["type"] == "candidate":
                    marks.append(f"{e.get('status')} {e['t']:.0f}")
                elif e["type"] == "result":
                    marks.append(f"result {e['t']:.0f}")
            lines.append(f"- {r.module}: " + ", ".join(marks))
        lines.append("")
    return "\n".join(lines)


def device_name(device: str) -> str:
    if device == "cpu":
        return "cpu (Triton interpreter; no GPU memory, CPU times are not speed claims)"
    if shutil.which("nvidia-smi"):
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True)
        return p.stdout.strip().splitlines()[0] if p.stdout.strip() else "cuda"
    return "cuda"


def merge(parts: list[Path], out: Path) -> int:
    """One table from several runs' JSON (a device call holds about five sessions): rows in
    the order given, each run's command listed; every row keeps its own budget and cap."""
    loaded = [json.loads(part.read_text(encoding="utf-8")) for part in parts]
    rows = [Row(**r) for d in loaded for r in d["rows"]]
    metas = [d["meta"] for d in loaded]
    meta = dict(metas[0])
    meta["total_seconds"] = sum(m["total_seconds"] for m in metas)
    meta["budget"] = "/".join(sorted({str(m["budget"]) for m in metas}))
    meta["cap_seconds"] = max(m["cap_seconds"] for m in metas)
    meta["command"] = None
    meta["parts"] = [{"command": m.get("command"), "budget": m["budget"], "cap_seconds": m["cap_seconds"],
                      "reserve_seconds": m.get("reserve_seconds"), "grace_seconds": m.get("grace_seconds"),
                      "started": m["started"], "modules": [r["module"] for r in d["rows"]]}
                     for m, d in zip(metas, loaded)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "realworld_gpu.json").write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2),
                                            encoding="utf-8")
    (out / "realworld_gpu.md").write_text(markdown(rows, meta), encoding="utf-8")
    print(f"wrote {out / 'realworld_gpu.json'} and {out / 'realworld_gpu.md'}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--merge":  # python benchmarks/realworld_gpu.py --merge A.json B.json ... --out DIR
        ap = argparse.ArgumentParser(prog="realworld_gpu.py --merge")
        ap.add_argument("parts", nargs="+", type=Path)
        ap.add_argument("--out", required=True, type=Path)
        a = ap.parse_args(argv[1:])
        return merge(a.parts, a.out)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget", type=int, default=8, help="evaluations per session (default 8)")
    ap.add_argument("--only", nargs="*", default=None, help="module stems (e.g. rope_inplace) to run")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (interpreter, tiny sizes)")
    ap.add_argument("--total-seconds", type=float, default=430.0,
                    help="wall budget for the whole run; per-kernel caps are carved from it (default 430)")
    ap.add_argument("--cap", type=float, default=40.0, help="max wall seconds per optimize session (default 40)")
    ap.add_argument("--reserve", type=float, default=10.0,
                    help="seconds of each cap kept for the final re-measurement: the search's --seconds is cap - this")
    ap.add_argument("--grace", type=float, default=0.0,
                    help="at the cap, SIGTERM and this many seconds to report the best so far before the kill (default 0)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    names = [m for m in MODULES if args.only is None or m[:-3] in args.only or m in args.only]
    if not names:
        ap.error(f"--only matched nothing; modules: {', '.join(m[:-3] for m in MODULES)}")
    rows: list[Row] = []
    # Each session works on a private copy so .kernelband/ stores never leak between runs.
    work = Path(tempfile.mkdtemp(prefix="kb_realworld_"))
    for name in names:
        rows.append(Row(module=name[:-3], kernel=MODULES[name]))
        shutil.copy(RW / name, work / name)
    (work / "pyproject.toml").write_text("[project]\nname = 'realworld'\n", encoding="utf-8")
    # 1. every bench harness alone, first (nothing else on the GPU)
    for row in rows:
        path = work / f"{row.module}.py"
        try:
            row.timing_harness = timing_harness(path, row.kernel)
        except (subprocess.SubprocessError, json.JSONDecodeError) as e:
            row.alone = {"error": f"kernelband list failed: {e}"[:300]}
            continue
        if row.timing_harness is None:
            row.alone = {"error": "no timing harness found by kernelband list"}
            continue
        row.alone = measure_alone(path, row.timing_harness, args.device,
                                  cap=max(10.0, min(90.0, args.total_seconds - (time.perf_counter() - t_start))))
        print(f"[alone] {row.module}: {json.dumps(row.alone)}", flush=True)
    # 2. one optimize session per kernel, under a cap carved from what is left
    for i, row in enumerate(rows):
        left = args.total_seconds - (time.perf_counter() - t_start)
        w = CAP_WEIGHT.get(row.module, 1.0)
        cap = min(args.cap * w, left * w / sum(CAP_WEIGHT.get(r.module, 1.0) for r in rows[i:]))
        if cap < 10:
            row.status, row.message = "skipped", "out of the run's wall budget"
            continue
        base = gpu_used_bytes() if args.device != "cpu" else None
        # the search stops at its own deadline; the rest of the cap is for the final paired
        # re-measurement and memcheck of the winner
        cmd = [sys.executable, "-m", "kernelband", "optimize", f"{row.module}.py", "--kernel", row.kernel,
               "--budget", str(args.budget), "--seconds", str(max(5, int(cap - args.reserve))), "--device", args.device,
               "--events", "jsonl"]
        rc, out, err, poll, secs, timed_out = run_polled(cmd, work, cap, args.device != "cpu", env_for_cli(),
                                                         grace=args.grace)
        row.seconds = round(secs, 1)
        row.under = {"peak_tree_rss": poll.peak_rss, "gpu_by_role": poll.peak_by_role,
                     "rss_by_role": poll.peak_rss_by_role, "memory_timeline": poll.samples}
        if base is not None and poll.peak_gpu is not None:
            row.under["smi_peak_delta"] = poll.peak_gpu - base
            row.under["smi_peak"] = poll.peak_gpu
        parse_optimize(row, rc, out, err, timed_out)
        print(f"[optimize] {row.module}: {row.status} {row.speedup} {row.speedup_ci} evals={row.evaluations} "
              f"{row.seconds}s {row.message[:160]}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    meta = {"device": args.device, "device_name": device_name(args.device), "budget": args.budget,
            "cap_seconds": args.cap, "reserve_seconds": args.reserve, "grace_seconds": args.grace,
            "command": "python benchmarks/realworld_gpu.py " + " ".join(argv),
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "total_seconds": time.perf_counter() - t_start,
            "ru_maxrss_children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
    (args.out / "realworld_gpu.json").write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]},
                                                            indent=2), encoding="utf-8")
    (args.out / "realworld_gpu.md").write_text(markdown(rows, meta), encoding="utf-8")
    print(f"wrote {args.out / 'realworld_gpu.json'} and {args.out / 'realworld_gpu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
