"""What every generator shares: the context of one request, its result, the protocol.

How a session uses a Generation, by its ``outcome``:
- ``PRODUCED``: evaluate ``variant``.
- ``REJECTED``: something was produced but cannot be run (an LLM reply with no code
  block, code that does not parse, a module that fails ``screen_variant``...). Do not
  evaluate it; record one evaluation with status ``rejected`` and ``message``
  (``variant`` carries the spliced module when there was one, for the record; it is
  None when not even a module could be built). It counts against the evaluation
  budget and as a failure for the strategy.
- ``NOTHING``: the generator has nothing (left) to offer for this request.
- ``FAILED``: the generator itself could not work (endpoint unreachable after its
  retries, bad key): not the kernel's fault, but a session should stop asking after a
  few of these.
``tokens`` and ``cost_usd`` are spent whatever the outcome and count against the budget.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Protocol, runtime_checkable

from ..model import Variant
from ..profile.schema import DeviceFacts, Profile

# Seconds one LLM request may take (the CLI's --llm-timeout; the openai generator's default). A kernel
# rewrite of up to 4096 tokens from a hosted model takes 10-60 s; slow local or reasoning
# models need it raised. A hanging endpoint costs two of these (one retry), then the search ends.
from ..options import DEFAULT_LLM_TIMEOUT_S  # noqa: E402,F401 - one owner: kernelband/options.py


@dataclass
class GenContext:
    kernel: str
    harness: str
    module_path: str
    profile: Optional[Profile] = None  # the parent's profile (diagnosis, tiers)
    device: DeviceFacts = field(default_factory=DeviceFacts)
    rng: random.Random = field(default_factory=lambda: random.Random(0))


class GenerationOutcome(Enum):
    """What one request to a generator gave (the module docstring says what a session does)."""

    PRODUCED = "produced"
    REJECTED = "rejected"
    NOTHING = "nothing"
    FAILED = "failed"


@dataclass
class Generation:
    outcome: GenerationOutcome
    variant: Optional[Variant] = None  # PRODUCED: always; REJECTED: the module, where one was built
    message: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 0  # requests made to a remote model (retries included); 0 for offline generators

    def __post_init__(self) -> None:
        if self.outcome is GenerationOutcome.PRODUCED and self.variant is None:
            raise ValueError("a produced Generation carries its variant")


@runtime_checkable
class Generator(Protocol):
    name: str

    def offered(self, parent: Variant, kernel: str) -> list[str]:
        """Strategies this generator can (still) apply to ``parent``."""
        ...

    def generate(self, parent: Variant, strategy: str, ctx: GenContext) -> Generation: ...

    def enumerate_space(self, original: Variant, kernel: str) -> list[Variant]:
        """Every point of the offline tunable space (rules only; others return [])."""
        ...
