"""KernelBand: the hierarchical bandit over (cluster of candidates, strategy).

One class serves v1 and v2; ``BanditConfig`` picks the behaviour (see config.py).

Statistics. Each pull is recorded per (parent member, strategy): count and reward sum.
An arm (cluster c, strategy s) aggregates the samples of c's current members, so
n(c,s) = sum of n(m,s) over m in c and mean(c,s) = their reward sum / n(c,s). When
the pool changes, members are re-clustered and the arms re-aggregated: nothing
learned is lost, it is regrouped. t is the number of updates so far.

A step (``select``):
1. offers: ``offered(m)`` for every member; a cluster offers s if any member does.
2. cluster the pool (cluster.py; cached until the set of members changes).
3. arms: each offered (c, s); the candidate it would modify, target(c,s), is the
   fastest member of c that offers s.
4. v2 masking (``masking``): (c, s) is masked when the representative of c (the
   member nearest the centroid) has saturation[resource(s)] >= 0.75. A member with no
   value for that resource does not mask. If every offered arm is masked, masks are
   ignored for this step (``fallback`` in state).
5. warm-up: v1/v2: the first offered, unmasked arm with n = 0, in order cluster 0, 1, ...
   and within a cluster strategies in canonical order, is pulled. kb: once ``kb_patience``
   pulls brought no new best (0, the default: from the start), while a strategy has never
   been pulled this session (on any member), it gets one look: with ``kb_fresh``
   "best-first" (the default) on the fastest member, the strategy the prior ranks highest
   first (a strategy the fastest member does not offer waits for the scores); with
   "score" the best-scoring such arm. Never per cluster: that warm-up recurred with
   every new cluster.
6. else UCB, ties to the earlier arm in the same order:
   v1: mean + sqrt(2 ln t / n) + alpha * psi_s(phi(target(c,s)))
   v2: mean + c * sqrt(ln t / n)
   kb (the default ``kernelband``; with m > 0 every arm has a finite score):
       g = (sum + m * mu_s) / (n + m), mu_s = the prior of s, or with ``kb_pooled`` (the
           default) s's pooled mean this session shrunk toward it: (S_s + m p_s) / (N_s + m)
       depleted: g * d ** k with d = ``kb_deplete`` (0.5 by default; 1 is off) and k the
           pulls of s since the pool's fastest time last improved (a new best resets every
           count): a strategy that stopped paying on the best member gives way
       mean = g, or with ``kb_gap`` (the default) 1 - T_target / T_best * (1 - g),
           T_best the pool's fastest time; with ``kb_gap_signed`` (the default) a slow
           target scores how far behind the best it would stay, else max(0, .)
       score = mean + kb_explore * sqrt(ln(t + 1) / (n + m))
               + hw_weight * (headroom_s(target) - 0.5) [+ hw_weight * (psi - 0.5) with counters]
   where m = prior_strength, p_s the strategy's prior mean reward (learned across
   kernels: priors.json) and headroom_s = 1 - saturation of s's resource.
Rewards (``update``): base.reward with the configured mode ("best" for kb: relative to
the fastest time seen so far, clipped at 0; with ``kb_gap`` the gain over the parent,
"v2", which the gap term turns into a gain over the best). A compatibility model,
when attached, also learns (parent.phi, s, improved) where improved = correct and
faster than the parent.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..json_types import JsonObject, JsonValue
from ..strategies import STRATEGIES
from .base import (
    ArmStats,
    Candidate,
    Offered,
    Outcome,
    PendingPulls,
    collect_offers,
    fastest,
    improved,
    json_number,
    reward,
    strategy_order,
    time_key,
    ucb_bonus,
)
from .cluster import Clustering, cluster_pool
from .compat import CompatibilityModels
from .config import BanditConfig


PRIORS_PATH = Path(__file__).with_name("priors.json")


def shipped_priors() -> dict[str, float]:
    """Per-strategy prior mean reward ("best" mode) fitted on the committed pulls by
    benchmarks/replay_ablation.py; {} when the file is missing."""
    try:
        d = json.loads(PRIORS_PATH.read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in d["strategies"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


@dataclass
class _Arm:
    """One (cluster, strategy) arm of a selection: the member it would modify, its
    statistics with running pulls as virtual losses, and its score once scored."""

    cluster: int
    strategy: str
    target: Candidate
    stats: ArmStats
    masked: bool
    score: Optional[float] = None  # None: not eligible this selection (masked), never scored
    terms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        terms: JsonObject = {k: json_number(v) for k, v in self.terms.items()}
        return {
            "cluster": self.cluster,
            "strategy": self.strategy,
            "candidate": self.target.id,
            "n": self.stats.n,
            "mean": json_number(self.stats.mean),
            "masked": self.masked,
            "score": json_number(self.score) if self.score is not None else None,
            **terms,
        }


def _score(arm: _Arm) -> float:
    """An eligible arm's score (each is scored before any is chosen)."""
    assert arm.score is not None
    return arm.score


class KernelBandPolicy:
    def __init__(self, config: Optional[BanditConfig] = None, compat: Optional[CompatibilityModels] = None) -> None:
        self.config = (config or BanditConfig()).resolved()
        self.name = {"v1": "kernelband-v1", "v2": "kernelband-v2", "kb": "kernelband"}[self.config.variant]
        if compat is None and (self.config.variant == "v1" and self.config.alpha != 0 or self.config.variant == "kb"):
            compat = CompatibilityModels(self.config)
        self.priors = dict(self.config.strategy_prior) if self.config.strategy_prior is not None else shipped_priors()
        self.best_ms = math.inf  # fastest time seen (reward mode "best")
        self._since_best = 0  # pulls since the fastest time last improved (kb_patience)
        self.compat = compat
        self._stats: dict[tuple[str, str], ArmStats] = {}  # (member id, strategy)
        self._stall: dict[str, int] = {}  # strategy: its pulls since the fastest time last improved (kb_deplete)
        self.t = 0
        self._clustering: Optional[Clustering] = None
        self._cluster_key: Optional[tuple[str, ...]] = None
        self._last: JsonObject = {}
        self._pending = PendingPulls()  # running pulls, seen by select as virtual losses (base.PendingPulls)
        self._pool_best = math.inf  # the pool's fastest time, set by select (kb_gap)

    # ------------------------------------------------------------------ statistics
    def clustering(self, pool: list[Candidate]) -> Clustering:
        key = tuple(c.id for c in pool)
        if self._clustering is None or key != self._cluster_key:
            cfg = self.config
            self._clustering = cluster_pool(
                pool, cfg.n_clusters, cfg.cluster_seed, cfg.kmeans_restarts, cfg.kmeans_max_iter
            )
            self._cluster_key = key
        return self._clustering

    def arm_stats(self, members: list[Candidate], strategy: str) -> ArmStats:
        agg = ArmStats()
        for m in members:
            st = self._stats.get((m.id, strategy))
            if st is not None:
                agg.merge(st)
        return agg

    def _arm_stats_pending(self, members: list[Candidate], strategy: str) -> ArmStats:
        """arm_stats plus the arm's running pulls, each a virtual loss (select only)."""
        agg = self.arm_stats(members, strategy)
        k = sum(self._pending.count(m.id, strategy) for m in members)
        if k:
            agg.merge(self._pending.as_stats(k, self._reward_mode()))
        return agg

    def masked(self, representative: Candidate, strategy: str) -> bool:
        if not self.config.masking:
            return False
        s = STRATEGIES.get(strategy)
        if s is None:
            return False
        level = (representative.saturation or {}).get(s.resource)
        return level is not None and math.isfinite(level) and level >= self.config.saturation_threshold

    def score(self, stats: ArmStats, target: Candidate, strategy: str) -> tuple[float, dict[str, float]]:
        cfg = self.config
        t = self.t + self._pending.total  # running pulls count as pulls
        if cfg.variant == "v1":
            bonus = ucb_bonus(cfg.v1_explore, t, stats.n)
            psi = self.compat.probability(target.phi, strategy) if self.compat is not None else cfg.phi_none_psi
            return stats.mean + bonus + cfg.alpha * psi, {"mean": stats.mean, "bonus": bonus, "psi": psi}
        if cfg.variant == "kb":
            m = cfg.prior_strength
            prior = self.priors.get(strategy, 0.0)
            if cfg.kb_pooled and m > 0:  # two levels: the strategy's session mean, shrunk toward the prior
                pooled = self._strategy_stats(strategy)
                prior = (pooled.total + m * prior) / (pooled.n + m)
            shrunk = (stats.total + m * prior) / (stats.n + m) if stats.n + m > 0 else prior
            if cfg.kb_deplete != 1.0:  # gains deplete: each pull of s since the last new best
                shrunk *= cfg.kb_deplete ** (self._stall.get(strategy, 0) + self._pending.of_strategy(strategy))
            best = self._pool_best
            if cfg.kb_gap and math.isfinite(best) and best > 0:
                # a gain over the target is worth only what it brings below the pool's fastest
                shrunk = 1.0 - target.time_ms / best * (1.0 - shrunk)
                if not cfg.kb_gap_signed:
                    shrunk = max(0.0, shrunk)
            bonus = cfg.kb_explore * math.sqrt(math.log(t + 1) / (stats.n + m)) if stats.n + m > 0 else math.inf
            hw = cfg.hw_weight * (self.headroom(target, strategy) - 0.5)
            if self.compat is not None and target.phi is not None:  # counters: the learned psi too
                hw += cfg.hw_weight * (self.compat.probability(target.phi, strategy) - 0.5)
            return shrunk + bonus + hw, {"mean": shrunk, "bonus": bonus, "hw": hw}
        bonus = cfg.c * ucb_bonus(1.0, t, stats.n)
        return stats.mean + bonus, {"mean": stats.mean, "bonus": bonus}

    @staticmethod
    def headroom(target: Candidate, strategy: str) -> float:
        """1 - the target's saturation of the strategy's resource (0.5 when unknown)."""
        s = STRATEGIES.get(strategy)
        level = (target.saturation or {}).get(s.resource) if s is not None else None
        if level is None or not math.isfinite(level):
            return 0.5
        return 1.0 - min(max(level, 0.0), 1.0)

    # ------------------------------------------------------------------ protocol
    def select(self, pool: list[Candidate], offered: Offered, rng: random.Random) -> Optional[tuple[Candidate, str]]:
        offers = collect_offers(pool, offered)
        if not offers:
            self._last = {"phase": "none", "t": self.t}
            return None
        cl = self.clustering(pool)
        self._pool_best = min((time_key(c) for c in pool), default=math.inf)  # T_best of the gap term
        arms: list[_Arm] = []
        for ci, members in enumerate(cl.clusters):
            for s in strategy_order(x for m in members for x in offers.get(m.id, ())):
                target = fastest(m for m in members if s in offers.get(m.id, ()))
                assert target is not None
                stats = self._arm_stats_pending(members, s)
                arms.append(_Arm(ci, s, target, stats, self.masked(cl.representatives[ci], s)))
        fallback = all(a.masked for a in arms)
        eligible = arms if fallback else [a for a in arms if not a.masked]
        kb = self.config.variant == "kb"
        for a in eligible:
            if a.stats.n == 0 and not kb:
                a.score, a.terms = math.inf, {}
            else:
                a.score, a.terms = self.score(a.stats, a.target, a.strategy)
        if kb:
            # after a stall (kb_patience), each never-pulled strategy once per session (not
            # per cluster: that warm-up recurred with every new cluster); else the scores
            stalled = self.config.kb_patience >= 0 and self._since_best >= self.config.kb_patience
            fresh = [a for a in eligible if self._strategy_pulls(a.strategy) == 0] if stalled else []
            best_first = self.config.kb_fresh == "best-first"
            if fresh and best_first:  # only on the fastest member (offers is not empty: one exists)
                lead = fastest(c for c in pool if c.id in offers)
                assert lead is not None
                fresh = [a for a in fresh if a.target.id == lead.id]
            phase = "try-each" if fresh else "ucb"
            if fresh and best_first:  # the fresh strategy the prior ranks highest
                chosen = max(fresh, key=lambda a: self.priors.get(a.strategy, 0.0))
            else:
                chosen = max(fresh or eligible, key=_score)  # max keeps the first of equals
        else:
            warm = [a for a in eligible if a.stats.n == 0] if self.config.warmup else []
            phase = "warmup" if warm else "ucb"
            chosen = warm[0] if warm else max(eligible, key=_score)
        self._last = {
            "phase": phase,
            "t": self.t,
            "fallback": fallback,
            "cluster": chosen.cluster,
            "strategy": chosen.strategy,
            "candidate": chosen.target.id,
            "arms": [a.to_dict() for a in arms],
        }
        return chosen.target, chosen.strategy

    def _reward_mode(self) -> str:
        """What a pull records: the gain over its parent ("v2") under kb_gap, else the configured mode."""
        cfg = self.config
        return "v2" if cfg.variant == "kb" and cfg.kb_gap else str(cfg.reward_mode)

    def _strategy_stats(self, strategy: str) -> ArmStats:
        """Every pull of ``strategy`` this session, on any member; running ones as virtual
        losses (as ``_arm_stats_pending`` counts them for an arm)."""
        agg = ArmStats()
        for (_mid, s), st in self._stats.items():
            if s == strategy:
                agg.merge(st)
        k = self._pending.of_strategy(strategy)
        if k:
            agg.merge(self._pending.as_stats(k, self._reward_mode()))
        return agg

    def _strategy_pulls(self, strategy: str) -> int:
        """Pulls of ``strategy`` this session, on any member, running ones included."""
        return self._strategy_stats(strategy).n

    def pending(self, parent: Candidate, strategy: str) -> None:
        """(parent, strategy) was handed to a worker: a virtual loss until ``update``."""
        self._pending.add(parent.id, strategy)

    def update(self, parent: Candidate, strategy: str, outcome: Outcome, child: Optional[Candidate]) -> None:
        self._pending.resolve(parent.id, strategy)
        self.best_ms = min(self.best_ms, parent.time_ms)
        r = reward(outcome, self._reward_mode(), self.best_ms)
        self._stats.setdefault((parent.id, strategy), ArmStats()).add(r)
        if outcome.success and outcome.child_ms is not None and outcome.child_ms < self.best_ms:
            self.best_ms, self._since_best = outcome.child_ms, 0
            self._stall.clear()  # a new best to work on: every strategy may pay again
        else:
            self._since_best += 1
            self._stall[strategy] = self._stall.get(strategy, 0) + 1
        self.t += 1
        if self.compat is not None and parent.phi is not None:
            self.compat.observe(parent.phi, strategy, improved(outcome))

    def state(self) -> JsonObject:
        cl = self._clustering
        clusters = cl.to_dict() if cl is not None else []
        arms: list[JsonValue] = []
        if cl is not None:
            for ci, members in enumerate(cl.clusters):
                for s in strategy_order(sorted({x for (mid, x) in self._stats if cl.label.get(mid) == ci})):
                    st = self.arm_stats(members, s)
                    arms.append(
                        {
                            "cluster": ci,
                            "strategy": s,
                            "n": st.n,
                            "mean": json_number(st.mean),
                            "masked": self.masked(cl.representatives[ci], s),
                        }
                    )
        return {
            "policy": self.name,
            "t": self.t,
            "clusters": clusters,
            "arms": arms,
            "members": {
                f"{mid}/{s}": {"n": st.n, "mean": json_number(st.mean)} for (mid, s), st in self._stats.items()
            },
            "last": self._last,
            "config": self.config.to_dict(),
        }
