"""Does `kernelband check` agree with do_bench run by hand?

For examples/add_scale.py, write a faster and a slower variant (block size), run
`kernelband check` on each (interleaved, kernel-only timing through launch capture),
then time the same three kernels by hand with triton.testing.do_bench on inputs of the
harness's size, and compare the speedups. GPU only (run it on the device).

    python benchmarks/check_vs_do_bench.py --out benchmarks/results
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT as REPO
from common import load_module, write_markdown
EXAMPLE = REPO / "examples" / "add_scale.py"
LAUNCH = "axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=128)"
VARIANTS = {
    "faster (BLOCK_SIZE=1024, num_warps=4)": LAUNCH.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024, num_warps=4"),
    "slower (BLOCK_SIZE=32, num_warps=1)": LAUNCH.replace("BLOCK_SIZE=128", "BLOCK_SIZE=32, num_warps=1"),
}


def by_hand(path: Path, name: str) -> float:
    """do_bench of the kernel launch alone, inputs built outside the timed region."""
    import torch
    import triton
    import triton.testing

    mod = load_module(path, name)
    n = (1 << 24) + 3
    torch.manual_seed(0)
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    src = path.read_text()
    line = next(ln.strip() for ln in src.splitlines() if ln.strip().startswith("axpy_kernel[grid]"))
    kwargs = dict(kv.split("=") for kv in line.split("n, ", 1)[1].rstrip(")").split(", "))
    kwargs = {k: int(v) for k, v in kwargs.items()}
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    fn = lambda: mod.axpy_kernel[grid](x, y, out, 0.5, n, **kwargs)  # noqa: E731
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kb-check-"))
    original_src = EXAMPLE.read_text()
    rows = []
    t_orig = by_hand(EXAMPLE, "orig")
    for label, launch in VARIANTS.items():
        vpath = tmp / f"variant_{len(rows)}.py"
        vpath.write_text(original_src.replace(LAUNCH, launch))
        cmd = [sys.executable, "-m", "kernelband", "check", str(EXAMPLE), "--variant", str(vpath), "--json"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        res = json.loads(proc.stdout)
        t_var = by_hand(vpath, f"v{len(rows)}")
        hand = t_orig / t_var
        rows.append({
            "variant": label,
            "check_status": res["status"],
            "check_speedup": res.get("speedup"),
            "check_ci": res.get("speedup_ci"),
            "check_baseline_ms": res.get("paired_baseline_ms"),
            "check_variant_ms": res.get("paired_variant_ms"),
            "hand_baseline_ms": t_orig,
            "hand_variant_ms": t_var,
            "hand_speedup": hand,
            "relative_difference": (res["speedup"] / hand - 1.0) if res.get("speedup") else None,
            "exit_code": proc.returncode,
            "command": " ".join(cmd[1:]).replace(str(REPO) + "/", "").replace(str(tmp) + "/", ""),
        })
    import torch

    report = {"gpu": torch.cuda.get_device_name(), "rows": rows}
    (out_dir / "check_vs_do_bench.json").write_text(json.dumps(report, indent=2))
    lines = [f"# kernelband check vs do_bench by hand ({report['gpu']})", "",
             "| variant | check speedup (95% CI) | do_bench speedup | difference |", "|---|---|---|---|"]
    for r in rows:
        ci = r["check_ci"] or [float("nan")] * 2
        lines.append(f"| {r['variant']} | {r['check_speedup']:.3f} ({ci[0]:.3f}-{ci[1]:.3f}) | {r['hand_speedup']:.3f} "
                     f"| {100 * r['relative_difference']:+.1f}% |")
    write_markdown(out_dir / "check_vs_do_bench.md", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
