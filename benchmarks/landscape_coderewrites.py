#!/usr/bin/env python3
"""The rules generator's code rewrites on the suite kernels, checked and timed on a GPU.

    python benchmarks/landscape_coderewrites.py --emit DIR        # here (needs libcst)
    python benchmarks/landscape_coderewrites.py --measure DIR     # on the GPU (torch, triton)

``--emit`` writes every code-rewrite variant (pipeline_loop, pid_swizzle, persistent,
rows_per_program, block_ptr) of each suite kernel's original as DIR/<module>__<key>.py,
plus DIR/index.json. Block pointers are emitted whatever the local Triton says (the
GPU machine's Triton decides: the variant then fails there if it lacks them).

``--measure`` runs, per variant: the original and the variant harness on the same
inputs (make_inputs called once and cached), the suite's ``compare`` of variant against
original, and ``triton.testing.do_bench`` (median ms) of each, interleaved
original/variant for ``--rounds`` rounds. It prints a markdown table and writes
DIR/measured.json (or ``--json``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CODE_FAMILIES = ("pipeline_loop", "pid_swizzle", "persistent", "rows_per_program", "block_ptr")


def emit(out: Path) -> None:
    from benchmarks.suite import SUITE, SUITE_DIR
    from kernelband.generators import triton_features
    from kernelband.generators.rules import FAMILIES, _Analyzer

    triton_features.assume_block_pointers(True)  # the target Triton (3.6) has them
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for e in SUITE:
        src = (SUITE_DIR / f"{e.module}.py").read_text(encoding="utf-8")
        an = _Analyzer(src, e.kernel).analyse(set(FAMILIES))
        for rw in an.rewrites:
            if rw.family not in CODE_FAMILIES:
                continue
            name = f"{e.module}__{rw.key.replace(':', '_')}.py"
            (out / name).write_text(an.source_of(rw), encoding="utf-8")
            index.append({"module": e.module, "harness": e.harness, "family": rw.family, "key": rw.key,
                          "file": name, "description": rw.description})
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"{len(index)} variants of {len({r['module'] for r in index})} kernels in {out}")


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def measure(folder: Path, rounds: int, out_json: Optional[Path]) -> None:
    import torch
    import triton
    from triton.testing import do_bench

    from benchmarks.suite import SUITE_DIR, compare

    index = json.loads((folder / "index.json").read_text())
    rows = []
    originals: dict[str, Any] = {}
    for r in index:
        m = r["module"]
        if m not in originals:
            orig = _load(SUITE_DIR / f"{m}.py", f"orig_{m}")
            torch.manual_seed(0)
            inputs = orig.make_inputs()
            orig.make_inputs = lambda inputs=inputs: inputs
            originals[m] = (orig, inputs, getattr(orig, r["harness"])())
        orig, inputs, ref = originals[m]
        row = dict(r)
        try:
            var = _load(folder / r["file"], f"var_{r['file'][:-3]}")
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
    (out_json or folder / "measured.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
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
    ap.add_argument("--measure", type=Path)
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
