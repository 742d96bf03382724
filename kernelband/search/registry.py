"""The policy registry: a search name -> a policy object.

Kept out of ``base.py`` because the policies import ``base`` (the interface); the
registry imports them, so nothing imports in a circle.
"""

from __future__ import annotations

from typing import Optional

from .base import POLICY_NAMES, SearchPolicy
from .baselines import GreedyPolicy, RandomPolicy, UCB1Policy
from .compat import CompatibilityModels
from .config import BanditConfig
from .kernelband import KernelBandPolicy


def make_policy(
    name: str, config: Optional[BanditConfig] = None, compat: Optional[CompatibilityModels] = None
) -> SearchPolicy:
    """``"kernelband"`` (the "kb" variant, our default), ``"kernelband-v1"`` and
    ``"kernelband-v2"`` (the paper's), ``"random"``, ``"ucb1"``, ``"greedy"``.

    The name picks the KernelBand variant: ``config`` supplies the constants and its
    ``variant`` is set from the name (``None`` = ``BanditConfig()``). Baselines use the
    config for their reward mode (ucb1 also for ``ucb1_explore``). ``compat`` is used by v1's score (a fresh
    warm-started model when ``None``); any KernelBand policy given one also feeds it.
    """
    cfg = config if config is not None else BanditConfig()
    key = name.strip().lower()
    if key == "kernelband":
        return KernelBandPolicy(cfg.with_variant("kb"), compat)
    if key == "kernelband-v1":
        return KernelBandPolicy(cfg.with_variant("v1"), compat)
    if key == "kernelband-v2":
        return KernelBandPolicy(cfg.with_variant("v2"), compat)
    if key == "random":
        return RandomPolicy(cfg)
    if key == "ucb1":
        return UCB1Policy(cfg)
    if key == "greedy":
        return GreedyPolicy(cfg)
    raise ValueError(f"unknown search policy {name!r}; known: {', '.join(POLICY_NAMES)}")
