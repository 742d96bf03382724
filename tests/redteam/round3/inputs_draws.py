"""Every CPU-visible WRONG case closed by inputs beyond the harness, through the evaluation
path, in two judges (two session seeds: two draws of the calls beyond the harness); one
JSON line per case and judge, with the message that refused it.

    TRITON_INTERPRET=1 python tests/redteam/round3/inputs_draws.py [--judges N]   (from the repository root)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `redteam`

from redteam.round3.corpus import wrong_cases  # noqa: E402
from redteam.round3.running import Evaluators, run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judges", type=int, default=2, help="judges, each with its own session seed")
    args = ap.parse_args()
    cases = [c for c in wrong_cases() if c.spec.defence == "inputs" and c.cpu_visible]
    print(f"{len(cases)} cases", flush=True)
    for judge in range(args.judges):
        evaluators = Evaluators(Path(tempfile.mkdtemp(prefix="kb-draws-")))
        try:
            for case in cases:
                try:
                    got = run_case(evaluators, case)
                    row = {"judge": judge, "case": case.id, "ok": got.ok, "message": got.message[:220]}
                except Exception as e:  # noqa: BLE001 - one case's setup failure is a row, not the end
                    row = {"judge": judge, "case": case.id, "error": repr(e)[:200]}
                print(json.dumps(row), flush=True)
        finally:
            evaluators.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
