"""A session's pool: the correct candidates found so far (the original first), their
profiles (the features the bandit clusters on, and what the generator's prompt shows),
and the strategy path to each. Tier 3 adds hardware counters to a candidate's profile;
a lasting failure to collect them turns them off for the rest of the session."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from .model import Task, Variant
from .profile.schema import Profile
from .session_config import SessionConfig
from .store import Store

if TYPE_CHECKING:  # the search modules load when the first candidate is made (candidate() imports them)
    from .search.base import Candidate


@dataclass
class Platform:
    """What the session runs on, known once its primary worker has started."""

    gpu: str = ""
    triton_version: str = ""


class CandidatePool:
    def __init__(
        self, task: Task, config: SessionConfig, store: Optional[Store], platform: Platform, warn: Callable[[str], None]
    ) -> None:
        self.task = task
        self.config = config
        self.store = store
        self.platform = platform
        self.warn = warn  # a Result warning and a log event, once per note
        self.members: list[Candidate] = []  # members[0] is the original
        self.by_id: dict[str, Candidate] = {}
        self.profiles: dict[str, Profile] = {}  # candidate id -> its profile
        self._counters_off: Optional[str] = None  # why tier 3 was given up for this session

    @property
    def original(self) -> Candidate:
        return self.members[0]

    def add(self, cand: Candidate) -> None:
        self.members.append(cand)
        self.by_id[cand.id] = cand

    def best(self) -> Candidate:
        return min(self.members, key=lambda c: c.time_ms)

    def strategy_path(self, cand: Candidate) -> list[str]:
        path: list[str] = []
        step: Optional[Candidate] = cand
        while step is not None and step.parent_id is not None:
            path.append(step.variant.strategy or "?")
            step = self.by_id.get(step.parent_id)
        return list(reversed(path))

    def candidate(
        self, variant: Variant, time_ms: float, profile: Optional[Profile], parent: Optional[Candidate]
    ) -> Candidate:
        """A pool member for a correct variant (not added): its features from its profile."""
        from .search.base import Candidate

        if profile is not None and self.config.profile_tier >= 3:
            profile = self._with_counters(variant, profile)
        prof = profile or Profile()
        if profile is not None:
            self.profiles[variant.id] = profile  # the generator's prompt shows the parent's profile
        return Candidate(
            id=variant.id,
            variant=variant,
            time_ms=time_ms,
            phi=prof.phi,
            runtime_vector=prof.runtime_vectors.get(self.feature_set()) or [math.log(max(time_ms, 1e-9))],
            saturation={k: v for k, v in prof.saturation.items() if v is not None},
            parent_id=parent.id if parent is not None else None,
            depth=(parent.depth + 1) if parent is not None else 0,
        )

    def feature_set(self) -> str:
        """The clustering runtime vector the policy's config resolves to: feature_set when
        set, else the one of the search's variant (make_policy picks it from the name)."""
        from .search.config import BanditConfig

        variant = "v2" if self.config.search == "kernelband-v2" else "v1"
        feature_set = (self.config.bandit or BanditConfig()).with_variant(variant).resolved().feature_set
        assert feature_set is not None  # resolved() always names one
        return feature_set

    def _with_counters(self, variant: Variant, profile: Profile) -> Profile:
        """Tier 3 runs Nsight Compute around a fresh process, outside the worker; it
        degrades to tiers 1-2 with a note when ncu or counter access is missing."""
        from dataclasses import replace

        from .profile.assemble import attach_counters
        from .worker.counters import add_counters, lasting_counter_failure

        if self._counters_off:  # ncu cannot work here: do not re-run it for every candidate
            return attach_counters(profile, {"ok": False, "reason": self._counters_off})
        try:
            profile = add_counters(
                profile,
                replace(self.task, source=variant.source),
                store=self.store,
                gpu=self.platform.gpu,
                triton_version=self.platform.triton_version,
            )
        except Exception as e:  # noqa: BLE001 - counters are optional, never a session failure
            self.warn(f"counters unavailable: {type(e).__name__}: {e}")
            return profile
        reason = lasting_counter_failure(profile)
        if reason:
            self._counters_off = reason
            self.warn(f"counters unavailable: {reason}; carrying on with tiers 1-2 for the rest of the session")
        return profile
