#!/usr/bin/env python3
"""Space size of each kernel of the real-style corpus, for the rules generator at a
git revision (default: the working tree) and optionally a second one to compare.

    python benchmarks/landscape_space.py [--corpus tests/data/realstyle] [--before REV] [--json OUT]

Per kernel: knobs found, launch configs (the product of the knobs' domains, which
``enumerate_space`` walks, the original included) and
first-level proposals (every rewrite of every family for the original). A kernel has
an *empty space* when it has no launch config besides the original. A revision is run
from ``git archive REV kernelband`` in a temporary directory, in a subprocess.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT / "tests" / "data" / "realstyle"


def measure(corpus: Path) -> list[dict[str, Any]]:
    """Run in the process whose ``kernelband`` is the one to measure."""
    from kernelband.detect import detect
    from kernelband.generators.rules import FAMILIES, _Analyzer

    rows = []
    for path in sorted(corpus.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        kernels = detect(source).kernels
        if not kernels:
            continue  # __init__.py and the like
        kernel = kernels[0].name
        try:
            an = _Analyzer(source, kernel).analyse(set(FAMILIES))
            knobs = [f"{k.name}:{getattr(k, 'origin', 'launch')}" for k in an.knobs]
            proposals = len(an.rewrites)
            by_family: dict[str, int] = {}
            for rw in an.rewrites:
                by_family[rw.family] = by_family.get(rw.family, 0) + 1
        except Exception as e:  # the old generator may not analyse a file at all
            knobs, proposals, by_family = [f"error: {type(e).__name__}"], 0, {}
        try:
            configs = math.prod(len(k.values) for k in an.knobs)  # the product enumerate_space walks
        except Exception:
            configs = 1
        rows.append({"file": path.name, "kernel": kernel, "knobs": knobs, "launch_configs": configs,
                     "proposals": proposals, "by_family": by_family})
    return rows


def measure_rev(rev: str, corpus: Path) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "kernelband"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = dict(os.environ, PYTHONPATH=tmp)
        out = subprocess.run([sys.executable, __file__, "--corpus", str(corpus), "--raw"], env=env, check=True,
                             capture_output=True, text=True, cwd=tmp).stdout
        return json.loads(out)


def summary(rows: list[dict[str, Any]]) -> str:
    empty = sum(1 for r in rows if r["launch_configs"] <= 1)
    return f"{len(rows)} kernels, {empty} with an empty launch space ({empty / max(len(rows), 1):.0%})"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--before", help="git revision to compare with (e.g. 63d8cac)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    corpus = Path(a.corpus).resolve()
    if a.raw:
        print(json.dumps(measure(corpus)))
        return 0
    after = measure(corpus)
    before = measure_rev(a.before, corpus) if a.before else None
    print(f"| file | launch configs{' before -> after' if before else ''} | proposals"
          f"{' before -> after' if before else ''} | knobs (after) |")
    print("| --- | --- | --- | --- |")
    for i, r in enumerate(after):
        b = before[i] if before else None
        cfg = f"{b['launch_configs']} -> {r['launch_configs']}" if b else str(r["launch_configs"])
        prop = f"{b['proposals']} -> {r['proposals']}" if b else str(r["proposals"])
        print(f"| {r['file']} | {cfg} | {prop} | {', '.join(r['knobs'])} |")
    if before:
        print(f"\nbefore ({a.before}): {summary(before)}")
    print(f"after: {summary(after)}")
    if a.json:
        Path(a.json).write_text(json.dumps({"before": before, "after": after}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
