"""Derived calls run (``derived.py`` draws them): in the variant process each tensor
argument is placed inside a canary-padded buffer (``build``), torch's factories allocate
inside padded buffers too (``padded_allocations``), and each call's frame carries the whole
buffers back (``run_calls``); the judge splits a returned buffer into the tensor and its
canaries by the layout it computes from its own spec (``split_buffer``), so where a
tensor lies in its buffer is never the variant's word.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from .call_spec import Arg, Call, DerivedCall, TensorArg, ValueArg
from .derived import WIDE_INDEX
from .messages import Derived, DerivedOutputs, Warm

PAD_ELEMENTS = 64  # canary elements before and after a tensor whose spec names none


@dataclass
class Placed:
    """A tensor argument inside its canary-padded buffer."""

    view: Any
    buffer: Any
    offset: int  # first element of the view in the buffer


def canary_value(dtype: Any, which: str) -> Any:
    import torch

    if dtype.is_floating_point or dtype.is_complex:
        return float("nan") if which == "a" else 7.25
    if dtype == torch.bool:
        return which == "a"
    return -1 if which == "a" else 3


def fresh_value(dtype: Any, which: str) -> Any:
    """What an empty tensor a derived call makes holds before the kernel writes it: it
    differs between the original's two canary runs, so what the original leaves unwritten
    shows (``judge_derived.unwritten_masks``); NaN in a candidate's run."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan") if which == "a" else -5.5
    return -1 if which == "a" else -2


def _generator(seed: int, device: str) -> Any:
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _values(spec: TensorArg, dtype: Any, device: str, seed: int, scale: float = 1.0) -> Any:
    import torch

    shape = spec.shape
    g = _generator(seed, device)
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g, device=device, dtype=torch.float32)
        if spec.values == "scaled":
            x = x * scale
        if spec.values == "centred" and x.dim() >= 1 and x.numel() > 0:
            # large values whose rows sum to about zero: the partial sums are large, the
            # result small, so an accumulation in 16 bits shows, and squares overflow fp16
            x = x * scale
            x = x - x.mean(dim=-1, keepdim=True)
        if spec.values == "integral":  # -6..6: sums exact in any order, up to 2**11 in fp16
            x = torch.round(x * 2.0)
        if spec.values == "offset":  # a large mean, a small spread (one-pass variance fails here)
            x = x * 0.01 + 300.0
        if spec.values == "special" and x.numel() > 0:
            flat = x.view(-1)
            n = flat.numel()
            picks = torch.randint(0, n, (max(n // 16, 1),), generator=g, device=device)
            specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 3.0e4, -3.0e4], device=device)
            flat[picks] = specials[torch.arange(picks.numel(), device=device) % specials.numel()]
            if x.dim() >= 2 and x.shape[0] >= 2:
                x[0] = float("-inf")  # a fully masked row
                x[1] = 2.5  # a constant row
        if spec.round_to:  # the values a reduced-precision twin holds, in a wider dtype
            x = x.to(getattr(torch, spec.round_to))
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g, device=device).to(torch.bool)
    # integers are often indices into another argument: drawn below its largest size
    high = 100 if dtype in (torch.int8, torch.uint8) else max(int(spec.index_high or 1000), 1)
    if dtype in (torch.int16,):
        high = min(high, 1 << 15)
    n = 1
    for d in shape:
        n *= d
    if spec.distinct and n <= high:  # scatter slots stay distinct: no two programs write one place
        ids = torch.randperm(high, generator=g, device=device)[:n].reshape(shape)
    else:
        ids = torch.randint(0, high, shape, generator=g, device=device, dtype=torch.int64)
    if spec.wide and high > WIDE_INDEX + 1 and ids.numel():
        # past int16's range every few elements, and the largest index (past 2**16 where it is)
        flat = ids.view(-1)
        if not spec.distinct:
            picks = flat[:: max(flat.numel() // 4, 1)]
            flat[:: max(flat.numel() // 4, 1)] = torch.randint(
                WIDE_INDEX, high, (picks.numel(),), generator=g, device=device, dtype=torch.int64
            )
        if not bool((flat == high - 1).any()):
            flat[0] = high - 1
    if spec.sorted:
        ids = ids.view(-1).sort().values.reshape(shape)
    return ids.to(dtype)


def pads(spec: TensorArg) -> tuple[int, int]:
    """Canary elements before and after the tensor (drawn per call: sometimes none before,
    so a tensor at the start of its buffer is shown too)."""
    before, after = spec.pad or (PAD_ELEMENTS, PAD_ELEMENTS)
    return int(before), int(after)


def layout(spec: TensorArg) -> tuple[list[int], list[int], int]:
    """(shape, strides, buffer elements) of a derived tensor: the view starts after
    ``pads(spec)[0]`` canaries and is followed by ``pads(spec)[1]``. The judge recomputes it
    from the spec it made, so where the tensor lies in its buffer is never the variant's
    word."""
    shape = list(spec.shape)
    if spec.layout == "spread" and shape:
        strides: list[int] = []
        step = 2
        for d in reversed(shape):  # every dimension spread out, the last one too
            strides.insert(0, step)
            step *= max(d, 1) * 2
    elif spec.layout == "transposed" and len(shape) >= 2:
        strides, step = [0] * len(shape), 1
        for i in range(len(shape)):  # column-major: the first dimension varies fastest
            strides[i] = step
            step *= max(shape[i], 1)
    elif spec.layout == "strided" and len(shape) >= 2:
        strides, step = [], 1
        for d in reversed(shape):  # rows padded (a slice of a wider tensor): the last dimension stays dense
            strides.insert(0, step)
            step = step * max(d, 1) + 1 + max(d, 1) // 7
    else:
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= max(d, 1)
    extent = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) if all(d > 0 for d in shape) else 0
    before, after = pads(spec)
    return shape, strides, before + extent + after


def distinct_tensors(call: Call) -> list[TensorArg]:
    """The call's tensor arguments, each identity once, in the order ``build`` places them."""
    seen: dict[int, TensorArg] = {}
    for arg in call.tensors():
        seen.setdefault(arg.id, arg)
    return list(seen.values())


def place(spec: TensorArg, seed: int, which: str, scale: float = 1.0) -> Placed:
    """A tensor as the derived call describes it, inside a buffer of canaries."""
    import torch

    dtype = getattr(torch, spec.dtype)
    shape, strides, total = layout(spec)
    buffer = torch.full((total,), canary_value(dtype, which), dtype=dtype, device=spec.device)
    view = buffer.as_strided(shape, strides, pads(spec)[0])
    if view.numel():
        view.copy_(_values(spec, dtype, spec.device, seed, scale))
    return Placed(view, buffer, pads(spec)[0])


def build(call: DerivedCall, which: str, repeat: int = 0) -> tuple[list[Any], dict[str, Any], list[Placed]]:
    """The arguments of a derived call: tensors placed in canary buffers (the same tensor
    where the recorded call passed one tensor twice), values as they are. ``repeat`` > 0:
    the inputs of that repetition (every other float element drawn again, the first kept:
    a result remembered by part of its input must not be returned)."""
    placed: dict[int, Placed] = {}
    order: list[Placed] = []

    scale = 1.0 if call.scale is None else call.scale

    def make(i: int, arg: Arg) -> Any:
        if isinstance(arg, ValueArg):
            return arg.v
        if arg.id not in placed:
            p = place(arg, call.seed + 7919 * arg.id, which, scale)
            if repeat and p.view.is_floating_point() and p.view.numel() > 1:
                again = place(arg, call.seed + 7919 * arg.id + 104729 * repeat, which, scale)
                flat, fresh = p.view.reshape(-1), again.view.reshape(-1)
                if flat.data_ptr() == p.view.data_ptr() and p.view.is_contiguous():
                    flat[1::2] = fresh[1::2]
                else:
                    mixed = p.view.clone().reshape(-1)
                    mixed[1::2] = fresh[1::2]
                    p.view.copy_(mixed.view(p.view.shape))
            placed[arg.id] = p
            order.append(p)
        return placed[arg.id].view

    args = [make(i, a) for i, a in enumerate(call.args)]
    kwargs = {k: make(-1, v) for k, v in call.kwargs.items()}
    return args, kwargs, order


@dataclass(frozen=True)
class Canaries:
    """The canary slots of a buffer: every element outside ``view``, the tensor placed in
    it by the judge's own layout (whose elements never overlap: each layout's strides are
    one to one). Counted, not gathered: no mask or copy the size of the buffer."""

    buffer: Any  # 1-D
    view: Any  # a view of ``buffer``


def split_buffer(buffer: Any, spec: TensorArg) -> tuple[Any, Optional[Canaries]]:
    """(the tensor, the canaries around and between its elements) of a returned buffer,
    by the layout the judge computes from its own spec; None when the buffer is not the
    size that layout needs."""
    shape, strides, total = layout(spec)
    if buffer.dim() != 1 or buffer.numel() != total:
        return None, None
    view = buffer.as_strided(shape, strides, pads(spec)[0])
    return view, Canaries(buffer, view)


def allocation_canaries(buffer: Any, before: int, n: int) -> Optional[Canaries]:
    """The canaries around a tensor the call's own code allocated (``padded_allocations``)."""
    if buffer.dim() != 1 or before < 0 or n < 0 or buffer.numel() < before + n:
        return None
    return Canaries(buffer, buffer[before : before + n])


def canaries_intact(rest: Optional[Canaries], which: str) -> bool:
    """Every canary still holds its value (nothing wrote outside the tensor): the buffer's
    elements that hold it, less the tensor's own, are all the canary slots (one
    synchronisation)."""
    import torch

    if rest is None:
        return False
    slots = rest.buffer.numel() - rest.view.numel()
    if not slots:
        return True
    value = canary_value(rest.buffer.dtype, which)
    if isinstance(value, float) and value != value:
        holding = torch.isnan(rest.buffer).sum() - torch.isnan(rest.view).sum()
    else:
        holding = (rest.buffer == value).sum() - (rest.view == value).sum()
    return int(holding) == slots


_FACTORIES = ("empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like")
_PLAIN_KWARGS = {"dtype", "device", "requires_grad"}


@contextlib.contextmanager
def padded_allocations(which: str, pad: int, fresh_fill: Optional[str] = None) -> Iterator[list[tuple[Any, int, int]]]:
    """While a derived call runs, the tensors its code makes with torch's factories
    (``torch.empty_like(x)`` for an output, say) lie inside canary-padded buffers too, so a
    write past an output the wrapper allocated itself is seen. Yields the list of
    (buffer, canaries before, elements) of each such tensor; torch is restored after."""
    import torch

    made: list[tuple[Any, int, int]] = []
    originals = {name: getattr(torch, name) for name in _FACTORIES}
    full = originals["full"]

    def padded(name: str, template: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if set(kwargs) - _PLAIN_KWARGS:  # layout, memory format, out=...: as torch does it
            return originals[name](*args, **kwargs)
        like = name.endswith("_like")
        if like:
            shape, rest = list(template.shape), args[1:]
        else:
            sizes = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
            if name == "full":
                sizes, rest = args[0], args[1:]
            else:
                rest = ()
            if not all(isinstance(d, int) for d in sizes):
                return originals[name](*args, **kwargs)
            shape = list(sizes)
        dtype = kwargs.get("dtype") or (template.dtype if like else None)
        device = kwargs.get("device") or (template.device if like else None)
        if dtype is None:
            value0 = rest[0] if name.startswith("full") and rest else 0.0
            dtype = torch.get_default_dtype() if isinstance(value0, float) else torch.int64
        n = 1
        for d in shape:
            n *= d
        buffer = full((pad + n + pad,), canary_value(dtype, which), dtype=dtype, device=device)
        view = buffer[pad : pad + n].view(shape)
        if name.startswith("zeros"):
            view.zero_()
        elif name.startswith("ones"):
            view.fill_(1)
        elif name.startswith("full"):
            view.fill_(rest[0])
        elif fresh_fill == "zero":  # empty: fresh memory is not always NaN outside the judge
            view.zero_()
        else:  # empty: what a kernel must write, as fresh memory reads in the variant process
            view.fill_(fresh_value(dtype, which))
        if kwargs.get("requires_grad"):
            view.requires_grad_(True)
        made.append((buffer, pad, n))
        return view

    def factory(name: str) -> Any:
        def make(*args: Any, **kwargs: Any) -> Any:
            template = args[0] if name.endswith("_like") and args else None
            return padded(name, template, args, kwargs)

        return make

    for name in _FACTORIES:
        setattr(torch, name, factory(name))
    try:
        yield made
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)


def autotuners(module: Any) -> list[Any]:
    """The module's Triton autotuners, also those under heuristics or another wrapper."""
    try:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import KernelInterface
    except ImportError:
        return []
    found: list[Any] = []
    for value in list(vars(module).values()):
        seen = 0
        while isinstance(value, KernelInterface) and seen < 8:  # the chain (Heuristics.fn, Autotuner.fn)
            if isinstance(value, Autotuner) and not any(value is f for f in found):
                found.append(value)
            value, seen = value.__dict__.get("fn"), seen + 1
    return found


def run_calls(version: Any, step: Derived, steps: Any, ahead_s: float = 0.0) -> None:
    """In the variant process: each derived call of ``step`` on inputs in canary-padded
    buffers; one frame per call with what it returned and the whole buffers after it (or
    the error it raised: the judge decides what that means). ``step.configs``: the config
    twins of its special-values calls instead (``run_config_twins``). ``ahead_s``: the
    seconds its kernels were compiled ahead (``warm_ahead``), counted as the first call's
    (the judge adds the calls' seconds up)."""
    from .autotune_clock import one_config_per_call
    from .capture import install
    from .runner import synchronize

    install()
    with one_config_per_call(synchronize):
        if step.configs:
            run_config_twins(version, step, steps)
        else:
            _run_calls(version, step, steps, ahead_s=ahead_s)


MAX_CONFIG_TWINS = 16  # configs run a special-values call pinned to (on a GPU each is a compile at a new size)
TWIN_FLAVOURS = ("special",)  # the calls whose results may hang on the config (NaN-ness of a block at +-inf)


def run_config_twins(version: Any, step: Derived, steps: Any) -> None:
    """The original's special-values calls once per autotune config, every autotuner pinned
    to it (the i-th of its configs, modulo its count): frames whose ``config`` is i. None
    where no autotuner of the module has two configs. A derived call runs one config, by
    its turn (``autotune_clock.one_config_per_call``), in each process: where the original's
    own configs disagree (a block whose max is NaN with one block shape, finite with
    another), a candidate that picked another config would be refused for a difference the
    original has itself; the judge leaves such elements undefined (``judge_derived``)."""
    tuners = [t for t in autotuners(version.module) if len(getattr(t, "configs", None) or []) > 1]
    if not tuners or not any(c.flavour in TWIN_FLAVOURS for c in step.calls):
        return
    count = min(max(len(t.configs) for t in tuners), MAX_CONFIG_TWINS)
    for k in range(count):
        with pinned_config(tuners, k):
            _run_calls(version, step, steps, config=k)


@contextlib.contextmanager
def pinned_config(tuners: list[Any], k: int) -> Iterator[None]:
    """Each autotuner left with only its ``k``-th config (modulo its count; a single config
    is run without benchmarking), its choices forgotten; all of it restored after."""
    names = ("configs", "cache", "best_config", "cache_results")
    saved = [(t, {n: t.__dict__[n] for n in names if n in t.__dict__}) for t in tuners]
    try:
        for tuner, _ in saved:
            tuner.configs = [tuner.configs[k % len(tuner.configs)]]
            tuner.cache = {}
            tuner.cache_results = False  # no timings from Triton's disk cache
        yield
    finally:
        for tuner, values in saved:
            for n in names:
                if n in values:
                    setattr(tuner, n, values[n])
                else:
                    tuner.__dict__.pop(n, None)


def _run_calls(version: Any, step: Derived, steps: Any, config: Optional[int] = None, ahead_s: float = 0.0) -> None:
    import time

    from .autotune_clock import config_turn
    from .gpu_lock import gpu_lock
    from .runner import seed_everything, synchronize

    which = step.which
    for i, call in enumerate(step.calls):
        if config is not None and call.flavour not in TWIN_FLAVOURS:
            continue
        steps.await_judge()
        t0 = time.perf_counter() - ahead_s
        ahead_s = 0.0
        try:
            fn = getattr(version.module, call.fn)
            seed_everything(call.seed)
            first = None
            # the inputs are GPU work too (never inside another's timed region); every
            # repetition's made first: inside, torch's factories make padded buffers
            with gpu_lock(exclusive=False), config_turn(call.seed):
                calls = [build(call, which, r) for r in range(call.repeats or 1)]
                with padded_allocations(which, PAD_ELEMENTS, call.fresh_fill) as made:
                    for r, (args, kwargs, placed) in enumerate(calls):
                        out = fn(*args, **kwargs)
                        if r == 0:
                            first = (out, placed)
                    synchronize()
        except Exception as e:  # noqa: BLE001 - the judge decides what a failure means here
            steps.check_runtime()
            steps.send(
                DerivedOutputs(
                    i,
                    which,
                    error=f"{type(e).__name__}: {e}"[:2000],
                    seconds=round(time.perf_counter() - t0, 4),
                    config=config,
                )
            )
            continue
        steps.check_runtime()
        meta = DerivedOutputs(
            i,
            which,
            allocs=[[before, n] for _, before, n in made],
            seconds=round(time.perf_counter() - t0, 4),
            config=config,
        )
        tree: dict[str, Any] = {
            "returned": out,
            "buffers": [p.buffer for p in placed],
            "allocs": [buffer for buffer, _, _ in made],
        }
        if call.repeats and first is not None:  # the first call's result, as it is now
            tree["first"] = {"returned": first[0], "buffers": [p.buffer for p in first[1]]}
        steps.send(meta, tree)


WARM_NICENESS = 10  # a sibling's compiles give way to the processes being judged


def warm_calls(version: Any, step: Warm) -> None:
    """In a job's sibling process (``judge_core.JudgeCore.warm_siblings``): each call made
    as ``_run_calls`` makes it (``warm_one``), every Triton launch a warmup: its kernels are
    compiled into the Triton cache the sibling shares with the job, ``step.compile_threads``
    at a time (``compile_pool``), and no kernel runs."""
    import os

    from .autotune_clock import one_config_per_call
    from .capture import install
    from .compile_pool import CompilePool
    from .runner import synchronize

    try:
        os.nice(WARM_NICENESS)
    except OSError:
        pass
    install()
    pool = CompilePool(step.compile_threads) if step.compile_threads > 1 else None
    try:
        with (
            one_config_per_call(synchronize),
            launches_as_warmups(pool.submit if pool else None),
            padded_allocations("a", PAD_ELEMENTS) as made,
        ):
            for call in step.calls:
                if pool is not None:
                    pool.next_call()
                warm_one(version, call)
                made.clear()  # what the wrapper allocated is not kept (a pending compile holds its own)
    finally:
        if pool is not None:
            pool.drain()


def warm_one(version: Any, call: DerivedCall) -> None:
    """One call, inside the caller's ``launches_as_warmups`` and ``padded_allocations``:
    the same arguments in the same canary-padded layout as ``_run_calls`` gives them (every
    buffer 16-byte aligned alike), so the same Triton specializations. What it returns is
    dropped unread; a call that raises is skipped (the real call meets the error itself)."""
    from .autotune_clock import config_turn
    from .gpu_lock import gpu_lock

    try:
        fn = getattr(version.module, call.fn)
        with gpu_lock(exclusive=False), config_turn(call.seed):  # its inputs and its wrapper's torch work: GPU work
            args, kwargs, _ = build(call, "a")
            fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a warmup is only ever a head start
        return


@contextlib.contextmanager
def launches_as_warmups(submit: Optional[Callable[..., None]] = None) -> Iterator[None]:
    """Inside the block, every Triton launch compiles its kernel and launches nothing
    (``run`` of the innermost kernel classes called with ``warmup=True``; an autotuner's
    configs and a heuristic's choices reach it too); restored after. With ``submit``
    (``compile_pool.CompilePool.submit``) a launch hands its compile over and returns None."""
    from .capture import innermost_classes

    classes = innermost_classes()
    saved = [(cls, cls.__dict__["run"]) for cls in classes if "run" in cls.__dict__]

    def as_warmup(current: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            kwargs["warmup"] = True
            if submit is not None:
                submit(current, self, args, kwargs)
                return None
            return current(self, *args, **kwargs)

        return run

    for cls, current in saved:
        setattr(cls, "run", as_warmup(current))
    try:
        yield
    finally:
        for cls, current in saved:
            setattr(cls, "run", current)
