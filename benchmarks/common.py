"""What several benchmark scripts share: the repository root on ``sys.path``, loading a
kernel module from a file, geometric means and paired t-intervals, and generated
sources kept as diffs against the file they were generated from.

A script run as ``python benchmarks/x.py`` has ``benchmarks/`` on its path, so
``import common`` works there and in the tests (which put ``benchmarks/`` on the path);
importing it puts the repository root on the path for ``kernelband`` and
``benchmarks.suite``. numpy-free: the statistics here are a few numbers each.
"""
from __future__ import annotations

import difflib
import hashlib
import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterable, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def bench_commit() -> str:
    """The commit a result describes: ``KERNELBAND_BENCH_COMMIT`` where the tree is a copy
    without its git history (the GPU machine), else HEAD, ``+dirty`` with uncommitted
    changes under ``kernelband/``."""
    if os.environ.get("KERNELBAND_BENCH_COMMIT"):
        return os.environ["KERNELBAND_BENCH_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "kernelband"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return (sha or "unknown") + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def kernel_modules() -> list[tuple[Path, str]]:
    """(file, kernel) of every kernel module of the repository: examples/, the suite, the
    real-world modules."""
    from benchmarks.realworld import MODULES
    from benchmarks.suite import SUITE

    out = [(ROOT / "examples" / f"{n}.py", k) for n, k in
           (("add_scale", "axpy_kernel"), ("matmul", "matmul_kernel"), ("softmax", "softmax_kernel"))]
    out += [(e.path, e.kernel) for e in SUITE]
    out += [(ROOT / "benchmarks" / "realworld" / f, k) for f, k in MODULES.items()]
    return out


def write_markdown(path: Path, lines: list[str]) -> None:
    """Write a report's lines to ``path`` and print them."""
    text = "\n".join(lines)
    path.write_text(text + "\n", encoding="utf-8")
    print(text)


def load_module(path: Path, name: str) -> ModuleType:
    """Import the file ``path`` as a module called ``name`` (registered in sys.modules,
    which dataclasses and pickling of its objects need)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def geomean(xs: Iterable[float]) -> float:
    """Geometric mean of positive numbers; ValueError on an empty or non-positive input
    (a speedup of 0 or below is a bug upstream, not a value to average)."""
    logs = []
    for x in xs:
        if not x > 0:
            raise ValueError(f"geomean of a non-positive value: {x!r}")
        logs.append(math.log(x))
    if not logs:
        raise ValueError("geomean of no values")
    return math.exp(math.fsum(logs) / len(logs))


def geomean_known(xs: Iterable[object]) -> Optional[float]:
    """Geometric mean of the values that are known (numbers, positive and finite), or
    None when none is: result tables have cells a run could not fill."""
    known = [float(x) for x in xs
             if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0]
    return geomean(known) if known else None


def _two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` (integer) degrees of freedom, exactly
    (Abramowitz & Stegun 26.7.3 and 26.7.4: a finite series in cos(theta))."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for k in range(3, df - 1, 2):
                term *= c2 * (k - 1) / k
                total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * total)
    term, total = 1.0, 1.0
    for k in range(2, df, 2):
        term *= c2 * (k - 1) / k
        total += term
    return math.sin(theta) * total


def t975(n: int) -> float:
    """Two-sided 95% Student t quantile for ``n`` paired samples (n - 1 degrees of
    freedom), exact to 1e-12 (bisection on the exact distribution; no scipy)."""
    df = n - 1
    if df < 1:
        raise ValueError(f"a t-interval needs at least 2 samples, got {n}")
    lo, hi = 0.0, 1.0
    while _two_sided_mass(hi, df) < 0.95:
        hi *= 2.0
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if _two_sided_mass(mid, df) < 0.95:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Paired comparison over seeds (a[i] and b[i] share seed i): the geomean ratio a/b
    and its 95% t-interval (of the mean log ratio, exponentiated); wins and losses count
    the seeds where a is above or below b."""
    if len(a) != len(b):
        raise ValueError(f"paired samples of different lengths: {len(a)} and {len(b)}")
    d = [math.log(x) - math.log(y) for x, y in zip(a, b)]
    n = len(d)
    m = math.fsum(d) / n
    if n > 1:
        sd = math.sqrt(math.fsum((x - m) ** 2 for x in d) / (n - 1))
        half = t975(n) * sd / math.sqrt(n)
    else:
        half = math.inf
    return {"ratio": math.exp(m), "lo": math.exp(m - half), "hi": math.exp(m + half), "n": n,
            "wins": sum(x > 1e-12 for x in d), "losses": sum(x < -1e-12 for x in d)}


# --------------------------------------------------------------------------- generated sources as data


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_diff(original: str, variant: str, name: str) -> list[str]:
    """A unified diff (3 lines of context) from ``original`` to ``variant``, one list
    entry per line: a JSON list keeps a last line without a newline intact."""
    return list(difflib.unified_diff(original.splitlines(keepends=True), variant.splitlines(keepends=True),
                                     f"a/{name}", f"b/{name}"))


_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def apply_source_diff(original: str, diff: list[str]) -> str:
    """``original`` with ``diff`` (from ``source_diff``) applied; ValueError when a
    context or removed line does not match (the original changed since)."""
    src = original.splitlines(keepends=True)
    out: list[str] = []
    pos, k = 0, 0
    while k < len(diff) and not diff[k].startswith("@@"):
        k += 1  # the ---/+++ header
    while k < len(diff):
        m = _HUNK.match(diff[k])
        if m is None:
            raise ValueError(f"not a hunk header: {diff[k]!r}")
        start = int(m[1]) - (0 if m[2] == "0" else 1)  # a hunk that only adds names the line before it
        if start < pos:
            raise ValueError("hunks overlap or are out of order")
        out.extend(src[pos:start])
        pos, k = start, k + 1
        while k < len(diff) and not diff[k].startswith("@@"):
            tag, text = diff[k][:1], diff[k][1:]
            if tag in (" ", "-"):
                if pos >= len(src) or src[pos] != text:
                    raise ValueError(f"line {pos + 1} of the original is not {text!r}: it changed since the diff")
                pos += 1
            if tag in (" ", "+"):
                out.append(text)
            elif tag != "-":
                raise ValueError(f"not a diff line: {diff[k]!r}")
            k += 1
    out.extend(src[pos:])
    return "".join(out)
