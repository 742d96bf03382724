#!/usr/bin/env python3
"""scikit-learn vs a numpy k-means++ and our logistic compatibility models.

    PYTHONPATH=.:server python benchmarks/sklearn_compare.py [--seeds 10] [--calls 50] [--no-replay]
        [--tables benchmarks/results/landscapes/tables] [--out benchmarks/results]

Writes ``sklearn_compare.json`` and ``sklearn_compare.md`` under ``--out``. Everything
runs on the CPU from committed data (the measured landscape tables); no GPU.

1. Clustering. Two kinds of pools, both built from the committed tables:
   - *replay pools*: the exact inputs of ``kmeans_pp`` (standardised runtime vectors,
     k, seed) recorded while the KernelBand policy is replayed on every table
     (``replay_landscapes.run_one``). A replay has no profile, so these vectors are
     [log time] (1-d);
   - *table pools*: random subsets (sizes 4..40 of one kernel's correct configs, 64 from
     the union of all kernels) with ``runtime_vector(values, "v1")`` built from what a
     table knows (time, BLOCK_* product) and ``"v2"`` (time, num_warps*32 threads); the
     other entries are unknown (NaN, imputed, hence constant columns: 2 effective dims).
   Ours: ``kmeans_pp(z, k, seed, restarts=4, max_iter=100)`` below, the numpy k-means++
   the policy used before it adopted sklearn's KMeans (``cluster.kmeans``). sklearn:
   ``KMeans(n_clusters=k, init="k-means++", n_init=4, max_iter=100, random_state=seed)``
   with the same k (reduced to the number of distinct rows, as ours does), and a cheap
   variant ``n_init=1, algorithm="lloyd"``. Reported: inertia ratio ours/sklearn,
   adjusted Rand index of the two labelings, wall time per call (``perf_counter``,
   >= ``--calls`` calls per pool size after one warm-up call), sklearn's import time.
2. Compatibility models. Samples from the tables: every measured config whose recipe
   minus its last step is also measured is one pull (parent -> child); its strategy is
   the one owning the last step's rule family (``kernelband.strategies``), its label
   "the child is correct and > 2% faster than the parent". A replay has no hardware
   profile (phi), so the 9 inputs are proxies from the parent's config (documented in
   ``proxy_features``), each mapped to [-0.5, 0.5] like ``normalise_phi``, plus a bias 1.
   Ours: ``compat.map_logistic_fit`` (MAP logistic, Gaussian prior of precision
   ``compat_prior_strength`` = 4 centred on the warm-start weights, up to 8 Newton
   steps); the warm start is off here (its weights name Nsight counters, not these
   proxies), so the prior is centred on 0. sklearn: ``LogisticRegression(C=1/4,
   fit_intercept=False)`` on the same rows (bias column included, so it is penalised as
   ours is): the same objective, sum of log-losses + (lambda/2)|w|^2 with C = 1/lambda.
   Leave one kernel out, per strategy; log-loss, accuracy, AUC; time per fit (buffers of
   50/200/500 rows) and per prediction (``probability(phi)`` vs ``normalise_phi`` +
   ``predict_proba``).
3. Search effect (unless ``--no-replay``): the KernelBand policy replayed on every table
   (``--seeds`` seeds, cost model fitted without the replayed kernel, like
   replay_landscapes.py's default) with ``cluster.kmeans`` replaced by the numpy
   ``kmeans_pp`` ("ours") and by plain sklearn KMeans ("sklearn"); geomean best speedup
   at 8/16/32 evaluations, paired per seed.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from common import ROOT

import replay_landscapes as rl  # noqa: E402

from kernelband.search import cluster as cluster_mod  # noqa: E402
from kernelband.search.cluster import distinct_k, runtime_vector, standardise  # noqa: E402
from kernelband.search.compat import PHI_DIM, CompatibilityModels, map_logistic_fit, normalise_phi  # noqa: E402
from kernelband.search.config import BanditConfig  # noqa: E402
from kernelband.strategies import STRATEGIES  # noqa: E402

_t = time.perf_counter()
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import adjusted_rand_score, log_loss, roc_auc_score  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402  (a dependency of scikit-learn)

SKLEARN_IMPORT_S = time.perf_counter() - _t
import sklearn  # noqa: E402

CFG = BanditConfig()
K, RESTARTS, MAX_ITER = CFG.n_clusters, CFG.kmeans_restarts, CFG.kmeans_max_iter
LAMBDA = CFG.compat_prior_strength
GAIN = 1.02  # a pull "gains" when the child is > 2% faster than its parent
BUDGETS = (8, 16, 32)
SIZES = (4, 8, 16, 32, 40, 64)


# --------------------------------------------------------------------------- k-means variants


def _sqdist(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)


def _seed_centres(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: first centre uniform, then each with probability ~ D(x)^2."""
    n = x.shape[0]
    idx = [int(rng.integers(n))]
    d2 = _sqdist(x, x[idx]).min(axis=1)
    while len(idx) < k:
        total = d2.sum()
        if total <= 0:  # fewer distinct points than k (callers prevent this)
            break
        nxt = int(rng.choice(n, p=d2 / total))
        idx.append(nxt)
        d2 = np.minimum(d2, _sqdist(x, x[[nxt]])[:, 0])
    return x[idx].copy()


def _lloyd(x: np.ndarray, centres: np.ndarray, max_iter: int) -> tuple[np.ndarray, np.ndarray, float]:
    labels = np.full(x.shape[0], -1)
    k = centres.shape[0]
    for _ in range(max_iter):
        d2 = _sqdist(x, centres)
        new = d2.argmin(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = labels == j
            if members.any():
                centres[j] = x[members].mean(axis=0)
            else:  # empty cluster: restart it at the point worst served by its centre
                far = int(d2[np.arange(x.shape[0]), labels].argmax())
                centres[j] = x[far]
    d2 = _sqdist(x, centres)
    labels = d2.argmin(axis=1)
    inertia = float(d2[np.arange(x.shape[0]), labels].sum())
    return labels, centres, inertia


def kmeans_pp(
    x: np.ndarray, k: int, seed: int = 0, restarts: int = 4, max_iter: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """k-means with k-means++ seeding; best of ``restarts`` runs. Returns (labels, centres).

    ``k`` is reduced to the number of distinct rows. Deterministic given ``seed``."""
    x = np.asarray(x, dtype=float)
    k = distinct_k(x, k)
    if k == 1:  # one cluster: nothing to seed
        return cluster_mod.kmeans(x, 1)
    rng = np.random.default_rng(seed)
    best: Optional[tuple[np.ndarray, np.ndarray, float]] = None
    for _ in range(max(1, restarts)):
        run = _lloyd(x, _seed_centres(x, k, rng), max_iter)
        if best is None or run[2] < best[2] - 1e-12:
            best = run
    assert best is not None
    return best[0], best[1]


def sk_kmeans(x: np.ndarray, k: int, seed: int = 0, n_init: int = RESTARTS,
              max_iter: int = MAX_ITER, algorithm: str = "lloyd") -> tuple[np.ndarray, np.ndarray, float]:
    """sklearn's KMeans with kmeans_pp's k rule. Returns (labels, centres, inertia)."""
    k = distinct_k(x, k)
    if k == 1:
        c = x.mean(axis=0, keepdims=True)
        return np.zeros(len(x), dtype=int), c, float(((x - c) ** 2).sum())
    km = KMeans(n_clusters=k, init="k-means++", n_init=n_init, max_iter=max_iter, random_state=seed,
                algorithm=algorithm).fit(x)
    return km.labels_, km.cluster_centers_, float(km.inertia_)


def inertia(x: np.ndarray, labels: np.ndarray, centres: np.ndarray) -> float:
    return float(((x - centres[labels]) ** 2).sum())


def ours(x: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    labels, centres = kmeans_pp(x, k, seed=seed, restarts=RESTARTS, max_iter=MAX_ITER)
    return labels, centres, inertia(x, labels, centres)


def call_times(fn: Callable[[], Any], calls: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def ms_stats(ts: list[float]) -> dict[str, float]:
    a = np.asarray(ts) * 1e3
    return {"median_ms": float(np.median(a)), "p95_ms": float(np.percentile(a, 95)), "calls": len(ts)}


# --------------------------------------------------------------------------- pools


def table_pools(tables: list[dict[str, Any]], draws: int) -> list[dict[str, Any]]:
    """Random subsets of measured configs as standardised runtime vectors (v1 and v2)."""
    def values(r: dict[str, Any]) -> dict[str, Optional[float]]:
        blocks = [v for key, v in r["knobs"].items() if key.startswith("block:")]
        warps = [v for key, v in r["knobs"].items() if key.startswith("num_warps:")]
        return {"time_ms": r["ms"], "block_elems": float(np.prod(blocks)) if blocks else None,
                "threads": 32.0 * warps[0] if warps else None}

    rows = {d["module"]: [values(r) for r in d["configs"] if r["correct"] and r["ms"]] for d in tables}
    union = [v for vs in rows.values() for v in vs]
    pools = []
    for fs in ("v1", "v2"):
        for size in SIZES:
            sources = [(m, vs) for m, vs in rows.items() if len(vs) >= size] if size <= 40 else [("mixed", union)]
            for module, vs in sources:
                for draw in range(draws):
                    rng = np.random.default_rng(1000 * size + draw)
                    pick = rng.choice(len(vs), size=size, replace=False)
                    z = standardise(np.array([runtime_vector(vs[i], fs) for i in pick]))
                    pools.append({"kind": f"table {fs}", "module": module, "n": size, "seed": draw, "z": z})
    return pools


# --------------------------------------------------------------------------- replay (recorded pools, search effect)


def replay(tables: list[dict[str, Any]], tables_dir: Path, seeds: list[int]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Replay KernelBand on every table with the numpy kmeans_pp (recording its inputs)
    and with sklearn's KMeans. Returns (recorded pools, speedups[arm][module] = per-seed
    best speedup at each budget, plus wall seconds)."""
    recorded: list[dict[str, Any]] = []
    shipped = cluster_mod.kmeans

    def recording(x: np.ndarray, k: int, seed: int = 0, restarts: int = 4, max_iter: int = 100):
        key = np.asarray(x).tobytes()
        if key not in seen:
            seen.add(key)
            recorded.append({"kind": "replay [log t]", "module": module, "n": len(x), "seed": seed, "z": np.array(x)})
        return kmeans_pp(x, k, seed=seed, restarts=restarts, max_iter=max_iter)

    def sklearn_pp(x: np.ndarray, k: int, seed: int = 0, restarts: int = 4, max_iter: int = 100):
        labels, centres, _ = sk_kmeans(np.asarray(x, float), k, seed, n_init=restarts, max_iter=max_iter)
        return labels, centres

    block_ptr = bool(tables[0]["meta"].get("block_ptr"))
    rl.force_block_pointers(block_ptr)
    max_evals = (max(BUDGETS) * 3 + 1) // 2
    res: dict[str, Any] = {"ours": {}, "sklearn": {}, "seconds": {"ours": 0.0, "sklearn": 0.0},
                           "kmeans_seconds": {"ours": 0.0, "sklearn": 0.0}, "kmeans_calls": {"ours": 0, "sklearn": 0}}

    def timed(arm: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                res["kmeans_seconds"][arm] += time.perf_counter() - t
                res["kmeans_calls"][arm] += 1
        return call

    try:
        for d in tables:
            module = d["module"]
            seen: set[bytes] = set()
            t = rl.Table(d)
            model = rl.held_out_model(module, tables_dir)
            t.ac.use_model(model)
            src = t.source()
            for arm, fn in (("ours", recording), ("sklearn", sklearn_pp)):
                cluster_mod.kmeans = timed(arm, fn)
                t0 = time.perf_counter()
                runs = [rl.run_one(t, "kernelband", s, max_evals, src, max(BUDGETS), "refund", model) for s in seeds]
                res["seconds"][arm] += time.perf_counter() - t0
                res[arm][module] = {b: [rl.at_evals(r["traj"], b) for r in runs] for b in BUDGETS}
            print(f"replayed {module}: {len(seen)} distinct pools clustered", file=sys.stderr)
    finally:
        cluster_mod.kmeans = shipped
    return recorded, res


def search_effect(res: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds": res["seconds"], "kmeans_seconds": res["kmeans_seconds"],
                           "kmeans_calls": res["kmeans_calls"], "geomean": {}, "paired": {}, "per_kernel": {}}
    modules = list(res["ours"])
    for b in BUDGETS:
        per_seed = {arm: np.array([rl.geomean([res[arm][m][b][i] for m in modules]) for i in range(len(seeds))])
                    for arm in ("ours", "sklearn")}
        out["geomean"][b] = {arm: rl.geomean(v) for arm, v in per_seed.items()}
        out["paired"][b] = rl.paired_ratio(per_seed["sklearn"], per_seed["ours"])
    out["per_kernel"] = {m: {arm: rl.geomean(res[arm][m][max(BUDGETS)]) for arm in ("ours", "sklearn")} for m in modules}
    return out


# --------------------------------------------------------------------------- clustering comparison


def compare_clustering(pools: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    rows = []
    for p in pools:
        z = p["z"]
        lo, co, io = ours(z, K, p["seed"])
        ls, cs, is_ = sk_kmeans(z, K, p["seed"])
        l1, _, i1 = sk_kmeans(z, K, p["seed"], n_init=1)
        rows.append({"kind": p["kind"], "module": p["module"], "n": p["n"], "k": distinct_k(z, K),
                     "ratio": io / is_ if is_ > 1e-12 else (1.0 if io <= 1e-12 else math.inf),
                     "ratio_n_init1": io / i1 if i1 > 1e-12 else (1.0 if io <= 1e-12 else math.inf),
                     "ari": float(adjusted_rand_score(lo, ls))})
    quality: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in rows}):
        rs = [r for r in rows if r["kind"] == kind]
        buckets = sorted({bucket(r["n"]) for r in rs}, key=lambda s: int(s.split("-")[0]))
        for b in buckets + ["all"]:
            sel = [r for r in rs if b == "all" or bucket(r["n"]) == b]
            ratios = [r["ratio"] for r in sel]
            quality[f"{kind} | {b}"] = {
                "pools": len(sel), "ratio_geomean": float(np.exp(np.mean(np.log(ratios)))),
                "ratio_median": float(np.median(ratios)), "ratio_worst": float(max(ratios)),
                "ratio_best": float(min(ratios)), "ours_worse_pools": sum(x > 1 + 1e-9 for x in ratios),
                "sklearn_worse_pools": sum(x < 1 - 1e-9 for x in ratios),
                "ratio_vs_n_init1_median": float(np.median([r["ratio_n_init1"] for r in sel])),
                "ratio_vs_n_init1_best": float(min(r["ratio_n_init1"] for r in sel)),
                "ari_median": float(np.median([r["ari"] for r in sel])), "ari_min": float(min(r["ari"] for r in sel)),
                "ari_1_fraction": float(np.mean([r["ari"] > 1 - 1e-9 for r in sel]))}
    # time: per pool size, cycling over the pools of that size (table v1 pools and replay pools)
    timing: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in pools:
        if p["kind"] == "table v1":
            groups.setdefault(f"table v1 n={p['n']}", []).append(p)
        elif p["kind"].startswith("replay"):
            groups.setdefault(f"replay n={bucket(p['n'])}", []).append(p)
    for name, ps in groups.items():
        def cycle(fn: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
            it = iter(range(10 ** 9))
            return lambda: fn(ps[next(it) % len(ps)])
        timing[name] = {
            "pools": len(ps),
            "ours": ms_stats(call_times(cycle(lambda p: kmeans_pp(p["z"], K, p["seed"], RESTARTS, MAX_ITER)), calls)),
            "sklearn n_init=4": ms_stats(call_times(cycle(lambda p: sk_kmeans(p["z"], K, p["seed"])), calls)),
            "sklearn n_init=1 lloyd": ms_stats(call_times(cycle(lambda p: sk_kmeans(p["z"], K, p["seed"], n_init=1)), calls)),
        }
        with threadpool_limits(1):  # OpenMP on one thread (entered once, outside the timed calls)
            timing[name]["sklearn n_init=4 1 thread"] = ms_stats(call_times(cycle(lambda p: sk_kmeans(p["z"], K, p["seed"])), calls))
        print(f"timed {name}", file=sys.stderr)
    return {"quality": quality, "timing": timing, "pools": len(rows)}


def bucket(n: int) -> str:
    for lo, hi in ((4, 7), (8, 15), (16, 31), (32, 64)):
        if lo <= n <= hi:
            return f"{lo}-{hi}"
    return f"{n}-{n}"


# --------------------------------------------------------------------------- compatibility models


def strategy_of(family: str) -> Optional[str]:
    return next((s.name for s in STRATEGIES.values() if family in s.offline_rewrites), None)


def proxy_features(r: dict[str, Any], original_ms: float) -> np.ndarray:
    """9 proxies of a parent config, each in [-0.5, 0.5], then the bias 1 (as normalise_phi)."""
    kn = r["knobs"]
    blocks = [v for key, v in kn.items() if key.startswith("block:")]
    warps = [v for key, v in kn.items() if key.startswith("num_warps:")]
    stages = [v for key, v in kn.items() if key.startswith("num_stages:")]
    fams = set(r["families"])
    unit = [
        0.5 + math.log2(r["ms"] / original_ms) / 2,  # time relative to the original (x0.25 .. x4)
        math.log2(float(np.prod(blocks))) / 20 if blocks else 0.5,  # log2 elements per program
        math.log2(warps[0]) / 5 if warps else 0.5,  # log2 num_warps (1..32)
        stages[0] / 8 if stages else 0.5,  # num_stages
        len(r["recipe"]) / 5,  # depth
        float("autotune" in fams),
        float("cache_modifiers" in fams),
        float("hints" in fams),
        (math.log10(original_ms) + 2) / 3,  # kernel scale: original time 0.01 .. 10 ms
    ]
    x = np.empty(PHI_DIM + 1)
    x[:PHI_DIM] = np.clip(unit, 0.0, 1.0) - 0.5
    x[PHI_DIM] = 1.0
    return x


def compat_samples(tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in tables:
        o = d["configs"][0]["ms"]
        by_recipe = {json.dumps(r["recipe"]): r for r in d["configs"]}
        for r in d["configs"]:
            if not r["recipe"]:
                continue
            parent = by_recipe.get(json.dumps(r["recipe"][:-1]))
            strategy = strategy_of(r["families"][-1]) if r["families"] else None
            if parent is None or not (parent["correct"] and parent["ms"]) or strategy is None:
                continue
            ok = bool(r["correct"] and r["ms"] and r["ms"] * GAIN < parent["ms"])
            out.append({"module": d["module"], "strategy": strategy, "x": proxy_features(parent, o), "y": ok})
    return out


def fit_ours(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The product's refit (what CompatibilityModels does after each sample) on a buffer
    of model inputs, from the prior (warm start off: centred on 0)."""
    zero = np.zeros(PHI_DIM + 1)
    return map_logistic_fit(x, np.asarray(y, dtype=float), zero, zero, CFG.compat_prior_strength, CFG.compat_lr,
                            CFG.compat_steps)


def fit_sklearn(x: np.ndarray, y: np.ndarray, solver: str = "lbfgs") -> LogisticRegression:
    return LogisticRegression(C=1.0 / LAMBDA, fit_intercept=False, solver=solver, max_iter=1000).fit(x, y)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def compare_compat(samples: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    modules = sorted({s["module"] for s in samples})
    strategies = sorted({s["strategy"] for s in samples})
    preds: dict[str, list[float]] = {"ours": [], "sklearn": []}
    truth: list[int] = []
    skipped_one_class, max_abs_dw = 0, 0.0
    for held in modules:
        for st in strategies:
            train = [s for s in samples if s["module"] != held and s["strategy"] == st]
            test = [s for s in samples if s["module"] == held and s["strategy"] == st]
            if not test:
                continue
            xt = np.array([s["x"] for s in test])
            truth += [int(s["y"]) for s in test]
            if not train:  # no data: both models are the prior (w = 0, psi = 0.5)
                preds["ours"] += [0.5] * len(test)
                preds["sklearn"] += [0.5] * len(test)
                continue
            x = np.array([s["x"] for s in train])
            y = np.array([int(s["y"]) for s in train])
            w = fit_ours(x, y)
            preds["ours"] += list(sigmoid(xt @ w))
            if len(set(y)) < 2:  # sklearn refuses one class; the product must then fall back
                skipped_one_class += 1
                preds["sklearn"] += list(sigmoid(xt @ w))
                continue
            clf = fit_sklearn(x, y)
            max_abs_dw = max(max_abs_dw, float(np.abs(clf.coef_[0] - w).max()))
            preds["sklearn"] += list(clf.predict_proba(xt)[:, 1])
    metrics = {}
    for arm, p in preds.items():
        pa = np.clip(np.array(p), 1e-12, 1 - 1e-12)
        metrics[arm] = {"log_loss": float(log_loss(truth, pa, labels=[0, 1])),
                        "accuracy": float(np.mean((pa > 0.5) == np.array(truth, bool))),
                        "auc": float(roc_auc_score(truth, pa)) if len(set(truth)) == 2 else None}
    # cost: refit on buffers of 50/200/500 rows (resampled from every sample), one prediction
    allx = np.array([s["x"] for s in samples])
    ally = np.array([int(s["y"]) for s in samples])
    cost: dict[str, Any] = {}
    for n in (50, 200, 500):
        rng = np.random.default_rng(n)
        idx = rng.choice(len(allx), size=n, replace=True)
        x, y = allx[idx], ally[idx]
        cost[f"fit n={n}"] = {"ours": ms_stats(call_times(lambda: fit_ours(x, y), calls)),
                              "sklearn lbfgs": ms_stats(call_times(lambda: fit_sklearn(x, y), calls)),
                              "sklearn newton-cholesky": ms_stats(call_times(lambda: fit_sklearn(x, y, "newton-cholesky"), calls))}
    m = CompatibilityModels(BanditConfig(compat_warm_start=False), strategies=("s",))
    m.set_weights("s", list(fit_ours(allx, ally)))
    clf = fit_sklearn(allx, ally)
    phi = [80.0, 40.0, 30.0, 95.0, 60.0, 64.0, 0.5, 8.0, 10.0]
    cost["predict (one phi)"] = {"ours": ms_stats(call_times(lambda: m.probability(phi, "s"), calls * 20)),
                                 "sklearn": ms_stats(call_times(lambda: clf.predict_proba(normalise_phi(phi)[None])[0, 1], calls * 20))}
    counts = {st: {"samples": sum(s["strategy"] == st for s in samples),
                   "gains": sum(s["strategy"] == st and s["y"] for s in samples)} for st in strategies}
    return {"samples": len(samples), "per_strategy": counts, "loko": metrics, "test_samples": len(truth),
            "sklearn_one_class_folds": skipped_one_class, "max_abs_weight_difference": max_abs_dw, "cost": cost}


# --------------------------------------------------------------------------- report


def markdown(out: dict[str, Any]) -> str:
    f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    cl, cp = out["clustering"], out["compat"]
    L = ["# scikit-learn vs numpy", "",
         f"`{out['command']}`; scikit-learn {out['sklearn']}, numpy {out['numpy']}. "
         f"Import of sklearn.cluster + linear_model + metrics: {out['sklearn_import_s'] * 1e3:.0f} ms (once per process). "
         f"Times are wall-clock per call on this machine ({out['machine']}), which may be shared: compare ratios, not absolutes. "
         "sklearn's Lloyd runs in OpenMP threads (one per core); on a busy machine they wait on each other, so sklearn is also "
         "timed with `threadpool_limits(1)`.", "",
         f"## 1. Clustering (k = {K}, restarts/n_init = {RESTARTS}, max_iter = {MAX_ITER})", "",
         "Quality, ours (`kmeans_pp`) vs sklearn `KMeans(init='k-means++', n_init=4)`: inertia ratio ours/sklearn "
         "(< 1: ours lower), adjusted Rand index of the labelings. *replay* pools are the exact inputs the policy "
         "clustered while replaying the committed tables ([log time]: a replay has no profile); *table* pools are "
         "random subsets of a kernel's measured configs as v1/v2 runtime vectors (64 = union of the 4 kernels).", "",
         "| pools | n | count | geomean ratio | median ratio | worst ratio | best ratio | ours worse / sklearn worse | median ratio vs sklearn n_init=1 | median ARI | min ARI | ARI = 1 |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, q in cl["quality"].items():
        L.append(f"| {key} | {q['pools']} | {q['ratio_geomean']:.4f} | {q['ratio_median']:.4f} | {q['ratio_worst']:.4f} | {q['ratio_best']:.4f} | "
                 f"{q['ours_worse_pools']} / {q['sklearn_worse_pools']} | {q['ratio_vs_n_init1_median']:.4f} | "
                 f"{q['ari_median']:.3f} | {q['ari_min']:.3f} | {q['ari_1_fraction']:.0%} |")
    L += ["", "Time per call (ms, median / p95):", "",
          "| pool size | pools | ours | sklearn n_init=4 | sklearn n_init=1 lloyd | sklearn n_init=4, 1 thread | "
          "sklearn n_init=4 / ours (1 thread) |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, t in cl["timing"].items():
        o, s4, s1, st = t["ours"], t["sklearn n_init=4"], t["sklearn n_init=1 lloyd"], t["sklearn n_init=4 1 thread"]
        cell = lambda s: f"{s['median_ms']:.2f} / {s['p95_ms']:.2f}"  # noqa: E731
        L.append(f"| {key} | {t['pools']} | {cell(o)} | {cell(s4)} | {cell(s1)} | {cell(st)} | "
                 f"{s4['median_ms'] / o['median_ms']:.0f}x ({st['median_ms'] / o['median_ms']:.1f}x) |")
    L += ["", "## 2. Compatibility models", "",
          f"{cp['samples']} pulls from the tables (parent config -> child, strategy of the last step's family, label: "
          f"correct and > 2% faster). Inputs: 9 proxies of the parent config (no phi in a replay; see `proxy_features`). "
          f"Ours: `compat.map_logistic_fit` (what `CompatibilityModels` refits with), prior precision {LAMBDA} centred on 0 (warm start off). sklearn: "
          f"`LogisticRegression(C=1/{LAMBDA:g}, fit_intercept=False)` with the bias column in X: the same objective. "
          f"Leave one kernel out, per strategy ({cp['test_samples']} test predictions; "
          f"{cp['sklearn_one_class_folds']} folds had one class only, where sklearn cannot fit and ours was used). "
          f"Largest weight difference between the two fits: {cp['max_abs_weight_difference']:.2e}.", "",
          "| model | log-loss | accuracy | AUC |", "| --- | --- | --- | --- |"]
    for arm, m in cp["loko"].items():
        L.append(f"| {arm} | {m['log_loss']:.4f} | {m['accuracy']:.3f} | {f(m['auc'])} |")
    L += ["", "Samples per strategy (gains / pulls): " + ", ".join(f"{s} {c['gains']}/{c['samples']}" for s, c in cp["per_strategy"].items()),
          "", "Cost per call (ms, median / p95):", "", "| call | ours | sklearn | sklearn newton-cholesky |", "| --- | --- | --- | --- |"]
    for key, c in cp["cost"].items():
        sk = c.get("sklearn lbfgs", c.get("sklearn"))
        nc = c.get("sklearn newton-cholesky")
        L.append(f"| {key} | {c['ours']['median_ms']:.3f} / {c['ours']['p95_ms']:.3f} | {sk['median_ms']:.3f} / {sk['p95_ms']:.3f} | "
                 + (f"{nc['median_ms']:.3f} / {nc['p95_ms']:.3f}" if nc else "-") + " |")
    se = out.get("search")
    if se:
        L += ["", "## 3. Effect on the search", "",
              f"KernelBand replayed on the {len(se['per_kernel'])} committed tables, {out['seeds']} seeds, cost model "
              "leave-one-kernel-out; `cluster.kmeans_pp` as shipped vs replaced by sklearn's KMeans (n_init=4). "
              "Geomean best speedup at N evaluations; ratio sklearn/ours paired per seed (95% t-interval, wins/losses):", "",
              "| N | ours | sklearn | sklearn / ours |", "| --- | --- | --- | --- |"]
        for b in BUDGETS:
            g, p = se["geomean"][b], se["paired"][b]
            L.append(f"| {b} | {g['ours']:.4f} | {g['sklearn']:.4f} | {p['ratio']:.4f} [{p['lo']:.4f}, {p['hi']:.4f}] {p['wins']}/{p['losses']} |")
        kc, ks = se["kmeans_calls"], se["kmeans_seconds"]
        L += ["", f"Replay wall time: ours {se['seconds']['ours']:.0f} s, sklearn {se['seconds']['sklearn']:.0f} s (ours ran first "
              "and paid the generator's analysis-cache warm-up; the replay's time is the generator's). Time inside k-means: "
              f"ours {ks['ours']:.1f} s over {kc['ours']} calls ({1e3 * ks['ours'] / max(1, kc['ours']):.1f} ms/call), sklearn "
              f"{ks['sklearn']:.1f} s over {kc['sklearn']} calls ({1e3 * ks['sklearn'] / max(1, kc['sklearn']):.1f} ms/call). "
              "Per kernel at N=32: " + ", ".join(f"{m} {v['ours']:.3f} vs {v['sklearn']:.3f}" for m, v in se["per_kernel"].items())]
    alls = [q for key, q in cl["quality"].items() if key.endswith("| all")]
    tm = cl["timing"].values()
    slow = [t["sklearn n_init=4"]["median_ms"] / t["ours"]["median_ms"] for t in tm]
    slow1 = [t["sklearn n_init=4 1 thread"]["median_ms"] / t["ours"]["median_ms"] for t in tm]
    L += ["", "## Summary", "",
          f"- k-means, {sum(q['pools'] for q in alls)} pools: ours has the higher inertia on "
          f"{sum(q['ours_worse_pools'] for q in alls)}, sklearn on {sum(q['sklearn_worse_pools'] for q in alls)}, "
          f"the rest tie; sklearn n_init=4 costs {min(slow):.0f}-{max(slow):.0f}x ours per call with its default threads, "
          f"{min(slow1):.1f}-{max(slow1):.1f}x on one thread.",
          f"- logistic: log-loss {cp['loko']['ours']['log_loss']:.4f} (ours) vs {cp['loko']['sklearn']['log_loss']:.4f} (sklearn); "
          "refit " + ", ".join(f"n={k.split('=')[1]}: {c['ours']['median_ms']:.2f} vs {c['sklearn lbfgs']['median_ms']:.1f} ms"
                               for k, c in cp["cost"].items() if k.startswith("fit")) + "."]
    if se:
        L.append("- search: geomean best speedup sklearn/ours " + ", ".join(
            f"N={b}: {se['paired'][b]['ratio']:.4f}" for b in BUDGETS) + ".")
    L += ["", "## Decision", "", out.get("decision", "(see the numbers)")]
    return "\n".join(L) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=Path, default=ROOT / "benchmarks" / "results" / "landscapes" / "tables")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--seeds", type=int, default=10, help="replay seeds (recorded pools and search effect)")
    ap.add_argument("--draws", type=int, default=10, help="random table pools per kernel and size")
    ap.add_argument("--calls", type=int, default=50, help="timed calls per pool size, after one warm-up")
    ap.add_argument("--no-replay", action="store_true", help="skip the replays (no recorded pools, no search effect)")
    ap.add_argument("--decision", default="", help="text of the decision paragraph (kept from the previous .md if empty)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    tables = rl.load_tables(a.tables)
    seeds = list(range(a.seeds))
    import platform

    shown = list(argv if argv is not None else sys.argv[1:])
    if "--decision" in shown:  # the decision text is not part of the command line shown
        i = shown.index("--decision")
        shown[i:i + 2] = ["--decision", "TEXT"]
    out: dict[str, Any] = {"command": "python benchmarks/sklearn_compare.py " + " ".join(shown),
                           "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores",
                           "sklearn": sklearn.__version__, "numpy": np.__version__, "sklearn_import_s": SKLEARN_IMPORT_S,
                           "tables": [d["module"] for d in tables], "seeds": a.seeds}
    pools = table_pools(tables, a.draws)
    if not a.no_replay:
        recorded, res = replay(tables, a.tables, seeds)
        pools = recorded + pools
        out["search"] = search_effect(res, seeds)
    out["clustering"] = compare_clustering(pools, a.calls)
    out["compat"] = compare_compat(compat_samples(tables), a.calls)
    md_path = a.out / "sklearn_compare.md"
    decision = a.decision
    if not decision and md_path.exists() and "## Decision\n" in md_path.read_text():
        decision = md_path.read_text().split("## Decision\n", 1)[1].strip()
    out["decision"] = decision
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "sklearn_compare.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    md = markdown(out)
    md_path.write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
