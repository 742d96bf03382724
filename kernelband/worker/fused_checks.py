"""The judge's passes over a large output as one Triton kernel each, on the GPU.

Written with torch operations, a comparison of a 256 MiB fp16 output took 16 ms on an
idle H200 (about thirty kernels over each 16M-element slice, float64 copies included)
and twice that beside another process's GPU work, where each of its host
synchronisations waits for the GPU to switch to the judge; the float64 precision check
took 18 ms idle and 190 ms beside other work (a synchronisation per statistic per slice).
A single read of that output takes 0.1 ms (benchmarks/results/judge_compare/). Each
kernel here reads its inputs once, accumulates per program, and the per-program partial
results are reduced by torch and read back with one synchronisation.

The statistics are the torch path's (``compare._float_stats``, ``checks.error_against``,
``checks.deviations``, ``observe.fingerprint``), computed in the same precision; only
the order of float summation differs (a last-bit difference in a relative L2 error).
Fingerprints are sums that wrap modulo 2**64: bit for bit equal to the torch path's.

The kernels compile into a folder this judge process makes for itself (``_use_private_cache``):
no file a variant process could have written is ever loaded as the judge's code.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from typing import Any, Callable, NamedTuple, Optional, TypeVar

import torch

from ..trace import mark

_R = TypeVar("_R")
_ENV = "KERNELBAND_FUSED_CHECKS"  # "0": the torch path everywhere (an A/B of this module)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INTS = (torch.uint8, torch.int16, torch.int32, torch.int64)
# A tensor's checks by torch cost about 30 ms a GiB each on an idle H200 and up to ten
# times that beside other processes' GPU work; a kernel's compile about 0.2-0.4 s, and the
# process's first about 2 s, once a session (benchmarks/results/judge_compare/). From
# MIN_BYTES a tensor's checks are fused from the first frame (a compile on the setup's
# path, where needed, costs less than torch's passes); from WARM_MIN_BYTES once ``warm``
# has compiled the kernels after the setup: a 64 MiB output's torch checks took 0.6 s of
# each add_scale candidate's judging, inside the GPU lock's shared hold
# (benchmarks/results/eval_speed/SESSION12.md), and one fused pass about 1-3 ms.
MIN_BYTES = 128 << 20
WARM_MIN_BYTES = 8 << 20
_BLOCK = 1024
_MAX_PROGRAMS = 1024  # partial results per kernel (each program strides over the tensor)

_kernels: Optional[Any] = None
_warmed = threading.Event()  # ``warm`` compiled the kernels: tensors from WARM_MIN_BYTES use them
_lock = threading.Lock()
_compile_lock = threading.Lock()
_compiled: set[tuple[Any, ...]] = set()
_cache_dir: Optional[str] = None


_cache_kept = False  # the machine's cache of the judge's kernels, not a folder of this process's


def _use_judge_cache() -> None:
    """Point this process's Triton cache, before the judge compiles its kernels, at a folder
    no variant process can write: this machine's cache of the judge's own kernels
    (``machine_cache.trusted_triton_cache``), so that a setup whose outputs take these
    checks loads them (compiling them took 1.2-2.1 s of the setup in 31 of 36 sessions:
    benchmarks/results/eval_speed/SESSION10.md); where that cache is off or cannot be
    written, a new folder of this process's own (mode 0700). Variant processes are given
    their own cache folders in their environment (``jobs.VariantJob.spawn``)."""
    global _cache_dir, _cache_kept
    if _cache_dir is not None:
        return
    from ..machine_cache import trusted_triton_cache

    kept = trusted_triton_cache("judge")
    if kept is not None:
        try:
            kept.mkdir(parents=True, exist_ok=True, mode=0o700)
            kept.chmod(0o700)  # only this user, whoever made the folder
            _cache_kept = os.access(kept, os.W_OK | os.X_OK)
        except OSError:
            _cache_kept = False
    _cache_dir = str(kept) if kept is not None and _cache_kept else tempfile.mkdtemp(prefix="kernelband-judge-triton-")
    os.environ["TRITON_CACHE_DIR"] = _cache_dir


def remove_private_cache() -> None:
    """The judge's compiled kernels, at its exit, where they were its own."""
    global _cache_dir
    with _lock:
        if _cache_dir is not None and not _cache_kept:
            shutil.rmtree(_cache_dir, ignore_errors=True)
        _cache_dir = None


def enabled() -> bool:
    return os.environ.get(_ENV, "1") != "0"


def usable(*tensors: torch.Tensor) -> bool:
    """Whether the fused kernels read these tensors: all on one CUDA device, and the first
    large enough that its torch passes cost more than a fused pass does: from MIN_BYTES
    always, from WARM_MIN_BYTES once ``warm`` has compiled the kernels (no compile on the
    setup's path for them: a session of small outputs starts as fast as before)."""
    if not enabled() or not tensors or not all(t.is_cuda for t in tensors):
        return False
    if not large_enough(tensors[0].numel() * tensors[0].element_size()):
        return False
    return len({t.device for t in tensors}) == 1 and _load() is not None


def large_enough(nbytes: int) -> bool:
    """Whether a tensor of ``nbytes`` is checked by the fused kernels (``usable``)."""
    return nbytes >= MIN_BYTES or (nbytes >= WARM_MIN_BYTES and _warmed.is_set())


def _load() -> Optional[Any]:
    global _kernels
    with _lock:
        if _kernels is None:
            _use_judge_cache()
            try:
                from . import fused_kernels
            except ImportError:  # pragma: no cover - no Triton: the torch path
                _kernels = False
            else:
                _kernels = fused_kernels
        return _kernels or None


def _guarded(run: Callable[[], _R]) -> Optional[_R]:
    """``run()``, or None (the torch path, from then on) where the kernels do not compile
    on this Triton: a judge whose fast path fails still judges."""
    global _kernels
    try:
        return run()
    except Exception as e:  # noqa: BLE001 - a compile error of any kind
        if "CUDA error" in str(e):
            raise  # the context is broken: no other path can go on with it
        with _lock:
            _kernels = False
        mark("judge.fused_checks_off", reason=f"{type(e).__name__}: {str(e)[:300]}")
        return None


def _kernel_module() -> Any:
    k = _load()
    if k is None:  # pragma: no cover - callers asked ``usable`` first
        raise RuntimeError("Triton is not importable: the fused checks cannot run")
    return k


def _on(device: torch.device) -> Any:
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


_TOLERANCES: dict[tuple[torch.device, float, float, float, float], torch.Tensor] = {}


def _tolerances(device: torch.device, atol: float, rtol: float, clamp: float, edge: float) -> torch.Tensor:
    """(atol, rtol, clamp, edge) as float64 on ``device``, made once per value (a handful per session)."""
    key = (device, atol, rtol, clamp, edge)
    t = _TOLERANCES.get(key)
    if t is None:
        t = _TOLERANCES[key] = torch.tensor([atol, rtol, clamp, edge], dtype=torch.float64, device=device)
    return t


def _specialization(kernel: Any, args: tuple[Any, ...], constants: dict[str, Any]) -> tuple[Any, ...]:
    """What Triton compiles a launch for: the kernel, its tensors' dtypes and alignment,
    the constants, the device."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    wide = tuple(isinstance(a, int) and a >= 2**31 for a in args)  # an int64 element count
    return (
        id(kernel),
        tuple((t.dtype, t.data_ptr() % 16 == 0) for t in tensors),
        tuple(sorted(constants.items())),
        wide,
        tensors[0].device if tensors else None,
    )


def _launch(kernel: Any, programs: int, args: tuple[Any, ...], constants: dict[str, Any], warmup: bool = False) -> None:
    """A launch (or with ``warmup``, only the compile) of ``kernel``. The first of each
    specialization runs under a lock: several candidates' threads that need the same new
    kernel at once compile it once, not once each (seconds of the first wave's frames)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    device = tensors[0].device
    key = _specialization(kernel, args, constants)
    with _on(device):
        if key in _compiled:
            kernel[(programs,)](*args, **constants)
            return
        with _compile_lock:
            if warmup:
                kernel.warmup(*args, grid=(programs,), **constants)
            else:
                kernel[(programs,)](*args, **constants)
            _compiled.add(key)


class FingerprintTables(NamedTuple):
    """What the fingerprint kernel reads besides the tensor (``observe.fingerprint_tables``)."""

    weights: torch.Tensor
    salts: torch.Tensor
    chunk: int
    views: frozenset[torch.dtype]  # the integer views of the tensors to be fingerprinted


def warm(
    device: torch.device, dtypes: set[torch.dtype], fingerprint_tables: FingerprintTables
) -> Optional[threading.Thread]:
    """Compile, in a thread of their own, the kernels the checks of outputs of ``dtypes``
    use, when the setup is done and the first candidates start (they compile and run for
    seconds before their first frame). Not during the setup: a compile holds the
    interpreter lock, and fifteen of them beside the original's runs made the setup
    about 1.5 s longer on an H200. Nothing runs on the GPU (Triton's ``warmup``); None
    where the kernels do not apply. ``fingerprint_tables``: ``observe.fingerprint_tables``."""
    if device.type != "cuda" or not dtypes or not enabled() or _load() is None:
        return None

    def compile_all() -> None:
        _guarded(lambda: _compile_for(device, dtypes, fingerprint_tables))
        _warmed.set()

    thread = threading.Thread(
        target=compile_all,
        daemon=True,
        name="kb-fused-warm",
    )
    thread.start()
    return thread


def _compile_for(device: torch.device, dtypes: set[torch.dtype], fingerprint_tables: FingerprintTables) -> None:
    k = _kernel_module()

    def t(dtype: torch.dtype, n: int = 16) -> torch.Tensor:
        return torch.zeros(n, dtype=dtype, device=device)

    for dtype in (d for d in _FLOATS if d in dtypes):
        _launch(
            k.float_stats_kernel,
            1,
            (t(dtype), t(dtype), t(torch.int64, 4), t(torch.float64, 2), t(torch.float64, 2), 16, t(torch.float64, 4)),
            {"BLOCK": _BLOCK, "WIDE": dtype == torch.float64, "enable_fp_fusion": False},
            warmup=True,
        )
        pairs = [(torch.float64, dtype)] + ([(dtype, dtype)] if dtype != torch.float64 else [])
        for a, b in pairs:
            _launch(
                k.diff_stats_kernel,
                1,
                (t(a), t(b), t(torch.int64, 1), t(torch.float64, 2), t(torch.float64, 2), 16),
                {"BLOCK": _BLOCK, "enable_fp_fusion": False},
                warmup=True,
            )
    weights, salts, chunk, views = fingerprint_tables
    for dtype in (d for d in _INTS if d in views):
        _launch(
            k.fingerprint_kernel,
            1,
            (t(dtype), weights, salts, t(torch.int64, 2), 16),
            {"CHUNK": chunk, "BLOCK": _BLOCK},
            warmup=True,
        )


def _flat(t: torch.Tensor) -> torch.Tensor:
    # the kernels read flat memory: a strided view (a 1-D one too) is copied first
    return t.detach().reshape(-1).contiguous()


def _grid(n: int) -> int:
    return max(1, min(_MAX_PROGRAMS, -(-n // _BLOCK)))


def float_stats(
    ref: torch.Tensor, out: torch.Tensor, atol: float, rtol: float, clamp: float, edge: float
) -> Optional[tuple[int, int, int, int, float, float, float, float]]:
    """``compare._float_stats`` in one kernel: (NaN positions that differ, of them NaN only
    in ``out``, Inf positions or signs that differ, elements outside ``atol + rtol *
    |ref|``, max abs error, max relative error (|ref| clamped below at ``clamp``), sum of
    squared errors, sum of squared references), over elements finite in both for the
    errors; an infinity against a finite value of its sign from ``edge`` on is no
    difference (``compare.overflow_edge``). None where the kernels cannot read the tensors."""
    if ref.dtype not in _FLOATS or out.dtype != ref.dtype or not usable(ref, out):
        return None
    return _guarded(lambda: run_float_stats(ref, out, atol, rtol, clamp, edge))


def run_float_stats(
    ref: torch.Tensor, out: torch.Tensor, atol: float, rtol: float, clamp: float, edge: float
) -> tuple[int, int, int, int, float, float, float, float]:
    """``float_stats`` without the checks of where the tensors are (the tests run it under
    Triton's interpreter, on the host)."""
    k = _kernel_module()
    a, b = _flat(ref), _flat(out)
    n = a.numel()
    programs = _grid(n)
    counts = torch.empty((programs, 4), dtype=torch.int64, device=a.device)
    maxima = torch.empty((programs, 2), dtype=torch.float64, device=a.device)
    sums = torch.empty((programs, 2), dtype=torch.float64, device=a.device)
    _launch(
        k.float_stats_kernel,
        programs,
        (a, b, counts, maxima, sums, n, _tolerances(a.device, atol, rtol, clamp, edge)),
        {"BLOCK": _BLOCK, "WIDE": ref.dtype == torch.float64, "enable_fp_fusion": False},
    )
    c, m, s = counts.sum(0), maxima.amax(0), sums.sum(0)
    values = torch.cat([c.to(torch.float64), m, s]).tolist()  # one synchronisation
    return (
        int(values[0]),
        int(values[1]),
        int(values[2]),
        int(values[3]),
        float(values[4]),
        float(values[5]),
        float(values[6]),
        float(values[7]),
    )


def diff_stats(ref: torch.Tensor, out: torch.Tensor) -> Optional[tuple[int, float, float, float, float]]:
    """Over elements finite in both, in float64: (their count, sum of (out - ref)**2, sum
    of ref**2, max |out - ref|, max |ref|). ``checks.error_against`` (``ref`` a float64
    rerun) and ``checks.deviations`` in one kernel. None where the kernels cannot read them."""
    if ref.dtype not in _FLOATS or out.dtype not in _FLOATS or not usable(ref, out):
        return None
    return _guarded(lambda: run_diff_stats(ref, out))


def run_diff_stats(ref: torch.Tensor, out: torch.Tensor) -> tuple[int, float, float, float, float]:
    k = _kernel_module()
    a, b = _flat(ref), _flat(out)
    n = a.numel()
    programs = _grid(n)
    counts = torch.empty((programs,), dtype=torch.int64, device=a.device)
    sums = torch.empty((programs, 2), dtype=torch.float64, device=a.device)
    maxima = torch.empty((programs, 2), dtype=torch.float64, device=a.device)
    _launch(
        k.diff_stats_kernel, programs, (a, b, counts, sums, maxima, n), {"BLOCK": _BLOCK, "enable_fp_fusion": False}
    )
    values = torch.cat([counts.sum().to(torch.float64).reshape(1), sums.sum(0), maxima.amax(0)]).tolist()
    return int(values[0]), float(values[1]), float(values[2]), float(values[3]), float(values[4])


def fingerprint_sums(
    raw: torch.Tensor, weights: torch.Tensor, salts: torch.Tensor, chunk: int
) -> Optional[tuple[int, int]]:
    """``observe.fingerprint``'s two wrapping int64 sums over ``raw`` (an integer view of
    the tensor's bytes): the plain sum, and the sum of each element times ``weights[i %
    chunk] ^ salts[i // chunk]``. None where the kernels cannot read it."""
    if raw.dtype not in _INTS or not usable(raw, weights, salts):
        return None
    return _guarded(lambda: run_fingerprint_sums(raw, weights, salts, chunk))


def run_fingerprint_sums(raw: torch.Tensor, weights: torch.Tensor, salts: torch.Tensor, chunk: int) -> tuple[int, int]:
    k = _kernel_module()
    flat = _flat(raw)
    n = flat.numel()
    programs = _grid(n)
    parts = torch.empty((programs, 2), dtype=torch.int64, device=flat.device)
    _launch(k.fingerprint_kernel, programs, (flat, weights, salts, parts, n), {"CHUNK": chunk, "BLOCK": _BLOCK})
    s1, s2 = parts.sum(0).tolist()  # int64 sums wrap as the torch path's do
    return int(s1), int(s2)
