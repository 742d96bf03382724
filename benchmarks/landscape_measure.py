#!/usr/bin/env python3
"""Measured landscapes: every config the rules generator reaches on a suite kernel, up
to a cap, checked once and timed, one kernel after the other in one process.

    python benchmarks/landscape_measure.py --out DIR [--cap 40] [--minutes 8.5] [--kernels a,b]
        [--repeats 3] [--compile-workers 8] [--warmup-ms 10] [--rep-ms 40]

Which configs (``landscape_configs.py``: recipes of the generator's own rewrites, typed
keys). Per kernel, up to ``--cap`` distinct typed configs, in this order:
1. the original and every single step the generator offers on it (every knob move,
   code rewrite, hint, cache modifier and, on a GPU, the autotune wrap): whatever a
   policy's first pull proposes is measured;
2. best-first: the fastest measured config not yet expanded gets its children (the
   generator's first ``--per-strategy`` proposals of each strategy, in the generator's
   own ranking), and each code rewrite is combined with the best launch-only config so
   far; repeated until the cap. This follows where the policies go (they expand the
   fast configs); what it does not cover, the replay counts as a miss and reports.

How. Inputs are made once per kernel (seed 0) and the harness is called with them
(``make_inputs`` patched), so a timing is the wrapper plus its launch(es), not input
creation. Each config: one run compared with the original's outputs (the suite's
tolerance compare, in this process: these are our own generated configs, not
adversarial code, and this benchmark is not the product's verdict path; the product's
hardened evaluation is what ``replay_confirm.py`` runs), then ``--repeats`` calls of
``triton.testing.do_bench`` (median; under the interpreter a CPU timer) whose median is
the config's time; the spread of the repeats is kept as the noise. On a GPU a pool of
``--compile-workers`` processes first runs every config of a batch once, so Triton's
on-disk cache is warm when the serial timing starts (compiles overlap; timings never
do). Each config's cost (compile + check + timing seconds) is recorded for the
equal-GPU-seconds comparison.

``--extra replay.json`` measures, for kernels already present, the proposals the replay
made but found unmeasured (its ``missing`` recipes, most frequent first, up to
``--extra-cap``) and appends them; replay again afterwards. A later session can run a few
% off the table's (clocks, another machine): it first re-times three rows already there
(the original, the fastest, the median) and multiplies the new rows' times by the median
old / new ratio (each new row keeps ``ms_measured`` and ``scale``; the table keeps
``extra_scales`` with the anchors).

Resumable: DIR/<module>.json is written as soon as a kernel is done and skipped when
present. ``--minutes`` stops cleanly before a kernel that would not finish (a kernel cut
short is not written). A table is printed at the end.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import statistics
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

from common import load_module

from landscape_configs import KNOB_FAMILIES, Analyses, Built, build, families, original, ranked_children, step  # noqa: E402

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
ANCHORS = 3  # rows re-timed by --extra to put its new rows on the table's clock
FATAL = ("illegal memory access", "CUDA error", "unspecified launch failure")


def _sync() -> None:
    import torch

    if torch.cuda.is_available() and not INTERPRETED:
        torch.cuda.synchronize()


def _compile_one(path: str, name: str, harness: str) -> tuple[float, Optional[str]]:
    """In a pool worker: run the config once (fills Triton's cache); seconds, error."""
    t0 = time.perf_counter()
    try:
        import torch

        torch.manual_seed(0)
        mod = load_module(Path(path), name)
        getattr(mod, harness)()
        _sync()
        return time.perf_counter() - t0, None
    except Exception as e:  # reported by the serial pass, which runs it again
        return time.perf_counter() - t0, f"{type(e).__name__}: {str(e)[:200]}"


def _warm_worker(_i: int) -> float:
    """Start-up of a pool worker (imports, CUDA context), so that no config's compile
    time carries it."""
    t0 = time.perf_counter()
    import torch
    import triton  # noqa: F401

    if torch.cuda.is_available() and not INTERPRETED:
        torch.zeros(1, device="cuda")
    time.sleep(0.5)  # keep this worker busy so that the others take the other warm-ups
    return time.perf_counter() - t0


class ContextLost(RuntimeError):
    """The CUDA context is gone: nothing measured after this in this process is valid."""


class Bench:
    def __init__(self, repeats: int, warmup_ms: int, rep_ms: int) -> None:
        self.repeats, self.warmup_ms, self.rep_ms = repeats, warmup_ms, rep_ms

    def __call__(self, fn: Callable[[], Any]) -> list[float]:
        if INTERPRETED:  # no GPU events: median wall time of a few calls
            out = []
            for _ in range(self.repeats):
                ts = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    fn()
                    ts.append((time.perf_counter() - t0) * 1e3)
                out.append(statistics.median(ts))
            return out
        from triton.testing import do_bench

        return [float(do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median"))
                for _ in range(self.repeats)]


class KernelMeasure:
    """Enumerate, check and time one kernel's configs."""

    def __init__(self, entry: Any, args: argparse.Namespace, workdir: Path, pool: Optional[cf.Executor],
                 deadline: float, log: Callable[[str], None]) -> None:
        self.e, self.a, self.workdir, self.pool, self.deadline, self.log = entry, args, workdir, pool, deadline, log
        self.autotune = not INTERPRETED  # the interpreter cannot benchmark autotune configs (as a CPU session)
        self.ac = Analyses(entry.kernel, families(self.autotune))
        self.original = entry.path.read_text(encoding="utf-8")
        self.bench = Bench(args.repeats, args.warmup_ms, args.rep_ms)
        self.rows: dict[str, dict[str, Any]] = {}  # typed key -> row
        self.n_loaded = 0

    # ---- one config
    def _module(self, source: str) -> tuple[Path, str]:
        self.n_loaded += 1
        name = f"kb_landscape_{self.e.module}_{self.n_loaded}"
        path = self.workdir / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        return path, name

    def _run(self, b: Built, path: Path, name: str, compile_s: Optional[float]) -> dict[str, Any]:
        import torch

        from benchmarks.suite import compare

        row: dict[str, Any] = {"recipe": b.recipe, "families": b.families, "code": b.code,
                               "description": b.description or "original", "typed_key": b.key(self.ac), "knobs": b.knobs,
                               "ast_key": self.ac.ast_key(b.source), "correct": False, "ms": None, "ms_repeats": [],
                               "compile_s": compile_s, "check_s": None, "time_s": None, "problems": [], "error": None}
        try:
            t0 = time.perf_counter()
            mod = load_module(path, name)
            mod.make_inputs = lambda: self.inputs
            fn = getattr(mod, self.e.harness)
            out = fn()
            _sync()
            row["check_s"] = time.perf_counter() - t0
            problems = compare(out, self.ref_out)
            del out
            row["problems"] = problems[:3]
            row["correct"] = not problems
            if not problems:
                t1 = time.perf_counter()
                reps = self.bench(fn)
                row["time_s"] = time.perf_counter() - t1
                row["ms_repeats"] = reps
                row["ms"] = statistics.median(reps)
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            if any(f in str(e) for f in FATAL):
                raise ContextLost(f"CUDA context lost on {self.e.module} {b.recipe}: {row['error']}") from e
        if compile_s is None:  # no compile pass: the first call compiled
            row["compile_s"] = row["check_s"]
        if torch.cuda.is_available() and not INTERPRETED:
            torch.cuda.empty_cache()
        return row

    def _batch(self, items: list[Built]) -> bool:
        """Measure items (compile pass first on a GPU); False when the deadline came first."""
        files = [self._module(b.source) for b in items]
        compiled: list[Optional[float]] = [None] * len(items)
        if self.pool is not None and items:
            futs = [self.pool.submit(_compile_one, str(p), f"{n}_c", self.e.harness) for p, n in files]
            for i, f in enumerate(futs):
                try:
                    left = self.deadline - time.monotonic()
                    compiled[i] = f.result(timeout=max(1.0, left) if left != float("inf") else None)[0]
                except Exception:  # a worker died or timed out: the serial run compiles it
                    compiled[i] = None
        for b, (path, name), c in zip(items, files, compiled):
            if time.monotonic() > self.deadline:
                return False
            row = self._run(b, path, name, c)
            self.rows[row["typed_key"]] = row
            self.log(f"  {self.e.module} {len(self.rows):3d} {'ok ' if row['correct'] else 'BAD'} "
                     f"{row['ms'] if row['ms'] is not None else '-':>10} {b.description[:90] or 'original'}")
        return True

    # ---- the kernel
    def run(self) -> Optional[dict[str, Any]]:
        t_start = time.perf_counter()
        ref_problems = self._setup()
        cap = self.a.cap
        orig = original(self.ac, self.original)
        queue: list[Built] = [orig] + [step(self.ac, orig, rw) for rw in ranked_children(self.ac, orig)]
        expanded: set[str] = set()
        combined: set[str] = set()
        while len(self.rows) < cap:
            todo, keys = [], set()
            for b in queue:
                k = b.key(self.ac)
                if k in self.rows or k in keys:
                    continue
                keys.add(k)
                todo.append(b)
                if len(self.rows) + len(todo) >= cap:
                    break
            queue = []
            if todo and not self._batch(todo):
                return None
            if len(self.rows) >= cap:
                break
            queue = self._next(expanded, combined)
            if not queue:
                break
        rows = list(self.rows.values())
        orig_row = rows[0]
        return {
            "module": self.e.module, "kernel": self.e.kernel, "harness": self.e.harness,
            "meta": meta(self.a, self.autotune),
            "original_matches_reference": not ref_problems, "reference_problems": ref_problems[:3],
            "original_ms": orig_row["ms"], "configs": rows, "seconds": time.perf_counter() - t_start,
        }

    def _setup(self) -> list[str]:
        """Inputs (seed 0) and the original's outputs; problems of the original vs the reference."""
        import torch

        from benchmarks.suite import compare

        base = load_module(self.e.path, f"kb_landscape_orig_{self.e.module}")
        torch.manual_seed(0)
        self.inputs = base.make_inputs()
        base.make_inputs = lambda: self.inputs
        self.ref_out = getattr(base, self.e.harness)()
        _sync()
        return compare(self.ref_out, getattr(base, self.e.reference)())

    def extend(self, d: dict[str, Any], recipes: list[list[str]], n: int) -> Optional[dict[str, Any]]:
        """Measure up to n more configs given as recipes (the replay's missed proposals) and
        append them to a kernel's table; None when the deadline came first."""
        t0 = time.perf_counter()
        self.rows = {r["typed_key"]: r for r in d["configs"]}
        todo, keys = [], set()
        for rec in recipes:
            try:
                b = build(self.ac, self.original, rec)
            except KeyError:  # not offered here (another Triton's features): nothing to measure
                continue
            k = b.key(self.ac)
            if k not in self.rows and k not in keys:
                keys.add(k)
                todo.append(b)
            if len(todo) >= n:
                break
        if not todo:
            return d
        self._setup()
        scale = self._drift(d["configs"])
        if scale is None or not self._batch(todo):
            return None
        for b in todo:  # on the table's clock: a later GPU session may run a few % off
            row = self.rows[b.key(self.ac)]
            row["scale"] = scale["factor"]
            if row["ms"] is not None:
                row["ms_measured"], row["ms"] = row["ms"], row["ms"] * scale["factor"]
        return dict(d, configs=list(self.rows.values()), seconds=d["seconds"] + time.perf_counter() - t0,
                    extra_rounds=d.get("extra_rounds", 0) + 1, extra_scales=d.get("extra_scales", []) + [scale])

    def _drift(self, old_rows: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
        """Rows added in a later session must be on the table's clock (GPU clocks, driver,
        another machine of the same model): re-time up to ``ANCHORS`` rows already in the
        table (the original, the fastest, the median), without replacing them, and return
        median(old ms / new ms) with the anchors' ratios; None when the deadline came."""
        ok = sorted((r for r in old_rows if r["correct"] and r["ms"]), key=lambda r: r["ms"])
        picks = [old_rows[0]] + ([ok[0], ok[len(ok) // 2]] if ok else [])
        anchors: list[dict[str, Any]] = []
        for r in picks[:ANCHORS]:
            if any(a["recipe"] == r["recipe"] for a in anchors) or not r["correct"] or not r["ms"]:
                continue
            if time.monotonic() > self.deadline:
                return None
            b = build(self.ac, self.original, r["recipe"])
            new = self._run(b, *self._module(b.source), None)
            if new["correct"] and new["ms"]:
                anchors.append({"recipe": r["recipe"], "old_ms": r["ms"], "new_ms": new["ms"]})
        ratios = [a["old_ms"] / a["new_ms"] for a in anchors]
        factor = statistics.median(ratios) if ratios else 1.0
        self.log(f"  {self.e.module}: drift against the table {factor:.4f} (anchors {', '.join(f'{x:.4f}' for x in ratios)})")
        return {"factor": factor, "anchors": anchors}

    def _next(self, expanded: set[str], combined: set[str]) -> list[Built]:
        """The next round: children of the fastest unexpanded config, and each code
        rewrite of the original on top of the best launch-only config."""
        good = sorted((r for r in self.rows.values() if r["correct"] and r["ms"] is not None), key=lambda r: r["ms"])
        out: list[Built] = []
        launch_only = [r for r in good if r["recipe"] and set(r["families"]) <= KNOB_FAMILIES]
        if launch_only:
            best = launch_only[0]
            if best["typed_key"] not in combined:
                combined.add(best["typed_key"])
                parent = build(self.ac, self.original, best["recipe"])
                an = self.ac.analysis(parent.source)
                for rw in (an.rewrites if an else []):
                    if rw.family not in KNOB_FAMILIES:
                        out.append(step(self.ac, parent, rw))
        for r in good:
            if r["typed_key"] in expanded:
                continue
            expanded.add(r["typed_key"])
            parent = build(self.ac, self.original, r["recipe"])
            out += [step(self.ac, parent, rw) for rw in ranked_children(self.ac, parent, self.a.per_strategy)]
            break
        return out


def meta(a: argparse.Namespace, autotune: bool) -> dict[str, Any]:
    import torch
    import triton

    from kernelband.generators import triton_features

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() and not INTERPRETED else "cpu (interpreter)"
    return {"gpu": gpu, "triton": triton.__version__, "torch": torch.__version__, "interpreted": INTERPRETED,
            "autotune": autotune, "block_ptr": bool(triton_features.block_pointers_supported()),
            "cap": a.cap, "repeats": a.repeats, "warmup_ms": a.warmup_ms, "rep_ms": a.rep_ms,
            "per_strategy": a.per_strategy, "compile_workers": a.compile_workers,
            "timer": "cpu perf_counter" if INTERPRETED else "triton.testing.do_bench median"}


def summary_row(d: dict[str, Any]) -> dict[str, Any]:
    ok = [r for r in d["configs"] if r["correct"] and r["ms"]]
    best = min(ok, key=lambda r: r["ms"]) if ok else None
    noise = [max(r["ms_repeats"]) / min(r["ms_repeats"]) - 1 for r in ok if len(r["ms_repeats"]) > 1 and min(r["ms_repeats"]) > 0]
    n = len(d["configs"])
    return {"module": d["module"], "configs": n, "correct": len(ok), "original_ms": d["original_ms"],
            "best_ms": best["ms"] if best else None,
            "best_speedup": (d["original_ms"] / best["ms"]) if best and d["original_ms"] else None,
            "best": (best["description"] if best else "")[:70],
            "noise": statistics.median(noise) if noise else None,
            "cost_per_config_s": sum((r["compile_s"] or 0) + (r["check_s"] or 0) + (r["time_s"] or 0) for r in d["configs"]) / max(n, 1),
            "seconds": d["seconds"]}


def print_table(out: Path, modules: list[str]) -> None:
    print("\n| kernel | configs | correct | original ms | best ms | best speedup | median repeat spread | cost/config s | kernel s | best config |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in modules:
        p = out / f"{m}.json"
        if not p.is_file():
            print(f"| {m} | not measured | | | | | | | | |")
            continue
        s = summary_row(json.loads(p.read_text()))
        f = lambda v, fmt: format(v, fmt) if v is not None else "-"  # noqa: E731
        print(f"| {m} | {s['configs']} | {s['correct']} | {f(s['original_ms'], '.4f')} | {f(s['best_ms'], '.4f')} | "
              f"{f(s['best_speedup'], '.3f')} | {f(s['noise'], '.1%')} | {s['cost_per_config_s']:.2f} | {s['seconds']:.0f} | {s['best']} |")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="one JSON per kernel is written here")
    ap.add_argument("--kernels", default="", help="comma-separated suite modules (default: all)")
    ap.add_argument("--cap", type=int, default=40, help="most configs per kernel (the original included)")
    ap.add_argument("--repeats", type=int, default=3, help="do_bench calls per config (their median is the time)")
    ap.add_argument("--warmup-ms", type=int, default=10)
    ap.add_argument("--rep-ms", type=int, default=40)
    ap.add_argument("--per-strategy", type=int, default=2, help="children per strategy when a config is expanded")
    ap.add_argument("--compile-workers", type=int, default=None, help="compile pass processes (GPU; default 8, 0 off)")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop cleanly before this much time is spent (0: none)")
    ap.add_argument("--extra", type=Path, help="replay.json: measure its missed recipes for kernels already present")
    ap.add_argument("--extra-cap", type=int, default=30, help="most extra configs per kernel and call")
    a = ap.parse_args(argv)
    if a.cap < 1 or a.repeats < 1:
        ap.error("--cap and --repeats must be at least 1")
    if a.compile_workers is None:
        a.compile_workers = 0 if INTERPRETED else 8
    from benchmarks.suite import SUITE, entry

    try:
        entries = [entry(k) for k in a.kernels.split(",") if k] or list(SUITE)
    except KeyError as e:
        ap.error(str(e.args[0]))
    missing: dict[str, list[dict[str, Any]]] = {}
    if a.extra is not None:
        if not a.extra.is_file():
            ap.error(f"no replay file {a.extra}")
        missing = json.loads(a.extra.read_text()).get("missing") or {}
    t0 = time.monotonic()
    deadline = t0 + a.minutes * 60 if a.minutes > 0 else float("inf")
    a.out.mkdir(parents=True, exist_ok=True)
    log = lambda s: print(s, flush=True)  # noqa: E731
    pool: Optional[cf.Executor] = None
    if a.compile_workers > 0:  # (under the interpreter only when asked: it checks the pool path)
        pool = cf.ProcessPoolExecutor(a.compile_workers, mp_context=multiprocessing.get_context("spawn"))
        list(pool.map(_warm_worker, range(a.compile_workers)))
    done_times: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="kb-landscape-") as tmp:
            for e in entries:
                path = a.out / f"{e.module}.json"
                recipes = [m["recipe"] for m in missing.get(e.module, [])]
                if path.is_file() and not recipes:
                    log(f"{e.module}: present, skipped")
                    continue
                if not path.is_file() and a.extra is not None:
                    log(f"{e.module}: not measured yet; --extra only extends present tables")
                    continue
                # a kernel is not started when the slowest one so far would not fit
                need = max(done_times) if done_times else 0.0
                if time.monotonic() + need > deadline:
                    log(f"{e.module}: not started ({deadline - time.monotonic():.0f}s left, a kernel took up to {need:.0f}s)")
                    continue
                log(f"{e.module}: measuring (cap {a.cap})")
                k0 = time.monotonic()
                try:
                    km = KernelMeasure(e, a, Path(tmp), pool, deadline, log)
                    if recipes:
                        log(f"{e.module}: {len(recipes)} missed recipes from {a.extra}")
                        d = km.extend(json.loads(path.read_text()), recipes, a.extra_cap)
                    else:
                        d = km.run()
                except ContextLost as ex:  # nothing after this would be valid
                    log(f"{e.module}: {ex}; stopping (rerun to continue with the next kernels)")
                    (a.out / f"{e.module}.failed.txt").write_text(traceback.format_exc())
                    break
                except Exception as ex:  # the original itself cannot run here: say so, go on
                    log(f"{e.module}: cannot be measured: {type(ex).__name__}: {str(ex)[:200]}")
                    (a.out / f"{e.module}.failed.txt").write_text(traceback.format_exc())
                    continue
                if d is None:
                    log(f"{e.module}: stopped at the deadline, not written")
                    break
                path.write_text(json.dumps(d, indent=1) + "\n")
                done_times.append(time.monotonic() - k0)
                log(f"{e.module}: {len(d['configs'])} configs in {d['seconds']:.1f}s -> {path}")
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    print_table(a.out, [e.module for e in entries])
    print(f"\ntotal {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
