"""Tier 2 in the variant process: the launch's tensors and which of them it wrote,
measured by replaying it (see ``kernelband.profile.traffic`` for the method and the
pure accounting). Imports torch lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, TypedDict

from ..profile.traffic import (
    KernelAccess,
    TensorArg,
    TensorRow,
    WriteEvidence,
    classify,
    dtype_name,
    matmul_flops,
    span_bytes,
)

if TYPE_CHECKING:  # capture imports torch and triton at module level; this module loads torch where it uses it
    from contextlib import AbstractContextManager

    import torch

    from .capture import CapturedLaunch


class LaunchTraffic(TypedDict):
    """One launch's traffic (``launch_traffic``): what the timing tier sums over launches."""

    tensors: list[TensorRow]
    bytes_read: int
    bytes_written: int
    footprint_bytes: int  # every tensor's bytes once
    flops: Optional[int]  # None: unknown (flops_note says why)
    flops_note: str
    dot_dtype: Optional[str]  # the tl.dot operands' dtype, when FLOPs were counted
    write_detection: str  # how the written tensors were found


def arg_names(launch: CapturedLaunch) -> list[str]:
    from ..profile.static import jit_function

    names = getattr(launch.obj, "arg_names", None) or getattr(jit_function(launch.obj), "arg_names", None)
    return list(names or [])


def tensor_args(launch: CapturedLaunch) -> list[TensorArg]:
    """The distinct tensors a launch was given (TensorDescriptor bases included)."""
    import torch

    names = arg_names(launch)
    items: list[tuple[str, object]] = []
    for i, a in enumerate(launch.args):
        items.append((names[i] if i < len(names) else f"arg{i}", a))
    items += [(k, v) for k, v in launch.kwargs.items() if k not in ("grid", "warmup")]
    out: dict[tuple[object, ...], TensorArg] = {}
    for name, a in items:
        if not isinstance(a, torch.Tensor):
            base = getattr(a, "base", None)
            if not isinstance(base, torch.Tensor):
                continue
            a = base
        key = (a.data_ptr(), tuple(a.shape), tuple(a.stride()), a.dtype, a.device)
        if key in out:
            out[key].names.append(name)
            continue
        out[key] = TensorArg(
            [name], a, list(a.shape), dtype_name(a), span_bytes(list(a.shape), list(a.stride()), a.element_size())
        )
    return list(out.values())


def _bits(t: torch.Tensor) -> torch.Tensor:
    import torch

    if t.dtype.is_complex:
        t = torch.view_as_real(t)
    intd = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t if t.dtype == intd else t.view(intd)


def _pattern(t: torch.Tensor, i: int) -> int:
    """Tensor i's poison: all ones minus i, a NaN for every float format but fp8 (and
    distinct per tensor, so a value copied from one poisoned tensor to another shows)."""
    import torch

    return 255 - i if _bits(t).dtype == torch.uint8 else -1 - i


def _sync(t: torch.Tensor) -> None:
    import torch

    if t.is_cuda:
        torch.cuda.synchronize(t.device)


def _quiet_replay(launch: CapturedLaunch) -> None:
    """Replay without the interpreter's numpy warnings about NaN arithmetic."""
    import warnings

    try:
        import numpy as np

        errstate: AbstractContextManager[object] = np.errstate(all="ignore")
    except ImportError:  # pragma: no cover
        import contextlib

        errstate = contextlib.nullcontext()
    with warnings.catch_warnings(), errstate:
        warnings.simplefilter("ignore", RuntimeWarning)
        launch.replay()


def detect_writes(
    launch: CapturedLaunch, tensors: list[TensorArg], access: KernelAccess
) -> tuple[Optional[list[WriteEvidence]], str]:
    """Replay-based write detection (two replays). Returns ([{changed, written,
    poisoned}] per tensor, how) or (None, reason) when the replays cannot be done.

    1. replay as is: a tensor that changes was written (in place, or from one that was);
    2. fill every float tensor (and every integer one the kernel only stores to) with
       its own bit pattern and replay: a tensor that lost its pattern was written.
    The arguments are restored to their values from before after each replay."""
    import torch

    if not tensors:
        return [], "no tensor arguments"
    try:
        saved = [ta.tensor.detach().clone() for ta in tensors]
    except (RuntimeError, MemoryError) as e:  # out of memory for the copies
        return None, f"write detection skipped: cannot copy the arguments ({type(e).__name__})"

    def restore() -> None:
        with torch.no_grad():
            for ta, s in zip(tensors, saved):
                ta.tensor.copy_(s)
        _sync(tensors[0].tensor)

    result: list[WriteEvidence] = [{"changed": False, "written": None, "poisoned": False} for _ in tensors]
    try:
        _quiet_replay(launch)
        _sync(tensors[0].tensor)
        for r, ta, s in zip(result, tensors, saved):
            r["changed"] = not torch.equal(_bits(ta.tensor), _bits(s))
            if r["changed"]:
                r["written"] = True
        restore()
        poisoned: list[tuple[int, int]] = []
        with torch.no_grad():
            for i, (r, ta) in enumerate(zip(result, tensors)):
                if r["changed"] or ta.tensor.dtype.is_complex:
                    continue
                uses = [access.use(n) for n in ta.names]
                store_only = any(u and u.stores and not u.loads and not u.unknown for u in uses)
                if not (ta.tensor.is_floating_point() or store_only):
                    continue  # an integer tensor the kernel may read as indices: never poison
                fill = _pattern(ta.tensor, i)
                _bits(ta.tensor).fill_(fill)
                poisoned.append((i, fill))
        if poisoned:
            try:
                _quiet_replay(launch)
                _sync(tensors[0].tensor)
                for i, fill in poisoned:
                    result[i]["written"] = not bool((_bits(tensors[i].tensor) == fill).all())
                    result[i]["poisoned"] = True
            finally:
                restore()
    except Exception as e:  # noqa: BLE001 - a replay failed; leave the inputs as they were
        try:
            restore()
        except Exception:  # noqa: BLE001
            pass
        return None, f"write detection failed on replay ({type(e).__name__}: {str(e)[:120]})"
    return result, "replay (changed / poisoned tensors)"


def launch_traffic(launch: CapturedLaunch, access: KernelAccess, replay: bool = True) -> LaunchTraffic:
    """Bytes read / written and FLOPs of one launch."""
    tensors = tensor_args(launch)
    detected, how = detect_writes(launch, tensors, access) if replay else (None, "replay not requested")
    rows = classify(tensors, detected, access)
    flops, flops_note, dtype = matmul_flops(rows, access)
    return {
        "tensors": rows,
        "bytes_read": sum(r["bytes"] for r in rows if r["read"]),
        "bytes_written": sum(r["bytes"] for r in rows if r["written"]),
        "footprint_bytes": sum(r["bytes"] for r in rows),
        "flops": flops,
        "flops_note": flops_note,
        "dot_dtype": dtype,
        "write_detection": how,
    }
