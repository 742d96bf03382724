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
5. warm-up: the first offered, unmasked arm with n = 0, in order cluster 0, 1, ...
   and within a cluster strategies in canonical order, is pulled.
6. else UCB, ties to the earlier arm in the same order:
   v1: mean + sqrt(2 ln t / n) + alpha * psi_s(phi(target(c,s)))
   v2: mean + c * sqrt(ln t / n)
Rewards (``update``): base.reward with the configured mode. A compatibility model,
when attached, also learns (parent.phi, s, improved) where improved = correct and
faster than the parent.
"""
from __future__ import annotations

import math
import random
from typing import Any, Optional

from ..strategies import STRATEGIES
from .base import (
    ArmStats, Candidate, Offered, Outcome, collect_offers, fastest, improved, reward, strategy_order, ucb_bonus,
)
from .cluster import Clustering, cluster_pool
from .compat import CompatibilityModels
from .config import BanditConfig


def _num(v: float) -> Optional[float]:
    return round(v, 6) if math.isfinite(v) else None


class KernelBandPolicy:
    def __init__(self, config: Optional[BanditConfig] = None, compat: Optional[CompatibilityModels] = None) -> None:
        self.config = (config or BanditConfig()).resolved()
        self.name = "kernelband" if self.config.variant == "v1" else "kernelband-v2"
        if compat is None and self.config.variant == "v1" and self.config.alpha != 0:
            compat = CompatibilityModels(self.config)
        self.compat = compat
        self._stats: dict[tuple[str, str], ArmStats] = {}  # (member id, strategy)
        self.t = 0
        self._clustering: Optional[Clustering] = None
        self._cluster_key: Optional[tuple[str, ...]] = None
        self._last: dict[str, Any] = {}

    # ------------------------------------------------------------------ statistics
    def clustering(self, pool: list[Candidate]) -> Clustering:
        key = tuple(c.id for c in pool)
        if self._clustering is None or key != self._cluster_key:
            cfg = self.config
            self._clustering = cluster_pool(pool, cfg.n_clusters, cfg.cluster_seed, cfg.kmeans_restarts, cfg.kmeans_max_iter)
            self._cluster_key = key
        return self._clustering

    def arm_stats(self, members: list[Candidate], strategy: str) -> ArmStats:
        agg = ArmStats()
        for m in members:
            st = self._stats.get((m.id, strategy))
            if st is not None:
                agg.merge(st)
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
        if cfg.variant == "v1":
            bonus = ucb_bonus(cfg.v1_explore, self.t, stats.n)
            psi = self.compat.probability(target.phi, strategy) if self.compat is not None else cfg.phi_none_psi
            return stats.mean + bonus + cfg.alpha * psi, {"mean": stats.mean, "bonus": bonus, "psi": psi}
        bonus = cfg.c * ucb_bonus(1.0, self.t, stats.n)
        return stats.mean + bonus, {"mean": stats.mean, "bonus": bonus}

    # ------------------------------------------------------------------ protocol
    def select(self, pool: list[Candidate], offered: Offered, rng: random.Random) -> Optional[tuple[Candidate, str]]:
        offers = collect_offers(pool, offered)
        if not offers:
            self._last = {"phase": "none", "t": self.t}
            return None
        cl = self.clustering(pool)
        arms: list[dict[str, Any]] = []
        for ci, members in enumerate(cl.clusters):
            for s in strategy_order(x for m in members for x in offers.get(m.id, ())):
                target = fastest(m for m in members if s in offers.get(m.id, ()))
                assert target is not None
                arms.append({
                    "cluster": ci, "strategy": s, "target": target,
                    "stats": self.arm_stats(members, s), "masked": self.masked(cl.representatives[ci], s),
                })
        fallback = all(a["masked"] for a in arms)
        eligible = arms if fallback else [a for a in arms if not a["masked"]]
        for a in eligible:
            if a["stats"].n == 0:
                a["score"], a["terms"] = math.inf, {}
            else:
                a["score"], a["terms"] = self.score(a["stats"], a["target"], a["strategy"])
        warm = [a for a in eligible if a["stats"].n == 0] if self.config.warmup else []
        phase = "warmup" if warm else "ucb"
        chosen = warm[0] if warm else max(eligible, key=lambda a: a["score"])  # max keeps the first of equals
        self._last = {
            "phase": phase,
            "t": self.t,
            "fallback": fallback,
            "cluster": chosen["cluster"],
            "strategy": chosen["strategy"],
            "candidate": chosen["target"].id,
            "arms": [
                {
                    "cluster": a["cluster"], "strategy": a["strategy"], "candidate": a["target"].id,
                    "n": a["stats"].n, "mean": _num(a["stats"].mean), "masked": a["masked"],
                    "score": _num(a["score"]) if "score" in a else None,
                    **{k: _num(v) for k, v in a.get("terms", {}).items()},
                }
                for a in arms
            ],
        }
        return chosen["target"], chosen["strategy"]

    def update(self, parent: Candidate, strategy: str, outcome: Outcome, child: Optional[Candidate]) -> None:
        r = reward(outcome, self.config.reward_mode)  # type: ignore[arg-type]
        self._stats.setdefault((parent.id, strategy), ArmStats()).add(r)
        self.t += 1
        if self.compat is not None and parent.phi is not None:
            self.compat.observe(parent.phi, strategy, improved(outcome))

    def state(self) -> dict[str, Any]:
        cl = self._clustering
        clusters = cl.to_dict() if cl is not None else []
        arms = []
        if cl is not None:
            for ci, members in enumerate(cl.clusters):
                for s in strategy_order(sorted({x for (mid, x) in self._stats if cl.label.get(mid) == ci})):
                    st = self.arm_stats(members, s)
                    arms.append({"cluster": ci, "strategy": s, "n": st.n, "mean": _num(st.mean),
                                 "masked": self.masked(cl.representatives[ci], s)})
        return {
            "policy": self.name,
            "t": self.t,
            "clusters": clusters,
            "arms": arms,
            "members": {f"{mid}/{s}": {"n": st.n, "mean": _num(st.mean)} for (mid, s), st in self._stats.items()},
            "last": self._last,
            "config": self.config.to_dict(),
        }

