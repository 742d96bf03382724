"""Baseline policies behind the same interface as KernelBand (for ablations and the simulator).

- random: uniform over every offered (candidate, strategy) pair; the only policy that
  draws from ``rng``.
- ucb1: flat UCB1 over strategies (no clusters, no hardware model): every offered
  strategy is pulled once (canonical order), then mean + sqrt(k ln t / n) with
  k = ``ucb1_explore`` (2); the chosen
  strategy is applied to the fastest candidate that offers it.
- greedy: best-first: always the fastest candidate that offers anything; among its
  strategies, one never tried (canonical order) first, then the best mean reward so
  far (ties: canonical order). No exploration bonus.

Rewards use the config's reward mode (v1 by default), statistics are per strategy.
Every constant comes from the BanditConfig.
"""

from __future__ import annotations

import math
import random
from typing import Optional

from ..json_types import JsonObject, JsonValue
from .base import (
    ArmStats,
    Candidate,
    Offered,
    Outcome,
    PendingPulls,
    collect_offers,
    fastest,
    json_number,
    reward,
    strategy_order,
    ucb_bonus,
)
from .config import BanditConfig


class _StrategyStats:
    name = "?"

    def __init__(self, config: Optional[BanditConfig] = None) -> None:
        self.config = (config or BanditConfig()).resolved()
        self.stats: dict[str, ArmStats] = {}
        self.t = 0
        self._last: JsonObject = {}
        self.best_ms = math.inf  # fastest time seen (for reward mode "best")
        self._pending = PendingPulls()  # running pulls, seen by select as virtual losses (base.PendingPulls)

    def pending(self, parent: Candidate, strategy: str) -> None:
        self._pending.add(parent.id, strategy)

    def update(self, parent: Candidate, strategy: str, outcome: Outcome, child: Optional[Candidate]) -> None:
        self._pending.resolve(parent.id, strategy)
        self.best_ms = min(self.best_ms, parent.time_ms)
        r = reward(outcome, str(self.config.reward_mode), self.best_ms)  # resolved: never None
        self.stats.setdefault(strategy, ArmStats()).add(r)
        if outcome.success and outcome.child_ms is not None:
            self.best_ms = min(self.best_ms, outcome.child_ms)
        self.t += 1

    def _with_pending(self, s: str) -> ArmStats:
        st = ArmStats()
        if s in self.stats:
            st.merge(self.stats[s])
        st.merge(self._pending.as_stats(self._pending.of_strategy(s), str(self.config.reward_mode)))
        return st

    def _n(self, s: str) -> int:
        return self._with_pending(s).n

    def _mean(self, s: str) -> float:
        return self._with_pending(s).mean

    @property
    def _t(self) -> int:
        return self.t + self._pending.total

    def state(self) -> JsonObject:
        return {
            "policy": self.name,
            "t": self.t,
            "arms": [_arm(s, st) for s, st in self.stats.items()],
            "last": self._last,
        }


def _arm(strategy: str, stats: ArmStats) -> JsonValue:
    return {"strategy": strategy, "n": stats.n, "mean": round(stats.mean, 6)}


class RandomPolicy(_StrategyStats):
    name = "random"

    def select(self, pool: list[Candidate], offered: Offered, rng: random.Random) -> Optional[tuple[Candidate, str]]:
        offers = collect_offers(pool, offered)
        by_id = {c.id: c for c in pool}
        pairs = [(by_id[cid], s) for cid, names in offers.items() for s in names]
        if not pairs:
            self._last = {"phase": "none"}
            return None
        cand, s = pairs[rng.randrange(len(pairs))]
        self._last = {"candidate": cand.id, "strategy": s, "choices": len(pairs)}
        return cand, s


class UCB1Policy(_StrategyStats):
    name = "ucb1"

    def select(self, pool: list[Candidate], offered: Offered, rng: random.Random) -> Optional[tuple[Candidate, str]]:
        offers = collect_offers(pool, offered)
        if not offers:
            self._last = {"phase": "none"}
            return None
        names = strategy_order(s for ss in offers.values() for s in ss)
        scores = {s: (self._mean(s) + ucb_bonus(self.config.ucb1_explore, self._t, self._n(s))) for s in names}
        s = max(names, key=lambda x: scores[x])  # unpulled arms score inf: warm-up in canonical order
        cand = fastest(c for c in pool if s in offers.get(c.id, ()))
        assert cand is not None
        self._last = {
            "phase": "warmup" if self._n(s) == 0 else "ucb",
            "candidate": cand.id,
            "strategy": s,
            "scores": {k: json_number(v) for k, v in scores.items()},
        }
        return cand, s


class GreedyPolicy(_StrategyStats):
    name = "greedy"

    def select(self, pool: list[Candidate], offered: Offered, rng: random.Random) -> Optional[tuple[Candidate, str]]:
        offers = collect_offers(pool, offered)
        cand = fastest(c for c in pool if c.id in offers)
        if cand is None:
            self._last = {"phase": "none"}
            return None
        names = offers[cand.id]
        untried = [s for s in names if self._n(s) == 0]
        s = untried[0] if untried else max(names, key=self._mean)
        self._last = {"phase": "untried" if untried else "best-mean", "candidate": cand.id, "strategy": s}
        return cand, s
