"""What the judge computes itself from the tensors a variant process shows it: content
fingerprints, copies it keeps (references), condensed views of large inputs, and whether
an earlier call's result changed later. Nothing here trusts a number the variant
process computed: the inputs are tensors (read in place over CUDA IPC, or rebuilt from
bytes), and every fact is derived from their contents.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from . import fused_checks
from .wire import WireObject

LOCAL_DATA_MAX_BYTES = 64 << 20  # a larger harness-local input is kept and compared as a fingerprint
_FP_CHUNK = 1 << 22  # elements hashed at a time (and multipliers kept per device: 32 MiB)
_MASK64 = (1 << 64) - 1


def _int_view(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    if flat.element_size() not in (2, 4, 8):
        return flat.contiguous().view(torch.uint8)
    if flat.dtype.is_floating_point or flat.dtype in (torch.bool, torch.complex64, torch.complex128):
        return flat.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[flat.element_size()])
    return flat


def fingerprint(t: torch.Tensor) -> tuple[int, int]:
    """A content hash of a tensor's bytes (a plain sum, and a sum weighted by multipliers
    drawn from this judge's secret key), computed where the tensor lives with one host
    synchronisation: equal content gives equal fingerprints. The weights are secret so
    that a variant cannot aim a change at them: with known weights (position-derived, as
    before), changing two or three elements by amounts chosen to cancel in both sums left
    a tensor that "came back unchanged"; with secret odd weights any one changed element
    changes the weighted sum, and a chosen set of changes cancels only by chance."""
    raw = _int_view(t)
    n = raw.numel()
    if n == 0:
        return (0, 0)
    weights = _weights(raw.device)
    fused = fused_checks.fingerprint_sums(raw, weights, _salts(raw.device, n), _FP_CHUNK) if raw.is_cuda else None
    if fused is not None:
        return (fused[0] & _MASK64, fused[1] & _MASK64)
    s1 = torch.zeros((), dtype=torch.int64, device=raw.device)
    s2 = torch.zeros((), dtype=torch.int64, device=raw.device)
    for k, start in enumerate(range(0, n, _FP_CHUNK)):
        part = raw[start : start + _FP_CHUNK].to(torch.int64)
        s1 += part.sum()
        s2 += (part * (weights[: part.numel()] ^ _salt(k))).sum()  # int64 products and sums wrap
    return (int(s1) & _MASK64, int(s2) & _MASK64)


_KEY = secrets.randbits(64)  # this judge process's: no variant process ever sees it
_WEIGHTS: dict[torch.device, torch.Tensor] = {}
_SALTS: dict[torch.device, torch.Tensor] = {}


def _signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _mix(x: int) -> int:
    """splitmix64's finaliser: a 64-bit value to one that looks random."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _salt(chunk: int) -> int:
    """What the weights of the ``chunk``-th slice are XORed with (even: they stay odd)."""
    return _signed(_mix(_KEY ^ _mix(chunk + 1)) & ~1)


def fingerprint_tables(device: torch.device, dtypes: set[torch.dtype]) -> fused_checks.FingerprintTables:
    """What ``fingerprint``'s kernel reads besides a tensor of ``dtypes`` (for
    ``fused_checks.warm``): the weights, the slices' salts, the slice length, and the
    integer views ``_int_view`` reads those dtypes as."""
    views = frozenset(_int_view(torch.empty(0, dtype=d)).dtype for d in dtypes)
    return fused_checks.FingerprintTables(_weights(device), _salts(device, 1), _FP_CHUNK, views)


def _salts(device: torch.device, n: int) -> torch.Tensor:
    """``_salt(k)`` for each ``_FP_CHUNK``-element slice of ``n`` elements, on ``device``
    (kept, and grown as larger tensors come)."""
    chunks = -(-n // _FP_CHUNK)
    have = _SALTS.get(device)
    if have is None or have.numel() < chunks:
        have = _SALTS[device] = torch.tensor(
            [_salt(k) for k in range(max(chunks, 64))], dtype=torch.int64, device=device
        )
    return have


def _weights(device: torch.device) -> torch.Tensor:
    """``_FP_CHUNK`` odd int64 multipliers from the key, made once per device (the same
    arithmetic on every device: a fingerprint taken on the GPU equals the host's)."""
    w = _WEIGHTS.get(device)
    if w is None:
        x = torch.arange(_FP_CHUNK, dtype=torch.int64, device=device) * _signed(0x9E3779B97F4A7C15) + _signed(
            _mix(_KEY)
        )
        # xorshift-multiply rounds on the device (arithmetic shifts: a mixing, not a bijection)
        x = (x ^ (x >> 31)) * _signed(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> 29)) * _signed(0x94D049BB133111EB)
        w = _WEIGHTS[device] = (x ^ (x >> 32)) | 1
    return w


def tensor_fingerprint_object(t: torch.Tensor) -> WireObject:
    """A large tensor as the judge keeps and compares it: dtype, shape and fingerprint."""
    s1, s2 = fingerprint(t)
    return WireObject("fingerprint", {"dtype": str(t.dtype), "shape": list(t.shape), "fp": [s1, s2]})


def _identities(tree: Any, out: set[int]) -> None:
    if isinstance(tree, torch.Tensor):
        out.add(id(tree))
    elif isinstance(tree, dict):
        for v in tree.values():
            _identities(v, out)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            _identities(v, out)


def condense_locals(tree: Any) -> Any:
    """In an outputs tree, replace each large harness-local tensor that is not an output
    (an input) by its fingerprint: inputs must come back unchanged, and comparing their
    fingerprints needs no copy of them."""
    if not isinstance(tree, dict) or not isinstance(tree.get("harness_locals"), dict):
        return tree
    outputs: set[int] = set()
    _identities(tree.get("returned"), outputs)
    _identities(tree.get("written"), outputs)

    def view(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if id(x) in outputs or x.numel() * x.element_size() <= LOCAL_DATA_MAX_BYTES:
                return x
            return tensor_fingerprint_object(x)
        if isinstance(x, WireObject):
            return WireObject(x.type_name, {k: view(v) for k, v in x.items()})
        if isinstance(x, dict):
            return {k: view(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(view(v) for v in x)
        return x

    return dict(tree, harness_locals=view(tree["harness_locals"]))


AUXILIARY = ("previous", "pre_state")  # parts of an outputs frame that are evidence, not outputs


def comparable(tree: Any) -> Any:
    """An outputs frame's tree as it is compared with a reference: large inputs condensed
    to fingerprints, the evidence parts (earlier results, the launches' starting state)
    left out."""
    tree = condense_locals(tree)
    if isinstance(tree, dict):
        tree = {k: v for k, v in tree.items() if k not in AUXILIARY}
    return tree


def materialize(tree: Any, device: Optional[str], pin: bool = False) -> Any:
    """A copy of every tensor of ``tree`` in the judge's own memory (``device``, else the
    host, page-locked where ``pin``: each later comparison moves it to the GPU several
    times faster): what the judge keeps must not be the variant's memory, which it may
    change or free once the frame is acked. Tensors shown twice stay one copy."""
    seen: dict[int, torch.Tensor] = {}

    def copy(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if id(x) not in seen:
                target = torch.device(device) if device else torch.device("cpu")
                if x.device.type == target.type and not getattr(x, "_kb_ipc", False):
                    seen[id(x)] = x
                elif pin and target.type == "cpu" and x.is_cuda:
                    seen[id(x)] = torch.empty(x.shape, dtype=x.dtype, pin_memory=True).copy_(x)
                else:
                    seen[id(x)] = x.to(target, copy=True).contiguous()
            return seen[id(x)]
        if isinstance(x, WireObject):
            return WireObject(x.type_name, {k: copy(v) for k, v in x.items()})
        if isinstance(x, dict):
            return {k: copy(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(copy(v) for v in x)
        return x

    return copy(tree)


_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bitwise_changed(before: torch.Tensor, after: torch.Tensor) -> Optional[int]:
    """How many elements of ``after`` differ bit for bit from ``before`` (NaNs included);
    None where the two cannot be compared element by element."""
    if before.shape != after.shape or before.dtype != after.dtype or after.is_complex():
        return None
    as_int = _SAME_SIZE_INT.get(after.element_size())
    try:
        if as_int is None or after.dtype == torch.bool:
            return int((before.to(after.device) != after).sum().item())
        a = after.contiguous().view(as_int)
        b = before.to(after.device).contiguous().view(as_int)
        return int((a != b).sum().item())
    except RuntimeError:  # out of memory for the comparison: the caller counts the whole tensor
        return None


def tree_bytes(tree: Any) -> int:
    total, seen = 0, set()

    def walk(x: Any) -> None:
        nonlocal total
        if isinstance(x, torch.Tensor):
            if id(x) not in seen:
                seen.add(id(x))
                total += x.numel() * x.element_size()
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(tree)
    return total


@dataclass
class CallHistory:
    """What each call of a harness returned, as the judge first saw it (fingerprints):
    a later frame shows those tensors again, and any change means the caller's earlier
    result changed under it (a shared output buffer)."""

    first_seen: dict[str, list[list[tuple[int, int]]]] = field(default_factory=dict)

    def record(self, harness: str, returned: Any) -> None:
        tensors: list[torch.Tensor] = []
        _tensors(returned, tensors)
        self.first_seen.setdefault(harness, []).append([fingerprint(t) for t in tensors])

    def calls(self, harness: str) -> int:
        return len(self.first_seen.get(harness, []))

    def changed(self, harness: str, previous: Any) -> Optional[str]:
        """A description of the first earlier result that changed, or None. ``previous`` is
        the frame's list (one entry per earlier call) of the tensors each call returned."""
        seen = self.first_seen.get(harness, [])
        if not isinstance(previous, (list, tuple)):
            return None
        if len(previous) != len(seen):
            return f"{len(previous)} earlier results shown, {len(seen)} expected"
        for call, (tensors, fps) in enumerate(zip(previous, seen)):
            if tensors is None:  # not kept by the variant process (memory): not compared
                continue
            now: list[torch.Tensor] = []
            _tensors(tensors, now)
            if len(now) != len(fps):
                return f"call {call + 1}: {len(now)} tensors shown, {len(fps)} returned"
            for i, (t, fp) in enumerate(zip(now, fps)):
                if fingerprint(t) != fp:
                    return f"call {call + 1}, tensor {i}"
        return None


def _tensors(tree: Any, out: list[torch.Tensor]) -> None:
    if isinstance(tree, torch.Tensor):
        out.append(tree)
    elif isinstance(tree, dict):
        for v in tree.values():
            _tensors(v, out)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            _tensors(v, out)


def content_key(t: torch.Tensor) -> tuple[str, int, tuple[int, int]]:
    """A tensor's content as a set member: dtype, element count and fingerprint."""
    return str(t.dtype), t.numel(), fingerprint(t)


def is_constant(t: torch.Tensor) -> bool:
    """Every element equal (a memset: zeros, ones, a fill) or every element NaN (fresh memory)."""
    flat = t.detach().reshape(-1)
    if flat.numel() <= 1:
        return True
    if flat.is_floating_point() and bool(torch.isnan(flat).all()):
        return True
    return bool((flat == flat[0]).all())


def tree_print(tree: Any, prints: Optional[dict[int, tuple[int, int]]] = None) -> Any:
    """An output tree as a hashable value that is equal for two trees exactly when they
    are equal bit for bit (tensors by dtype, shape and ``fingerprint``, everything else by
    value and type); ``prints`` collects each tensor's fingerprint by ``id`` (valid while
    the tree lives)."""
    if isinstance(tree, torch.Tensor):
        fp = fingerprint(tree)
        if prints is not None:
            prints[id(tree)] = fp
        return ("tensor", str(tree.dtype), tuple(tree.shape), fp)
    if isinstance(tree, dict):
        items = tuple(sorted(((repr(k), tree_print(v, prints)) for k, v in tree.items()), key=lambda kv: kv[0]))
        return ("dict", getattr(tree, "type_name", None), items)
    if isinstance(tree, (list, tuple)):
        return (type(tree).__name__, tuple(tree_print(v, prints) for v in tree))
    return (type(tree).__name__, repr(tree))
