"""Standardisation, k-means++ and pool clustering (kernelband/search/cluster.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernelband.model import Variant
from kernelband.search import Candidate, cluster_pool, kmeans_pp, runtime_vector, standardise


def cand(name, t, rv):
    return Candidate(id=name, variant=Variant(source=name, id=name), time_ms=t, runtime_vector=list(rv))


def test_standardise_by_hand():
    z = standardise(np.array([[1.0, 10.0, 0.0], [3.0, 10.0, 4.0], [5.0, 10.0, 8.0]]))
    # column 0: mean 3, population std sqrt(8/3) = 1.632993; column 1 constant -> 0
    s = math.sqrt(8 / 3)
    assert z[:, 0] == pytest.approx([-2 / s, 0.0, 2 / s])
    assert z[:, 1] == pytest.approx([0.0, 0.0, 0.0])
    assert z[:, 2] == pytest.approx([-4 / math.sqrt(32 / 3), 0.0, 4 / math.sqrt(32 / 3)])


def test_standardise_imputes_non_finite_with_the_column_mean():
    z = standardise(np.array([[0.0], [np.nan], [2.0]]))
    assert z[:, 0] == pytest.approx([-1.224745, 0.0, 1.224745], abs=1e-6)
    assert np.isfinite(standardise(np.array([[np.nan], [np.nan]]))).all()


def test_kmeans_pp_finds_obvious_clusters_deterministically():
    blobs = [(0, 0), (0.1, 0), (0, 0.1), (10, 10), (10.1, 10), (10, 10.1), (0, 10), (0.1, 10), (0, 10.1)]
    x = np.array(blobs, dtype=float)
    labels, centres = kmeans_pp(x, 3, seed=0)
    groups = {frozenset(np.flatnonzero(labels == k)) for k in range(3)}
    assert groups == {frozenset({0, 1, 2}), frozenset({3, 4, 5}), frozenset({6, 7, 8})}
    assert sorted(map(tuple, np.round(centres, 3))) == [(0.033, 0.033), (0.033, 10.033), (10.033, 10.033)]
    again, _ = kmeans_pp(x, 3, seed=0)
    assert (again == labels).all()


def test_kmeans_pp_reduces_k_to_distinct_points():
    labels, centres = kmeans_pp(np.array([[1.0], [1.0], [1.0], [5.0]]), 3)
    assert len(set(labels.tolist())) == 2 and centres.shape == (2, 1)


def test_small_pool_each_member_its_own_cluster_ordered_by_speed():
    cl = cluster_pool([cand("slow", 2.0, [1.0]), cand("fast", 1.0, [1.0])], k=3)
    assert [[c.id for c in m] for m in cl.clusters] == [["fast"], ["slow"]]
    assert [r.id for r in cl.representatives] == ["fast", "slow"]
    assert cl.label == {"fast": 0, "slow": 1}


def test_cluster_pool_groups_numbers_and_representatives():
    pool = [
        cand("a1", 5.0, [0, 0]), cand("a2", 6.0, [0.2, 0]), cand("a3", 7.0, [0.1, 0]),
        cand("b1", 1.0, [10, 10]), cand("b2", 2.0, [10, 10.2]),
        cand("c1", 3.0, [0, 10]), cand("c2", 4.0, [0.2, 10]), cand("c3", 3.5, [0.1, 10]),
    ]
    cl = cluster_pool(pool, k=3, seed=0)
    assert [sorted(c.id for c in m) for m in cl.clusters] == [["b1", "b2"], ["c1", "c2", "c3"], ["a1", "a2", "a3"]]
    # the member nearest the centroid represents a cluster; tie (b1, b2) -> the faster
    assert [r.id for r in cl.representatives] == ["b1", "c3", "a3"]
    assert cl.to_dict()[0]["members"] == ["b1", "b2"]


def test_mismatched_runtime_vectors_fall_back_to_log_time():
    pool = [cand("a", 1.0, [1, 2]), cand("b", 1.1, []), cand("c", 100.0, [1]), cand("d", 110.0, [3, 4])]
    cl = cluster_pool(pool, k=2)
    assert [sorted(c.id for c in m) for m in cl.clusters] == [["a", "b"], ["c", "d"]]


def test_runtime_vector_feature_sets():
    v1 = runtime_vector({"time_ms": math.e, "footprint_bytes": 1.0, "arithmetic_intensity": 0.25,
                         "block_elems": 1024, "occupancy": 0.5}, "v1")
    assert v1 == pytest.approx([1.0, 0.0, 0.25, 10.0, 0.5])
    v2 = runtime_vector({"time_ms": 1.0, "registers": 64, "shared_kb": 16, "threads": 0}, "v2")
    assert v2[:3] == pytest.approx([0.0, 64, 16]) and math.isnan(v2[3]) and math.isnan(v2[4])
    with pytest.raises(ValueError):
        runtime_vector({}, "v9")
