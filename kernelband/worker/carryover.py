"""The replay rules of a candidate's timed run: state a replay does not reproduce.

Timing replays the kept run's launches, frozen, each replay from the state the run's
launches found (``prestate``: every storage they touch, as the first of them found it).
A kernel's work may depend on that state (a flag, a counter, a semaphore, a result it
left for itself, a buffer the wrapper zeroed): it is then timed doing exactly the
call's work. Three things are refused instead, checked on the kept
run before any replay:

- the launches changed memory the judge could not copy to put back (past every budget):
  no replay could start from the call's state;
- a launch is given a tensor's address as an integer: it reaches memory no launch
  argument covers, which no restore puts back;
- a launch works only for a later run of the launches: everything it may write is a
  buffer the call drops (not returned, not the caller's, not an output, not held by the
  module), that nothing after it reads (no launch, no torch op), that an earlier launch
  read, and that the call leaves changed. Such a write does nothing for the call; only a
  replay that did not start from the call's state would see it (a helper kernel that
  marks each program's work done, so that the next run skips it).

The last rule is narrow on purpose: a launch that also reads what it writes (atomics, a
semaphore its programs share), a buffer read again afterwards (ping-pong state, a loop's
scratch), a reset to the state the call found, or a write the caller can see, is work
for the call, and is timed from the restored state like any other launch.

Reads of a kernel's pointer arguments come from the static access analysis
(``kernelband.access``: a parameter flowing into a call it cannot follow, or a kernel it
cannot find, counts as possibly read and written, never as proof); torch's reads beside
the launches from a function mode around the harness (``TorchAccess``).

Imports torch: used inside a variant process only.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .prestate import StorageKey, storage_key

try:  # torch's function mode sees every torch call the module makes beside the launches (a
    # dispatch mode would too, but its first op imports torch._dynamo, which replaces
    # torch.manual_seed: the integrity check would refuse every candidate)
    from torch.overrides import TorchFunctionMode as _Mode
except ImportError:  # pragma: no cover - a torch without it: torch reads are unknown
    _Mode = object  # type: ignore[assignment,misc]

# calls that read a tensor's metadata, not its memory
_METADATA = frozenset(
    """__get__ numel size stride dim ndimension nelement data_ptr element_size storage_offset
is_contiguous is_floating_point is_complex get_device __len__ __hash__""".split()
)


class TorchAccess(_Mode):
    """Around a harness run: for each storage a torch call touched outside the launches,
    how many launches had started by its last touch; and every storage torch handled (the
    address check's ranges). Calls inside the recorder's own handling of a launch (its
    copies, Triton's launcher, the interpreter) are not the module's and are skipped."""

    available = _Mode is not object

    def __init__(self) -> None:
        if self.available:
            super().__init__()
        self.last_touch: dict[StorageKey, int] = {}
        self.sizes: dict[StorageKey, int] = {}

    def __enter__(self) -> "TorchAccess":
        if self.available:
            super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.available:
            super().__exit__(*exc)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        from . import capture

        rec = capture._active()
        if rec is not None and not capture.busy():
            started = len(rec.launches)
            touches = getattr(func, "__name__", "") not in _METADATA
            for t in _leaf_tensors((args, kwargs, out)):
                key = _key(t)
                if key is None:
                    continue
                self.sizes[key] = t.untyped_storage().nbytes()
                if touches:
                    self.last_touch[key] = started
        return out

    def read_after(self, key: StorageKey, launch_index: int) -> bool:
        """Whether a torch call touched the storage after that launch (unknown: yes)."""
        if not self.available:
            return True
        return self.last_touch.get(key, -1) > launch_index


def _leaf_tensors(tree: Any) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _key(t: torch.Tensor) -> Optional[StorageKey]:
    try:
        return storage_key(t) if t.device.type != "meta" else None
    except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, functional)
        return None


# --------------------------------------------------------------------------- reachable
def reachable(version: Any, returned: Any, harness_locals: Any, written: Any) -> dict[StorageKey, int]:
    """Storages the call's results live in, with their sizes: what the harness got back or
    holds, every output the judge compares, and tensors the module keeps (its globals one
    container deep, its functions' defaults and closures): a write into any of them is seen
    after the call."""
    found: dict[StorageKey, int] = {}

    def walk(x: Any, depth: int) -> None:
        if isinstance(x, torch.Tensor):
            key = _key(x)
            if key is not None:
                found[key] = x.untyped_storage().nbytes()
        elif depth > 0 and isinstance(x, dict):
            for v in list(x.values()):
                walk(v, depth - 1)
        elif depth > 0 and isinstance(x, (list, tuple, set, frozenset)):
            for v in list(x):
                walk(v, depth - 1)
        elif depth > 0 and callable(x) and hasattr(x, "__code__"):  # a function: what it keeps between calls
            walk(list(getattr(x, "__defaults__", None) or ()), depth - 1)
            walk(dict(getattr(x, "__kwdefaults__", None) or {}), depth - 1)
            for cell in getattr(x, "__closure__", None) or ():
                try:
                    walk(cell.cell_contents, depth - 1)
                except ValueError:  # an empty cell
                    pass

    walk(returned, 4)
    walk(harness_locals, 5)
    walk(written, 3)
    for module in {
        id(m): m for m in (getattr(version, "module", None), getattr(version, "harness_module", None)) if m is not None
    }.values():
        for value in list(vars(module).values()):
            walk(value, 3)
    return found


# --------------------------------------------------------------------------- the rules
@dataclass
class _Use:
    """How one launch uses one storage (through any of its arguments)."""

    params: list[str] = field(default_factory=list)
    loads: bool = False  # the analysis shows a load (or an atomic) through it
    may_load: bool = False  # loads, or the analysis cannot tell
    may_store: bool = False


def _named(launch: Any) -> dict[str, Any]:
    """The arguments of the JIT call that really ran (an autotuner's config applied)."""
    from .capture import arg_names_of

    if launch.inner is not None:
        obj, args, kwargs = launch.inner
        out = dict(zip(arg_names_of(obj), args))
        out.update({k: v for k, v in kwargs.items() if k not in ("grid", "warmup")})
        return out
    return dict(launch.named_args())


def _uses(launches: list[Any], source: str) -> tuple[list[dict[StorageKey, _Use]], list[bool]]:
    """Per launch, its storages and how it uses each; and whether its kernel was analysed."""
    from ..access import analyze_kernel

    analyses: dict[str, Any] = {}
    uses: list[dict[StorageKey, _Use]] = []
    known: list[bool] = []
    for launch in launches:
        if launch.name not in analyses:
            try:
                analyses[launch.name] = analyze_kernel(source, launch.name) if source else None
            except Exception:  # noqa: BLE001 - an analysis failure is no proof of anything
                analyses[launch.name] = None
        acc = analyses[launch.name]
        found = acc is not None and acc.found
        per: dict[StorageKey, _Use] = {}
        for name, t in _named(launch).items():
            if not isinstance(t, torch.Tensor):
                continue
            key = _key(t)
            if key is None:
                continue
            p = acc.params.get(name) if found else None
            use = per.setdefault(key, _Use())
            use.params.append(name)
            unknown = p is None or p.unknown
            use.loads |= bool(p is not None and p.loads)
            use.may_load |= unknown or bool(p is not None and p.loads)
            use.may_store |= unknown or bool(p is not None and p.stores)
        uses.append(per)
        known.append(found)
    return uses, known


def carried_state(rec: Any, watch: TorchAccess, source: str, keep: dict[StorageKey, int]) -> Optional[str]:
    """The first launch whose only effect is state for a later run of the launches, or None."""
    launches = rec.launches
    uses, known = _uses(launches, source)
    for j, launch in enumerate(launches):
        writes = [key for key, use in uses[j].items() if use.may_store]
        if not known[j] or not writes:
            continue
        if any(_consumed(key, j, uses, watch, keep) for key in writes):
            continue  # it writes something the call sees, or reads back itself
        for key in writes:
            reader = next((i for i in range(j) if key in uses[i] and uses[i][key].loads), None)
            if reader is not None and rec.prestate.changed(key) is True:
                earlier = launches[reader]
                return (
                    f"{launch.name}.{uses[j][key].params[0]} writes only a buffer the call drops and nothing "
                    f"after it reads, which the earlier {earlier.name}.{uses[reader][key].params[0]} reads: "
                    "state left for a later run of the launches, not work for this call (a replay starting "
                    "from it would skip work)"
                )
    return None


def _consumed(
    key: StorageKey, j: int, uses: list[dict[StorageKey, _Use]], watch: TorchAccess, keep: dict[StorageKey, int]
) -> bool:
    """Whether launch j's write to the storage can matter to the call: the caller sees
    it, launch j may read it back, or a later launch or torch op reads it."""
    if key in keep or uses[j][key].may_load:
        return True
    if any(key in later and later[key].may_load for later in uses[j + 1 :]):
        return True
    return watch.read_after(key, j)


def address_argument(rec: Any, watch: TorchAccess, keep: dict[StorageKey, int]) -> Optional[str]:
    """A launch given the address of a tensor's memory as an integer, or None."""
    ranges: dict[int, int] = {}
    for (_, base), size in list(watch.sizes.items()) + list(keep.items()):
        ranges[base] = max(ranges.get(base, 0), size)
    for (_, base), kept in rec.prestate.storages.items():
        ranges[base] = max(ranges.get(base, 0), kept.nbytes)
    starts = sorted(b for b in ranges if b > 0)
    if not starts:
        return None
    for launch in rec.launches:
        for name, value in _named(launch).items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                continue
            i = bisect.bisect_right(starts, value) - 1
            if i >= 0 and value < starts[i] + max(ranges[starts[i]], 1):
                return (
                    f"{launch.name}.{name} is the address of a tensor, passed as an integer: a launch may "
                    "reach memory only through its tensor arguments (the state every replay starts from)"
                )
    return None


def replay_refusal(rec: Any, watch: TorchAccess, source: str, keep: dict[StorageKey, int]) -> Optional[str]:
    """Why no replay of the kept run's launches can be the call, or None (see the module
    docstring). ``keep``: the storages the call's results live in (``reachable``)."""
    state = rec.prestate
    if state.active and state.storages and not state.restorable:
        sizes = {kept.label: kept.nbytes for kept in state.storages.values() if kept.label in state.unrestorable}
        what = ", ".join(f"{label} ({_mib(n)})" for label, n in sizes.items())
        return (
            f"the launches change memory the judge cannot copy to put back before each timed replay ({what}): "
            "no replay could start from the state the checked run found"
        )
    return address_argument(rec, watch, keep) or carried_state(rec, watch, source, keep)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
