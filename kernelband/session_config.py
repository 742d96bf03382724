"""What a session is asked to do (SessionConfig), within what budget (Budget), and what
it has used so far (Usage)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .json_types import JsonObject
from .verdict import DEFAULT_MIN_SPEEDUP

if TYPE_CHECKING:  # the search modules load when a search runs
    from .search.config import BanditConfig


@dataclass
class Budget:
    """Any combination; None = unlimited. At least one must be set."""

    evaluations: Optional[int] = 16
    seconds: Optional[float] = None
    tokens: Optional[int] = None
    dollars: Optional[float] = None

    def validate(self) -> None:
        if all(v is None for v in (self.evaluations, self.seconds, self.tokens, self.dollars)):
            raise ValueError(
                "a session needs a budget: evaluations, seconds, tokens or dollars above 0 "
                "(0 means no limit, so they cannot all be 0)"
            )
        for name in ("evaluations", "seconds", "tokens", "dollars"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise ValueError(f"budget {name} must be positive, got {v}")


@dataclass
class Usage:
    evaluations: int = 0
    tokens: int = 0
    dollars: float = 0.0
    started: float = field(default_factory=time.monotonic)
    in_flight: int = 0  # counted in evaluations (the budget), not finished yet (several workers)

    @property
    def done(self) -> int:
        return self.evaluations - self.in_flight

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def exhausted(self, b: Budget) -> Optional[str]:
        if b.evaluations is not None and self.evaluations >= b.evaluations:
            return f"evaluation budget reached ({self.evaluations})"
        if b.seconds is not None and self.seconds >= b.seconds:
            return f"time budget reached ({self.seconds:.0f} s)"
        if b.tokens is not None and self.tokens >= b.tokens:
            return f"token budget reached ({self.tokens} of {b.tokens})"
        if b.dollars is not None and self.dollars >= b.dollars:
            return f"dollar budget reached (${self.dollars:.4f} of ${b.dollars:.4f})"
        return None

    def overshoot(self, b: Budget) -> Optional[str]:
        """Budgets are checked before each LLM request, whose size is only known after it:
        the last request can go past a token or dollar budget. Say so rather than hide it."""
        over = []
        if b.tokens is not None and self.tokens > b.tokens:
            over.append(f"{self.tokens} of {b.tokens} tokens")
        if b.dollars is not None and self.dollars > b.dollars:
            over.append(f"${self.dollars:.4f} of ${b.dollars:.4f}")
        if not over:
            return None
        return (
            f"the last LLM request went past the budget ({', '.join(over)}): budgets are checked before "
            "each request and a reply's size is only known after it"
        )


@dataclass
class SessionConfig:
    search: str = "kernelband"
    generator: str = "rules"
    budget: Budget = field(default_factory=Budget)
    seed: int = 0
    bandit: Optional[BanditConfig] = None  # None = defaults for the search
    generator_options: dict[str, Any] = field(default_factory=dict)  # model, base_url, temperature...
    strategies: Optional[list[str]] = None  # restrict to these; None = all
    profile_tier: int = 2  # profile each correct candidate up to this tier (features for the bandit)
    paired_rounds: int = 10
    min_speedup: float = DEFAULT_MIN_SPEEDUP  # "improved" needs the CI's lower bound above this (kernelband/verdict.py)
    cpu_tuning: bool = False  # under the interpreter, let CPU times decide "improved" (and --apply) anyway
    warm_start: bool = True  # seed the pool with the best variant stored by earlier sessions
    allow_weak_harness: bool = False

    def to_dict(self) -> JsonObject:
        d = asdict(self)
        d["bandit"] = (
            asdict(self.bandit) if self.bandit is not None and hasattr(self.bandit, "__dataclass_fields__") else None
        )
        return d
