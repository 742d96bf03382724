"""The round-3 GPU-only cases through `kernelband check` (the CLI's verdict path,
compute-sanitizer memcheck and racecheck included, then the calls past int32 offsets:
`embedding/int32_row_offsets` is refused there or nowhere), and each of their kernels
checked against itself (the control: it must pass). On a GPU:

    python benchmarks/round3_gpu_only.py OUT.json [CASE ...]

CASE: ids to run alone (e.g. wrong/embedding/int32_row_offsets; each one's kernel checked
against itself follows as its control). One JSON line per case on stdout, the rows in
OUT.json; `wide` is what `checked.wide` said (the calls past int32 offsets, or why not).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from redteam.round3.corpus import Case, timing_cases, wrong_cases  # noqa: E402

# one check: its judge, memcheck and racecheck, then the calls past int32 offsets (the
# original's two canary runs and the variant's of a 10 GiB table, read back by the judge)
CHECK_S = 1800


def check(case: Case) -> dict[str, Any]:
    """`kernelband check ORIGINAL --variant CASE --json` in a fresh folder."""
    k = case.kernel
    with tempfile.TemporaryDirectory() as d:
        original = Path(d) / f"{k.module}.py"
        original.write_text(k.source)
        variant = Path(d) / "variant_case.py"
        variant.write_text(case.source)
        t0 = time.time()
        p = subprocess.run([sys.executable, "-m", "kernelband", "check", str(original), "--kernel", k.kernel,
                            "--variant", str(variant), "--json"], capture_output=True, text=True, timeout=CHECK_S, cwd=d)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = {"stderr": p.stderr[-800:]}
    control = " (control: the original itself)" if case.source == k.source else ""
    return {"case": case.id + control, "exit": p.returncode, "status": out.get("status"), "verdict": out.get("verdict"),
            "message": str(out.get("message") or out.get("stderr") or "")[:400],
            "memcheck": (out.get("checked") or {}).get("memcheck"), "wide": (out.get("checked") or {}).get("wide"),
            "wall_s": round(time.time() - t0, 1)}


def main(argv: list[str]) -> int:
    gpu_only = [c for c in wrong_cases() + timing_cases() if c.spec.gpu_only]
    if argv[1:]:
        gpu_only = [c for c in gpu_only if c.id in argv[1:]]
        assert gpu_only, f"no GPU-only case among {argv[1:]}"
    controls = [Case(c.kind, c.spec, c.kernel.source) for c in gpu_only[:4]]
    rows = []
    for case in gpu_only + controls:
        rows.append(check(case))
        print(json.dumps(rows[-1]), flush=True)
    Path(argv[0]).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
