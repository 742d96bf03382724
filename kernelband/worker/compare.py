"""Compare a variant's outputs with the original's (DESIGN section 6).

Outputs must match in structure, shape, dtype and NaN/Inf positions (an infinity
against a finite value of its sign within the tolerance of the dtype's largest is the
same value: ``overflow_edge``), and in value within dtype-aware tolerances: every finite
element within ``atol + rtol * |ref|`` and the relative L2 error under ``rel_l2``
(``Bounds`` says how a comparison widens them). Integers and booleans must be exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import torch

from ..model import ErrorStats
from . import fused_checks


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    rel_l2: float


# fp32 allows tf32 (Triton's default for fp32 tl.dot) and a changed reduction order;
# a 1% scaling error still fails everywhere.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(1e-8, 1e-7, 1e-7),
    torch.float32: Tolerance(1e-4, 1e-3, 1e-3),
    torch.float16: Tolerance(1e-2, 5e-3, 3e-3),
    torch.bfloat16: Tolerance(2e-2, 2e-2, 6e-3),
}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        TOLERANCES[getattr(torch, _name)] = Tolerance(1e-1, 1.25e-1, 5e-2)


@dataclass(frozen=True)
class Bounds:
    """How a comparison widens the dtype's tolerances: ``scale`` times every one (0: an
    exact check), ``l2_scale`` times the relative L2 error's, and an absolute term of
    ``of_largest`` times the tensor's largest finite reference magnitude added to each
    element's bound."""

    scale: float = 1.0
    l2_scale: float = 1.0
    of_largest: float = 0.0


@dataclass
class Comparison:
    ok: bool
    message: str
    stats: ErrorStats


def to_device(tree: Any, device: str) -> Any:
    """Move an output tree's tensors to ``device``, keeping its structure (and the type
    name of objects decoded from the wire, which are dicts with a ``type_name``)."""
    if isinstance(tree, torch.Tensor):
        return tree.to(device)
    if isinstance(tree, dict):
        out = type(tree).__new__(type(tree))
        dict.__init__(out, {k: to_device(v, device) for k, v in tree.items()})
        if hasattr(tree, "type_name"):
            out.type_name = tree.type_name  # type: ignore[attr-defined]
        return out
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_device(v, device) for v in tree)
    return tree


def count_tensors(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, (tuple, list)):
        return sum(count_tensors(x) for x in obj)
    if isinstance(obj, dict):
        return sum(count_tensors(v) for v in obj.values())
    return 0


class _Mismatch(Exception):
    pass


_CHUNK = 1 << 24  # elements compared at a time: no full float64 copy of a large output


_COMPUTE_DEVICE: Optional[torch.device] = None


def set_compute_device(device: Optional[str]) -> None:
    """Where comparisons of two host tensors run (the judge sets "cuda" on a GPU machine:
    slices cross to the GPU, so float64 error sums over large outputs take milliseconds
    there instead of seconds on the host)."""
    global _COMPUTE_DEVICE
    _COMPUTE_DEVICE = torch.device(device) if device else None


def work_device(a: torch.Tensor, b: torch.Tensor) -> torch.device:
    """Where to compare two tensors: on the GPU if either lives there (the judge keeps a
    large reference on the host and decodes the candidate's outputs onto the GPU, so only
    one copy of the outputs sits on each side), else on the compute device, else the host."""
    if a.device.type != "cpu":
        return a.device
    if b.device.type != "cpu":
        return b.device
    return _COMPUTE_DEVICE or a.device


def chunk_pairs(
    a: torch.Tensor, b: torch.Tensor, dtype: Optional[torch.dtype] = None
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Matching flat slices of ``a`` and ``b`` (same numel) on their work device, cast to
    ``dtype`` when given: no full-size temporary of either."""
    dev = work_device(a, b)
    fa, fb = a.reshape(-1), b.reshape(-1)
    for start in range(0, fa.numel(), _CHUNK):
        yield (_moved(fa[start : start + _CHUNK], dev, dtype), _moved(fb[start : start + _CHUNK], dev, dtype))


def _moved(x: torch.Tensor, dev: torch.device, dtype: Optional[torch.dtype]) -> torch.Tensor:
    """``x`` on ``dev`` as ``dtype``: moved in its own dtype, then cast there. A cast in the
    same ``to`` as a host-to-GPU move runs on the host and moves twice the bytes (float32 to
    float64): the judge's seconds on a large reference kept on the host."""
    # page-locked host memory (the judge's references) is copied without a host wait
    x = x.to(device=dev, non_blocking=dev.type == "cuda" and x.device.type == "cpu" and x.is_pinned())
    return x.to(dtype) if dtype is not None else x


def _compare_tensor(path: str, ref: torch.Tensor, out: torch.Tensor, stats: ErrorStats, bounds: Bounds) -> None:
    if out.shape != ref.shape:
        raise _Mismatch(f"{path}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        raise _Mismatch(f"{path}: dtype {out.dtype} != expected {ref.dtype}")
    n = ref.numel()
    stats.total += n
    if n == 0:
        return
    if not (ref.is_floating_point() or ref.is_complex()):
        dev = work_device(ref, out)
        bad_t = torch.zeros((), dtype=torch.int64, device=dev)
        for r, o in chunk_pairs(ref, out):
            bad_t += (o != r).sum()
        bad = int(bad_t)  # one synchronisation per tensor
        if bad:
            stats.mismatched += bad
            stats.worst_output = path
            raise _Mismatch(f"{path}: {bad} of {n} integer elements differ (exact match required)")
        return
    if ref.is_complex():
        ref, out = torch.view_as_real(ref), torch.view_as_real(out)
    tol = TOLERANCES.get(ref.dtype, TOLERANCES[torch.float32])
    tol_scale = bounds.scale
    floor = bounds.of_largest * largest_finite(ref) if bounds.of_largest else 0.0
    nan_diff, unwritten, inf_bad, bad, max_abs, max_rel, err_sq, ref_sq = _float_stats(ref, out, tol, tol_scale, floor)
    if nan_diff:
        stats.mismatched += nan_diff
        stats.worst_output = path
        hint = " (NaN where the original has values: outputs left unwritten?)" if unwritten else ""
        raise _Mismatch(f"{path}: NaN positions differ at {nan_diff} elements{hint}")
    if inf_bad:
        stats.worst_output = path
        raise _Mismatch(f"{path}: Inf positions or signs differ")
    ref_norm, err_norm = math.sqrt(ref_sq), math.sqrt(err_sq)
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    if max_abs >= stats.max_abs:
        stats.worst_output = path
    stats.max_abs = max(stats.max_abs, max_abs)
    stats.max_rel = max(stats.max_rel, max_rel)
    stats.rel_l2 = max(stats.rel_l2, rel_l2)
    stats.mismatched += bad
    if bad:
        raise _Mismatch(
            f"{path}: {bad} of {n} elements outside atol={tol.atol:g}+rtol={tol.rtol:g}*|ref| "
            f"(max abs err {max_abs:.3g}, relative L2 error {rel_l2:.3g})"
        )
    if rel_l2 > bounds.l2_scale * tol.rel_l2:
        raise _Mismatch(f"{path}: relative L2 error {rel_l2:.3g} > {bounds.l2_scale * tol.rel_l2:.3g} ({ref.dtype})")


def largest_finite(t: torch.Tensor) -> float:
    """The largest magnitude among ``t``'s finite elements (0 for none), in slices."""
    top = 0.0
    for chunk, _ in chunk_pairs(t, t, None if t.dtype == torch.float64 else torch.float32):
        finite = chunk[torch.isfinite(chunk)]
        if finite.numel():
            top = max(top, float(finite.abs().max()))
    return top


def overflow_edge(dtype: torch.dtype, tol: Tolerance, tol_scale: float) -> float:
    """The magnitude from which a finite value counts as the same as an infinity of its
    sign: within ``dtype``'s own tolerance of its largest finite value. A sum whose true
    value lies at the edge of the range overflows in one order of additions and rounds to
    the largest value in another (a split-K matmul of large fp16 values against the
    original's single pass), so the two agree as closely as any two finite values within
    the tolerance do. A widened tolerance (``tol_scale`` above 1) does not widen the edge:
    an infinity is never the same as a finite value further from it; exact checks
    (``tol_scale`` 0) have no edge."""
    if tol_scale <= 0:
        return math.inf
    big = torch.finfo(dtype).max
    return big - (tol.atol + tol.rtol * big)


def _at_the_edge(r: torch.Tensor, o: torch.Tensor, r_inf: torch.Tensor, edge: float) -> torch.Tensor:
    """Elements infinite in one of ``r``, ``o`` and, in the other, finite of the same sign
    from ``edge`` on (``overflow_edge``)."""
    finite_side = torch.where(r_inf, o, r)
    return ((r > 0) == (o > 0)) & (finite_side.abs() >= edge) & ~torch.isnan(finite_side)


def _float_stats(
    ref: torch.Tensor, out: torch.Tensor, tol: "Tolerance", tol_scale: float, floor: float = 0.0
) -> tuple[int, int, int, int, float, float, float, float]:
    """Every statistic of a float comparison in one pass over the data, accumulated where
    the data is and read back with a single synchronisation: NaN positions that differ,
    of them the ones NaN only in ``out`` (unwritten), Inf positions or signs that differ,
    elements outside the tolerance, max abs and max relative error, and the sums of
    squares of the error and of the reference (in float64). Elementwise work runs in the
    data's own precision (float32 for half types), float64 only for float64 data."""
    scale_atol = tol_scale * tol.atol + floor
    edge = overflow_edge(ref.dtype, tol, tol_scale)
    fused = fused_checks.float_stats(ref, out, scale_atol, tol_scale * tol.rtol, tol.atol, edge)
    if fused is not None:
        return fused
    dev = work_device(ref, out)
    compute = torch.float64 if ref.dtype == torch.float64 else torch.float32
    counts = torch.zeros(4, dtype=torch.int64, device=dev)  # nan_diff, unwritten, inf_bad, bad
    maxima = torch.zeros(2, dtype=compute, device=dev)  # max_abs, max_rel
    sums = torch.zeros(2, dtype=torch.float64, device=dev)  # err_sq, ref_sq
    for r, o in chunk_pairs(ref, out, compute):
        r_nan, o_nan = torch.isnan(r), torch.isnan(o)
        r_inf, o_inf = torch.isinf(r), torch.isinf(o)
        finite = torch.isfinite(r) & torch.isfinite(o)
        zero = torch.zeros((), dtype=compute, device=dev)
        err = torch.where(finite, (o - r).abs(), zero)
        mag = torch.where(finite, r.abs(), zero)
        counts += torch.stack(
            [
                (r_nan != o_nan).sum(),
                (o_nan & ~r_nan).sum(),
                ((r_inf != o_inf) & ~_at_the_edge(r, o, r_inf, edge)).sum() + (r_inf & o_inf & (r != o)).sum(),
                (err > scale_atol + tol_scale * tol.rtol * mag).sum(),
            ]
        )
        maxima = torch.maximum(maxima, torch.stack([err.max(), (err / mag.clamp_min(tol.atol)).max()]))
        err64, mag64 = err.to(torch.float64), mag.to(torch.float64)
        sums += torch.stack([(err64 * err64).sum(), (mag64 * mag64).sum()])
    c = counts.tolist()
    m = maxima.tolist()
    q = sums.tolist()
    return int(c[0]), int(c[1]), int(c[2]), int(c[3]), float(m[0]), float(m[1]), float(q[0]), float(q[1])


def _walk(path: str, ref: Any, out: Any, stats: ErrorStats, bounds: Bounds, compared: set[tuple[int, int]]) -> None:
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            raise _Mismatch(f"{path}: expected a tensor, got {type(out).__name__}")
        # one tensor shown under several names (returned and written) is one pair of the
        # same two objects: compared once, not once per name (a large output's seconds)
        if (id(ref), id(out)) not in compared:
            _compare_tensor(path, ref, out, stats, bounds)
            compared.add((id(ref), id(out)))
    elif isinstance(ref, (tuple, list)):
        if type(out) is not type(ref) or len(out) != len(ref):
            raise _Mismatch(
                f"{path}: expected {type(ref).__name__} of {len(ref)}, got {type(out).__name__}"
                f"{' of ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}"
            )
        for i, (a, b) in enumerate(zip(ref, out)):
            _walk(f"{path}[{i}]", a, b, stats, bounds, compared)
    elif isinstance(ref, dict):
        ref_type, out_type = getattr(ref, "type_name", None), getattr(out, "type_name", None)
        if ref_type != out_type:
            raise _Mismatch(f"{path}: expected {ref_type or 'a dict'}, got {out_type or type(out).__name__}")
        if not isinstance(out, dict) or set(out) != set(ref):
            raise _Mismatch(
                f"{path}: expected dict keys {sorted(map(str, ref))}, got "
                f"{sorted(map(str, out)) if isinstance(out, dict) else type(out).__name__}"
            )
        for k in ref:
            _walk(f"{path}[{k!r}]", ref[k], out[k], stats, bounds, compared)
    elif isinstance(ref, float):
        if not isinstance(out, (float, int)):
            raise _Mismatch(f"{path}: expected a number, got {type(out).__name__}")
        if not (
            math.isclose(out, ref, rel_tol=1e-5 * bounds.scale, abs_tol=1e-8) or (math.isnan(ref) and math.isnan(out))
        ):
            raise _Mismatch(f"{path}: {out!r} != {ref!r}")
    else:
        if out != ref:
            raise _Mismatch(f"{path}: {out!r} != {ref!r}")


def compare_outputs(ref: Any, out: Any, tol_scale: float = 1.0, bounds: Optional[Bounds] = None) -> Comparison:
    """Whether ``out`` matches ``ref`` (module docstring); ``tol_scale`` widens (or, at 0,
    removes) every tolerance; ``bounds``, where given, says how instead."""
    stats = ErrorStats()
    try:
        _walk("output", ref, out, stats, bounds or Bounds(tol_scale, tol_scale), set())
    except _Mismatch as e:
        return Comparison(False, str(e), stats)
    return Comparison(True, "", stats)


def bitwise_equal(a: Any, b: Any) -> bool:
    v = compare_outputs(a, b, tol_scale=0.0)
    return v.ok and v.stats.max_abs == 0.0


def describe(stats: Optional[ErrorStats]) -> str:
    if stats is None:
        return ""
    return f"max abs {stats.max_abs:.3g}, max rel {stats.max_rel:.3g}, rel L2 {stats.rel_l2:.3g}"
