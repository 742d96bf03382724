"""``kernelband check FILE --kernel NAME --variant OTHER.py``: is a hand-written variant
correct, and is it faster?

The variant is screened, then checked against the original on every seed and harness
(on a GPU a correct variant also runs under compute-sanitizer memcheck); a correct
variant and the original are then re-measured interleaved (A B A B ...) for a speedup
with a 95% confidence interval; ``--json`` also says what was checked ("checked": seeds,
harnesses, the checks a pass requires, memcheck). The verdict follows the one rule
optimize and the editor use (kernelband/verdict.py): "improved" needs the CI's lower
bound above --min-speedup.
Under the Triton interpreter (no GPU) a correct variant is "verified_correct": its speed
cannot be measured without a GPU, so nothing is re-measured and no speedup is printed,
unless --cpu-tuning asks for the CPU-time ratio as the verdict.

The original already ran cleanly in ``prepare``, so a failure of the interleaved
re-measurement (the variant stops passing, crashes or hangs there) is the variant's: a
failed verdict (exit 1, status timeout/crashed/runtime_error), not exit 2.

Exit codes: 0 the variant is correct (faster or not: see "verdict"), 1 it is not
(mismatch, rejected, crashed, timeout, or its re-measurement failed), 2 bad usage, or an
original / harness / device that cannot be used (one line on stderr).
"""

from __future__ import annotations

import argparse
from ..check_outcome import CheckOutcome
from ..checking import CheckOptions, check_variant
from ..evaluate import SetupError
from ..options import CHECK, add_arguments
from .common import (
    EXIT_OK,
    EXIT_VERDICT,
    StderrLog,
    UsageError,
    add_task_arguments,
    build_task,
    print_json,
    read_module,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="evaluate a variant module against the original kernel",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_task_arguments(p)
    p.add_argument(
        "--variant", required=True, help="the variant: a complete copy of the module with the kernel changed"
    )
    add_arguments(p, CHECK)  # --rounds, --min-speedup, --cpu-tuning: kernelband/options.py
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    task, _ = build_task(args)
    variant_source = read_module(args.variant)[1]
    options = CheckOptions(rounds=args.rounds, min_speedup=args.min_speedup, cpu_tuning=args.cpu_tuning)
    try:
        out = check_variant(task, variant_source, args.variant, options, log=StderrLog(quiet=args.json))
    except SetupError as e:  # the original, its harness or the worker cannot be used
        raise UsageError(str(e)) from None
    if args.json:
        print_json(out.to_dict())
    else:
        _print_human(out)
    return EXIT_OK if out.ok else EXIT_VERDICT


def _print_human(out: CheckOutcome) -> None:
    print(f"{out.kernel}: {out.status}" + (f" ({out.verdict})" if out.verdict else "") + f"  {out.message}")
    if not out.paired:
        return
    clock = "CPU time under the Triton interpreter (--cpu-tuning), not GPU time" if out.interpreted else "GPU time"
    lo, hi = out.speedup_ci or (float("nan"), float("nan"))
    print(
        f"  original {out.baseline_ms:.4g} ms -> variant {out.variant_ms:.4g} ms "
        f"({out.rounds} interleaved rounds; {clock})"
    )
    print(
        f"  speedup {out.speedup:.3f}x (95% CI {lo:.3f}-{hi:.3f}); 'improved' needs the lower bound above "
        f"{max(1.0, out.min_speedup or 0.0):.3f}x"
    )
    for w in out.warnings:
        print(f"  warning: {w}")
