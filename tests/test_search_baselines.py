"""Baselines behind the SearchPolicy interface: random, ucb1, greedy."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from kernelband.model import Variant
from kernelband.search import BanditConfig, Candidate, Outcome, SearchPolicy, make_policy


def cand(name, t):
    return Candidate(id=name, variant=Variant(source=name, id=name), time_ms=t)


def offer(table):
    return lambda c: list(table.get(c.id, []))


POOL = [cand("slow", 3.0), cand("fast", 1.0), cand("mid", 2.0)]


def test_policies_satisfy_the_protocol():
    for name in ("random", "ucb1", "greedy", "kernelband", "kernelband-v2"):
        assert isinstance(make_policy(name), SearchPolicy)


def test_random_is_uniform_over_offered_pairs_and_seeded():
    table = {"slow": ["tiling", "fusion"], "fast": ["pipeline"], "mid": []}
    p = make_policy("random")
    rng = random.Random(3)
    counts = Counter()
    for _ in range(3000):
        c, s = p.select(POOL, offer(table), rng)
        counts[(c.id, s)] += 1
    assert set(counts) == {("slow", "tiling"), ("slow", "fusion"), ("fast", "pipeline")}
    assert all(900 < n < 1100 for n in counts.values())
    a = [make_policy("random").select(POOL, offer(table), random.Random(5)) for _ in range(3)]
    assert len({(c.id, s) for c, s in a}) == 1


def test_ucb1_warms_up_then_scores_and_uses_fastest_offering_candidate():
    table = {"slow": ["tiling", "fusion"], "fast": ["fusion"], "mid": ["tiling"]}
    p = make_policy("ucb1")  # reward v1
    rng = random.Random(0)
    c, s = p.select(POOL, offer(table), rng)
    assert (c.id, s) == ("mid", "tiling")  # canonical order; mid is the fastest offering tiling
    p.update(c, s, Outcome(True, 2.0, 1.0), None)  # r = 0.5
    c, s = p.select(POOL, offer(table), rng)
    assert (c.id, s) == ("fast", "fusion")
    p.update(c, s, Outcome(False, 1.0, None), None)  # r = -1
    # t = 2: tiling 0.5 + sqrt(2 ln 2) = 1.677410; fusion -1 + 1.177410 = 0.177410
    c, s = p.select(POOL, offer(table), rng)
    assert (c.id, s) == ("mid", "tiling")
    assert p.state()["last"]["scores"] == {"tiling": pytest.approx(1.677410, abs=1e-6),
                                           "fusion": pytest.approx(0.177410, abs=1e-6)}


def test_ucb1_uses_the_configured_reward_mode():
    p = make_policy("ucb1", BanditConfig(reward_mode="v2"))
    p.update(POOL[1], "tiling", Outcome(False, 1.0, None), None)
    assert p.state()["arms"] == [{"strategy": "tiling", "n": 1, "mean": 0.0}]


def test_greedy_always_expands_the_fastest_candidate():
    table = {"slow": ["tiling"], "fast": ["pipeline", "tiling"], "mid": ["fusion"]}
    p = make_policy("greedy")
    rng = random.Random(0)
    picks = []
    for child in (0.9, 0.5, None, None):
        c, s = p.select(POOL, offer(table), rng)
        picks.append((c.id, s))
        p.update(c, s, Outcome(child is not None, c.time_ms, child), None)
    # untried first (canonical order), then the best mean: tiling 0.1 vs pipeline 0.5 -> pipeline
    assert picks == [("fast", "tiling"), ("fast", "pipeline"), ("fast", "pipeline"), ("fast", "tiling")]
    # once the fastest offers nothing, the next fastest that offers something
    c, s = p.select(POOL, offer({"slow": ["tiling"], "mid": ["fusion"]}), rng)
    assert (c.id, s) == ("mid", "fusion")


def test_ucb1_exploration_constant_comes_from_the_config():
    table = {"fast": ["tiling", "fusion"]}
    rng = random.Random(0)
    scores = {}
    for k in (2.0, 8.0):
        p = make_policy("ucb1", BanditConfig(ucb1_explore=k))
        for _ in range(2):
            c, s = p.select(POOL, offer(table), rng)
            p.update(c, s, Outcome(True, 1.0, 0.5), None)  # r = 0.5 for both arms
        p.select(POOL, offer(table), rng)
        scores[k] = p.state()["last"]["scores"]["tiling"]
    # t = 2, n = 1: 0.5 + sqrt(k ln 2)
    assert scores[2.0] == pytest.approx(0.5 + (2.0 * 0.693147) ** 0.5, abs=1e-5)
    assert scores[8.0] == pytest.approx(0.5 + (8.0 * 0.693147) ** 0.5, abs=1e-5)
    assert BanditConfig().ucb1_explore == 2.0
