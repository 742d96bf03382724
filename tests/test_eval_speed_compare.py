"""benchmarks/eval_speed_compare.py: the paired tables committed under
benchmarks/results/eval_speed/h200x2_ef087ef_ab and h200x2_64b764d_ab are what the script
makes from the arms and traces committed beside them (the numbers in SESSION10.md,
SESSION11.md and the README come from there)."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

import eval_speed_compare as compare
from helpers.paths import REPO

RESULTS = REPO / "benchmarks" / "results" / "eval_speed"


@pytest.mark.parametrize("part, arm", [("h200x2_ef087ef_ab/A_5e0b408", "A"), ("h200x2_ef087ef_ab/A_ef087ef", "A"),
                                       ("h200x2_ef087ef_ab/B_ef087ef", "B"), ("h200x2_64b764d_ab", "A")])
def test_the_committed_paired_table_is_made_from_the_committed_arms(tmp_path: Path, part: str, arm: str) -> None:
    folder = RESULTS / part
    with tarfile.open(folder / "traces.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    report = compare.compare(folder / f"{arm}_new", folder / f"{arm}_old", tmp_path / f"traces_{arm}_new",
                             tmp_path / f"traces_{arm}_old")
    committed = json.loads((folder / "compare.json").read_text(encoding="utf-8"))
    assert report["summary"] == committed["summary"]
    assert report["kernels"] == committed["kernels"]
    assert compare.markdown(report) == (folder / "compare.md").read_text(encoding="utf-8")
    # every kernel compared has its setup marks from its own trace
    assert all(k[side]["setup.prepared"] for k in report["kernels"] for side in ("new", "old"))


def test_a_wave_wait_counts_only_the_first_frame_of_each_of_the_first_eight_jobs(tmp_path: Path) -> None:
    marks = [{"t": 0.0, "what": "setup.start"}]
    for i in range(9):  # nine candidate jobs: the ninth is not of the first wave
        marks.append({"t": 1.0, "what": "job.request", "trusted": False, "job": f"j{i}"})
    for i in range(9):
        marks.append({"t": 2.0 + i, "what": "job.frame", "job": f"j{i}", "kind": "outputs", "seconds": 0.5})
        marks.append({"t": 50.0, "what": "job.frame", "job": f"j{i}", "kind": "outputs", "seconds": 0.0})
    trace = tmp_path / "k-kernel-1.jsonl"
    trace.write_text("\n".join(json.dumps(m) for m in marks), encoding="utf-8")
    # first frames at 2..9 s after requests at 1 s, each less its own 0.5 s: 0.5..7.5, median 4.0
    assert compare.session_marks(trace)["wave_wait"] == 4.0


def test_fresh_jobs_count_candidate_jobs_forked_without_a_spare(tmp_path: Path) -> None:
    marks = [{"t": 0.0, "what": "setup.start"},
             {"t": 0.1, "what": "job.request", "trusted": True, "job": "orig"},  # the original's: not counted
             {"t": 0.2, "what": "job.start", "job": "orig", "zygote": True, "spare": False}]
    for i, spare in enumerate([True, False, True, False, False]):
        marks.append({"t": 1.0 + i, "what": "job.request", "trusted": False, "job": f"c{i}"})
        marks.append({"t": 1.1 + i, "what": "job.start", "job": f"c{i}", "zygote": True, "spare": spare})
    # a compute-sanitizer job runs outside the fork server: never a spare, not counted
    marks.append({"t": 9.0, "what": "job.request", "trusted": False, "job": "san"})
    marks.append({"t": 9.1, "what": "job.start", "job": "san", "zygote": False, "spare": False})
    trace = tmp_path / "k-kernel-1.jsonl"
    trace.write_text("\n".join(json.dumps(m) for m in marks), encoding="utf-8")
    assert compare.session_marks(trace)["fresh_jobs"] == 3


def test_the_table_says_where_a_candidates_seconds_go_with_the_gpu_locks_holds() -> None:
    """eval_speed.md's phase table: each phase's median and range over the sessions (of each
    session's median candidate), the lock's longest shared hold among them; a phase no
    session recorded is left out, and no table at all without phases."""
    import eval_speed

    rows = [
        {"median_phases_s": {"vp.gpu_lock_hold_shared_longest": 1.5, "timing": 0.2}},
        {"median_phases_s": {"vp.gpu_lock_hold_shared_longest": 0.5, "timing": 0.4}},
        {"median_phases_s": {"vp.gpu_lock_hold_shared_longest": 2.0}},
        {},
    ]
    table = eval_speed.phases_markdown(rows)
    longest = next(line for line in table if "vp.gpu_lock_hold_shared_longest" in line)
    assert longest.endswith("| 1.500 | 0.500-2.000 |")
    assert any(line.endswith("(`timing`) | 0.300 | 0.200-0.400 |") for line in table)
    assert not any("vp.compile" in line for line in table)
    assert eval_speed.phases_markdown([{}, {"median_phases_s": {}}]) == []
