"""The agent tools on a GPU, as an agent calls them: ``kernelband mcp`` driven by the MCP
SDK's stdio client on a copy of examples/add_scale.py.

- check_variant of a faster launch configuration (BLOCK_SIZE 1024): correct, and on a GPU
  ``speed_claim`` true with the paired speedup, its 95% CI and memcheck run;
- check_variant of a wrong variant (the mask drops the last element): rejected, with its reason;
- optimize_kernel with a small budget: a diff, the file untouched.

Prints one JSON object (the answers, trimmed) and exits 1 when one of them is not what a
GPU must give. Usage: python benchmarks/mcp_gpu_smoke.py [--budget 8] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers.mcp_client import connect  # noqa: E402

MASK = "mask = offsets < n_elements"


async def run(budget: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        original = (REPO / "examples" / "add_scale.py").read_text(encoding="utf-8")
        (root / "add_scale.py").write_text(original, encoding="utf-8")
        out: dict = {}
        async with connect(root) as s:
            faster = original.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")
            r = await s.call_tool("check_variant", {"file": "add_scale.py", "variant_source": faster})
            out["check_faster"] = r.structured_content
            wrong = original.replace(MASK, MASK + " - 1")
            r = await s.call_tool("check_variant", {"file": "add_scale.py", "variant_source": wrong})
            out["check_wrong"] = r.structured_content
            r = await s.call_tool("optimize_kernel", {"file": "add_scale.py", "budget": budget})
            out["optimize"] = r.structured_content
        out["file_untouched"] = (root / "add_scale.py").read_text(encoding="utf-8") == original
    return out


def problems(out: dict) -> list[str]:
    bad = []
    fast, wrong, opt = out["check_faster"], out["check_wrong"], out["optimize"]
    if not fast["correct"] or not fast["speed_claim"] or fast["speedup"] is None or not fast["speedup_ci"]:
        bad.append("check_variant of the faster variant: expected correct with a paired GPU speedup")
    if not fast["checked"]["memcheck"]["ran"]:
        bad.append(f"memcheck did not run: {fast['checked']['memcheck']['reason']}")
    if wrong["correct"] or not wrong["reason"]:
        bad.append("the wrong variant was not rejected with a reason")
    if opt["written"] or not out["file_untouched"]:
        bad.append("optimize wrote the file")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    out = anyio.run(run, args.budget)
    out["problems"] = problems(out)
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 1 if out["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
