#!/usr/bin/env python3
"""Fit the proposal-ranking cost model on the measured landscapes, with
leave-one-kernel-out evidence.

    python benchmarks/landscape_costmodel.py [--write]

Data: ``benchmarks/results/gpu/shard*/oracle_partial/*.json`` — for each suite kernel,
every config of its rules space (up to the cap of 48) timed on an H200, as
speedup over the original; the original's own config (speedup 1) comes from the
suite source. Plus the knob-only configs (no code rewrite) of the measured H100
landscapes (``benchmarks/results/landscapes/tables``, ``landscape_measure.py``). Training pairs: every (parent, child) pair of ok configs of a kernel,
target log(speedup_child / speedup_parent), each kernel weighted equally; the model is
the difference of a potential over configs (kernelband/generators/costmodel.py). A failed
config is a child with target log(0.25).

Evidence (leave one kernel out: fit on the others, rank the held-out kernel's configs
from its original): Spearman rho of predicted vs measured, and the best measured
speedup among the first k proposals as a fraction of the landscape's best, for the
model, for nearest-first (the previous order) and for a random order (mean of 200).
``--write`` stores the model fitted on all kernels in kernelband/generators/costmodel.json.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import random
from pathlib import Path
from typing import Any, Optional

import numpy as np

from common import ROOT

from kernelband.generators.costmodel import DEFAULT_PATH, FEATURES, CostModel, KernelTraits, features  # noqa: E402
from kernelband.generators.space import BLOCK_RE, GROUP_RE  # noqa: E402

RIDGE = 1.0
FAIL_TARGET = math.log(0.25)


def _kind(name: str) -> Optional[str]:
    if name in ("num_warps", "num_stages"):
        return name
    if BLOCK_RE.search(name):
        return "block"
    if GROUP_RE.search(name):
        return "group"
    return None


def _parse(desc: str) -> dict[str, int]:
    out = {}
    for part in desc.split(","):
        if "=" in part:
            k, v = part.strip().split("=", 1)
            out[k.strip()] = int(v)
    return out


def load_landscapes() -> list[dict[str, Any]]:
    from kernelband.detect import detect
    from kernelband.generators.analysis import KernelAnalyzer

    out = []
    for f in sorted(glob.glob(str(ROOT / "benchmarks/results/gpu/*/oracle_partial/*.json"))):
        name = Path(f).name.split("__")[0]
        src = (ROOT / "benchmarks" / "suite" / f"{name}.py").read_text(encoding="utf-8")
        kernel = detect(src).kernels[0].name
        an = KernelAnalyzer(src, kernel)
        original = {k.name: k.current for k in an.knobs()}
        traits = an.traits()
        points = [(original, 1.0)]
        for v in json.loads(Path(f).read_text())["done"].values():
            cfg = {**original, **_parse(v["description"])}
            points.append((cfg, v["speedup"] if v["status"] == "ok" and v.get("speedup") else None))
        out.append({"kernel": name, "traits": traits, "points": points})
    return out


def load_tables(folder: Path = ROOT / "benchmarks/results/landscapes/tables") -> list[dict[str, Any]]:
    """Knob-only configs of the measured landscapes, with knob names as the oracle files
    spell them (``block:BLOCK_M:kernel`` -> ``BLOCK_M``)."""
    out = []
    for f in sorted(folder.glob("*.json")):
        d = json.loads(f.read_text())
        rows = [r for r in d.get("configs", []) if not r.get("code")]
        if not rows or not rows[0].get("ms") or rows[0].get("recipe"):
            continue
        t0 = float(rows[0]["ms"])
        src = (ROOT / "benchmarks" / "suite" / f"{d['module']}.py").read_text(encoding="utf-8")
        traits = KernelTraits(has_dot="tl.dot(" in src, has_loop="for " in src)
        points = []
        for r in rows:
            cfg = {k.split(":")[1]: int(v) for k, v in r["knobs"].items()}
            points.append((cfg, t0 / float(r["ms"]) if r.get("correct") and r.get("ms") else None))
        out.append({"kernel": d["module"], "traits": traits, "points": points})
    return out


def move_of(a: dict[str, int], b: dict[str, int]) -> list[tuple[str, int, int]]:
    return [(k, a[n], b[n]) for n in a if (k := _kind(n)) and n in b and a[n] != b[n]]


def typed(cfg: dict[str, int]) -> list[tuple[str, int]]:
    return [(k, v) for n, v in cfg.items() if (k := _kind(n))]


def pairs(land: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    X, y = [], []
    pts = land["points"]
    for pa, sa in pts:
        if sa is None:
            continue
        for pb, sb in pts:
            if pb is pa:
                continue
            X.append(features(typed(pa), typed(pb), land["traits"]))
            y.append(FAIL_TARGET if sb is None else math.log(sb / sa))
    return np.array(X), np.array(y)


def fit(lands: list[dict[str, Any]]) -> CostModel:
    Xs, ys = [], []
    for land in lands:
        X, y = pairs(land)
        w = 1.0 / math.sqrt(len(y))  # every kernel counts the same
        Xs.append(X * w)
        ys.append(y * w)
    X, y = np.vstack(Xs), np.concatenate(ys)
    A = X.T @ X + RIDGE * np.eye(X.shape[1]) * (len(lands) / 10)
    return CostModel(tuple(float(v) for v in np.linalg.solve(A, X.T @ y)))


def _rank(vals: list[float]) -> np.ndarray:
    return np.argsort(np.argsort(vals)).astype(float)


def evidence(model: CostModel, land: dict[str, Any], ks: tuple[int, ...]) -> dict[str, Any]:
    orig = land["points"][0][0]
    cands = [(p, s if s is not None else 0.0) for p, s in land["points"][1:]]
    best = max(s for _, s in cands)
    pred = [model.predict(typed(orig), typed(p), land["traits"]) for p, _ in cands]
    actual = [s for _, s in cands]
    rho = float(np.corrcoef(_rank(pred), _rank(actual))[0, 1]) if len(cands) > 2 else float("nan")
    dist = [sum(abs(math.log2(b / a)) if k != "num_stages" else abs(b - a) for k, a, b in move_of(orig, p)) for p, _ in cands]
    by_model = [actual[i] for i in sorted(range(len(cands)), key=lambda i: -pred[i])]
    by_near = [actual[i] for i in sorted(range(len(cands)), key=lambda i: dist[i])]
    rng = random.Random(0)
    out: dict[str, Any] = {"kernel": land["kernel"], "n": len(cands), "rho": rho, "best": best}
    for k in ks:
        rand = []
        for _ in range(200):
            rand.append(max(rng.sample(actual, min(k, len(actual)))))
        out[f"model@{k}"] = max(max(by_model[:k]), 1.0) / max(best, 1.0)
        out[f"nearest@{k}"] = max(max(by_near[:k]), 1.0) / max(best, 1.0)
        out[f"random@{k}"] = float(np.mean([max(r, 1.0) for r in rand])) / max(best, 1.0)
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    lands = load_landscapes() + load_tables()
    ks = (1, 3, 5)
    rows = []
    for i, land in enumerate(lands):
        model = fit(lands[:i] + lands[i + 1:])
        rows.append(evidence(model, land, ks))
    cols = ["rho"] + [f"{m}@{k}" for k in ks for m in ("model", "nearest", "random")]
    print("leave-one-kernel-out (fraction of the landscape's best gain found in the first k, 1 = the best; "
          "no gain counts as 1.0x)")
    print("| kernel | configs | best | " + " | ".join(cols) + " |")
    print("|" + " --- |" * (3 + len(cols)))
    for r in rows:
        print(f"| {r['kernel']} | {r['n']} | {r['best']:.2f} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + " |")
    means = {c: float(np.nanmean([r[c] for r in rows])) for c in cols}
    print("| mean | | | " + " | ".join(f"{means[c]:.3f}" for c in cols) + " |")
    full = fit(lands)
    print("\nweights (all kernels):", ", ".join(f"{n}={w:+.3f}" for n, w in zip(FEATURES, full.weights)))
    if a.write:
        DEFAULT_PATH.write_text(full.to_json(
            trained_on=[land["kernel"] for land in lands], ridge=RIDGE,
            source="benchmarks/results/gpu/shard*/oracle_partial (H200, Triton 3.6) + "
                   "benchmarks/results/landscapes/tables knob-only configs (H100, Triton 3.6)",
            loko_mean={c: round(v, 4) for c, v in means.items()},
        ))
        print(f"wrote {DEFAULT_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
