"""benchmarks/simulate.py: a small run, the output's structure, monotone regret."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kernelband.search.base import POLICY_NAMES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("kb_simulate", ROOT / "benchmarks" / "simulate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def nondecreasing(xs):
    return all(b >= a - 1e-12 for a, b in zip(xs, xs[1:]))


def test_simulate_writes_json_and_markdown(sim, tmp_path, capsys):
    assert sim.main(["--seeds", "3", "--steps", "10", "--out", str(tmp_path), "--no-plot"]) == 0
    res = json.loads((tmp_path / "simulation.json").read_text())
    assert (res["seeds"], res["steps"]) == (3, 10)
    assert res["data"]["source"].startswith("built-in")
    assert set(res["policies"]) == set(POLICY_NAMES)
    for p in res["policies"].values():
        for key in ("regret", "parent_regret"):
            assert len(p[key]["mean"]) == len(p[key]["std"]) == 10
            assert nondecreasing(p[key]["mean"]) and p[key]["mean"][0] >= 0
            assert set(p[key]["final"]) == {"mean", "std", "ci95"}
        assert len(p["speedup_geomean"]) == 10 and nondecreasing(p["speedup_geomean"])
    md = (tmp_path / "simulation.md").read_text()
    assert "| policy |" in md and all(f"| {n} |" in md for n in POLICY_NAMES)


def test_each_run_has_nondecreasing_regret_and_respects_offers(sim):
    data = sim.default_data()
    for name in POLICY_NAMES:
        for seed in range(2):
            run = sim.run_one(name, seed, 24, data)  # run_one raises if a policy picks an unoffered pair
            assert nondecreasing(run["regret"]) and nondecreasing(run["parent_regret"])


def test_simulate_reads_measured_data_and_runs_dry(sim, tmp_path):
    data = tmp_path / "samples.json"
    data.write_text(json.dumps({"strategies": {"tiling": [1.1, None, 0.9], "pipeline": [1.05]},
                                "max_tries": 1, "max_uses": 1}))
    out = tmp_path / "out"
    assert sim.main(["--seeds", "2", "--steps", "12", "--data", str(data), "--out", str(out),
                     "--policies", "kernelband,greedy", "--no-plot"]) == 0
    res = json.loads((out / "simulation.json").read_text())
    assert res["data"] == {"source": str(data), "classes": ["generic"]}
    assert res["world"]["max_tries"] == 1 and set(res["policies"]) == {"kernelband", "greedy"}
    # with one try per (kernel, strategy) and one use per lineage the search runs dry: regret stops growing
    reg = res["policies"]["greedy"]["regret"]["mean"]
    assert reg[-1] == reg[-2]


def test_simulate_reads_benchmark_results_pulls(sim, tmp_path):
    """A benchmarks/run.py results file: pulls grouped by the original's bottleneck class."""
    rows = [
        {"kernel": "a", "baseline_bottleneck": "memory-bound",
         "pulls": [{"strategy": "vectorization", "status": "ok", "x": 1.2},
                   {"strategy": "tiling", "status": "mismatch", "x": None}]},
        {"kernel": "b", "baseline_bottleneck": "launch-bound",
         "pulls": [{"strategy": "pipeline", "status": "ok", "x": 0.9}]},
        {"kernel": "c", "method": "exhaustive"},  # no pulls: ignored
    ]
    data = tmp_path / "results.json"
    data.write_text(json.dumps({"schema": 1, "runs": rows}))
    loaded = sim.load_data(str(data))
    assert loaded["classes"] == {"memory-bound": {"vectorization": [1.2], "tiling": [None]},
                                 "generic": {"pipeline": [0.9]}}
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema": 1, "runs": [rows[2]]}))
    with pytest.raises(SystemExit, match="pulls"):
        sim.load_data(str(empty))


def test_plot(sim, tmp_path):
    import matplotlib  # noqa: F401  (setup.sh installs the plots extra: missing is a failure)

    assert sim.main(["--seeds", "2", "--steps", "4", "--out", str(tmp_path), "--policies", "random,ucb1"]) == 0
    assert (tmp_path / "simulation.png").stat().st_size > 1000
