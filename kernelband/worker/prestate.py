"""What a kept run's launches found, kept so that every replay starts from it.

A frozen replay runs the launches alone. Whatever they read that the call prepared
outside them (an input, a buffer the wrapper zeroed, a flag a helper kernel set, a
result a kernel left for itself) must be put back before each timed replay and before
the replay check, or what is timed is not the call: a kernel that skips the work its
earlier run marked done would be timed doing nothing.

The unit is the *storage* (the allocation a tensor views), copied whole when a launch
first touches any view of it: a kernel reaches anywhere in it by pointer arithmetic,
past the view it was given, and two views of one buffer (another dtype, another slice,
first used by a later launch) are one state, as the call found it. Read-only storages
are copied too: a later launch, or torch between launches, may change them.

Copies go to the device while the budget lasts, then (on a GPU) to host memory; a
storage past both budgets is fingerprinted instead. After the run, ``seal`` tells
whether every storage that changed has a copy: when one has none, no replay can start
from the call's state (``unrestorable``).

Imports torch: used inside a variant process only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

StorageKey = tuple[str, int]


def storage_key(t: torch.Tensor) -> StorageKey:
    """The allocation ``t`` views: device and base address of its storage."""
    return (str(t.device), int(t.untyped_storage().data_ptr()))


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """A uint8 tensor over the whole storage ``t`` views (writes through it change ``t``)."""
    s = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(s, 0, (s.nbytes(),), (1,))


def launch_tensors(named: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A launch's tensor arguments, and the tensor under an argument that wraps one (a
    TensorDescriptor's ``base``): memory the launch reaches through either is its state."""
    out: dict[str, torch.Tensor] = {}
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            out[name] = value
        elif isinstance(getattr(value, "base", None), torch.Tensor):
            out[f"{name}.base"] = value.base
    return out


def _device_copy(live: torch.Tensor) -> Optional[torch.Tensor]:
    """A copy of ``live`` on its device, or None where the device has no room for it."""
    try:
        return live.clone()
    except torch.cuda.OutOfMemoryError:
        return None


def view_of(copy: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``t``'s view (dtype, offset, shape, strides) over a copy of its storage."""
    return torch.empty(0, dtype=t.dtype, device=copy.device).set_(
        copy.untyped_storage(), t.storage_offset(), t.size(), t.stride()
    )


@dataclass
class Kept:
    """One storage the launches touched: its live bytes, and their copy (or fingerprint)
    as the first launch that touched it found them."""

    live: torch.Tensor
    label: str  # kernel.arg of the first launch that touched it
    copy: Optional[torch.Tensor] = None  # None: past the budget
    fp: Optional[tuple[int, int]] = None  # fingerprint at first touch, where not copied

    @property
    def nbytes(self) -> int:
        return int(self.live.numel())

    def changed(self) -> Optional[bool]:
        """Whether its content now differs from the first touch's; None when unknown."""
        from .fingerprints import fingerprint

        if self.copy is not None and self.copy.device == self.live.device:
            return not torch.equal(self.live, self.copy)
        if self.copy is not None:  # a host copy: compare fingerprints, not a second device copy
            return fingerprint(self.live) != fingerprint(self.copy)
        if self.fp is not None:
            return fingerprint(self.live) != self.fp
        return None


@dataclass
class PreState:
    """Every storage a run's launches touched, as the first of them found it."""

    device_budget: int  # bytes of copies on the tensors' device; 0: keep nothing
    host_budget: int = 0  # bytes of copies in host memory once the device budget is spent (GPU)
    # beyond the budget, a storage is still copied on its GPU while that leaves this much of
    # the GPU free then (0: never): where a job is alone on the GPU (``Job.gpu_alone``)
    device_reserve: int = 0
    storages: dict[StorageKey, Kept] = field(default_factory=dict)
    # each launch argument view, in order of first use: (tensor, its storage, kernel.arg)
    views: dict[tuple[Any, ...], tuple[torch.Tensor, StorageKey, str]] = field(default_factory=dict)
    device_held: int = 0
    host_held: int = 0
    unrestorable: list[str] = field(default_factory=list)  # labels of changed storages without a copy
    sealed: bool = False

    @property
    def active(self) -> bool:
        return self.device_budget > 0

    def take(self, launch_name: str, named: dict[str, torch.Tensor]) -> None:
        """Before a launch: keep every storage it touches that no earlier launch did."""
        from .fingerprints import fingerprint, tensor_key

        for name, t in named.items():
            key = storage_key(t)
            self.views.setdefault(tensor_key(t), (t, key, f"{launch_name}.{name}"))
            if key in self.storages:
                continue
            live = storage_bytes(t)
            kept = Kept(live, f"{launch_name}.{name}")
            size = kept.nbytes
            if self.device_held + size <= self.device_budget or self._room_beyond_budget(live, size):
                kept.copy = _device_copy(live)
            if kept.copy is not None:
                self.device_held += size
            elif live.is_cuda and self.host_held + size <= self.host_budget:
                kept.copy = live.to("cpu")
                self.host_held += size
            else:
                kept.fp = fingerprint(live)
            self.storages[key] = kept

    def _room_beyond_budget(self, live: torch.Tensor, size: int) -> bool:
        """Where the job is alone on its GPU: whether a copy of ``size`` bytes leaves
        ``device_reserve`` free now. The budget is a quarter of what was free before the
        harness ran; a 32 GiB harness's two 16 GiB storages need more, and the second one's
        copy went to the host: every replay and timed sample then restored 16 GiB from
        pageable memory (a timing step of 22 s instead of 0.3 on an H200,
        benchmarks/results/eval_speed/h200_2ecaa38/D; on an 80 GB H100, every time)."""
        if self.device_reserve <= 0 or not live.is_cuda:
            return False
        free, _ = torch.cuda.mem_get_info(live.device)
        return free - size >= self.device_reserve

    def seal(self) -> None:
        """After the run: which storages changed without a copy to put them back from."""
        self.unrestorable = [k.label for k in self.storages.values() if k.copy is None and k.changed() is not False]
        self.sealed = True

    @property
    def restorable(self) -> bool:
        """Every storage the launches changed can be put back (read-only ones need no copy).
        Sealed on first use: ask before any replay runs."""
        if not self.active or not self.storages:
            return False
        if not self.sealed:
            self.seal()
        return not self.unrestorable

    @property
    def on_device(self) -> bool:
        """Every storage copied, on its own device: the per-view copies can go to the judge."""
        return (
            self.active
            and bool(self.storages)
            and all(k.copy is not None and k.copy.device == k.live.device for k in self.storages.values())
        )

    def restore(self) -> bool:
        """Put every copied storage back as the first launch found it; False (nothing
        restored) when a storage that changed has no copy."""
        if not self.restorable:
            return False
        for kept in self.storages.values():
            if kept.copy is not None:
                kept.live.copy_(kept.copy, non_blocking=False)
        return True

    def view_copies(self) -> list[tuple[str, torch.Tensor]]:
        """("kernel.arg" of the first launch that used it, its content before the first
        launch) for each launch argument view: what the judge checks the launches read."""
        out = []
        for t, key, label in self.views.values():
            copy = self.storages[key].copy
            assert copy is not None, "view_copies needs every storage copied (on_device)"
            out.append((label, view_of(copy, t)))
        return out

    def changed(self, key: StorageKey) -> Optional[bool]:
        kept = self.storages.get(key)
        return kept.changed() if kept is not None else None
