"""Every constant of the KernelBand search in one object (DESIGN section 2).

``BanditConfig()`` is KernelBand v1; ``BanditConfig.v2()`` is v2. The v1/v2 choice is
``variant``; the choices that follow from it (reward, feature set, masking) default to
``None`` = "follow ``variant``" and can be set on their own for ablations, e.g.
``BanditConfig(variant="v2", reward_mode="v1")``. ``resolved()`` fills them in.

| field | v1 | v2 | meaning |
| --- | --- | --- | --- |
| n_clusters | 3 | 3 | K of k-means++ |
| alpha | 0.5 | (unused) | weight of the compatibility term psi in the v1 score |
| v1_explore | 2.0 | (unused) | the 2 in sqrt(2 ln t / n) |
| c | (unused) | 2.0 | v2 exploration: c * sqrt(ln t / n) |
| ucb1_explore | 2.0 | 2.0 | the 2 in the ucb1 baseline's sqrt(2 ln t / n) |
| saturation_threshold | | 0.75 | v2 masks a strategy whose resource is >= this fraction of peak |
| reward_mode | "v1" | "v2" | v1: 1 - Tc/Tp, -1 on failure; v2: max(0, 1 - Tc/Tp), 0 on failure |
| feature_set | "v1" | "v2" | runtime vector used for clustering (see cluster.FEATURE_SETS) |
| masking | False | True | v2's saturation mask |

``variant="kb"`` is the default ``kernelband`` policy (our departures from the paper,
each backed by the landscape replays in benchmarks/README.md, "The default policy"):
- one look per strategy, not per cluster (``kb_patience`` 0, ``kb_fresh`` "best-first"):
  while a strategy has never been pulled this session and the fastest member offers it,
  it is pulled there, the strategy the prior ranks highest first;
- two-level shrinkage (``kb_pooled``): an arm's mean is shrunk, with ``prior_strength``
  pseudo-pulls, toward its strategy's mean this session, itself shrunk toward the
  cross-kernel ``strategy_prior`` (the shipped ``priors.json`` when None); so an arm of
  a new cluster starts at what its strategy did here, and nothing scores +inf;
- the gap term (``kb_gap``): arms learn the gain over their parent and score the new best
  it would give from their target, 1 - T_target / T_best * (1 - gain), not clipped at 0
  (``kb_gap_signed``), so a cluster far behind the best scores how far behind it would
  stay and is tried only through exploration;
- depletion (``kb_deplete`` 0.5): a strategy's gain estimate halves with each of its pulls
  since the pool's fastest time last improved (a new best resets every count), so a
  strategy that stopped paying on the best member gives way to the others;
- exploration ``kb_explore * sqrt(ln(t+1) / (n + prior_strength))`` and a hardware term
  ``hw_weight * (headroom - 0.5)`` where headroom = 1 - saturation of the strategy's
  resource on the target (tier-1/2 estimates; 0 when unknown).
Setting ``kb_gap_signed=False, kb_deplete=1.0`` turns the last two parts off (the gap
clipped at 0, no depletion); ``kb_patience=-1, kb_pooled=False, kb_gap=False,
kb_fresh="score", prior_strength=0`` on top of that gives plain per-cluster warm-up
with the reward relative to the best (``reward_mode`` "best"). Clustering uses the v1
feature vector.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from ..decode import decode_fields
from ..json_types import JsonObject

VARIANTS = ("v1", "v2", "kb")
REWARD_MODES = ("v1", "v2", "best")


@dataclass(frozen=True)
class BanditConfig:
    variant: str = "v1"  # scoring rule: "v1" (UCB1 + alpha*psi) or "v2" (masked UCB)
    # clustering (cluster.py)
    n_clusters: int = 3
    cluster_seed: int = 0  # k-means++ seeding: clusters are a pure function of the pool
    kmeans_restarts: int = 4  # best of N k-means++ runs (lowest inertia)
    kmeans_max_iter: int = 100
    # scores (kernelband.py)
    alpha: float = 0.5
    v1_explore: float = 2.0
    c: float = 2.0
    ucb1_explore: float = 2.0  # the flat UCB1 baseline's coefficient (baselines.py), separate for ablations
    saturation_threshold: float = 0.75
    masking: Optional[bool] = None  # None: on for v2, off for v1
    reward_mode: Optional[str] = None  # None: same as variant
    feature_set: Optional[str] = None  # None: same as variant
    warmup: bool = True  # pull every offered (cluster, strategy) arm once before UCB (v1, v2)
    # the "kb" variant (the default kernelband policy)
    prior_strength: float = (
        4.0  # kb: pseudo-pulls at the strategy prior; 0: none, unpulled arms score +inf and are warmed up per cluster
    )
    strategy_prior: Optional[dict[str, float]] = None  # None: the shipped priors.json
    kb_explore: float = 0.05
    kb_patience: int = 0  # kb: after this many pulls without a new best, each strategy never pulled gets one look (-1: never; 0: from the start)
    hw_weight: float = 0.05
    kb_pooled: bool = True  # kb: an arm shrinks toward its strategy's mean this session (itself shrunk toward the prior), not the prior alone
    kb_gap: bool = True  # kb: arms learn the gain over their parent and score the new best it would give from their target: 1 - T_target/T_best * (1 - gain), clipped at 0 unless kb_gap_signed
    kb_gap_signed: bool = (
        True  # kb_gap not clipped at 0: a target slower than the best scores how far behind it would stay
    )
    kb_deplete: float = (
        0.5  # kb: an arm's gain estimate times kb_deplete ** (pulls of its strategy since the last new best); 1: off
    )
    kb_fresh: str = "best-first"  # kb: which fresh (never-pulled) strategy goes first: "score" (the arm scores) or "best-first" (highest prior, on the fastest member)
    # compatibility model (compat.py)
    compat_buffer: int = 500  # samples kept per strategy
    compat_warm_start: bool = True  # start from the documented prior weights (else zeros)
    compat_prior_strength: float = 4.0  # L2 pull towards the warm-start weights (MAP prior precision)
    compat_lr: float = 1.0  # step size of each (Newton) update; 1.0 = full step
    compat_steps: int = 8  # Newton iterations per observation (stops early on convergence)
    phi_none_psi: float = 0.5  # psi when a kernel has no hardware profile (neutral)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, not {self.variant!r}")
        if self.reward_mode is not None and self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES} or None, not {self.reward_mode!r}")
        if self.feature_set is not None and self.feature_set not in ("v1", "v2"):
            raise ValueError(f"feature_set must be one of ('v1', 'v2') or None, not {self.feature_set!r}")
        if self.kb_fresh not in ("score", "best-first"):
            raise ValueError(f"kb_fresh must be 'score' or 'best-first', not {self.kb_fresh!r}")
        if self.n_clusters < 1:
            raise ValueError("n_clusters must be >= 1")
        if self.compat_buffer < 1:
            raise ValueError("compat_buffer must be >= 1")

    @classmethod
    def v2(cls, **overrides: Any) -> "BanditConfig":
        return cls(variant="v2", **overrides)

    @classmethod
    def kb(cls, **overrides: Any) -> "BanditConfig":
        return cls(variant="kb", **overrides)

    def with_variant(self, variant: str) -> "BanditConfig":
        return dataclasses.replace(self, variant=variant)

    def resolved(self) -> "BanditConfig":
        """A copy with every ``None`` ("follow variant") choice filled in."""
        return dataclasses.replace(
            self,
            masking=self.masking if self.masking is not None else self.variant == "v2",
            reward_mode=self.reward_mode or ("best" if self.variant == "kb" else self.variant),
            feature_set=self.feature_set or ("v2" if self.variant == "v2" else "v1"),
        )

    def to_dict(self) -> JsonObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: JsonObject) -> "BanditConfig":
        """A config from its ``to_dict``: ValueError (``MalformedMessage``) for an unknown
        field or a value of another type than its field's."""
        return decode_fields(cls, d, "BanditConfig")
