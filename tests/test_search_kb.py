"""The default ``kernelband`` policy (variant "kb"): reward relative to the best, no
warm-up (arm means shrunk toward a strategy prior), the hardware headroom term; and the
replay ablation script runs."""
from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kernelband.search import BanditConfig, Outcome, make_policy, reward
from kernelband.search.kernelband import shipped_priors
from helpers.search import arm, cand, offer

REPO = Path(__file__).resolve().parents[1]


def test_reward_best_is_relative_to_the_fastest_time_clipped_at_zero():
    assert reward(Outcome(True, 2.0, 1.5), "best", best_ms=1.0) == 0.0  # faster than its parent, not a new best
    assert reward(Outcome(True, 2.0, 0.8), "best", best_ms=1.0) == pytest.approx(0.2, abs=1e-5)
    assert reward(Outcome(True, 1.0, 0.5), "best") == pytest.approx(0.5)  # no best known: the parent
    assert reward(Outcome(True, 1.0, 3.0), "best", best_ms=1.0) == 0.0
    assert reward(Outcome(False, 1.0, None), "best", best_ms=1.0) == 0.0


def test_score_is_shrunk_mean_plus_bonus_plus_headroom_by_hand():
    prior = {"tiling": 0.1, "vectorization": 0.0}
    cfg = BanditConfig(strategy_prior=prior, prior_strength=2.0, kb_explore=0.5, hw_weight=0.2, n_clusters=1)
    p = make_policy("kernelband", cfg)
    pool = [cand("a", 1.0, sat={"SM": 0.8, "DRAM": 0.2})]
    table = offer({"a": ["tiling", "vectorization"]})
    c, s = p.select(pool, table, random.Random(0))
    st = p.state()
    # t = 0: bonus 0.5 * sqrt(ln 1 / 2) = 0; tiling: 0.1 + 0.2 * (0.2 - 0.5); vectorization: 0 + 0.2 * (0.8 - 0.5)
    assert arm(st, "tiling")["score"] == pytest.approx(0.1 - 0.06, abs=1e-5)
    assert arm(st, "vectorization")["score"] == pytest.approx(0.06, abs=1e-5)
    assert st["last"]["phase"] == "ucb" and (c.id, s) == ("a", "vectorization")
    p.update(c, s, Outcome(True, 1.0, 0.5), None)  # reward 0.5 (a new best)
    p.select(pool, table, random.Random(0))
    st = p.state()
    bonus1 = 0.5 * math.sqrt(math.log(2) / 3)
    assert arm(st, "vectorization")["score"] == pytest.approx((0.5 + 2 * 0.0) / 3 + bonus1 + 0.06, abs=1e-5)
    assert arm(st, "tiling")["score"] == pytest.approx(0.1 + 0.5 * math.sqrt(math.log(2) / 2) - 0.06, abs=1e-5)


def test_no_recurring_warm_up_when_new_members_join():
    """v1 pulls every unpulled (cluster, strategy) arm first, again for every new
    cluster; kb with shrinkage (prior_strength > 0) scores unpulled arms at their prior,
    so a strong arm keeps winning. Without it (the default, 0) kb warms up like v1."""
    prior = {"tiling": 0.2, "vectorization": 0.0, "access_layout": 0.0}
    strategies = ["tiling", "vectorization", "access_layout"]
    for name, expect_tiling in (("kernelband", True), ("kernelband-v1", False)):
        p = make_policy(name, BanditConfig(strategy_prior=prior, n_clusters=3, prior_strength=8.0))
        pool = [cand("a", 1.0, rv=[0.0]), cand("b", 0.5, rv=[5.0]), cand("c", 0.25, rv=[10.0])]
        table = offer({m.id: strategies for m in pool})
        picks = []
        for _ in range(3):
            c, s = p.select(pool, table, random.Random(0))
            picks.append(s)
            p.update(c, s, Outcome(True, c.time_ms, c.time_ms * 0.99), None)
        assert (picks == ["tiling"] * 3) == expect_tiling, (name, picks)


def test_shipped_priors_favour_tiling():
    pri = shipped_priors()
    assert set(pri) >= {"tiling", "vectorization", "pipeline", "reordering", "access_layout"}
    assert max(pri, key=pri.get) == "tiling"


def test_replay_ablation_runs_small():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "replay_ablation.py"), "--seeds", "2", "--steps", "8"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| kernelband | " in out.stdout and "| ucb1 | " in out.stdout and "Paired ratio" in out.stdout


def test_patience_gives_each_never_pulled_strategy_one_look_after_a_stall():
    """kb_patience=2: after two pulls without a new best, the strategies never pulled get
    one look each (best prior first), then the scores decide again; off (-1) by default,
    where the strong prior keeps winning."""
    prior = {"tiling": 0.2, "vectorization": 0.01, "pipeline": 0.02}
    strategies = ["tiling", "vectorization", "pipeline"]
    pool = [cand("a", 1.0)]
    table = offer({"a": strategies})

    def picks(patience: int) -> list[str]:
        p = make_policy("kernelband", BanditConfig(strategy_prior=prior, n_clusters=1, kb_patience=patience,
                                                   prior_strength=8.0))
        out = []
        for _ in range(5):
            c, s = p.select(pool, table, random.Random(0))
            out.append(s)
            p.update(c, s, Outcome(True, 1.0, 1.0), None)  # never faster: a stall
        return out

    assert picks(-1) == ["tiling"] * 5
    assert BanditConfig().kb_patience == -1
    assert picks(2) == ["tiling", "tiling", "pipeline", "vectorization", "tiling"]


def test_default_kb_warms_up_every_arm_once_and_keeps_the_best_reward():
    """The default (prior_strength 0): every unpulled arm scores +inf, taken in canonical
    order, so a strategy the prior ranks low still gets its look (the measured matmul
    landscape: 1.84x from pipeline stages, missed with 8 pseudo-pulls of prior)."""
    assert BanditConfig().prior_strength == 0.0
    prior = {"tiling": 0.2, "vectorization": 0.0, "pipeline": 0.0}
    p = make_policy("kernelband", BanditConfig(strategy_prior=prior, n_clusters=1))
    pool = [cand("a", 1.0)]
    table = offer({"a": ["tiling", "vectorization", "pipeline"]})
    picks = []
    for _ in range(3):
        c, s = p.select(pool, table, random.Random(0))
        picks.append(s)
        p.update(c, s, Outcome(True, 1.0, 1.0), None)
    assert sorted(picks) == ["pipeline", "tiling", "vectorization"]
    assert p.config.reward_mode == "best"
