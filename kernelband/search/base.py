"""The search-policy interface shared by KernelBand and the baselines.

A policy chooses the next (candidate, strategy) to try from the pool; the session
generates and evaluates a child and reports the outcome with ``update``. Contract:

- ``select`` only returns a strategy listed by ``offered(candidate)``; it returns
  ``None`` when nothing is offered for any pool member.
- ``select`` does not change what a policy has learned (only its record of the last
  decision, for ``state()``); ``update`` is the one place statistics change.
- Policies are deterministic given the ``rng`` passed to ``select``.
- ``state()`` is a JSON-able snapshot for events and the store.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Protocol, runtime_checkable

from ..json_types import JsonObject
from ..model import Variant
from ..strategies import STRATEGY_NAMES

Offered = Callable[["Candidate"], list[str]]


@dataclass
class Candidate:
    """A pool member."""

    id: str  # Variant.id
    variant: Variant
    time_ms: float
    phi: Optional[list[Optional[float]]] = None  # 9-dim hardware profile (compat.PHI_FEATURES), None if unknown
    # clustering features (profile.assemble.FEATURE_SETS); None: not known (imputed when clustering)
    runtime_vector: list[Optional[float]] = field(default_factory=list)
    saturation: dict[str, float] = field(default_factory=dict)  # {"L2","DRAM","SM"}: fraction of peak 0..1
    parent_id: Optional[str] = None
    depth: int = 0


@dataclass
class Outcome:
    success: bool  # the child passed correctness
    parent_ms: float
    child_ms: Optional[float]


@runtime_checkable
class SearchPolicy(Protocol):
    name: str

    def select(
        self, pool: list[Candidate], offered: Offered, rng: random.Random
    ) -> Optional[tuple[Candidate, str]]: ...

    def update(self, parent: Candidate, strategy: str, outcome: Outcome, child: Optional[Candidate]) -> None: ...

    def state(self) -> JsonObject: ...


# --------------------------------------------------------------------------- rewards


def reward(outcome: Outcome, mode: str, best_ms: Optional[float] = None) -> float:
    """KernelBand's reward for one pull.

    v1: ``1 - T_child/T_parent`` on success (unclipped: a correct but 2x slower child
    scores -1, as a failure does), ``-1`` on failure.
    v2: ``max(0, 1 - T_child/T_parent)`` on success, ``0`` on failure.
    best: ``max(0, 1 - T_child/T_best)`` with T_best the fastest time known before the
    pull (``best_ms``; the parent's when not given), ``0`` on failure: only a new best
    earns, so a near no-op strategy cannot look as good as one that moves the answer.
    A success without a usable time (child_ms missing, parent_ms <= 0) scores 0.
    """
    if mode not in ("v1", "v2", "best"):
        raise ValueError(f"reward mode must be 'v1', 'v2' or 'best', not {mode!r}")
    if not outcome.success:
        return -1.0 if mode == "v1" else 0.0
    if outcome.child_ms is None or not outcome.parent_ms or outcome.parent_ms <= 0:
        return 0.0
    if mode == "best":
        ref = (
            min(float(outcome.parent_ms), best_ms) if best_ms is not None and best_ms > 0 else float(outcome.parent_ms)
        )
        return max(0.0, 1.0 - float(outcome.child_ms) / ref)
    r = 1.0 - float(outcome.child_ms) / float(outcome.parent_ms)
    return r if mode == "v1" else max(0.0, r)


def improved(outcome: Outcome) -> bool:
    """A strategy "worked" for a kernel: correct and strictly faster than its parent."""
    return bool(outcome.success and outcome.child_ms is not None and outcome.child_ms < outcome.parent_ms)


# --------------------------------------------------------------------------- pending pulls


class PendingPulls:
    """Pulls handed to a worker whose outcome is not known yet (several workers).

    Batched decisions by virtual loss: while a pull of (member, strategy) is running,
    ``select`` counts it as a finished pull that failed (the mode's failure reward: -1
    for v1, 0 otherwise) in n, in the arm's mean and in t. The next free worker is then
    steered away from an arm that is already being tried, by exactly as much as a
    failure would, and ``update`` replaces the virtual loss with the real reward. With
    one worker nothing is ever pending when ``select`` runs: the policy is unchanged.
    """

    def __init__(self) -> None:
        self._n: dict[tuple[str, str], int] = {}

    def add(self, member_id: str, strategy: str) -> None:
        self._n[(member_id, strategy)] = self._n.get((member_id, strategy), 0) + 1

    def resolve(self, member_id: str, strategy: str) -> None:
        k = self._n.get((member_id, strategy), 0)
        if k <= 1:
            self._n.pop((member_id, strategy), None)
        else:
            self._n[(member_id, strategy)] = k - 1

    def count(self, member_id: str, strategy: str) -> int:
        return self._n.get((member_id, strategy), 0)

    def of_strategy(self, strategy: str) -> int:
        return sum(k for (_, s), k in self._n.items() if s == strategy)

    @property
    def total(self) -> int:
        return sum(self._n.values())

    def as_stats(self, k: int, mode: str) -> "ArmStats":
        """k virtual losses: k pulls at the failure reward of ``mode``."""
        return ArmStats(k, k * reward(Outcome(False, 1.0, None), mode))


def add_pending(policy: "SearchPolicy", parent: Candidate, strategy: str) -> None:
    """Tell a policy that (parent, strategy) was handed to a worker (a policy without
    ``pending`` simply does not see running pulls)."""
    fn = getattr(policy, "pending", None)
    if fn is not None:
        fn(parent, strategy)


# --------------------------------------------------------------------------- helpers


@dataclass
class ArmStats:
    n: int = 0
    total: float = 0.0

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    def add(self, r: float) -> None:
        self.n += 1
        self.total += r

    def merge(self, other: "ArmStats") -> None:
        self.n += other.n
        self.total += other.total


def strategy_order(names: Iterable[str]) -> list[str]:
    """Distinct names in canonical order: the six strategies as in strategies.py, then
    any other names in the order first seen."""
    seen = list(dict.fromkeys(names))
    known = [s for s in STRATEGY_NAMES if s in seen]
    return known + [s for s in seen if s not in STRATEGY_NAMES]


def time_key(c: Candidate) -> float:
    t = c.time_ms
    return float(t) if t is not None and math.isfinite(t) else math.inf


def collect_offers(pool: list[Candidate], offered: Offered) -> dict[str, list[str]]:
    """``{candidate id: offered strategies in canonical order}``, members offering nothing left out.
    ``offered`` is called once per member."""
    out: dict[str, list[str]] = {}
    for c in pool:
        if c.id in out:
            continue
        names = strategy_order(offered(c) or [])
        if names:
            out[c.id] = names
    return out


def json_number(v: float) -> Optional[float]:
    """A statistic as JSON: six places; null where it is not finite (an unpulled arm's score)."""
    return round(v, 6) if math.isfinite(v) else None


def fastest(cands: Iterable[Candidate]) -> Optional[Candidate]:
    """The fastest candidate; ties go to the earlier one (pool order, as min keeps the first)."""
    return min(cands, key=time_key, default=None)


def ucb_bonus(coef: float, total: int, n: int) -> float:
    """``sqrt(coef * ln t / n)``: coef 2 gives UCB1's sqrt(2 ln t / n); v2's c*sqrt(ln t/n) is c * ucb_bonus(1, ...)."""
    if n <= 0:
        return math.inf
    return math.sqrt(coef * math.log(max(total, 1)) / n)


POLICY_NAMES = ("kernelband", "kernelband-v1", "kernelband-v2", "random", "ucb1", "greedy")
