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
    cfg = BanditConfig(strategy_prior=prior, prior_strength=2.0, kb_explore=0.5, hw_weight=0.2, n_clusters=1,
                       kb_patience=-1, kb_pooled=False, kb_gap=False, kb_fresh="score")
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
        p = make_policy(name, BanditConfig(strategy_prior=prior, n_clusters=3, prior_strength=8.0, kb_patience=-1, kb_pooled=False, kb_gap=False, kb_fresh="score"))
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
                                                   prior_strength=8.0, kb_pooled=False, kb_gap=False, kb_fresh="score",
                                                   kb_deplete=1.0))
        out = []
        for _ in range(5):
            c, s = p.select(pool, table, random.Random(0))
            out.append(s)
            p.update(c, s, Outcome(True, 1.0, 1.0), None)  # never faster: a stall
        return out

    assert picks(-1) == ["tiling"] * 5
    assert picks(2) == ["tiling", "tiling", "pipeline", "vectorization", "tiling"]


def test_default_kb_looks_at_each_strategy_once_on_the_best_then_scores():
    """The default (each part chosen by the landscape replay, benchmarks/README.md): every
    strategy gets one look on the fastest member, best prior first, never again per
    cluster; then the scores, with shrinkage toward the strategy's session mean, the
    gap term and rewards over the parent."""
    cfg = BanditConfig()
    assert (cfg.prior_strength, cfg.kb_patience, cfg.kb_pooled, cfg.kb_gap, cfg.kb_fresh) == (4.0, 0, True, True,
                                                                                              "best-first")
    assert (cfg.kb_gap_signed, cfg.kb_deplete) == (True, 0.5)
    prior = {"tiling": 0.2, "vectorization": 0.0, "pipeline": 0.01}
    p = make_policy("kernelband", BanditConfig(strategy_prior=prior, n_clusters=3))
    assert p.config.reward_mode == "best" and p.config.variant == "kb"
    a = cand("a", 1.0, rv=[0.0])
    pool = [a]
    table = offer({"a": ["tiling", "vectorization", "pipeline"], "b": ["tiling", "vectorization", "pipeline"]})
    c, s = p.select(pool, table, random.Random(0))
    assert (c.id, s) == ("a", "tiling")
    b = cand("b", 0.5, rv=[5.0])  # tiling halved the time: a new member, a new cluster
    p.update(c, s, Outcome(True, 1.0, 0.5), b)
    pool.append(b)
    picks = []
    for _ in range(2):
        c, s = p.select(pool, table, random.Random(0))
        assert p.state()["last"]["phase"] == "try-each"
        picks.append((c.id, s))
        p.update(c, s, Outcome(True, c.time_ms, c.time_ms), None)
    assert picks == [("b", "pipeline"), ("b", "vectorization")]  # on the new best, by prior
    p.select(pool, table, random.Random(0))
    last = p.state()["last"]
    assert last["phase"] == "ucb" and (last["candidate"], last["strategy"]) == ("b", "tiling")


# --------------------------------------------------------------------------- the gap, pooled and best-first terms

def test_gap_scores_a_slow_target_by_the_new_best_it_could_give():
    """kb_gap: an arm learns the gain over its parent (v2 reward) and scores the new best
    that gain would give from its target: max(0, 1 - T_target / T_best * (1 - gain)). The
    cheat it stops: a big gain once earned on the slow original keeps its arm on top,
    re-tuning a member that cannot beat the best any more (the attention landscape)."""
    prior = {"tiling": 0.1, "pipeline": 0.0}
    cfg = BanditConfig(strategy_prior=prior, prior_strength=1.0, kb_explore=0.0, hw_weight=0.0, n_clusters=2,
                       kb_gap=True, kb_pooled=False, kb_patience=-1, kb_gap_signed=False, kb_deplete=1.0)
    p = make_policy("kernelband", cfg)
    slow, fast = cand("slow", 2.0, rv=[0.0]), cand("fast", 1.0, rv=[10.0])
    pool = [slow]
    table = offer({"slow": ["tiling"], "fast": ["tiling"]})
    c, s = p.select(pool, table, random.Random(0))
    p.update(c, s, Outcome(True, 2.0, 1.0), fast)  # tiling halved the time: gain 0.5 over the parent
    pool.append(fast)
    p.select(pool, table, random.Random(0))
    arms = {a["candidate"]: a for a in p.state()["last"]["arms"]}
    # slow's arm: gain (0.5 + 0.1) / 2 = 0.3 over a 2 ms target, best 1 ms: 1 - 2 * 0.7 < 0 -> 0
    assert arms["slow"]["mean"] == pytest.approx(0.0, abs=1e-6)
    # fast's arm (unpulled): the prior 0.1 over the best itself
    assert arms["fast"]["mean"] == pytest.approx(0.1, abs=1e-6)
    assert p.state()["last"]["candidate"] == "fast"
    # without the gap term the slow arm's own record (0.5 + 0.1 * 1) / 2 keeps it on top
    q = make_policy("kernelband", BanditConfig(strategy_prior=prior, prior_strength=1.0, kb_explore=0.0,
                                               hw_weight=0.0, n_clusters=2, reward_mode="v2", kb_gap=False,
                                               kb_pooled=False, kb_patience=-1))
    q.select([slow], table, random.Random(0))
    q.update(slow, "tiling", Outcome(True, 2.0, 1.0), fast)
    q.select([slow, fast], table, random.Random(0))
    assert q.state()["last"]["candidate"] == "slow"


def test_gap_records_the_gain_over_the_parent_not_over_the_best():
    p = make_policy("kernelband", BanditConfig(strategy_prior={}, prior_strength=1.0, n_clusters=1, kb_gap=True))
    a = cand("a", 4.0)
    p.select([a], offer({"a": ["tiling"]}), random.Random(0))
    p.best_ms = 1.0  # a faster member seen before
    p.update(a, "tiling", Outcome(True, 4.0, 2.0), None)  # 2x over its parent, no new best
    assert p.state()["members"]["a/tiling"]["mean"] == pytest.approx(0.5)


def test_pooled_unpulled_arm_takes_its_strategys_session_mean():
    """kb_pooled: a (cluster, strategy) arm never pulled starts at what the strategy did
    this session (shrunk toward the prior), not at the prior alone: a strategy that keeps
    working is tried on a new cluster before one the prior likes but that has failed here."""
    prior = {"tiling": 0.2, "vectorization": 0.0}
    cfg = dict(strategy_prior=prior, prior_strength=2.0, kb_explore=0.0, hw_weight=0.0, n_clusters=2)
    table = offer({"a": ["tiling", "vectorization"], "b": ["tiling", "vectorization"]})
    a, b = cand("a", 1.0, rv=[0.0]), cand("b", 1.0, rv=[10.0])
    picks = {}
    for pooled in (False, True):
        p = make_policy("kernelband", BanditConfig(**cfg, kb_pooled=pooled))
        p.update(a, "tiling", Outcome(True, 1.0, 1.0), None)  # tiling did nothing, twice
        p.update(a, "tiling", Outcome(True, 1.0, 1.0), None)
        p.update(a, "vectorization", Outcome(True, 1.0, 0.5), None)  # vectorization halved it
        p.best_ms = 1.0
        p.select([a, b], table, random.Random(0))
        arms = [x for x in p.state()["last"]["arms"] if x["candidate"] == "b"]
        picks[pooled] = {x["strategy"]: x["mean"] for x in arms}
    assert picks[False]["tiling"] == pytest.approx(0.2) and picks[False]["vectorization"] == pytest.approx(0.0)
    # pooled: tiling (0 + 2 * 0.2) / 4 = 0.1; vectorization (0.5 + 2 * 0) / 3 = 1/6
    assert picks[True]["tiling"] == pytest.approx(0.1, abs=1e-6)
    assert picks[True]["vectorization"] == pytest.approx(1 / 6, abs=1e-6)


def test_best_first_tries_fresh_strategies_on_the_fastest_member_by_prior():
    """kb_fresh="best-first" with kb_patience 0: every strategy never pulled gets one look,
    on the fastest member only, the one the prior ranks highest first (not canonical
    order, not on a slow member that happens to offer it)."""
    prior = {"tiling": 0.05, "pipeline": 0.02, "access_layout": 0.03, "vectorization": 0.01}
    cfg = BanditConfig(strategy_prior=prior, prior_strength=4.0, n_clusters=2, kb_patience=0, kb_fresh="best-first")
    p = make_policy("kernelband", cfg)
    slow, fast = cand("slow", 2.0, rv=[0.0]), cand("fast", 1.0, rv=[10.0])
    table = offer({"slow": ["tiling", "vectorization", "pipeline", "access_layout"],
                   "fast": ["tiling", "pipeline", "access_layout"]})
    picks = []
    for _ in range(3):
        c, s = p.select([slow, fast], table, random.Random(0))
        assert p.state()["last"]["phase"] == "try-each"
        picks.append((c.id, s))
        p.update(c, s, Outcome(True, c.time_ms, c.time_ms), None)
    assert picks == [("fast", "tiling"), ("fast", "access_layout"), ("fast", "pipeline")]
    p.select([slow, fast], table, random.Random(0))  # vectorization is fresh only on the slow member
    assert p.state()["last"]["phase"] == "ucb"


def test_kb_fresh_must_be_a_known_rule():
    with pytest.raises(ValueError, match="kb_fresh"):
        BanditConfig(kb_fresh="first")


# --------------------------------------------------------------------------- the signed gap and depletion

def test_signed_gap_keeps_a_slow_target_below_a_depleted_arm_on_the_best():
    """kb_gap_signed: the gap term is not clipped at 0. Clipped, a member far behind the
    best scores 0, as much as a strategy that stopped paying on the best member, and the
    exploration bonus, largest on the least-pulled arm, sends the pull to the slow member
    (the layernorm replays: pulls on the original at 1.0x while the best was 1.7x).
    Signed, the slow arm scores how far behind the best it would stay."""
    prior = {"tiling": 0.0, "pipeline": 0.0}
    table = offer({"slow": ["pipeline"], "fast": ["tiling"]})
    slow, fast = cand("slow", 2.0, rv=[0.0]), cand("fast", 1.0, rv=[10.0])
    picks, means = {}, {}
    for signed in (False, True):
        p = make_policy("kernelband", BanditConfig(strategy_prior=prior, prior_strength=1.0, hw_weight=0.0, n_clusters=2,
                                                   kb_pooled=False, kb_patience=-1, kb_gap_signed=signed))
        for _ in range(2):
            p.update(fast, "tiling", Outcome(True, 1.0, 1.0), None)  # tiling stopped paying on the best
        c, s = p.select([slow, fast], table, random.Random(0))
        picks[signed] = c.id
        means[signed] = {a["candidate"]: (a["mean"], a["bonus"]) for a in p.state()["last"]["arms"]}
    # t = 2; fast/tiling: n 2, gain (0 + 1 * 0) / 3 = 0, gap 1 - 1/1 * (1 - 0) = 0, bonus 0.05 sqrt(ln 3 / 3)
    # slow/pipeline: n 0, gain 0, gap 1 - 2/1 * (1 - 0) = -1 (clipped: 0), bonus 0.05 sqrt(ln 3 / 1)
    b_fast, b_slow = 0.05 * math.sqrt(math.log(3) / 3), 0.05 * math.sqrt(math.log(3))
    assert means[False]["fast"] == pytest.approx((0.0, b_fast), abs=1e-5)
    assert means[False]["slow"] == pytest.approx((0.0, b_slow), abs=1e-5)
    assert picks[False] == "slow"  # clipped: 0 + 0.052 beats 0 + 0.030
    assert means[True]["slow"] == pytest.approx((-1.0, b_slow), abs=1e-5)
    assert picks[True] == "fast"  # signed: -1 + 0.052 is far below 0 + 0.030


def test_deplete_halves_a_strategy_per_pull_since_the_last_new_best_and_a_new_best_resets():
    """kb_deplete=0.5: each pull of a strategy since the fastest time last improved halves
    its gain estimate, so a strategy whose gains ran out (tiling's chain of block sizes)
    gives way after a pull or two, not after the many zero rewards the clipped, prior-
    shrunk mean needs to fall below the others; a new best reopens every strategy."""
    prior = {"tiling": 0.08, "pipeline": 0.01}
    table = offer({"a": ["tiling", "pipeline"], "b": ["tiling", "pipeline"]})
    a = cand("a", 1.0)

    def run(deplete: float) -> tuple[list[str], object]:
        p = make_policy("kernelband", BanditConfig(strategy_prior=prior, n_clusters=1, kb_explore=0.0, hw_weight=0.0,
                                                   kb_patience=-1, kb_deplete=deplete))
        out = []
        for _ in range(3):
            c, s = p.select([a], table, random.Random(0))
            out.append(s)
            p.update(c, s, Outcome(True, 1.0, 1.0), None)  # no gain: a stall
        return out, p

    # k tiling pulls, all 0: pooled (0 + 4 * 0.08) / (k + 4), arm (0 + 4 * pooled) / (k + 4) = 1.28 / (k + 4)^2
    # pipeline unpulled: 0.01. Undepleted tiling stays above until k = 8; halved per pull:
    # k = 1: 1.28 / 25 * 0.5 = 0.0256, k = 2: 1.28 / 36 * 0.25 = 0.0089 < 0.01
    assert run(1.0)[0] == ["tiling", "tiling", "tiling"]
    picks, p = run(0.5)
    assert picks == ["tiling", "tiling", "pipeline"]
    b = cand("b", 0.8)  # pipeline finds a new best: the counts reset
    p.select([a], table, random.Random(0))
    assert next(x for x in p.state()["last"]["arms"] if x["strategy"] == "tiling")["mean"] == pytest.approx(
        1.28 / 36 * 0.25, abs=1e-5)
    p.update(a, "pipeline", Outcome(True, 1.0, 0.8), b)
    p.select([a, b], table, random.Random(0))
    tiling = next(x for x in p.state()["last"]["arms"] if x["strategy"] == "tiling")
    # tiling undepleted again, on b (the best, gap factor 1): 1.28 / 36
    assert tiling["candidate"] == "b" and tiling["mean"] == pytest.approx(1.28 / 36, abs=1e-5)
