"""Clustering of pool members by their runtime vector (DESIGN section 2).

Features. ``Candidate.runtime_vector`` is the profile's vector of the configured
feature set (``kernelband.profile.assemble``: ``FEATURE_SETS``, ``runtime_vector``; an
unknown feature is None there and NaN here). When pool members' vectors are missing or
of different lengths, every member is clustered by ``[log time_ms]`` alone.

Standardisation: each column to zero mean and unit (population) standard deviation
over the pool; a constant column becomes 0; a non-finite entry is replaced by the
mean of the column's finite entries first (0 when there are none).

Clusters: with no more members than K, each member is its own cluster. Otherwise
scikit-learn's KMeans (k-means++ seeding) with k = min(K, number of distinct
standardised vectors), best of ``kmeans_restarts`` runs by inertia, seeded by
``cluster_seed``: the clustering is a pure function of the pool. Clusters are numbered by their fastest member (cluster 0
holds the fastest kernel), so numbers are stable when the partition is.

Representative of a cluster (used by v2's mask): the member nearest its centroid in
the standardised space; ties go to the faster member.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..deps import require
from ..json_types import JsonValue
from ..profile.assemble import FEATURE_SETS, runtime_vector  # noqa: F401 (the one feature table, re-exported)
from .base import Candidate, time_key


def features(pool: list[Candidate]) -> np.ndarray:
    """Raw feature matrix (one row per member): runtime vectors, or [log time] when they do not line up."""
    lengths = {len(c.runtime_vector or ()) for c in pool}
    if len(lengths) == 1 and 0 not in lengths:
        return np.array([[math.nan if x is None else x for x in c.runtime_vector] for c in pool], dtype=float)
    return np.array([[math.log(t) if 0 < (t := time_key(c)) < math.inf else math.nan] for c in pool], dtype=float)


def standardise(x: np.ndarray) -> np.ndarray:
    """Column-wise z-scores; constant columns become 0; non-finite entries take the column's finite mean."""
    x = np.array(x, dtype=float, copy=True)
    if x.ndim != 2:
        raise ValueError(f"standardise expects a 2-d array (rows = members), got shape {x.shape}")
    if x.shape[0] == 0:
        return x
    for j in range(x.shape[1]):
        col = x[:, j]
        bad = ~np.isfinite(col)
        if bad.any():
            good = col[~bad]
            col[bad] = good.mean() if good.size else 0.0
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    z = np.zeros_like(x)
    ok = std > 1e-12 * np.maximum(1.0, np.abs(mean))
    z[:, ok] = (x[:, ok] - mean[ok]) / std[ok]
    return z


def distinct_k(x: np.ndarray, k: int) -> int:
    """``k`` reduced to the number of distinct rows of ``x`` (at least 1)."""
    return max(1, min(k, len({tuple(r) for r in np.round(x, 12)})))


def kmeans(
    x: np.ndarray, k: int, seed: int = 0, restarts: int = 4, max_iter: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's k-means (k-means++ seeding, best of ``restarts`` Lloyd runs by
    inertia). Returns (labels, centres); deterministic given ``seed``.

    ``k`` is reduced to the number of distinct rows (more clusters than distinct points
    would leave duplicate centres). One OpenMP thread: a session shares the CPU with
    Triton's compile workers, and on busy cores sklearn's threads wait on each other
    (tens of ms per call instead of a few; benchmarks/results/sklearn_compare.md).
    scikit-learn is imported here, on the first pool larger than k: importing it costs
    1-2 s, which a session that never clusters should not pay."""
    x = np.asarray(x, dtype=float)
    k = distinct_k(x, k)
    if k == 1:
        return np.zeros(x.shape[0], dtype=int), x.mean(axis=0, keepdims=True)
    sk_cluster = require("sklearn.cluster", "KernelBand's clustering", "pip install scikit-learn")
    model = sk_cluster.KMeans(
        n_clusters=k, init="k-means++", n_init=max(1, restarts), max_iter=max_iter, random_state=seed
    )
    with _one_openmp_thread():
        model.fit(x)
    return np.asarray(model.labels_, dtype=int), np.asarray(model.cluster_centers_, dtype=float)


_controller: Optional[Any] = None


def _one_openmp_thread() -> Any:
    """A context that limits OpenMP to one thread; the controller scans the loaded
    libraries once (a fresh ``threadpool_limits`` per call costs more than the fit)."""
    global _controller
    if _controller is None:
        _controller = require(
            "threadpoolctl", "KernelBand's clustering", "pip install scikit-learn"
        ).ThreadpoolController()
    return _controller.limit(limits=1, user_api="openmp")


@dataclass
class Clustering:
    clusters: list[list[Candidate]]  # members in pool order; cluster 0 holds the fastest member
    representatives: list[Candidate]
    label: dict[str, int]  # candidate id -> cluster index
    centroids: list[list[float]]  # in the standardised space

    def to_dict(self) -> list[JsonValue]:
        return [
            {
                "cluster": i,
                "members": [c.id for c in members],
                "representative": self.representatives[i].id,
                "centroid": [round(v, 6) for v in self.centroids[i]],
            }
            for i, members in enumerate(self.clusters)
        ]


def cluster_pool(
    pool: list[Candidate], k: int = 3, seed: int = 0, restarts: int = 4, max_iter: int = 100
) -> Clustering:
    """Partition the pool (see the module docstring for every rule)."""
    if not pool:
        return Clustering([], [], {}, [])
    z = standardise(features(pool))
    n = len(pool)
    if n <= k:
        labels = np.arange(n)
        centres = z.copy()
    else:
        labels, centres = kmeans(z, k, seed=seed, restarts=restarts, max_iter=max_iter)
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(int(lab), []).append(i)
    # number clusters by their fastest member (ties: pool order)
    order = sorted(groups, key=lambda g: min((time_key(pool[i]), i) for i in groups[g]))
    clusters, reps, cents, label = [], [], [], {}
    for new, g in enumerate(order):
        idx = groups[g]
        centre = centres[g]
        d2 = ((z[idx] - centre) ** 2).sum(axis=1)
        rep = min(range(len(idx)), key=lambda j: (round(float(d2[j]), 12), time_key(pool[idx[j]]), idx[j]))
        clusters.append([pool[i] for i in idx])
        reps.append(pool[idx[rep]])
        cents.append([float(v) for v in centre])
        for i in idx:
            label[pool[i].id] = new
    return Clustering(clusters, reps, label, cents)
