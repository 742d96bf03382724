"""Tier 2 accounting: bytes a launch moves and FLOPs where they can be known.

Bytes follow the roofline convention of DESIGN section 7: every tensor argument is
read once, or written once, or both when it is updated in place; caches are ignored.
Which tensors a launch wrote is measured, not guessed from names: the launch is
replayed (1) as is, where a tensor that changes was written (and, when the kernel
also loads from it or the AST cannot tell, updated in place: read and written), then (2) once more after filling each candidate tensor with its own bit
pattern (all ones minus its index: a NaN for floats), where a tensor that no longer
holds its pattern was written. Every tensor is restored after each replay. Integer
tensors the kernel may read (indices) are never poisoned; for them, and whenever a
replay is not possible, the kernel's AST decides (``kernelband.access.analyze_kernel``:
which pointer parameters reach a ``tl.load`` / ``tl.store`` / ``tl.atomic_*``). A written tensor
also counts as read when the AST shows the kernel loading from it.

FLOPs: only matrix products are counted. A kernel with exactly one ``tl.dot`` whose
launch has tensors A (..., M, K), B (..., K, N) or (..., N, K) read and C (..., M, N)
written did 2*batch*M*N*K FLOPs; anything else is "unknown" with the reason.

This module is pure (AST and arithmetic); the replays that measure writes run in the
variant process: ``kernelband.worker.traffic_replay`` (``launch_traffic``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, TypedDict

from ..access import KernelAccess, analyze_kernel  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # only the type: this module's arithmetic runs without torch
    import torch

# --------------------------------------------------------------------------- tensors


@dataclass
class TensorArg:
    names: list[str]
    tensor: torch.Tensor
    shape: list[int]
    dtype: str
    nbytes: int  # distinct bytes the view spans (broadcast dims counted once)


class WriteEvidence(TypedDict):
    """What replaying a launch showed about one of its tensors (``traffic_replay.detect_writes``)."""

    changed: bool  # differs after a plain replay
    written: Optional[bool]  # None: neither replay showed whether the launch wrote it
    poisoned: bool  # filled with its bit pattern for the second replay


class TensorRow(TypedDict):
    """One tensor of a launch as the timing tier reports it (``TimingTier.tensors``)."""

    name: str  # its argument names, joined by "/"
    shape: list[int]
    dtype: str
    bytes: int
    read: bool
    written: bool
    bytes_moved: int  # bytes * (read + written)
    how: str  # the evidence for read / written


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def span_bytes(shape: list[int], stride: list[int], itemsize: int) -> int:
    """Bytes of the distinct elements a strided view covers: min(numel, span)."""
    numel = math.prod(shape) if shape else 1
    if numel == 0:
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(shape, stride))
    return min(numel, span) * itemsize


def classify(
    tensors: list[TensorArg], detected: Optional[list[WriteEvidence]], access: KernelAccess
) -> list[TensorRow]:
    """Per tensor: read / written, the bytes counted, and the evidence."""
    rows: list[TensorRow] = []
    for i, ta in enumerate(tensors):
        uses = [u for u in (access.use(n) for n in ta.names) if u is not None]
        ast_loads = any(u.loads for u in uses)
        ast_stores = any(u.stores for u in uses)
        ast_sure = bool(uses) and not any(u.unknown for u in uses)
        d = detected[i] if detected is not None else None
        if d is not None and d["written"] is not None:
            written = bool(d["written"])
            if d["changed"]:  # changed on replay: updated in place, or computed from something that was
                read = ast_loads or not ast_sure
                how = "updated in place (changed on replay)" if read else "written (changed on replay; never loaded)"
            elif written:
                read = ast_loads
                how = "written (poison overwritten)" + ("; also loaded by the kernel" if read else "")
            else:
                read, how = True, "read (poison kept)"
            if not written and ast_sure and not ast_loads and not ast_stores:
                read, how = False, "unused by the kernel"
        else:
            written = ast_stores
            read = ast_loads or not ast_stores or not ast_sure
            how = "from the kernel's loads/stores (no replay evidence)"
            if ast_sure and not ast_loads and not ast_stores:
                read, how = False, "unused by the kernel"
        rows.append(
            {
                "name": "/".join(ta.names),
                "shape": ta.shape,
                "dtype": ta.dtype,
                "bytes": ta.nbytes,
                "read": read,
                "written": written,
                "bytes_moved": ta.nbytes * (int(read) + int(written)),
                "how": how,
            }
        )
    return rows


def matmul_flops(rows: list[TensorRow], access: KernelAccess) -> tuple[Optional[int], str, Optional[str]]:
    """(FLOPs or None, how/why, operand dtype) for one launch from its tensors' shapes."""
    if not access.found:
        return None, "FLOPs unknown: the kernel's source was not found", None
    if access.dots == 0:
        return None, "FLOPs unknown: no tl.dot in the kernel (elementwise work is not counted)", None
    if access.dots > 1:
        return None, f"FLOPs unknown: {access.dots} tl.dot calls; one matrix product cannot account for them", None
    outs = [r for r in rows if r["written"] and len(r["shape"]) >= 2]
    ins = [r for r in rows if r["read"] and len(r["shape"]) >= 2]
    found: list[tuple[int, str]] = []
    for c in outs:
        m, n = c["shape"][-2:]
        batch = math.prod(c["shape"][:-2]) if len(c["shape"]) > 2 else 1
        for i, a in enumerate(ins):
            for b in ins[i + 1 :]:
                if a is c or b is c:
                    continue
                (am, ak), (b0, b1) = a["shape"][-2:], b["shape"][-2:]
                if am == m and b1 == n and ak == b0:
                    found.append((2 * batch * m * n * ak, a["dtype"]))
                elif am == m and b0 == n and ak == b1:
                    found.append((2 * batch * m * n * ak, a["dtype"]))
    if not found:
        return None, "FLOPs unknown: no (M,K) x (K,N) -> (M,N) tensors among the launch's arguments", None
    flops, dtype = found[0]
    note = "2*M*N*K from the tl.dot operand tensors"
    if len({f for f, _ in found}) > 1:
        note += " (several shape matches; the first argument order was used)"
    return flops, note, dtype


def peak_key(dtype: Optional[str], ieee: bool) -> Optional[str]:
    """Which measured matrix rate a tl.dot on these operands is judged against."""
    if dtype is None:
        return None
    if dtype in ("float16", "bfloat16") or dtype.startswith("float8"):
        return "bf16"
    if dtype == "float32":
        return "fp32" if ieee else "tf32"
    return None
