"""Two arms of ``eval_speed.py`` measured side by side on one host (a new commit on one GPU,
an old one on the other, one session at a time on each): a paired table per kernel.

Besides each row's rate, first verdict and session length, it reads the arms' traces
(``EVAL_SPEED_TRACES``) for where the setup stood: the baseline ready (``setup.prepared``),
the derivation's references (``derive.done``), the first verdict that passed everything
(an ``ok`` one, not a candidate screened slower), and how long the first wave's processes
took to their first frame beyond their own run (a process still making its CUDA context,
importing, compiling), and how many candidate jobs were forked fresh rather than handed a
spare (a fresh one makes its CUDA context on the verdict's path).

    python benchmarks/eval_speed_compare.py NEW_DIR OLD_DIR --out DIR
        [--traces NEW_TRACES OLD_TRACES]      (default: traces_<name> beside each arm)

writes ``DIR/compare.json``, ``DIR/compare.md`` and ``DIR/compare.png``.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_speed import _marks  # noqa: E402

WAVE = 8  # the first wave: one candidate per lane on an H200


def session_marks(trace: Path) -> dict[str, Optional[float]]:
    """Seconds from the session's first mark to the setup and verdict marks of one trace."""
    marks = _marks(trace)
    if not marks:
        return {}
    t0 = float(marks[0]["t"])
    out: dict[str, Optional[float]] = {}
    pending: dict[str, float] = {}  # a first-wave job's request time, until its first frame
    requested = 0
    waits: list[float] = []
    candidates: set[str] = set()
    fresh = 0
    for m in marks:
        what, t = m.get("what"), float(m["t"]) - t0
        if what in ("setup.prepared", "derive.start", "derive.done") and what not in out:
            out[what] = round(t, 3)
        if what == "session.verdict" and m.get("status") == "ok" and "first_ok" not in out:
            out["first_ok"] = round(t, 3)
        if what == "job.request" and m.get("trusted") is False:  # a candidate's job
            candidates.add(m["job"])
            if requested < WAVE:
                requested += 1
                pending[m["job"]] = t
        if what == "job.start" and m.get("job") in candidates and m.get("zygote") and not m.get("spare"):
            fresh += 1
        if what == "job.frame" and m.get("job") in pending:
            waits.append(t - pending.pop(m["job"]) - float(m.get("seconds") or 0.0))
    out["wave_wait"] = round(statistics.median(waits), 3) if waits else None
    out["fresh_jobs"] = fresh
    return out


def traces_by_kernel(folder: Path) -> dict[str, dict[str, Optional[float]]]:
    """Each trace's marks by "kernel" (its file name's first part), a second session of the
    same kernel name as "kernel (realworld)" (the suite runs first)."""
    out: dict[str, dict[str, Optional[float]]] = {}
    for trace in sorted(folder.glob("*.jsonl"), key=lambda p: int(p.stem.rsplit("-", 1)[-1])):
        name = trace.stem.split("-", 1)[0]
        out[name if name not in out else f"{name} (realworld)"] = session_marks(trace)
    return out


def _rows(arm: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    report = json.loads((arm / "eval_speed.json").read_text(encoding="utf-8"))
    rows = {r["kernel"] + (" (realworld)" if r.get("group") == "realworld" else ""): r for r in report["rows"]}
    return report, rows


ROW_KEYS = ("evals_per_min", "first_verdict_s", "session_s", "capped")
MARK_KEYS = ("setup.prepared", "derive.done", "first_ok", "wave_wait", "fresh_jobs")


def compare(new: Path, old: Path, new_traces: Path, old_traces: Path) -> dict[str, Any]:
    new_report, new_rows = _rows(new)
    old_report, old_rows = _rows(old)
    new_marks, old_marks = traces_by_kernel(new_traces), traces_by_kernel(old_traces)
    kernels = []
    for name, row in new_rows.items():
        if name not in old_rows:
            continue
        kernels.append({"kernel": name,
                        "new": {**{k: row.get(k) for k in ROW_KEYS}, **{k: new_marks.get(name, {}).get(k) for k in MARK_KEYS}},
                        "old": {**{k: old_rows[name].get(k) for k in ROW_KEYS},
                                **{k: old_marks.get(name, {}).get(k) for k in MARK_KEYS}}})
    return {"new_commit": new_report["commit"], "old_commit": old_report["commit"], "gpu": new_report["gpu"],
            "new_command": new_report["command"], "old_command": old_report["command"],
            "kernels": kernels, "summary": summary(kernels)}


def summary(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the sessions that ended in both arms (neither capped)."""
    both = [k for k in kernels if not k["new"]["capped"] and not k["old"]["capped"]]

    def median(arm: str, key: str) -> Optional[float]:
        values = [k[arm][key] for k in both if k[arm][key] is not None]
        return round(statistics.median(values), 2) if values else None

    def sooner(key: str) -> int:
        return sum((k["new"][key] if k["new"][key] is not None else math.inf)
                   < (k["old"][key] if k["old"][key] is not None else math.inf) for k in both)

    ratios = [k["new"]["evals_per_min"] / k["old"]["evals_per_min"] for k in both
              if k["new"]["evals_per_min"] and k["old"]["evals_per_min"]]
    out: dict[str, Any] = {"sessions": len(both),
                           "evals_per_min_ratio_geomean": round(math.exp(statistics.mean(map(math.log, ratios))), 3)
                           if ratios else None}
    for key in ("evals_per_min", "first_verdict_s", "first_ok", "setup.prepared", "derive.done", "wave_wait"):
        out[f"median_{key}"] = {"new": median("new", key), "old": median("old", key)}
    out["first_verdict_sooner"] = sooner("first_verdict_s")
    out["first_ok_sooner"] = sooner("first_ok")
    out["session_s_total"] = {arm: round(sum(k[arm]["session_s"] for k in both), 1) for arm in ("new", "old")}
    out["sessions_shorter"] = sooner("session_s")
    out["fresh_jobs_total"] = {arm: sum(k[arm]["fresh_jobs"] or 0 for k in both) for arm in ("new", "old")}
    return out


def markdown(report: dict[str, Any]) -> str:
    def f(value: Any) -> str:
        return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = [f"# {report['new_commit'][:10]} beside {report['old_commit'][:10]} ({report['gpu']}, one host)", "",
             f"New: `{report['new_command']}`", "", f"Old: `{report['old_command']}`", "",
             "Each cell: new / old. Seconds from the command's start. First wave's wait: the median, over its "
             "first eight candidates, of the seconds to their first frame beyond their own run. Fresh jobs: "
             "candidate jobs forked without a spare.", "",
             "| kernel | evals/min | first verdict s | first `ok` verdict s | baseline ready s | derivation done s "
             "| first wave's wait s | fresh jobs | session s |", "|---|---|---|---|---|---|---|---|---|"]
    for k in report["kernels"]:
        n, o = k["new"], k["old"]
        capped = " (capped)" if n["capped"] or o["capped"] else ""
        lines.append(f"| {k['kernel']} | {f(n['evals_per_min'])} / {f(o['evals_per_min'])} "
                     f"| {f(n['first_verdict_s'])} / {f(o['first_verdict_s'])} | {f(n['first_ok'])} / {f(o['first_ok'])} "
                     f"| {f(n['setup.prepared'])} / {f(o['setup.prepared'])} | {f(n['derive.done'])} / {f(o['derive.done'])} "
                     f"| {f(n['wave_wait'])} / {f(o['wave_wait'])} | {f(n['fresh_jobs'])} / {f(o['fresh_jobs'])} "
                     f"| {f(n['session_s'])} / {f(o['session_s'])}{capped} |")
    s = report["summary"]
    lines += ["", f"Over the {s['sessions']} sessions that ended in both arms:", "",
              f"- evaluations a minute: {s['evals_per_min_ratio_geomean']}x (geometric mean of the ratios); median "
              f"{s['median_evals_per_min']['new']} / {s['median_evals_per_min']['old']}",
              f"- first verdict: median {s['median_first_verdict_s']['new']} / {s['median_first_verdict_s']['old']} s, "
              f"sooner in {s['first_verdict_sooner']}",
              f"- first `ok` verdict: median {s['median_first_ok']['new']} / {s['median_first_ok']['old']} s, "
              f"sooner in {s['first_ok_sooner']}",
              f"- baseline ready: median {s['median_setup.prepared']['new']} / {s['median_setup.prepared']['old']} s; "
              f"derivation done: median {s['median_derive.done']['new']} / {s['median_derive.done']['old']} s; "
              f"first wave's wait: median {s['median_wave_wait']['new']} / {s['median_wave_wait']['old']} s",
              f"- sessions: {s['session_s_total']['new']} / {s['session_s_total']['old']} s in all, shorter in "
              f"{s['sessions_shorter']}",
              f"- candidate jobs forked without a spare: {s['fresh_jobs_total']['new']} / "
              f"{s['fresh_jobs_total']['old']} in all", ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    kernels = report["kernels"]
    names = [k["kernel"] for k in kernels]
    x = range(len(names))
    fig, (rate, verdict) = plt.subplots(1, 2, figsize=(14, 4.5))
    for ax, key, label in ((rate, "evals_per_min", "evaluations per minute"), (verdict, "first_verdict_s",
                                                                             "first verdict, s")):
        ax.bar([i - 0.2 for i in x], [k["new"][key] or 0 for k in kernels], 0.4, label=report["new_commit"][:10])
        ax.bar([i + 0.2 for i in x], [k["old"][key] or 0 for k in kernels], 0.4, label=report["old_commit"][:10])
        ax.set_xticks(list(x), names, rotation=70)
        ax.set_ylabel(label)
        ax.legend()
    rate.axhline(60, color="red", linestyle="--")
    verdict.axhline(10, color="red", linestyle="--")
    fig.suptitle(f"{report['new_commit'][:10]} beside {report['old_commit'][:10]} on one host ({report['gpu']})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new", type=Path)
    ap.add_argument("old", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--traces", nargs=2, type=Path, default=None, metavar=("NEW_TRACES", "OLD_TRACES"))
    args = ap.parse_args()
    new_traces, old_traces = args.traces or (args.new.parent / f"traces_{args.new.name}",
                                             args.old.parent / f"traces_{args.old.name}")
    report = compare(args.new, args.old, new_traces, old_traces)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (args.out / "compare.md").write_text(markdown(report), encoding="utf-8")
    plot(report, args.out / "compare.png")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
