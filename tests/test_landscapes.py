"""Measured landscapes and their replay (benchmarks/landscape_measure.py, replay_landscapes.py).

The measurement runs for real under Triton's interpreter (CPU sizes, cap 4, two
kernels) in a child process with TRITON_INTERPRET=1; the replay runs the real policies
and the real rules generator over those tables. The paired-CI test uses a known case.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import replay_landscapes as replay

REPO = Path(__file__).resolve().parent.parent

KERNELS = ("gelu_fp32", "scale_tuned_fp32")

_CHILD = textwrap.dedent(
    r'''
    import json, sys
    from pathlib import Path
    sys.path.insert(0, "benchmarks")
    import landscape_measure as lm
    out = Path(sys.argv[1])
    assert lm.main(["--out", str(out), "--kernels", "gelu_fp32,scale_tuned_fp32", "--cap", "4", "--repeats", "2"]) == 0
    # a wrong config must be measured as wrong (the check is not a formality)
    import argparse, tempfile
    from benchmarks.suite import entry
    from landscape_configs import original
    e = entry("gelu_fp32")
    a = argparse.Namespace(cap=2, repeats=1, warmup_ms=1, rep_ms=1, per_strategy=1, compile_workers=0)
    with tempfile.TemporaryDirectory() as d:
        km = lm.KernelMeasure(e, a, Path(d), None, float("inf"), lambda s: None)
        km.run()
        b = original(km.ac, km.original.replace("0.044715", "0.5"))
        b.recipe, b.description = ["broken"], "broken on purpose"
        km._batch([b])
        bad = km.rows[b.key(km.ac)]
    print("WRONG" + json.dumps({"correct": bad["correct"], "problems": bad["problems"], "ms": bad["ms"]}))
    '''
)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("landscapes")
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "server"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(out)], env=env, capture_output=True, text=True,
                          timeout=240, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("WRONG"))
    (out / "wrong.txt").write_text(line[len("WRONG"):])
    (out / "stdout.txt").write_text(proc.stdout)
    return out


@pytest.mark.slow
def test_measure_writes_one_table_per_kernel(tables):
    for k in KERNELS:
        d = json.loads((tables / f"{k}.json").read_text())
        assert d["module"] == k and d["meta"]["interpreted"] and d["meta"]["autotune"] is False
        assert d["original_matches_reference"]
        rows = d["configs"]
        assert len(rows) == 4 and rows[0]["recipe"] == [] and all(r["recipe"] for r in rows[1:])
        assert len({r["typed_key"] for r in rows}) == 4  # deduplicated on typed configs
        for r in rows:
            assert r["correct"] and r["ms"] > 0 and len(r["ms_repeats"]) == 2
            assert r["compile_s"] > 0 and r["check_s"] > 0 and r["time_s"] > 0
        assert d["original_ms"] == rows[0]["ms"]
    out = (tables / "stdout.txt").read_text()
    assert "| gelu_fp32 | 4 | 4 |" in out and "| scale_tuned_fp32 | 4 | 4 |" in out


@pytest.mark.slow
def test_measure_catches_a_wrong_config(tables):
    bad = json.loads((tables / "wrong.txt").read_text())
    assert bad["correct"] is False and bad["problems"] and bad["ms"] is None


@pytest.mark.slow
def test_measure_is_resumable(tables, capsys):
    import landscape_measure as lm

    before = {k: (tables / f"{k}.json").read_text() for k in KERNELS}
    assert lm.main(["--out", str(tables), "--kernels", ",".join(KERNELS), "--cap", "4"]) == 0
    assert "gelu_fp32: present, skipped" in capsys.readouterr().out
    assert before == {k: (tables / f"{k}.json").read_text() for k in KERNELS}


@pytest.mark.slow
def test_replay_structure_on_measured_tables(tables, tmp_path):
    out = tmp_path / "replay"
    assert replay.main(["--tables", str(tables), "--seeds", "3", "--budgets", "1,2,3", "--out", str(out), "--no-plot"]) == 0
    r = json.loads((out / "replay.json").read_text())
    assert r["kernels"] == sorted(KERNELS) and r["seeds"] == [0, 1, 2]
    for p in replay.POLICIES:
        for mode in ("evals", "seconds"):
            g = r["geomean"][p][mode]
            assert set(g) == {"1", "2", "3"}
            assert all(v >= 1.0 for v in g.values())
            assert g["1"] <= g["2"] + 1e-12 <= g["3"] + 2e-12  # the best so far never gets worse
        assert 0 < r["best_known_fraction"][p] <= 1 + 1e-9
        assert 0 <= r["miss_rate"][p] <= 1
    for p in replay.POLICIES[1:]:
        c = r["paired"][p]["evals"]["3"]
        assert c["lo"] <= c["ratio"] <= c["hi"] and c["n"] == 3
    assert r["best_baseline"]["evals"]["3"] in replay.BASELINES
    for k in KERNELS:  # descriptions stored once, runs as indices; decoded for replay_confirm.py
        runs = replay.first_pulls(r, k, "greedy")
        assert len(runs) == 3 and all(run and all(isinstance(x, str) and x for x in run) for run in runs)
        assert all(max(run) < len(r["pull_descriptions"][k]) for run in r["first_pulls"][k]["greedy"])
    legacy = {"first_pulls": {"k": {"greedy": [["a", "b"]]}}}
    assert replay.first_pulls(legacy, "k", "greedy") == [["a", "b"]]
    md = (out / "replay.md").read_text()
    assert "Which rewrite won on which kernel" in md and "equal GPU-seconds" in md and "| gelu_fp32 |" in md


@pytest.mark.slow
def test_replay_refunds_unmeasured_and_fails_wrong_configs(tables):
    d = json.loads((tables / "gelu_fp32.json").read_text())
    t = replay.Table(d)
    full = replay.run_one(t, "greedy", 0, 8, t.source())
    assert full["evals"] == 3  # the three measured configs besides the original, then only misses
    assert full["misses"] > 0
    # drop one measured config: it becomes a miss (no evaluation), the rest is unchanged
    d2 = dict(d, configs=d["configs"][:-1])
    r2 = replay.run_one(replay.Table(d2), "greedy", 0, 8, t.source())
    dropped = d["configs"][-1]["recipe"][-1]
    assert r2["evals"] == 2 and r2["misses"] > 0 and dropped not in [p["key"] for p in r2["pulls"]]
    # a config measured as wrong is a failed pull: it never becomes the best
    rows = [dict(r) for r in d["configs"]]
    fastest = min(range(1, 4), key=lambda i: rows[i]["ms"])
    rows[fastest]["correct"] = False
    r3 = replay.run_one(replay.Table(dict(d, configs=rows)), "greedy", 0, 8, t.source())
    assert not any(p["ok"] for p in r3["pulls"] if p["key"] == rows[fastest]["recipe"][-1])
    best_ok = d["configs"][0]["ms"] / min(r["ms"] for i, r in enumerate(rows) if r["correct"])
    assert math.isclose(r3["traj"][-1][2], best_ok)
    # --unmeasured estimate: a measured single step applied to a child is estimated, not refunded
    r4 = replay.run_one(t, "greedy", 0, 8, t.source(), unmeasured="estimate")
    assert r4["estimated"] > 0 and r4["evals"] > full["evals"]
    est = [p for p in r4["pulls"] if p["estimated"]]
    assert est and all(p["family"] not in ("block_size", "num_warps", "num_stages", "group_m") for p in est)
    # --unmeasured charge: a miss costs an evaluation and finds nothing (the pessimistic bound):
    # the budget is spent in full, the measured configs it reaches still count, no charged pull gains
    r5 = replay.run_one(t, "greedy", 0, 8, t.source(), unmeasured="charge")
    charged = [p for p in r5["pulls"] if p.get("charged")]
    assert r5["evals"] == 8 and len(r5["pulls"]) == 8 and charged and not any(p["ok"] for p in charged)
    assert len(charged) + sum(1 for p in r5["pulls"] if not p.get("charged")) == 8
    for i, p in enumerate(r5["pulls"]):
        if p.get("charged"):  # the best so far does not move on a charged pull
            assert r5["traj"][i][2] == (r5["traj"][i - 1][2] if i else 1.0)
    assert r5["traj"][-1][2] <= full["traj"][-1][2] + 1e-12  # never better than the refunded run here
    # a charged pull is neutral in every reward mode: as a failure it would cost the v1-reward
    # baselines -1 and kernelband 0, and the pessimistic bound would favour kernelband
    from kernelband.search.base import reward

    told = []
    make = replay.make_policy

    def spy(*a, **k):
        pol = make(*a, **k)
        inner = pol.update
        pol.update = lambda parent, s, outcome, child: (told.append((outcome, child)), inner(parent, s, outcome, child))[1]
        return pol

    replay.make_policy = spy
    try:
        r6 = replay.run_one(t, "greedy", 0, 8, t.source(), unmeasured="charge")
    finally:
        replay.make_policy = make
    charged_told = [o for (o, c), p in zip(told, r6["pulls"]) if p.get("charged")]
    assert charged_told and all(reward(o, m) == 0.0 for o in charged_told for m in ("v1", "v2", "best"))


def test_paired_ratio_known_case():
    # per-seed log ratios 0.1 .. 0.3: mean 0.2, sd sqrt(0.00625), t(0.975, 4) = 2.776445
    b = np.exp(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))  # large differences between seeds...
    a = b * np.exp(np.array([0.1, 0.15, 0.2, 0.25, 0.3]))  # ...but a consistent paired gain
    c = replay.paired_ratio(a, b)
    half = 2.776445 * math.sqrt(0.00625) / math.sqrt(5)
    assert c["ratio"] == pytest.approx(math.exp(0.2))
    assert c["lo"] == pytest.approx(math.exp(0.2 - half), rel=1e-5)
    assert c["hi"] == pytest.approx(math.exp(0.2 + half), rel=1e-5)
    assert c["wins"] == 5 and c["losses"] == 0 and c["lo"] > 1.0 and c["n"] == 5
    # an unpaired interval (independent samples, t(0.975, 8) = 2.306) would include 1: the pairing matters
    la, lb = np.log(a), np.log(b)
    unpaired_half = 2.306 * math.sqrt(la.var(ddof=1) / 5 + lb.var(ddof=1) / 5)
    assert math.exp(0.2 - unpaired_half) < 1.0 < c["lo"]
    # identical ratios on every seed: a zero-width interval at that ratio
    same = replay.paired_ratio(np.array([2.0, 4.0, 8.0]), np.array([1.0, 2.0, 4.0]))
    assert same["ratio"] == pytest.approx(2.0) and same["lo"] == pytest.approx(2.0) and same["hi"] == pytest.approx(2.0)


def test_cli_rejects_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit):
        replay.main(["--tables", str(tmp_path), "--seeds", "3"])
    assert "no measured tables" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        replay.main(["--tables", str(tmp_path), "--policies", "kernelband,nope"])
    assert "unknown policies" in capsys.readouterr().err
    for bad in ("kernelband+nope=1", "kernelband+prior_strength=lots", "kernelband+prior_strength"):
        with pytest.raises(SystemExit):
            replay.main(["--tables", str(tmp_path), "--policies", bad])
        assert "unknown policies" in capsys.readouterr().err


def test_a_policy_variant_overrides_its_config():
    """``name+field=value``: an ablation replays the registered policy with those fields."""
    name, cfg = replay.policy_spec("kernelband+prior_strength=8+kb_patience=1")
    assert name == "kernelband" and cfg.prior_strength == 8.0 and cfg.kb_patience == 1
    assert replay.policy_spec("greedy") == ("greedy", replay.BanditConfig())
    policy = replay.make_policy(*replay.policy_spec("kernelband+kb_patience=2"))
    assert policy.config.kb_patience == 2 and policy.config.variant == "kb"


def test_generator_names_the_rewrite_behind_each_variant():
    from kernelband.generators.base import GenContext
    from kernelband.generators.rules import RulesGenerator
    from kernelband.model import Variant

    src = (REPO / "benchmarks" / "suite" / "add_small_blocks_fp16.py").read_text()
    gen = RulesGenerator(seed=0, autotune=False)
    ctx = GenContext(kernel="add_small_kernel", harness="harness_add_small", module_path="")
    parent = Variant(src)
    seen = set()
    for strategy in ("tiling", "tiling", "access_layout"):
        g = gen.generate(parent, strategy, ctx)
        assert g.variant is not None and gen.last_rewrite is not None
        family, key = gen.last_rewrite
        assert key not in seen
        seen.add(key)
        assert family in ("block_size", "num_warps", "persistent", "hints", "cache_modifiers")
        assert g.variant.description == g.message
    # a request with nothing to offer clears it
    assert gen.generate(parent, "fusion", ctx).variant is None and gen.last_rewrite is None


@pytest.mark.slow
def test_extra_measures_the_replays_missed_proposals(tables, tmp_path):
    import shutil

    copy = tmp_path / "tables"
    copy.mkdir()
    shutil.copy(tables / "scale_tuned_fp32.json", copy)
    out = tmp_path / "replay"
    assert replay.main(["--tables", str(copy), "--seeds", "2", "--budgets", "2,4", "--out", str(out), "--no-plot"]) == 0
    missing = json.loads((out / "replay.json").read_text())["missing"]["scale_tuned_fp32"]
    assert missing and all(m["count"] >= 1 and m["recipe"] for m in missing)
    # the table's session ran on a clock twice as slow as this one: the new row must be put on
    # the table's clock (re-timed anchors), not appended raw beside rows it cannot be compared with
    before = json.loads((copy / "scale_tuned_fp32.json").read_text())
    for r in before["configs"]:
        r["ms"] = r["ms"] * 2 if r["ms"] else r["ms"]
    (copy / "scale_tuned_fp32.json").write_text(json.dumps(before))
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "landscape_measure.py"), "--out", str(copy),
                           "--kernels", "scale_tuned_fp32", "--extra", str(out / "replay.json"), "--extra-cap", "1",
                           "--repeats", "1"], env=env, capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = json.loads((copy / "scale_tuned_fp32.json").read_text())
    assert len(after["configs"]) == len(before["configs"]) + 1 and after["extra_rounds"] == 1
    assert after["configs"][-1]["recipe"] == missing[0]["recipe"] and after["configs"][-1]["correct"]
    assert after["configs"][:-1] == before["configs"]
    new, scale = after["configs"][-1], after["extra_scales"][0]
    assert len(scale["anchors"]) >= 2 and scale["anchors"][0]["recipe"] == []
    # the anchors are read on the table's (doubled) clock and re-timed here; the factor is
    # their median ratio (interpreter times swing with load, so the test checks the
    # arithmetic, not a range of timings)
    old_ms = {json.dumps(r["recipe"]): r["ms"] for r in before["configs"]}
    assert all(a["old_ms"] == old_ms[json.dumps(a["recipe"])] and a["new_ms"] > 0 for a in scale["anchors"])
    assert scale["factor"] == pytest.approx(float(np.median([a["old_ms"] / a["new_ms"] for a in scale["anchors"]])))
    assert new["scale"] == scale["factor"] and new["ms"] == pytest.approx(new["ms_measured"] * scale["factor"])
