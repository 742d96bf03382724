#!/usr/bin/env python3
"""The rules generator's code rewrites on the suite kernels, checked and timed on a GPU.

    python benchmarks/landscape_coderewrites.py --emit FILE.json     # here (needs libcst)
    python benchmarks/landscape_coderewrites.py --measure FILE.json  # on the GPU (torch, triton)

``--emit`` lists every code-rewrite variant (pipeline_loop, pid_swizzle, persistent,
rows_per_program, block_ptr) of each suite kernel's original in FILE.json: per variant
its rewrite, and its source as a unified diff against the suite original with both
texts' sha256 (generated sources are data, not code to keep). Block pointers are
emitted whatever the local Triton says (the GPU machine's Triton decides: the variant
then fails there if it lacks them). The committed list is
``benchmarks/results/code_rewrites/variants.json``.

``--measure`` rebuilds each variant from its diff (refusing one whose original changed
since), then runs, per variant: the original and the variant harness on the same
inputs (make_inputs called once and cached), the suite's ``compare`` of variant against
original, and ``triton.testing.do_bench`` (median ms) of each, interleaved
original/variant for ``--rounds`` rounds. It prints a markdown table and writes
``measured.json`` beside FILE.json (or ``--json``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any, Optional

from common import ROOT, apply_source_diff, load_module, sha256_of, source_diff

CODE_FAMILIES = ("pipeline_loop", "pid_swizzle", "persistent", "rows_per_program", "block_ptr")
COMMITTED = ROOT / "benchmarks" / "results" / "code_rewrites" / "variants.json"


def emit(out: Path) -> None:
    from benchmarks.suite import SUITE, SUITE_DIR
    from kernelband.generators import triton_features
    from kernelband.generators.analysis import KernelAnalyzer

    triton_features.assume_block_pointers(True)  # the target Triton (3.6) has them
    variants = []
    for e in SUITE:
        src = (SUITE_DIR / f"{e.module}.py").read_text(encoding="utf-8")
        an = KernelAnalyzer(src, e.kernel).analyse()
        for rw in an.rewrites:
            if rw.family in CODE_FAMILIES:
                variant = an.source_of(rw)
                variants.append({"module": e.module, "harness": e.harness, "family": rw.family, "key": rw.key,
                                 "description": rw.description, "original_sha256": sha256_of(src),
                                 "sha256": sha256_of(variant), "diff": source_diff(src, variant, f"{e.module}.py")})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"variants": variants}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(variants)} variants of {len({v['module'] for v in variants})} kernels in {out}")


def variant_sources(listing: Path) -> list[tuple[dict[str, Any], str]]:
    """Each listed variant with its source, rebuilt from the diff against the suite's
    original; ValueError when an original or a rebuilt source is not the one listed."""
    from benchmarks.suite import SUITE_DIR

    out = []
    for v in json.loads(listing.read_text(encoding="utf-8"))["variants"]:
        original = (SUITE_DIR / f"{v['module']}.py").read_text(encoding="utf-8")
        if sha256_of(original) != v["original_sha256"]:
            raise ValueError(f"{v['module']}.py changed since {listing.name} was written: emit it again")
        source = apply_source_diff(original, v["diff"])
        if sha256_of(source) != v["sha256"]:
            raise ValueError(f"{v['module']} {v['key']}: the rebuilt source is not the one listed")
        out.append((v, source))
    return out


def measure(listing: Path, rounds: int, out_json: Optional[Path]) -> None:
    import torch
    import triton
    from triton.testing import do_bench

    from benchmarks.suite import SUITE_DIR, compare

    folder = Path(tempfile.mkdtemp(prefix="kb-coderewrites-"))  # the variants as importable files
    rows = []
    originals: dict[str, Any] = {}
    for v, source in variant_sources(listing):
        r = {k: v[k] for k in ("module", "harness", "family", "key", "description")}
        r["file"] = f"{v['module']}__{v['key'].replace(':', '_')}.py"
        (folder / r["file"]).write_text(source, encoding="utf-8")
        m = r["module"]
        if m not in originals:
            orig = load_module(SUITE_DIR / f"{m}.py", f"orig_{m}")
            torch.manual_seed(0)
            inputs = orig.make_inputs()
            orig.make_inputs = lambda inputs=inputs: inputs
            originals[m] = (orig, inputs, getattr(orig, r["harness"])())
        orig, inputs, ref = originals[m]
        row = dict(r)
        try:
            var = load_module(folder / r["file"], f"var_{r['file'][:-3]}")
            var.make_inputs = lambda inputs=inputs: inputs
            got = getattr(var, r["harness"])()
            torch.cuda.synchronize()
            problems = compare(got, ref)
            row["correct"] = not problems
            row["problems"] = problems[:2]
            if not problems:
                to, tv = [], []
                for _ in range(rounds):
                    to.append(do_bench(getattr(orig, r["harness"]), return_mode="median"))
                    tv.append(do_bench(getattr(var, r["harness"]), return_mode="median"))
                row["orig_ms"], row["variant_ms"] = statistics.median(to), statistics.median(tv)
                row["speedup"] = row["orig_ms"] / row["variant_ms"]
        except Exception as ex:  # a variant that does not compile or run is a result
            row["correct"] = False
            row["problems"] = [f"{type(ex).__name__}: {str(ex)[:200]}"]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("file", "correct", "speedup", "problems")}), flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
            "rounds": rounds}
    (out_json or listing.parent / "measured.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"\n{meta}\n\n| kernel | rewrite | correct | original ms | variant ms | speedup |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        sp = f"{r['speedup']:.3f}" if r.get("speedup") else "-"
        om = f"{r['orig_ms']:.4f}" if r.get("orig_ms") else "-"
        vm = f"{r['variant_ms']:.4f}" if r.get("variant_ms") else "-"
        print(f"| {r['module']} | {r['key']} | {'yes' if r['correct'] else 'no: ' + '; '.join(r['problems'])[:80]} "
              f"| {om} | {vm} | {sp} |")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emit", type=Path)
    ap.add_argument("--measure", type=Path, nargs="?", const=COMMITTED,
                    help=f"a list written by --emit (default {COMMITTED.relative_to(ROOT)})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.emit:
        emit(a.emit)
    if a.measure:
        measure(a.measure, a.rounds, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
