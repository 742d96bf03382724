#!/usr/bin/env python3
"""Space size of each kernel of the real-style corpus, for the rules generator of this tree.

    python benchmarks/landscape_space.py [--corpus tests/data/realstyle] [--json OUT]

Per kernel: knobs found, launch configs (the product of the knobs' domains, which
``enumerate_space`` walks, the original included) and first-level proposals (every
rewrite of every family for the original). A kernel has an *empty space* when it has
no launch config besides the original. To compare two revisions, run the script in a
checkout of each.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Optional

from common import ROOT

DEFAULT_CORPUS = ROOT / "tests" / "data" / "realstyle"


def measure(corpus: Path) -> list[dict[str, Any]]:
    from kernelband.detect import detect
    from kernelband.generators.analysis import analyse

    rows = []
    for path in sorted(corpus.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        kernels = detect(source).kernels
        if not kernels:
            continue  # __init__.py and the like
        kernel = kernels[0].name
        an = analyse(source, kernel)
        by_family: dict[str, int] = {}
        for rw in an.rewrites if an is not None else []:
            by_family[rw.family] = by_family.get(rw.family, 0) + 1
        rows.append({"file": path.name, "kernel": kernel,
                     "knobs": [f"{k.name}:{k.origin}" for k in an.knobs] if an is not None else ["error: not analysable"],
                     "launch_configs": math.prod(len(k.values) for k in an.knobs) if an is not None else 1,
                     "proposals": len(an.rewrites) if an is not None else 0, "by_family": by_family})
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    empty = sum(1 for r in rows if r["launch_configs"] <= 1)
    return f"{len(rows)} kernels, {empty} with an empty launch space ({empty / max(len(rows), 1):.0%})"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    rows = measure(Path(a.corpus).resolve())
    print("| file | launch configs | proposals | knobs |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['file']} | {r['launch_configs']} | {r['proposals']} | {', '.join(r['knobs'])} |")
    print(f"\n{summary(rows)}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
