"""KernelBand v1/v2 policy: rewards, score arithmetic (hand-computed), updates, warm-up, masking."""
from __future__ import annotations

import json
import random

import pytest

from kernelband.search import BanditConfig, KernelBandPolicy, Outcome, make_policy, reward
from kernelband.search.base import POLICY_NAMES

from helpers.search import arm, cand, offer, pull

# sqrt(2 ln 2) = 1.177410, sqrt(2 ln 3 / 2) = 1.048147, sqrt(2 ln 3) = 1.482304,
# sqrt(ln 2) = 0.832555, sqrt(ln 3 / 2) = 0.741152, sqrt(ln 3) = 1.048147


class FixedCompat:
    """A stand-in psi: fixed probabilities per strategy, records observations."""

    def __init__(self, psi):
        self.psi = psi
        self.seen = []

    def probability(self, phi, strategy):
        return self.psi[strategy]

    def observe(self, phi, strategy, success):
        self.seen.append((strategy, success))


# ----------------------------------------------------------------------------- rewards


def test_reward_v1():
    assert reward(Outcome(True, 1.0, 0.8), "v1") == pytest.approx(0.2)
    assert reward(Outcome(True, 2.0, 3.0), "v1") == pytest.approx(-0.5)
    assert reward(Outcome(True, 1.0, 3.0), "v1") == pytest.approx(-2.0)  # the formula, unclipped
    assert reward(Outcome(False, 1.0, None), "v1") == -1.0
    assert reward(Outcome(True, 1.0, None), "v1") == 0.0


def test_reward_v2():
    assert reward(Outcome(True, 1.0, 0.8), "v2") == pytest.approx(0.2)
    assert reward(Outcome(True, 2.0, 3.0), "v2") == 0.0
    assert reward(Outcome(False, 1.0, None), "v2") == 0.0
    with pytest.raises(ValueError):
        reward(Outcome(True, 1.0, 0.5), "v3")


# ----------------------------------------------------------------------------- config / factory


def test_make_policy_names_and_variants():
    v1 = make_policy("kernelband-v1")
    v2 = make_policy("kernelband-v2", BanditConfig())  # name wins over the config's variant
    assert (v1.name, v1.config.reward_mode, v1.config.feature_set, v1.config.masking) == ("kernelband-v1", "v1", "v1", False)
    kb = make_policy("kernelband")  # the default: our variant (see config.py)
    assert (kb.name, kb.config.variant, kb.config.reward_mode, kb.config.feature_set, kb.config.masking) == (
        "kernelband", "kb", "best", "v1", False)
    assert (v2.name, v2.config.reward_mode, v2.config.feature_set, v2.config.masking) == ("kernelband-v2", "v2", "v2", True)
    assert v1.config.alpha == 0.5 and v2.config.c == 2.0 and v2.config.saturation_threshold == 0.75
    assert v1.config.n_clusters == 3 and v1.config.compat_buffer == 500
    ablation = make_policy("kernelband-v2", BanditConfig(reward_mode="v1", masking=False))
    assert ablation.config.reward_mode == "v1" and ablation.config.masking is False
    assert {make_policy(n).name for n in POLICY_NAMES} == set(POLICY_NAMES)
    with pytest.raises(ValueError):
        make_policy("exhaustive")
    with pytest.raises(ValueError):
        BanditConfig(variant="v3")
    assert BanditConfig.from_dict(BanditConfig.v2().to_dict()) == BanditConfig.v2()
    # a stored or hand-written config is checked field by field, not splatted into the class
    with pytest.raises(ValueError, match="unknown field"):
        BanditConfig.from_dict({"alpah": 0.3})
    with pytest.raises(ValueError, match="alpha must be float"):
        BanditConfig.from_dict({"alpha": "0.3"})
    with pytest.raises(ValueError, match="strategy_prior"):
        BanditConfig.from_dict({"strategy_prior": {"tiling": "high"}})


# ----------------------------------------------------------------------------- scores


def test_v1_score_arithmetic_without_profile():
    # two members, K=3: each its own cluster (0 = the faster A). phi None -> psi = 0.5.
    pool = [cand("A", 1.0), cand("B", 2.0)]
    p = make_policy("kernelband-v1")
    off = offer({"A": ["tiling"], "B": ["tiling"]})
    assert pull(p, pool, off, 0.8) == ("A", "tiling")  # warm-up, r = 1 - 0.8/1 = 0.2
    assert pull(p, pool, off, None) == ("B", "tiling")  # warm-up, r = -1
    # t = 2: A: 0.2 + sqrt(2 ln 2 / 1) + 0.5 * 0.5 = 1.627410; B: -1 + 1.177410 + 0.25 = 0.427410
    assert p.select(pool, off, random.Random(0))[0].id == "A"
    st = p.state()
    assert st["last"]["phase"] == "ucb"
    assert arm(st, "tiling", 0)["score"] == pytest.approx(1.627410, abs=1e-6)
    assert arm(st, "tiling", 1)["score"] == pytest.approx(0.427410, abs=1e-6)
    assert arm(st, "tiling", 0)["psi"] == 0.5
    p.update(pool[0], "tiling", Outcome(True, 1.0, 0.9), None)  # r = 0.1 -> A: n 2, mean 0.15
    # t = 3: A: 0.15 + sqrt(2 ln 3 / 2) + 0.25 = 1.448147; B: -1 + sqrt(2 ln 3) + 0.25 = 0.732304
    p.select(pool, off, random.Random(0))
    st = p.state()
    assert arm(st, "tiling", 0)["score"] == pytest.approx(1.448147, abs=1e-6)
    assert arm(st, "tiling", 1)["score"] == pytest.approx(0.732304, abs=1e-6)
    assert (arm(st, "tiling", 0)["n"], arm(st, "tiling", 0)["mean"]) == (2, pytest.approx(0.15))


def test_v1_compatibility_term_decides_between_equal_arms():
    phi = [50.0] * 9
    pool = [cand("A", 1.0, phi=phi)]
    compat = FixedCompat({"tiling": 0.1, "fusion": 0.9})
    p = make_policy("kernelband-v1", compat=compat)
    off = offer({"A": ["fusion", "tiling"]})
    assert pull(p, pool, off, 0.9) == ("A", "tiling")  # canonical order: tiling before fusion
    assert pull(p, pool, off, 0.9) == ("A", "fusion")
    # t = 2, both n 1, mean 0.1: tiling 0.1 + 1.177410 + 0.5*0.1 = 1.327410; fusion ... + 0.5*0.9 = 1.727410
    assert p.select(pool, off, random.Random(0))[1] == "fusion"
    st = p.state()
    assert arm(st, "tiling")["score"] == pytest.approx(1.327410, abs=1e-6)
    assert arm(st, "fusion")["score"] == pytest.approx(1.727410, abs=1e-6)
    # the compatibility model learned from each update: improved = correct and faster
    assert compat.seen == [("tiling", True), ("fusion", True)]


def test_v2_score_arithmetic():
    pool = [cand("A", 1.0)]
    p = make_policy("kernelband-v2")
    off = offer({"A": ["tiling", "fusion"]})
    assert pull(p, pool, off, 0.5) == ("A", "tiling")  # r = 0.5
    assert pull(p, pool, off, None) == ("A", "fusion")  # r = 0
    # t = 2: tiling 0.5 + 2 sqrt(ln 2) = 2.165109; fusion 0 + 1.665109
    assert p.select(pool, off, random.Random(0))[1] == "tiling"
    st = p.state()
    assert arm(st, "tiling")["score"] == pytest.approx(2.165109, abs=1e-6)
    assert arm(st, "fusion")["score"] == pytest.approx(1.665109, abs=1e-6)
    p.update(pool[0], "tiling", Outcome(True, 1.0, 1.2), None)  # slower: r = max(0, -0.2) = 0
    # t = 3: tiling mean 0.25 + 2 sqrt(ln 3 / 2) = 1.732304; fusion 0 + 2 sqrt(ln 3) = 2.096294
    assert p.select(pool, off, random.Random(0))[1] == "fusion"
    st = p.state()
    assert arm(st, "tiling")["score"] == pytest.approx(1.732304, abs=1e-6)
    assert arm(st, "fusion")["score"] == pytest.approx(2.096294, abs=1e-6)
    assert "psi" not in arm(st, "tiling")


# ----------------------------------------------------------------------------- warm-up


def test_warmup_order_clusters_then_canonical_strategies():
    pool = [cand("B", 2.0), cand("A", 1.0)]  # A is faster: cluster 0
    p = make_policy("kernelband-v1")
    off = offer({"A": ["vectorization", "tiling"], "B": ["tiling"]})
    order = []
    for _ in range(3):
        order.append(pull(p, pool, off, 0.9))
        assert p.state()["last"]["phase"] == "warmup"
    assert order == [("A", "tiling"), ("A", "vectorization"), ("B", "tiling")]
    pull(p, pool, off, 0.9)
    assert p.state()["last"]["phase"] == "ucb"


def test_arm_targets_fastest_member_of_cluster_offering_the_strategy():
    # 4 members, K=3: two far-apart singletons and a pair {P1, P2}
    pool = [cand("S1", 1.0, [0.0]), cand("S2", 1.5, [100.0]), cand("P1", 3.0, [50.0]), cand("P2", 2.0, [50.1])]
    p = make_policy("kernelband-v1")
    off = offer({"P1": ["tiling", "pipeline"], "P2": ["pipeline"]})
    picks = [pull(p, pool, off, 0.9) for _ in range(2)]
    assert picks == [("P1", "tiling"), ("P2", "pipeline")]  # P2 (faster) does not offer tiling
    st = p.state()
    pair = next(c for c in st["clusters"] if "P1" in c["members"])
    assert sorted(pair["members"]) == ["P1", "P2"]


def test_statistics_survive_reclustering():
    pool = [cand("A", 1.0, [0.0]), cand("B", 2.0, [10.0])]
    p = KernelBandPolicy(BanditConfig(n_clusters=2))
    off = offer({"A": ["tiling"], "B": ["tiling"]})
    pull(p, pool, off, 0.8)  # A: 0.2
    pull(p, pool, off, 2.0)  # B: 1 - 2/2 = 0
    pool += [cand("C", 1.1, [0.1]), cand("D", 2.1, [10.1])]  # 4 members: A+C and B+D cluster together
    p.select(pool, off, random.Random(0))
    st = p.state()
    assert sorted(map(sorted, (c["members"] for c in st["clusters"]))) == [["A", "C"], ["B", "D"]]
    by_cluster = {a["cluster"]: (a["n"], a["mean"]) for a in st["arms"]}
    assert by_cluster == {0: (1, pytest.approx(0.2)), 1: (1, pytest.approx(0.0))}
    assert sum(a["n"] for a in st["arms"]) == st["t"] == 2
    assert st["last"]["phase"] == "ucb"  # A+C and B+D already have a tiling sample


# ----------------------------------------------------------------------------- masking (v2)


def test_v2_masks_strategies_on_a_saturated_resource():
    pool = [cand("A", 1.0, sat={"DRAM": 0.75, "SM": 0.2, "L2": 0.9})]
    p = make_policy("kernelband-v2")
    off = offer({"A": ["vectorization", "tiling", "fusion", "reordering"]})
    picks = {pull(p, pool, off, 0.9)[1] for _ in range(6)}
    assert picks == {"tiling"}  # DRAM (vectorization, fusion) and L2 (reordering) are masked at >= 0.75
    masks = {a["strategy"]: a["masked"] for a in p.state()["last"]["arms"]}
    assert masks == {"tiling": False, "vectorization": True, "fusion": True, "reordering": True}
    assert p.state()["last"]["fallback"] is False


def test_v2_below_threshold_is_not_masked_and_v1_never_masks():
    pool = [cand("A", 1.0, sat={"DRAM": 0.74})]
    off = offer({"A": ["vectorization"]})
    p2 = make_policy("kernelband-v2")
    assert pull(p2, pool, off, 0.9) == ("A", "vectorization")
    assert p2.state()["last"]["arms"][0]["masked"] is False
    p1 = make_policy("kernelband-v1")
    pool = [cand("A", 1.0, sat={"DRAM": 0.99})]
    assert pull(p1, pool, off, 0.9) == ("A", "vectorization")


def test_v2_falls_back_to_unmasked_when_everything_is_masked():
    pool = [cand("A", 1.0, sat={"DRAM": 0.9})]
    p = make_policy("kernelband-v2")
    off = offer({"A": ["fusion", "vectorization"]})
    assert pull(p, pool, off, 0.9) == ("A", "vectorization")
    last = p.state()["last"]
    assert last["fallback"] is True and all(a["masked"] for a in last["arms"])


def test_v2_mask_uses_the_cluster_representative():
    # one cluster of three (K=1); the middle member is nearest the centroid and is saturated
    pool = [cand("F", 1.0, [0.0], sat={"DRAM": 0.1}), cand("M", 2.0, [1.0], sat={"DRAM": 0.8}),
            cand("S", 3.0, [2.0], sat={"DRAM": 0.1})]
    p = KernelBandPolicy(BanditConfig.v2(n_clusters=1))
    off = offer({"F": ["vectorization", "tiling"], "M": ["vectorization", "tiling"], "S": ["vectorization"]})
    assert pull(p, pool, off, 0.9) == ("F", "tiling")
    assert p.state()["clusters"][0]["representative"] == "M"
    assert {a["strategy"]: a["masked"] for a in p.state()["last"]["arms"]} == {"tiling": False, "vectorization": True}


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_none_when_nothing_offered(name):
    p = make_policy(name)
    rng = random.Random(0)
    assert p.select([], offer({}), rng) is None
    assert p.select([cand("A", 1.0), cand("B", 2.0)], offer({}), rng) is None
    json.dumps(p.state())


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_only_offered_pairs_and_deterministic(name):
    def run():
        pool = [cand(f"k{i}", 1.0 + 0.1 * i, [i % 3, i]) for i in range(6)]
        table = {c.id: ["tiling", "fusion", "pipeline"][: 1 + i % 3] for i, c in enumerate(pool)}
        p = make_policy(name)
        rng = random.Random(7)
        picks = []
        for step in range(20):
            c, s = p.select(pool, offer(table), rng)
            assert s in table[c.id]
            p.update(c, s, Outcome(step % 3 != 0, c.time_ms, c.time_ms * 0.95), None)
            picks.append((c.id, s))
        json.dumps(p.state())
        return picks

    assert run() == run()
