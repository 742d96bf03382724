"""Where a judge's threads spend their time, from a ``py-spy record --format raw`` file
(``--threads --idle``: wall clock; ``--gil``: only the thread holding the interpreter lock).

    python benchmarks/spy_summary.py SPY.txt [--only THREAD_OR_FRAME] [--top N]

Prints the samples in all (97 a second in the probe) and, for each function the stacks
pass through, the share of the selected samples whose stack includes it (inclusive), the
functions sorted by that share. ``--only`` keeps the stacks containing that text (a
thread's name such as ``kb-op-evaluate``, or a function such as ``prepare``).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_PLACE = re.compile(r" \((?:[^()]*/)?([^/()]+?):\d+\)$")


def inclusive(path: Path, only: str = "") -> tuple[int, Counter[str]]:
    """Selected samples in all, and per function (``name (file)``) the samples whose stack
    includes it, each stack counted once per function."""
    total, counts = 0, Counter[str]()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit() or (only and only not in stack):
            continue
        total += int(n)
        for frame in {_PLACE.sub(r" (\1)", f) for f in stack.split(";")}:
            counts[frame] += int(n)
    return total, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spy", type=Path)
    ap.add_argument("--only", default="")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    total, counts = inclusive(args.spy, args.only)
    print(f"{total} samples{f' with {args.only!r}' if args.only else ''}")
    for frame, n in counts.most_common(args.top):
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}% {frame}")


if __name__ == "__main__":
    main()
