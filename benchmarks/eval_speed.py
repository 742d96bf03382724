"""How fast a verified evaluation is: evaluations per minute, the first verdict, whole
sessions, and where one evaluation's seconds go.

    python benchmarks/eval_speed.py --out DIR [--budget 16] [--cap 120] [--only NAME ...] [--gpus 0,1]
                                    [--skip-sessions] [--skip-timeline] [--skip-parallel]

Parts (each one session at a time on the GPU, except ``parallel3`` on purpose):
- sessions: ``kernelband optimize FILE --kernel K --budget N --events jsonl --no-store`` on
  each kernel of benchmarks/suite and benchmarks/realworld (``--only`` picks some), under a
  wall cap; from the event stream: evaluations, evaluations per minute of the search phase,
  the first candidate verdict (seconds from the start), the session's seconds, and the
  winner's search-phase speedup over its final paired speedup (``search_vs_final``);
- add_scale_b16: the README's command, ``kernelband optimize examples/add_scale.py --budget
  16`` from a fresh copy of examples/ (cold workspace, after the sessions: the machine's
  caches as a user's second kernel finds them), wall seconds;
- timeline: one evaluation's phases (variant process: sandbox, CUDA context, import,
  compile, fingerprints, frame sends, waits for the judge; judge: spawn, receive, compare,
  teardown) for an elementwise kernel whose harness returns 64 MiB and 1.5 GiB;
- parallel3: three sessions of one kernel on one GPU at once against one alone: the final
  CI half-widths and the verdicts (``--parallel-solo`` sessions alone and
  ``--parallel-rounds`` rounds of three, alternating).

Writes DIR/eval_speed.json (``{"commit", "gpu", "rows": [...], "add_scale_b16_wall_s",
"ci_halfwidth": {"solo", "parallel3"}, ...}``), DIR/eval_speed.md and DIR/eval_speed.png.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.realworld import MODULES as REALWORLD  # noqa: E402
from benchmarks.common import bench_commit  # noqa: E402
from benchmarks.suite import SUITE  # noqa: E402

PARALLEL_KERNEL = "matmul_fp16"  # the default of --parallel-kernel


def kernels(only: list[str]) -> list[tuple[str, str, Path, str]]:
    """(group, name, file, kernel) for the suite and the real-world modules."""
    out = [("suite", e.module, e.path, e.kernel) for e in SUITE]
    out += [("realworld", m[:-3], REPO / "benchmarks" / "realworld" / m, k) for m, k in REALWORLD.items()]
    if only:
        out = [k for k in out if k[1] in only]
    return out


# --------------------------------------------------------------------------- one session
def run_session(path: Path, kernel: str, budget: int, cap: float, cwd: Optional[Path] = None,
                extra: Optional[list[str]] = None, gpu: Optional[str] = None) -> dict[str, Any]:
    """One ``kernelband optimize`` with its events timestamped on arrival."""
    cmd = [sys.executable, "-m", "kernelband", "optimize", str(path), "--kernel", kernel, "--budget", str(budget),
           "--events", "jsonl", "--no-store", *(extra or [])]
    trace = Path(tempfile.mkstemp(prefix="kb-trace-", suffix=".jsonl")[1])
    t0, t0_wall = time.monotonic(), time.time()
    proc = subprocess.Popen(cmd, cwd=str(cwd or REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=_session_env(trace, gpu))
    events: list[dict[str, Any]] = []
    stderr: list[str] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stderr.append(line.rstrip())
            del stderr[:-40]

    threading.Thread(target=read_err, daemon=True).start()
    killer = threading.Timer(cap, lambda: _kill(proc))
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["_t"] = round(time.monotonic() - t0, 3)
            events.append(ev)
        proc.wait()
    finally:
        killer.cancel()
    wall = time.monotonic() - t0
    row = summarize(events, wall, proc.returncode, cap, stderr)
    row["startup"] = startup_timeline(trace, t0_wall)
    row["in_flight"] = in_flight(trace)
    if row["capped"] or row["evals"] < budget:
        row["unfinished_jobs"] = unfinished_jobs(trace, t0_wall + wall)
    keep = os.environ.get("EVAL_SPEED_TRACES")  # a folder that keeps each session's whole trace
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(trace, Path(keep) / f"{path.stem}-{kernel}-{int(t0_wall)}.jsonl")
    trace.unlink(missing_ok=True)
    return row


# the trace marks (kernelband/trace.py) that tell where the seconds before the first verdict
# go, and the derivation's: the first wave of candidates waits for its references
_STARTUP_MARKS = ("zygote.spawn", "zygote.ready", "setup.start", "setup.prepare", "job.request", "job.start",
                  "job.frame", "setup.prepared", "setup.retimed", "session.evaluate", "session.verdict",
                  "derive.start", "derive.job", "derive.frames", "derive.absorbed", "derive.done")


def _session_env(trace: Path, gpu: Optional[str]) -> dict[str, str]:
    env = dict(os.environ, KERNELBAND_TRACE=str(trace))
    if gpu is not None:  # --gpus: this session's own GPU
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def _marks(trace: Path) -> list[dict[str, Any]]:
    """The trace's marks (kernelband/trace.py), unreadable lines left out."""
    try:
        lines = trace.read_text().splitlines()
    except OSError:
        return []
    marks = []
    for line in lines:
        try:
            marks.append(json.loads(line))
        except ValueError:
            continue
    return marks


def startup_timeline(trace: Path, t0_wall: float) -> dict[str, float]:
    """Seconds from the command's start to the first of each startup mark, and to the
    first job's first frame and the first candidate's verdict."""
    out: dict[str, float] = {}
    for m in _marks(trace):
        what = m.get("what")
        if what in _STARTUP_MARKS and what not in out:
            out[what] = round(float(m["t"]) - t0_wall, 3)
        if what == "job.request" and m.get("trusted") is False and "first_candidate_job" not in out:
            out["first_candidate_job"] = round(float(m["t"]) - t0_wall, 3)
    return out


def in_flight(trace: Path) -> Optional[float]:
    """Candidates in flight on average over the search (the sum of each one's seconds from
    ``session.evaluate`` to ``session.verdict`` over the span from the first to the last
    mark): how much of the lanes the session keeps busy."""
    spans: dict[str, list[float]] = {}
    for m in _marks(trace):
        if m.get("what") in ("session.evaluate", "session.verdict") and m.get("variant"):
            spans.setdefault(str(m["variant"]), []).append(float(m["t"]))
    whole = [(min(t), max(t)) for t in spans.values() if len(t) >= 2]
    if not whole:
        return None
    span = max(b for _, b in whole) - min(a for a, _ in whole)
    return round(sum(b - a for a, b in whole) / span, 2) if span > 0 else None


def unfinished_jobs(trace: Path, t_end: float) -> list[dict[str, Any]]:
    """The jobs still open when the session ended (a cap kills it): their steps, the last
    frame each sent and how long before the end, so a stall says where it is."""
    jobs: dict[str, dict[str, Any]] = {}
    for m in _marks(trace):
        job = m.get("job")
        if not job:
            continue
        if m.get("what") == "job.request":
            jobs[job] = {"job": job, "trusted": m.get("trusted"), "steps": m.get("steps"), "t": m["t"], "frames": 0}
        elif m.get("what") == "job.frame" and job in jobs:
            jobs[job].update(last_frame=m.get("kind"), last_what=m.get("frame"), t=m["t"],
                             frames=jobs[job]["frames"] + 1)
        elif m.get("what") == "job.closed":
            jobs.pop(job, None)
    out = []
    for j in jobs.values():
        j["idle_s"] = round(t_end - float(j.pop("t")), 2)
        out.append(j)
    return out


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass


def _data(ev: dict[str, Any]) -> dict[str, Any]:
    return ev.get("data") if isinstance(ev.get("data"), dict) else ev


def summarize(events: list[dict[str, Any]], wall: float, code: Optional[int], cap: float,
              stderr: list[str]) -> dict[str, Any]:
    baseline = next((e for e in events if e.get("type") == "baseline"), None)
    cands = [e for e in events if e.get("type") == "candidate"]
    result = next((_data(e).get("result") for e in events if e.get("type") == "result"), None)
    error = next((_data(e).get("message") for e in events if e.get("type") == "error"), None)
    row: dict[str, Any] = {"session_s": round(wall, 2), "exit_code": code, "capped": wall >= cap - 0.5 and result is None}
    row["baseline_s"] = baseline["_t"] if baseline else None
    row["evals"] = len(cands)
    row["first_verdict_s"] = cands[0]["_t"] if cands else None
    if baseline and cands:
        span = cands[-1]["_t"] - baseline["_t"]
        row["search_s"] = round(span, 2)
        row["evals_per_min"] = round(60.0 * len(cands) / span, 2) if span > 0 else None
    else:
        row["search_s"] = row["evals_per_min"] = None
    row["setup_s"] = _data(baseline).get("setup_s") if baseline else None
    phases = [_data(c).get("phases") or {} for c in cands]
    keys = sorted({k for p in phases for k in p})
    row["median_phases_s"] = {k: round(statistics.median(p.get(k, 0.0) for p in phases), 4) for k in keys}
    row["statuses"] = [_data(c).get("status") for c in cands]
    # why candidates failed, once per distinct start of a message: a rule rewrite refused
    # is either a wrong rewrite or a false rejection, and the table alone cannot say which
    failed = [f"{_data(c).get('status')}: {_data(c).get('message') or ''}" for c in cands
              if _data(c).get("status") not in ("ok", "slower")]
    row["failure_messages"] = list(dict.fromkeys(m[:400] for m in failed))[:6]
    if result:
        row["status"] = result.get("status")
        row["speedup"] = result.get("speedup")
        row["speedup_ci"] = result.get("speedup_ci")
        s_best, s_base = result.get("search_best_ms"), result.get("search_baseline_ms")
        if s_best and s_base and result.get("speedup") and result.get("speed_claim"):
            row["search_speedup"] = round(s_base / s_best, 4)
            row["search_vs_final"] = round((s_base / s_best) / result["speedup"], 4)
        else:
            row["search_speedup"] = row["search_vs_final"] = None
        row["message"] = (result.get("message") or "")[:300]
        row["gpu"] = result.get("gpu")
        row["winner"] = winner_detail(result)
    else:
        row["status"] = "capped" if row["capped"] else "error"
        row["message"] = (error or " | ".join(stderr[-3:]))[:300]
    return row


def winner_detail(result: dict[str, Any]) -> dict[str, Any]:
    """What a search/final disagreement is read from: the winner (its diff), the search's
    times of it and of the original (the baseline's clock), the paired medians of both."""
    best_id = result.get("best_variant_id") or result.get("unverified_variant_id")
    entry = next((h for h in result.get("history") or [] if h.get("variant_id") == best_id), {})
    return {"variant_id": best_id, "strategy_path": result.get("strategy_path"),
            "search_baseline_ms": result.get("search_baseline_ms"), "search_best_ms": result.get("search_best_ms"),
            "search_measured_ms": (entry.get("phases") or {}).get("measured_ms"),
            "paired_medians_ms": result.get("paired_medians_ms"), "paired_rounds": result.get("paired_rounds"),
            "diff": (result.get("diff") or result.get("unverified_diff") or "")[:3000]}


def ci_halfwidth(row: dict[str, Any]) -> Optional[float]:
    ci = row.get("speedup_ci")
    if not ci or row.get("speedup") in (None, 0) or ci[0] is None:
        return None
    return round((ci[1] - ci[0]) / 2.0, 5)


# --------------------------------------------------------------------------- parts
def part_sessions(args: argparse.Namespace, rows: list[dict[str, Any]], save: Any) -> list[dict[str, Any]]:
    """Every kernel's session, one session at a time on each GPU: with ``--gpus 0,1`` two
    queues of sessions run side by side, each pinned to its own GPU (CUDA_VISIBLE_DEVICES)."""
    todo = list(enumerate(kernels(args.only)))
    lock = threading.Lock()

    def one_gpu(gpu: Optional[str]) -> None:
        while True:
            with lock:
                if not todo:
                    return
                order, (group, name, path, kernel) = todo.pop(0)
            cap = args.cap * (5.0 if name == "layernorm_large" else 1.0)
            if args.deadline and time.monotonic() + cap > args.deadline:
                print(f"{group:9s} {name:22s} not run: the run's time (--total-seconds) would be exceeded", flush=True)
                continue
            row = run_session(path, kernel, args.budget, cap, gpu=gpu)
            row.update(kernel=name, group=group, kernel_fn=kernel, output_bytes=output_bytes(row), order=order)
            if gpu is not None:
                row["gpu_index"] = gpu
            with lock:
                rows.append(row)
                rows.sort(key=lambda r: r.get("order", 0))
                save()
            print(f"{group:9s} {name:22s} {row['status']:16s} evals {row['evals']:3d} "
                  f"{row['evals_per_min'] or 0:6.1f}/min first {row['first_verdict_s'] or 0:6.1f}s "
                  f"session {row['session_s']:6.1f}s search/final {row.get('search_vs_final')}", flush=True)

    gpus: list[Optional[str]] = list(args.gpus) if args.gpus else [None]
    threads = [threading.Thread(target=one_gpu, args=(g,)) for g in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rows


def output_bytes(row: dict[str, Any]) -> Optional[int]:
    """Bytes the timing harness returns or writes, from the baseline's setup phases when the
    engine reports them (``prepare.output_bytes``)."""
    setup = row.get("setup_s") or {}
    value = setup.get("prepare.output_bytes")
    return int(value) if isinstance(value, (int, float)) else None


def part_add_scale(args: argparse.Namespace) -> dict[str, Any]:
    """The README's example from a fresh copy of examples/ (a cold workspace, --no-store):
    its wall time and its first candidate verdict, from one run."""
    with tempfile.TemporaryDirectory(prefix="kb-eval-speed-") as d:
        ws = Path(d) / "ws"
        shutil.copytree(REPO / "examples", ws, ignore=shutil.ignore_patterns("__pycache__", ".kernelband"))
        res = run_session(ws / "add_scale.py", "axpy_kernel", 16, 300.0, cwd=ws,
                          gpu=args.gpus[0] if args.gpus else None)  # a one-GPU user's command
    out = {"wall_s": res["session_s"], "status": res.get("status"), "speedup": res.get("speedup"),
           "speedup_ci": res.get("speedup_ci"), "evaluations": res.get("evals"), "evals_per_min": res.get("evals_per_min"),
           "first_verdict_s_no_store": res.get("first_verdict_s"), "baseline_s": res.get("baseline_s"),
           "search_vs_final": res.get("search_vs_final"), "winner": res.get("winner"), "startup": res.get("startup"),
           "command": "kernelband optimize add_scale.py --budget 16 --no-store (fresh workspace)"}
    print(f"add_scale b16: {out}", flush=True)
    return out


TIMELINE_MODULE = '''
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
N = {n}


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(alpha, x, y):
    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=1024)
    return out


def bench_axpy():
    x = torch.randn(N, device=DEVICE)
    y = torch.randn(N, device=DEVICE)
    return axpy(0.5, x, y)
'''


def part_timeline(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    from kernelband.evaluate import Evaluator
    from kernelband.model import Task, Variant

    gpu = torch.cuda.is_available()
    sizes = [64 << 20, 3 << 29] if gpu else [1 << 16]
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        with tempfile.TemporaryDirectory(prefix="kb-timeline-") as d:
            path = Path(d) / "axpy_big.py"
            source = TIMELINE_MODULE.format(n=n)
            path.write_text(source, encoding="utf-8")
            task = Task(module_path=str(path), source=source, kernel="axpy_kernel", harness="bench_axpy",
                        device="cuda" if gpu else "cpu", timeout_s=120.0)
            t0 = time.perf_counter()
            with Evaluator(task) as ev:
                base = ev.prepare()
                prepare_s = time.perf_counter() - t0
                evals = []
                for block in (512, 2048, 256):
                    variant = Variant(source.replace("BLOCK_SIZE=1024", f"BLOCK_SIZE={block}", 1))
                    t1 = time.perf_counter()
                    res = ev.evaluate(variant)
                    evals.append({"block": block, "status": res.status.value, "wall_s": round(time.perf_counter() - t1, 3),
                                  "phases": res.phases})
        row = {"output_bytes": nbytes, "prepare_s": round(prepare_s, 3), "baseline_ok": base.ok,
               "prepare_phases": base.phases, "evals": evals}
        rows.append(row)
        print(f"timeline {nbytes / 2**20:.0f} MiB: prepare {prepare_s:.1f}s, evals "
              + ", ".join(f"{e['wall_s']:.2f}s" for e in evals), flush=True)
        for e in evals[1:2]:
            print("   " + " ".join(f"{k}={v:.3f}" for k, v in sorted(e["phases"].items())), flush=True)
    return rows


def three_at_once(path: Path, kernel: str, budget: int, cap: float, gpu: Optional[str]) -> list[dict[str, Any]]:
    """Three sessions of one kernel on one GPU, started 2 s apart."""
    box: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: box.append(run_session(path, kernel, budget, cap, gpu=gpu)))
               for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(2.0)
    for t in threads:
        t.join()
    return box


def part_parallel(args: argparse.Namespace) -> dict[str, Any]:
    name = args.parallel_kernel
    entry = next(k for k in kernels([name]))
    _, _, path, kernel = entry
    gpu = args.gpus[0] if args.gpus else None  # all three on one GPU
    solo: list[dict[str, Any]] = []
    box: list[dict[str, Any]] = []
    # Solo sessions and rounds of three alternate, so that a drift of the machine (clocks,
    # temperature) reaches both; one CI half-width varies by 2x from session to session, so
    # a ratio of medians needs several of each.
    for i in range(max(args.parallel_solo, args.parallel_rounds)):
        if i < args.parallel_solo:
            solo.append(run_session(path, kernel, args.parallel_budget, args.cap * 2, gpu=gpu))
        if i < args.parallel_rounds:
            box.extend(three_at_once(path, kernel, args.parallel_budget, args.cap * 4, gpu))
    halves_solo = [h for h in (ci_halfwidth(r) for r in solo) if h is not None]
    halves_par = [h for h in (ci_halfwidth(r) for r in box) if h is not None]
    out = {"kernel": name, "solo": solo, "parallel3": box,
           "ci_halfwidth": {"solo": statistics.median(halves_solo) if halves_solo else None,
                            "parallel3": statistics.median(halves_par) if halves_par else None},
           "verdicts": {"solo": [r.get("status") for r in solo], "parallel3": [r.get("status") for r in box]}}
    print(f"parallel3 {name}: CI half-width solo {out['ci_halfwidth']['solo']} parallel {out['ci_halfwidth']['parallel3']}; "
          f"verdicts {out['verdicts']}", flush=True)
    return out


# --------------------------------------------------------------------------- report
def startup_markdown(report: dict[str, Any]) -> list[str]:
    """Seconds from the command's start to each startup mark, one column per session."""
    cols = [(r["kernel"], r.get("startup") or {}) for r in report.get("rows") or []]
    if report.get("add_scale_b16"):
        cols.append(("add_scale b16", report["add_scale_b16"].get("startup") or {}))
    cols = [c for c in cols if c[1]]
    if not cols:
        return []
    lines = ["", "## Before the first verdict, and the derivation (seconds from the command's start, KERNELBAND_TRACE)", "",
             "| mark | " + " | ".join(name for name, _ in cols) + " |", "|---|" + "---|" * len(cols)]
    for mark in (*_STARTUP_MARKS, "first_candidate_job"):
        lines.append(f"| {mark} | " + " | ".join(str(marks.get(mark, "")) for _, marks in cols) + " |")
    return lines


def _queues(gpus: list[str]) -> str:
    """Where the sessions ran: one queue per GPU listed, side by side on one host."""
    if len(gpus) > 1:
        return f"each of GPUs {', '.join(gpus)} ({len(gpus)} queues side by side, the host shared)"
    return f"GPU {gpus[0]}" if gpus else "the GPU"


# where a candidate's seconds go, in the order of its life; the GPU lock's waits and holds
# (a timer waits for the longest shared hold running when it asks)
PHASES = (
    ("variant_process_total", "the variant process, in all"),
    ("vp.early_cuda_context", "its spare's CUDA context (mostly before the candidate takes it)"),
    ("vp.compile", "Triton compiles"),
    ("vp.harness", "the harness runs"),
    ("vp.await_judge", "waiting for the judge's acks"),
    ("vp.gpu_lock_wait_shared", "waiting for the GPU lock's shared hold"),
    ("vp.gpu_lock_hold_shared", "holding it shared, in all"),
    ("vp.gpu_lock_hold_shared_longest", "its longest shared hold"),
    ("judge", "the judge's own work on its frames"),
    ("judge.gpu_lock_wait", "the judge waiting for the GPU lock to read them"),
    ("timing.wait", "waiting for its timing turn"),
    ("timing", "the timing turn"),
)


def phases_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """Each phase's median and range over the sessions, of each session's median candidate
    (``median_phases_s``); phases no session recorded are left out."""
    out = []
    for key, what in PHASES:
        values = [r["median_phases_s"][key] for r in rows if key in (r.get("median_phases_s") or {})]
        if values:
            out.append(f"| {what} (`{key}`) | {statistics.median(values):.3f} | {min(values):.3f}-{max(values):.3f} |")
    if not out:
        return []
    return ["", "## Where a candidate's seconds go (s: median over the sessions of each one's median candidate)", "",
            "| phase | median | range |", "|---|---|---|", *out]


def markdown(report: dict[str, Any]) -> str:
    commits = " + ".join(c[:12] for c in str(report["commit"]).split(" + "))  # merged: each part's commit
    lines = [f"# Evaluation speed ({report['gpu']}, commit {commits})", "",
             f"Command: `{report['command']}`; budget {report['budget']}, cap {report['cap']} s per session "
             f"(layernorm_large 5x); one session at a time on "
             + _queues(report.get("gpus") or [])
             + " except parallel3.", ""]
    rows = report.get("rows") or []
    if rows:
        lines += ["| kernel | group | status | evals | slower (screened) | in flight | evals/min | first verdict s | "
                  "session s | speedup [CI] | search/final |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            ci = r.get("speedup_ci")
            sp = f"{r['speedup']:.3f}x [{ci[0]:.3f}, {ci[1]:.3f}]" if r.get("speedup") and ci and ci[0] else ""
            slower = sum(1 for st in r.get("statuses") or [] if st == "slower")
            lines.append(f"| {r['kernel']} | {r['group']} | {r['status']} | {r['evals']} | {slower} | "
                         f"{r.get('in_flight') or ''} | "
                         f"{r.get('evals_per_min') or ''} | "
                         f"{r.get('first_verdict_s') or ''} | {r['session_s']} | {sp} | {r.get('search_vs_final') or ''} |")
        rates = [r["evals_per_min"] for r in rows if r.get("evals_per_min")]
        if rates:
            lines += ["", f"Median evaluations per minute: **{statistics.median(rates):.1f}** over {len(rates)} sessions."]
    if report.get("add_scale_b16"):
        a = report["add_scale_b16"]
        lines += ["", f"`kernelband optimize examples/add_scale.py --budget 16` (fresh workspace): **{a['wall_s']} s** wall, "
                      f"{a.get('status')} {a.get('speedup')} {a.get('speedup_ci')}; first verdict with --no-store "
                      f"{a.get('first_verdict_s_no_store')} s."]
    lines += phases_markdown(rows)
    lines += startup_markdown(report)
    for t in report.get("timeline") or []:
        lines += ["", f"## One evaluation, harness output {t['output_bytes'] / 2**20:.0f} MiB "
                      f"(prepare {t['prepare_s']} s)", "", "| phase | " + " | ".join(f"block {e['block']}" for e in t["evals"]) + " |",
                  "|---|" + "---|" * len(t["evals"])]
        keys = sorted({k for e in t["evals"] for k in e["phases"]})
        for k in keys:
            lines.append(f"| {k} | " + " | ".join(f"{e['phases'].get(k, 0):.3f}" for e in t["evals"]) + " |")
        lines.append("| **wall** | " + " | ".join(f"**{e['wall_s']:.3f}**" for e in t["evals"]) + " |")
    par = report.get("parallel")
    if par:
        lines += ["", f"## Three sessions of {par['kernel']} on one GPU", "",
                  f"Median 95% CI half-width of the final speedup: solo {par['ci_halfwidth']['solo']} "
                  f"({len(par['solo'])} sessions), three at once {par['ci_halfwidth']['parallel3']} "
                  f"({len(par['parallel3'])} sessions); verdicts {par['verdicts']}.",
                  "", "Each session's half-width: solo "
                  + ", ".join(str(ci_halfwidth(r)) for r in par["solo"]) + "; three at once "
                  + ", ".join(str(ci_halfwidth(r)) for r in par["parallel3"]) + "."]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for r in report.get("rows") or [] if r.get("evals_per_min")]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar([r["kernel"] for r in rows], [r["evals_per_min"] for r in rows])
    ax.axhline(60, color="red", linestyle="--", label="target 60/min")
    ax.set_ylabel("evaluations per minute")
    ax.set_title(f"Verified evaluations per minute ({report['gpu']}, {report['commit'][:10]})")
    ax.tick_params(axis="x", rotation=70)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def merge_parts(parts: list[Path], out: Path) -> int:
    """One report from parts measured in several device calls on one kind of GPU: rows by
    (group, kernel), the later part's winning; the example and parallel3 from the last part
    that has them; every part's commit and command kept."""
    reports = [json.loads((p / "eval_speed.json").read_text(encoding="utf-8")) for p in parts]
    gpus = {r["gpu"] for r in reports}
    if len(gpus) != 1:
        print(f"eval_speed: the parts ran on different GPUs ({', '.join(sorted(gpus))}): not merged", file=sys.stderr)
        return 2
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in reports:
        for row in r.get("rows") or []:
            rows[(row.get("group", ""), row["kernel"])] = {**row, "commit": row.get("commit") or r["commit"]}
    canonical = {(g, n): i for i, (g, n, _, _) in enumerate(kernels([]))}
    merged: dict[str, Any] = {**reports[0], "rows": sorted(rows.values(), key=lambda x: canonical.get(
        (x.get("group", ""), x["kernel"]), len(canonical)))}
    for r in reports:
        for key in ("add_scale_b16", "add_scale_b16_wall_s", "parallel", "ci_halfwidth"):
            if r.get(key) is not None:
                merged[key] = r[key]
    merged["gpus"] = list(dict.fromkeys(g for r in reports for g in r.get("gpus") or []))
    merged["commit"] = " + ".join(dict.fromkeys(r["commit"] for r in reports))
    merged["command"] = " ; ".join(f"{r['command']} (commit {r['commit'][:10]})" for r in reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_speed.json").write_text(json.dumps(merged, indent=1, default=str), encoding="utf-8")
    (out / "eval_speed.md").write_text(markdown(merged), encoding="utf-8")
    plot(merged, out / "eval_speed.png")
    print(markdown(merged))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--cap", type=float, default=120.0, help="wall cap per session, seconds")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--parallel-budget", type=int, default=8)
    ap.add_argument("--parallel-kernel", default=PARALLEL_KERNEL, help="the kernel of the three-sessions part")
    ap.add_argument("--parallel-solo", type=int, default=2, help="solo sessions of the three-sessions part")
    ap.add_argument("--parallel-rounds", type=int, default=1, help="rounds of three sessions at once")
    ap.add_argument("--skip-sessions", action="store_true")
    ap.add_argument("--skip-timeline", action="store_true")
    ap.add_argument("--skip-parallel", action="store_true")
    ap.add_argument("--skip-add-scale", action="store_true")
    ap.add_argument("--gpus", type=lambda v: [x for x in v.split(",") if x], default=[],
                    help="comma-separated GPU indices: one queue of sessions per GPU, side by side (default: "
                         "one queue, the visible GPUs)")
    ap.add_argument("--total-seconds", type=float, default=0.0,
                    help="start no session that could end after this many seconds of the run (0: no limit)")
    ap.add_argument("--merge", nargs="*", default=[],
                    help="combine the eval_speed.json of these part directories into --out (a later part's row of "
                         "a kernel replaces an earlier one's); runs nothing")
    args = ap.parse_args()
    if args.merge:
        return merge_parts([Path(p) for p in args.merge], Path(args.out))
    args.deadline = time.monotonic() + args.total_seconds if args.total_seconds else 0.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        import torch

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (Triton interpreter)"
    except ImportError:
        gpu = "?"
    report: dict[str, Any] = {"commit": bench_commit(), "gpu": gpu, "budget": args.budget, "cap": args.cap,
                              "command": "python benchmarks/eval_speed.py " + " ".join(sys.argv[1:]), "gpus": args.gpus or None,
                              "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}

    def save() -> None:
        (out / "eval_speed.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
        (out / "eval_speed.md").write_text(markdown(report), encoding="utf-8")

    if not args.skip_timeline:
        report["timeline"] = part_timeline(args)
        save()
    if not args.skip_sessions:
        report["rows"] = []
        part_sessions(args, report["rows"], save)
        save()
    # after the sessions: a fresh workspace on a machine that has run KernelBand before
    # (its bytecode and device peaks cached), as a user's second kernel finds it
    if not args.skip_add_scale:
        report["add_scale_b16"] = part_add_scale(args)
        report["add_scale_b16_wall_s"] = report["add_scale_b16"]["wall_s"]
        save()
    if not args.skip_parallel:
        report["parallel"] = part_parallel(args)
        report["ci_halfwidth"] = report["parallel"]["ci_halfwidth"]
        save()
    save()
    plot(report, out / "eval_speed.png")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
