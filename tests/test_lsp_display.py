"""What the editors show of a job (server/kernelband_lsp/display.py): one rule for
ratios and before -> after times, fed the event streams a real engine wrote under the
Triton interpreter (tests/data/events: `kernelband optimize examples/add_scale.py
--budget 4 --events jsonl` without a GPU, the second run re-checking the first run's
stored variant)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from kernelband.events import PAYLOADS
from kernelband.model import Result

from kernelband_lsp import display as D
from kernelband_lsp import evidence as EV
from kernelband_lsp import hover as H
from kernelband_lsp.settings import Settings, describe_changes

EVENTS = Path(__file__).resolve().parent / "data" / "events"
# a ratio ("48.23x", "48.23×", "1x") or a before -> after pair of times
SPEED_CLAIM = re.compile(r"\d(?:\.\d+)?\s*[x×](?![a-z])|(?:ms|µs|\d s)\s*(?:→|->)")


def stream(name: str) -> list[dict]:
    return [json.loads(line) for line in (EVENTS / name).read_text().splitlines() if line.strip()]


def on(disp: D.JobDisplay, etype: str, data: dict) -> str | None:
    """The display's line for an event as the server reads it off the wire."""
    return disp.on_event(PAYLOADS[etype].from_wire(data))


def feed(events: list[dict], kind: str = "optimize") -> tuple[D.JobDisplay, list[tuple[str, str | None]]]:
    disp = D.JobDisplay(kind)
    lines = []
    for ev in events:
        data = {k: v for k, v in ev.items() if k not in ("type", "t")}
        lines.append((ev["type"], on(disp, ev["type"], data)))
        lines.append(("line", disp.line()))
        lines.append(("status", disp.status(disp.started + 12.0)))
    return disp, lines


def test_the_recorded_streams_say_they_are_interpreter_times():
    for name in ("interpreter_fresh.jsonl", "interpreter_warm_start.jsonl"):
        events = stream(name)
        assert {e.get("speed_claim") for e in events if e["type"] in ("baseline", "candidate", "progress")} == {False}
        assert any(e["type"] == "candidate" and (e.get("speedup") or 0) > 10 for e in events)  # ratios a GPU never saw


def test_no_ratio_and_no_time_pair_under_the_interpreter():
    for name in ("interpreter_fresh.jsonl", "interpreter_warm_start.jsonl"):
        disp, lines = feed(stream(name))
        shown = [text for _, text in lines if text]
        assert shown
        bad = [t for t in shown if SPEED_CLAIM.search(t)]
        assert not bad, bad
        assert disp.claims_speed is False
        result = Result.from_dict(next(e for e in stream(name) if e["type"] == "result")["result"])
        assert result.status == "verified_correct"
        for text in (D.result_summary(result), H.result_line(result), EV.evidence_markdown(result),
                     *(f"{r['label']}: {r['value']}" for r in EV.evidence(result))):
            assert not SPEED_CLAIM.search(text), text
        rows = {r["label"]: r["value"] for r in EV.evidence(result)}
        assert "GPU" not in rows and rows["Device"] == "no GPU: Triton's interpreter on the CPU"
        assert "Timing (measured)" not in rows and "During the search" not in rows


def test_the_re_check_of_a_stored_variant_is_not_a_search_evaluation():
    disp, lines = feed(stream("interpreter_warm_start.jsonl"))
    by_type = [(t, x) for t, x in lines if t not in ("line", "status")]
    recheck = next(x for t, x in by_type if t == "candidate")
    assert recheck == "re-checked the variant an earlier session found: ok"
    progress = [x for t, x in by_type if t == "progress"]
    assert progress[0] is None  # its own "0/4" is not a progress line
    assert progress[1:] == ["1/4 evaluated", "2/4 evaluated", "3/4 evaluated", "4/4 evaluated"]
    assert not [x for t, x in lines if x and "#0" in x]


def test_progress_ends_at_the_budget_before_it_finishes():
    disp, lines = feed(stream("interpreter_fresh.jsonl"))
    assert disp.done == 4 and disp.total == 4 and disp.percent() == 100.0
    assert disp.phase == "search done: preparing the result"


def test_phases_while_no_event_comes():
    disp = D.JobDisplay("optimize")
    assert disp.status(disp.started + 3) == "starting the engine (Python, torch and Triton load)… (3 s)"
    assert disp.line() == "optimizing: starting the engine (Python, torch and Triton load)…"
    on(disp, "started", {"kernel": "k", "budget": {"evaluations": 4}, "generator": "rules"})
    assert disp.status(disp.started + 41) == "preparing: compiling, checking and timing the original… (41 s)"
    # the engine announces the step it starts with a trailing "..."
    assert on(disp, "log", {"level": "info", "message": "measuring device peaks (once per device)..."}) \
        == "measuring device peaks (once per device)…"
    assert disp.status(disp.started + 75) == "measuring device peaks (once per device)… (1 min 15 s)"
    # bookkeeping is no progress line
    assert on(disp, "log", {"level": "info", "message": "marked 1 stale running session(s) as interrupted"}) is None
    assert on(disp, "log", {"level": "warning", "message": "no GPU"}) == "warning: no GPU"
    on(disp, "baseline", {"time_ms": 362.8, "clock": "cpu-interpreter", "interpreted": True, "speed_claim": False})
    assert disp.status(disp.started + 80) == "evaluating candidate 1 of 4… (1 min 20 s)"
    on(disp, "progress", {"done": 1, "total": 4, "speed_claim": False})
    assert disp.status(disp.started + 90) == "1/4 evaluated · evaluating candidate 2 of 4… (1 min 30 s)"


def test_gpu_events_keep_their_ratios():
    disp = D.JobDisplay("optimize")
    on(disp, "started", {"kernel": "k", "budget": {"evaluations": 16}, "generator": "rules"})
    assert on(disp, "baseline", {"time_ms": 0.642, "clock": "cuda-events", "speed_claim": True}) == "original: 0.64 ms"
    assert on(disp, "candidate", {"index": 1, "strategy": "tiling", "status": "ok", "time_ms": 0.5, "speedup": 1.284,
                                       "speed_claim": True}) == "#1 tiling: ok 0.50 ms (1.28x)"
    assert on(disp, "progress", {"done": 1, "total": 16, "best_speedup": 1.284, "speed_claim": True}) \
        == "1/16 evaluated · best 1.28x"
    assert disp.line() == "optimizing 1/16 evaluated · best 1.28x"
    # one event under the interpreter is enough: the job never claims speed again
    on(disp, "progress", {"done": 2, "total": 16, "best_speedup": 1.5, "speed_claim": False})
    on(disp, "progress", {"done": 3, "total": 16, "best_speedup": 1.6, "speed_claim": True})
    assert disp.line() == "optimizing 3/16 evaluated"


def test_an_older_engine_without_speed_claim_is_judged_by_its_clock():
    disp = D.JobDisplay("optimize")
    on(disp, "baseline", {"time_ms": 300.0, "clock": "cpu-interpreter"})
    assert on(disp, "candidate", {"index": 1, "strategy": "tiling", "status": "ok", "time_ms": 12.0,
                                       "speedup": 25.0}) == "#1 tiling: ok"


def test_result_summaries():
    gpu = Result(status="improved", kernel="k", baseline_ms=0.642, best_ms=0.155, speedup=4.14, speedup_ci=[3.9, 4.3],
                 evaluations=8, interpreted=False, clock="cuda-events", speed_claim=True, strategy_path=["tiling"])
    assert D.result_summary(gpu) == "k: 4.14x (95% CI 3.90–4.30x) faster, 0.64 ms → 0.15 ms via tiling, 8 evaluations"
    # --cpu-tuning: improved on CPU times, still no speed claim
    cpu = Result(status="improved", kernel="k", baseline_ms=700.0, best_ms=28.0, speedup=25.0, speedup_ci=[24.0, 26.0],
                 evaluations=4, interpreted=True, clock="cpu-interpreter", applicable=True)
    assert not SPEED_CLAIM.search(D.result_summary(cpu)), D.result_summary(cpu)
    assert not SPEED_CLAIM.search(" ".join(f"{r['label']} {r['value']}" for r in EV.evidence(cpu)))
    none = Result(status="no_improvement", kernel="k", speedup=1.01, interpreted=True, clock="cpu-interpreter",
                  evaluations=4)
    assert D.result_summary(none) == "k: no faster variant found, 4 evaluations"
    # an older stored Result lacks speed_claim (False by default): its clock and flag decide
    old = Result.from_dict({"status": "improved", "kernel": "k", "speedup": 1.5, "interpreted": False,
                            "clock": "cuda-events"})
    assert D.result_claims_speed(old)


def test_settings_changes_are_words_not_a_dict():
    text = describe_changes(Settings(), Settings(budget_evaluations=4, min_speedup=1.05, strategies=("tiling",)))
    assert text == "budget.evaluations 16 → 4, strategies [] → [tiling], minSpeedup 1.03 → 1.05"
    assert "{" not in text and "'" not in text
