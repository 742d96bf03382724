"""Search policies: KernelBand v1/v2 and baselines behind one interface (see base.py)."""

from .base import (
    POLICY_NAMES,
    Candidate,
    Offered,
    Outcome,
    SearchPolicy,
    improved,
    reward,
)
from .baselines import GreedyPolicy, RandomPolicy, UCB1Policy
from .cluster import FEATURE_SETS, cluster_pool, kmeans, runtime_vector, standardise
from .compat import PHI_DIM, PHI_FEATURES, PRIOR_WEIGHTS, CompatibilityModels, normalise_phi
from .config import BanditConfig
from .kernelband import KernelBandPolicy
from .registry import make_policy

__all__ = [
    "POLICY_NAMES",
    "Candidate",
    "Offered",
    "Outcome",
    "SearchPolicy",
    "improved",
    "make_policy",
    "reward",
    "GreedyPolicy",
    "RandomPolicy",
    "UCB1Policy",
    "FEATURE_SETS",
    "cluster_pool",
    "kmeans",
    "runtime_vector",
    "standardise",
    "PHI_DIM",
    "PHI_FEATURES",
    "PRIOR_WEIGHTS",
    "CompatibilityModels",
    "normalise_phi",
    "BanditConfig",
    "KernelBandPolicy",
]
