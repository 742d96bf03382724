"""psi_s: per-strategy logistic "compatibility" models over the hardware profile phi.

phi is the 9-dim vector below (units as Nsight Compute reports them; the profiler
builds it in this order). Each entry is mapped to roughly [-0.5, 0.5] by a fixed
transform (``normalise_phi``) so weights are comparable and the warm-start prior is
readable: a positive weight means "a high value of this feature makes the strategy
more likely to help". A non-finite entry maps to 0 (no evidence either way).

    psi_s(phi) = sigmoid(w_s . [x(phi), 1])

Learning: each (phi, strategy, success) joins the strategy's buffer (the last
``compat_buffer`` = 500 samples), and the weights are refitted as the MAP estimate
under a Gaussian prior centred on the warm-start weights (precision
``compat_prior_strength``): a few Newton steps from the current weights, step size
``compat_lr``. With few samples the prior dominates; with many, the data.
"success" is defined by the caller (the policies: correct and faster than the parent).

When a kernel has no profile (phi None), psi is ``phi_none_psi`` = 0.5: neutral, the
term then shifts every strategy's score equally. We do not guess counters from
runtime estimates.

Why numpy and not scikit-learn's LogisticRegression (which the clustering uses): its
L2 penalty is centred on zero, with no prior mean and no offset term, so it cannot
pull the weights towards ``PRIOR_WEIGHTS``, and the warm start is what the model knows
before a session has samples; it refuses a buffer that holds one class only, the usual
case early in a session. A refit after each sample starts from the current weights
(a few Newton steps, well under a millisecond). With the warm start off, sklearn's fit
(``C = 1 / compat_prior_strength``, no intercept, the bias column in X) is the same
objective: benchmarks/results/sklearn_compare.md finds the same weights (within 6e-4).

Persistence through kernelband/store.py: ``CompatibilityModels.load(store)`` reads
each strategy's stored weights and last samples; ``save(store)`` appends the samples
observed since load/last save and writes the current weights. Weights of another
length than 10 (a changed feature set) are ignored in favour of the prior.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from ..json_types import JsonObject
from ..strategies import STRATEGY_NAMES
from .config import BanditConfig

# (name, unit, transform to ~[0, 1]); x = transform(value) - 0.5
PHI_FEATURES: tuple[tuple[str, str], ...] = (
    ("l2_hit_rate", "% of L2 requests that hit, 0..100"),
    ("dram_throughput", "% of peak DRAM throughput, 0..100"),
    ("sm_throughput", "% of peak SM throughput, 0..100"),
    ("warp_efficiency", "% of active threads per executed warp instruction, 0..100"),
    ("achieved_occupancy", "% of the maximum resident warps, 0..100"),
    ("registers_per_thread", "registers, 0..255"),
    ("shared_bank_conflicts", "extra shared-memory wavefronts per request (0 = conflict-free)"),
    ("sectors_per_request", "global-load sectors per request (4 = 32-bit coalesced, 32 = scattered)"),
    ("tensor_core_utilisation", "% of peak tensor-pipe utilisation, 0..100"),
)
PHI_DIM = len(PHI_FEATURES)
PHI_NAMES = tuple(n for n, _ in PHI_FEATURES)


def _unit(v: float, name: str) -> float:
    if name == "registers_per_thread":
        return v / 255.0
    if name == "shared_bank_conflicts":
        return math.log1p(max(v, 0.0)) / math.log(33.0)
    if name == "sectors_per_request":
        return math.log2(max(v, 1.0)) / 5.0
    return v / 100.0


def normalise_phi(phi: Sequence[Optional[float]]) -> np.ndarray:
    """phi -> model input [x_1..x_9, 1] with x_j in [-0.5, 0.5]."""
    if len(phi) != PHI_DIM:
        raise ValueError(f"phi must have {PHI_DIM} entries ({', '.join(PHI_NAMES)}), got {len(phi)}")
    x = np.empty(PHI_DIM + 1)
    for j, (name, v) in enumerate(zip(PHI_NAMES, phi)):
        if v is None or not math.isfinite(float(v)):
            x[j] = 0.0
        else:
            x[j] = min(max(_unit(float(v), name), 0.0), 1.0) - 0.5
    x[PHI_DIM] = 1.0
    return x


def _w(**kw: float) -> tuple[float, ...]:
    unknown = set(kw) - set(PHI_NAMES) - {"bias"}
    assert not unknown, unknown
    return tuple(kw.get(n, 0.0) for n in PHI_NAMES) + (kw.get("bias", 0.0),)


# Warm start: hardware intuitions, as weights on the centred features (a weight of 4
# moves the logit by 4 across a feature's whole range). Biases are 0: psi = 0.5 for a
# middle-of-the-road kernel.
PRIOR_WEIGHTS: dict[str, tuple[float, ...]] = {
    # SM-bound work with idle SMs or low occupancy, or register pressure, wants re-tiling;
    # tensor cores left unused suggest tiles too small for MMA.
    "tiling": _w(sm_throughput=-2.0, achieved_occupancy=-2.0, registers_per_thread=1.5, tensor_core_utilisation=-1.0),
    # scattered loads (many sectors/request) are what wide, aligned accesses fix; a
    # DRAM bus already near peak leaves little to gain.
    "vectorization": _w(sectors_per_request=4.0, dram_throughput=-2.0, warp_efficiency=-0.5),
    # heavy DRAM traffic with idle SMs: fusing passes removes traffic.
    "fusion": _w(dram_throughput=2.0, sm_throughput=-1.0),
    # latency-bound loops (low SM throughput, low occupancy) gain from more stages.
    "pipeline": _w(sm_throughput=-2.0, achieved_occupancy=-1.0, dram_throughput=0.5),
    # poor L2 reuse with DRAM traffic: grouped / swizzled orderings help.
    "reordering": _w(l2_hit_rate=-4.0, dram_throughput=1.0),
    # poor L2 hit rate, bank conflicts or scattered accesses: cache policy and layout.
    "access_layout": _w(l2_hit_rate=-2.0, shared_bank_conflicts=2.0, sectors_per_request=1.0),
}


def map_logistic_fit(
    x: np.ndarray,
    y: np.ndarray,
    start: np.ndarray,
    prior_mean: np.ndarray,
    prior_strength: float,
    lr: float = 1.0,
    steps: int = 8,
) -> np.ndarray:
    """MAP weights of ``sigmoid(x @ w)`` for labels ``y`` (0/1) under a Gaussian prior
    centred on ``prior_mean`` with precision ``prior_strength``: up to ``steps`` Newton
    steps of size ``lr`` from ``start``, stopping when a step is below 1e-9."""
    w = np.array(start, dtype=float, copy=True)
    lam = max(prior_strength, 1e-6)
    eye = np.eye(w.size)
    for _ in range(max(1, steps)):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -50, 50)))
        grad = x.T @ (p - y) + lam * (w - prior_mean)
        hess = (x * (p * (1 - p))[:, None]).T @ x + lam * eye
        step = np.linalg.solve(hess, grad)
        w -= lr * step
        if float(np.abs(step).max()) < 1e-9:
            break
    return w


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


class CompatibilityModels:
    """One logistic model per strategy, with its sample buffer."""

    def __init__(self, config: Optional[BanditConfig] = None, strategies: Iterable[str] = STRATEGY_NAMES) -> None:
        self.config = config or BanditConfig()
        self._weights: dict[str, np.ndarray] = {}
        self._buffers: dict[str, deque[tuple[list[float], bool, np.ndarray]]] = {}  # (phi, success, model input)
        self._unsaved: list[tuple[str, list[float], bool]] = []
        for s in strategies:
            self._model(s)

    # ------------------------------------------------------------------ model
    def prior(self, strategy: str) -> np.ndarray:
        if not self.config.compat_warm_start:
            return np.zeros(PHI_DIM + 1)
        return np.array(PRIOR_WEIGHTS.get(strategy, (0.0,) * (PHI_DIM + 1)), dtype=float)

    def _model(self, strategy: str) -> np.ndarray:
        if strategy not in self._weights:
            self._weights[strategy] = self.prior(strategy)
            self._buffers[strategy] = deque(maxlen=self.config.compat_buffer)
        return self._weights[strategy]

    @property
    def strategies(self) -> list[str]:
        return list(self._weights)

    def weights(self, strategy: str) -> list[float]:
        return [float(v) for v in self._model(strategy)]

    def set_weights(self, strategy: str, weights: Sequence[float]) -> None:
        """Use these weights for ``strategy`` (as ``load`` does with stored ones)."""
        if len(weights) != PHI_DIM + 1:
            raise ValueError(f"a compatibility model has {PHI_DIM + 1} weights, got {len(weights)}")
        self._model(strategy)
        self._weights[strategy] = np.array(weights, dtype=float)

    def samples(self, strategy: str) -> list[tuple[list[float], bool]]:
        self._model(strategy)
        return [(phi, ok) for phi, ok, _ in self._buffers[strategy]]

    def probability(self, phi: Optional[Sequence[Optional[float]]], strategy: str) -> float:
        """psi_s(phi); ``phi_none_psi`` (0.5) when phi is None."""
        if phi is None:
            return float(self.config.phi_none_psi)
        return _sigmoid(float(self._model(strategy) @ normalise_phi(phi)))

    def observe(self, phi: Sequence[Optional[float]], strategy: str, success: bool) -> None:
        """Add one sample to the strategy's buffer and refit its weights."""
        phi_list = [float(v) if v is not None else math.nan for v in phi]
        self._model(strategy)
        self._buffers[strategy].append((phi_list, bool(success), normalise_phi(phi_list)))
        self._unsaved.append((strategy, phi_list, bool(success)))
        self._fit(strategy)

    def _fit(self, strategy: str) -> None:
        buf = self._buffers[strategy]
        if not buf:
            return
        x = np.stack([row for _, _, row in buf])
        y = np.array([1.0 if ok else 0.0 for _, ok, _ in buf])
        cfg = self.config
        self._weights[strategy] = map_logistic_fit(
            x,
            y,
            self._weights[strategy],
            self.prior(strategy),
            cfg.compat_prior_strength,
            cfg.compat_lr,
            cfg.compat_steps,
        )

    # ------------------------------------------------------------------ persistence
    @classmethod
    def load(
        cls, store: Any, config: Optional[BanditConfig] = None, strategies: Iterable[str] = STRATEGY_NAMES
    ) -> "CompatibilityModels":
        """Weights and the last ``compat_buffer`` samples of each strategy, from a Store."""
        m = cls(config, strategies)
        for s in m.strategies:
            for phi, ok in store.compat_samples(s, limit=m.config.compat_buffer):
                if len(phi) == PHI_DIM:
                    phi = [float(v) if v is not None else math.nan for v in phi]
                    m._buffers[s].append((phi, bool(ok), normalise_phi(phi)))
            w = store.get_compat_weights(s)
            if w is not None and len(w) == PHI_DIM + 1:
                m._weights[s] = np.array(w, dtype=float)
            elif m._buffers[s]:
                m._fit(s)
        return m

    def save(self, store: Any) -> None:
        """Append samples observed since the last load/save, then write every strategy's weights."""
        for s, phi, ok in self._unsaved:
            store.add_compat_sample(s, [v if math.isfinite(v) else None for v in phi], ok)
        self._unsaved.clear()
        for s in self.strategies:
            store.put_compat_weights(s, self.weights(s))

    def state(self) -> JsonObject:
        return {
            s: {"weights": [round(v, 6) for v in self.weights(s)], "samples": len(self._buffers[s])}
            for s in self.strategies
        }
