"""Standardisation, k-means (scikit-learn) and pool clustering (kernelband/search/cluster.py)."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from helpers.blocked import env_without
from helpers.paths import REPO
from kernelband.model import Variant
from kernelband.search import Candidate, cluster_pool, kmeans, runtime_vector, standardise


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


def test_kmeans_finds_obvious_clusters_deterministically():
    blobs = [(0, 0), (0.1, 0), (0, 0.1), (10, 10), (10.1, 10), (10, 10.1), (0, 10), (0.1, 10), (0, 10.1)]
    x = np.array(blobs, dtype=float)
    labels, centres = kmeans(x, 3, seed=0)
    groups = {frozenset(np.flatnonzero(labels == k)) for k in range(3)}
    assert groups == {frozenset({0, 1, 2}), frozenset({3, 4, 5}), frozenset({6, 7, 8})}
    assert sorted(map(tuple, np.round(centres, 3))) == [(0.033, 0.033), (0.033, 10.033), (10.033, 10.033)]
    again, _ = kmeans(x, 3, seed=0)
    assert (again == labels).all()


def test_kmeans_reduces_k_to_distinct_points():
    labels, centres = kmeans(np.array([[1.0], [1.0], [1.0], [5.0]]), 3)
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
    assert v2[:3] == pytest.approx([0.0, 64, 16]) and v2[3:] == [None, None]  # unknown: None, never NaN
    with pytest.raises(ValueError):
        runtime_vector({}, "v9")


def test_one_feature_table_and_one_rule_for_unknown_features():
    """The profile names the features once; an unknown one (None in the profile, null on
    the wire) takes its column's mean when the pool is clustered, not a made-up 0."""
    from kernelband.profile import assemble
    from kernelband.search import FEATURE_SETS, cluster

    assert FEATURE_SETS is assemble.FEATURE_SETS and runtime_vector is assemble.runtime_vector
    pool = [cand("a", 1.0, [0.0, 1.0]), cand("b", 2.0, [None, 3.0]), cand("c", 3.0, [4.0, 5.0])]
    x = cluster.features(pool)
    assert math.isnan(x[1, 0])
    assert standardise(x)[1, 0] == pytest.approx(0.0)  # imputed with the mean of 0 and 4


def test_kmeans_is_scikit_learns_kmeans():
    """The labels and centres are sklearn's for the same k, seeding, restarts and seed."""
    from sklearn.cluster import KMeans

    x = np.random.default_rng(3).normal(size=(30, 4))
    labels, centres = kmeans(x, 3, seed=7, restarts=4, max_iter=100)
    ref = KMeans(n_clusters=3, init="k-means++", n_init=4, max_iter=100, random_state=7).fit(x)
    assert (labels == ref.labels_).all()
    assert centres == pytest.approx(ref.cluster_centers_)
    again, _ = kmeans(x, 3, seed=7, restarts=4, max_iter=100)
    assert (again == labels).all()


def test_kmeans_fits_on_one_openmp_thread(monkeypatch):
    """On busy cores sklearn's OpenMP threads wait on each other (tens of ms a call):
    the fit runs with OpenMP limited to one thread, and the limit ends with the fit."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_info

    def openmp_threads() -> list[int]:
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp"]

    seen: list[list[int]] = []
    real_fit = KMeans.fit

    def spying_fit(self, *args, **kwargs):
        seen.append(openmp_threads())
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(KMeans, "fit", spying_fit)
    kmeans(np.random.default_rng(0).normal(size=(12, 2)), 3)
    assert seen and seen[0] and set(seen[0]) == {1}, seen
    # the machine may have one core: the limit is only visible when OpenMP had more
    if max(openmp_threads(), default=1) > 1:
        assert openmp_threads() != seen[0]


def test_importing_the_search_does_not_import_scikit_learn():
    """sklearn's import takes 1-2 s: a session pays it when it first clusters a pool
    larger than K, not when the policies are imported or a small pool is clustered."""
    code = (
        "import sys\n"
        "from kernelband.search import cluster_pool, make_policy, BanditConfig, Candidate\n"
        "from kernelband.model import Variant\n"
        "make_policy('kernelband', BanditConfig(), None)\n"
        "pool = [Candidate(id=n, variant=Variant(source=n, id=n), time_ms=t, runtime_vector=[t]) for n, t in (('a', 1.0), ('b', 2.0))]\n"
        "cluster_pool(pool, k=3)\n"
        "print('sklearn' in sys.modules)\n"
        "cluster_pool(pool + [Candidate(id=n, variant=Variant(source=n, id=n), time_ms=t, runtime_vector=[t]) for n, t in (('c', 3.0), ('d', 9.0))], k=3)\n"
        "print('sklearn' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_clustering_without_scikit_learn_is_one_line(tmp_path):
    code = ("from kernelband.search import kmeans\nimport numpy as np\n"
            "kmeans(np.arange(8.0).reshape(4, 2), 2)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=env_without(tmp_path, "sklearn"))
    assert out.returncode == 1
    assert "MissingDependency: KernelBand's clustering needs the sklearn.cluster package" in out.stderr
    assert "pip install scikit-learn" in out.stderr
