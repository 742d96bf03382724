"""A cost model over config moves: predicted log(T_parent / T_child) of going from one
config to another, as the difference of a potential over configs (log tile size,
warps, elements per warp, stages, group, their squares, and interactions with
``tl.dot``). A ridge regression fitted by ``benchmarks/landscape_costmodel.py`` on the
measured landscapes (every config of each suite kernel timed on the GPU) and shipped
as ``costmodel.json`` beside this file. It ranks proposals within a strategy; it is
never used to judge a variant (only measurements do that).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

DEFAULT_PATH = Path(__file__).with_name("costmodel.json")
FEATURES: tuple[str, ...] = (
    "tile",
    "tile_sq",
    "warps",
    "warps_sq",
    "per_warp",
    "per_warp_sq",
    "stages",
    "stages_sq",
    "group",
    "tile_dot",
    "warps_dot",
    "stages_dot",
    "per_warp_dot",
)
Config = Iterable[tuple[str, int]]  # (knob kind, value) for every knob of a kernel


@dataclass(frozen=True)
class KernelTraits:
    has_dot: bool = False
    has_loop: bool = False


def potential(config: Config, traits: KernelTraits) -> list[float]:
    """Features of one config. A move's features are potential(child) - potential(parent),
    so what is learned is a shape over configs (with an optimum, through the squares),
    and a kernel's unknown offset cancels."""
    tile = 0.0
    warps, stages, group = 2.0, 3.0, 0.0  # Triton's defaults (log2 4 warps, 3 stages)
    for kind, v in config:
        if v <= 0:
            continue
        if kind == "block":
            tile += math.log2(v)
        elif kind == "num_warps":
            warps = math.log2(v)
        elif kind == "num_stages":
            stages = float(v)
        elif kind == "group":
            group = math.log2(v)
    tile_c, per_warp = tile - 8.0, tile - warps - 6.0  # centred: 256 elements, 64 per warp
    dot = 1.0 if traits.has_dot else 0.0
    return [
        tile_c,
        tile_c**2,
        warps,
        warps**2,
        per_warp,
        per_warp**2,
        stages,
        stages**2,
        group,
        tile_c * dot,
        warps * dot,
        stages * dot,
        per_warp * dot,
    ]


def features(parent: Config, child: Config, traits: KernelTraits) -> list[float]:
    a, b = potential(list(parent), traits), potential(list(child), traits)
    return [y - x for x, y in zip(a, b)]


@dataclass(frozen=True)
class CostModel:
    weights: tuple[float, ...]

    def predict(self, parent: Config, child: Config, traits: KernelTraits) -> float:
        """Predicted log(T_parent / T_child) (> 0: the child is expected faster)."""
        return sum(w * x for w, x in zip(self.weights, features(parent, child, traits)))

    def to_json(self, **meta: object) -> str:
        return json.dumps({"features": list(FEATURES), "weights": list(self.weights), **meta}, indent=1) + "\n"

    @classmethod
    def load(cls, path: Optional[Path] = None) -> Optional["CostModel"]:
        """The shipped model; None when it is missing or was fitted on other features."""
        try:
            d = json.loads((path or DEFAULT_PATH).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if tuple(d.get("features", ())) != FEATURES:
            return None
        return cls(tuple(float(x) for x in d["weights"]))
