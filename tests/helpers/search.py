"""Small builders for the search-policy tests."""
from __future__ import annotations

import random

from kernelband.model import Variant
from kernelband.search import Candidate, Outcome


def cand(name: str, t: float, rv=None, sat=None, phi=None) -> Candidate:
    return Candidate(id=name, variant=Variant(source=f"# {name}\n", id=name), time_ms=t,
                     runtime_vector=list(rv or []), saturation=dict(sat or {}), phi=phi)


def offer(table):
    return lambda c: list(table.get(c.id, []))


def pull(policy, pool, offered, child_ms, rng=None):
    """select, then report a child of ``child_ms`` (None = failed); returns (candidate id, strategy)."""
    c, s = policy.select(pool, offered, rng or random.Random(0))
    ok = child_ms is not None
    policy.update(c, s, Outcome(ok, c.time_ms, child_ms), None)
    return c.id, s


def arm(state, strategy, cluster=0):
    return next(a for a in state["last"]["arms"] if a["strategy"] == strategy and a["cluster"] == cluster)
