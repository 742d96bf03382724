"""Record the Triton launches a harness makes, so they can be replayed and timed alone.

Every launch ``k[grid](*args, **kwargs)`` ends in ``<KernelInterface>.run(*args,
grid=..., warmup=..., **kwargs)`` for JITFunction, InterpretedFunction, Autotuner and
Heuristics alike. We wrap ``run`` on those classes and record:
- the outermost call (what the harness launched: an Autotuner, say);
- the innermost call made for it (the JITFunction that really ran, with the autotuner's
  chosen config and the heuristics' values already applied) and the grid it resolved to.

A replay is *frozen*: it calls the innermost JIT function with the recorded grid as a
tuple and the recorded arguments, so no Python code of the module (grid lambdas,
heuristics, hooks, wrappers) runs while timing. A variant cannot make its timed replays
launch less than its checked run did (a grid closure that drops to 0 after the first
launch, say).

While recording, each launch's tensor arguments are fingerprinted before and after it
ran: that is how we know which tensors a kernel writes (its outputs, in-place ones
included) and which inputs it left unchanged.

Imports triton: only used inside a variant process.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch
import triton  # noqa: F401  (ensures triton.runtime is importable)
from triton.runtime import autotuner as _autotuner
from triton.runtime import jit as _jit

from ..model import LaunchRecord
from .fingerprints import fingerprint, tensor_key  # noqa: F401 - used here and by the worker's modules
from .prestate import PreState, launch_tensors

try:
    from triton.runtime import interpreter as _interpreter
except Exception:  # pragma: no cover - very old triton
    _interpreter = None


def _kernel_classes() -> list[type]:
    classes: list[type] = [_jit.JITFunction, _autotuner.Autotuner, _autotuner.Heuristics]
    if _interpreter is not None and hasattr(_interpreter, "InterpretedFunction"):
        classes.append(_interpreter.InterpretedFunction)
    return classes


def innermost_classes() -> tuple[type, ...]:
    """The classes whose ``run`` really launches a kernel (under autotuners and heuristics)."""
    inner: list[type] = [_jit.JITFunction]
    if _interpreter is not None and hasattr(_interpreter, "InterpretedFunction"):
        inner.append(_interpreter.InterpretedFunction)
    return tuple(inner)


def kernel_name(obj: Any) -> str:
    """Name of the user's function behind a JITFunction/Autotuner/Heuristics chain."""
    seen = 0
    while hasattr(obj, "fn") and seen < 8:
        obj = obj.fn
        seen += 1
    return getattr(obj, "__name__", type(obj).__name__)


def arg_names_of(obj: Any) -> list[str]:
    seen = 0
    while obj is not None and seen < 8:
        names = getattr(obj, "arg_names", None)
        if names:
            return list(names)
        obj = getattr(obj, "fn", None)
        seen += 1
    return []


def _normalize_grid(g: Any) -> tuple[int, ...]:
    if isinstance(g, int):
        return (g,)
    return tuple(int(x) for x in g)


# --------------------------------------------------------------------------- launches
@dataclass
class CapturedLaunch:
    obj: Any  # the outermost KernelInterface object (e.g. an Autotuner)
    args: tuple[Any, ...]
    kwargs: dict[str, Any]  # includes grid= and warmup=
    name: str
    result: Any = None  # what run() returned (a CompiledKernel on GPU, where triton returns one)
    # the innermost JIT call that really ran, frozen: (jit object, args, kwargs with grid as a tuple)
    inner: Optional[tuple[Any, tuple[Any, ...], dict[str, Any]]] = None
    written: list[str] = field(default_factory=list)  # argument names whose content the launch changed
    stream: int = 0  # CUDA stream handle the launch ran on (0 on the CPU)
    recorded: bool = False  # made by the recorder (then only a frozen replay is allowed)

    def replay(self) -> Any:
        """Launch again exactly what ran, without any of the module's Python code."""
        if self.inner is None:
            if self.recorded:  # recorded, yet its JIT call was never seen: never replay it another way
                raise RuntimeError(f"launch of {self.name} was not captured completely: it cannot be replayed")
            obj, args, kwargs = self.obj, self.args, self.kwargs  # built by hand (profiling tools, tests)
        else:
            obj, args, kwargs = self.inner
        return run_unrecorded(obj, args, kwargs)

    @property
    def grid(self) -> Any:
        return self.kwargs.get("grid")

    def named_args(self) -> dict[str, Any]:
        names = arg_names_of(self.obj)
        out = {n: a for n, a in zip(names, self.args)}
        out.update({k: v for k, v in self.kwargs.items() if k not in ("grid", "warmup")})
        return out

    def resolved_grid(self) -> list[int]:
        """The grid the launch really used (recorded while it ran)."""
        if self.inner is not None:
            return list(self.inner[2]["grid"])
        g = self.grid
        if callable(g):  # not recorded while running (a launch built by hand): ask the grid
            meta = dict(self.kwargs)
            meta.update(self.named_args())
            best = getattr(self.obj, "best_config", None)
            if best is not None and hasattr(best, "kwargs"):
                meta.update(best.kwargs)
            try:
                g = g(meta)
            except Exception:  # noqa: BLE001
                return []
        try:
            return list(_normalize_grid(g))
        except Exception:  # noqa: BLE001
            return []


def run_unrecorded(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a kernel object's own ``run`` (not our wrapper), never recorded: replays, and
    reruns of a frozen launch on other arguments (the float64 reference)."""
    _state.depth = _depth() + 1
    try:
        return _run_unwrapped(obj, *args, **kwargs)
    finally:
        _state.depth -= 1


def _run_unwrapped(obj: Any, *args: Any, **kwargs: Any) -> Any:
    for cls in type(obj).__mro__:
        fn = cls.__dict__.get("run")
        if fn is not None:
            original = getattr(fn, "__kernelband_wrapped__", fn)
            return original(obj, *args, **kwargs)
    raise RuntimeError(f"{type(obj).__name__} has no run method")


def launch_record(launch: CapturedLaunch) -> LaunchRecord:
    """What the session and the profile read of a launch: grid, constexprs, warps, stages."""
    consts: dict[str, Any] = {
        k: v for k, v in launch.kwargs.items() if k not in ("grid", "warmup") and isinstance(v, (int, float, bool, str))
    }
    if launch.inner is not None:
        consts.update(
            {
                k: v
                for k, v in launch.inner[2].items()
                if k not in ("grid", "warmup") and isinstance(v, (int, float, bool, str))
            }
        )
    best = getattr(launch.obj, "best_config", None)
    if best is not None:
        consts.update({k: v for k, v in getattr(best, "kwargs", {}).items() if isinstance(v, (int, float, bool, str))})
        consts.setdefault("num_warps", getattr(best, "num_warps", None))
        consts.setdefault("num_stages", getattr(best, "num_stages", None))
    seen: set[int] = set()
    nbytes = 0
    for a in list(launch.args) + list(launch.kwargs.values()):
        if isinstance(a, torch.Tensor) and id(a) not in seen:
            seen.add(id(a))
            nbytes += a.numel() * a.element_size()
    return LaunchRecord(
        kernel=launch.name,
        grid=launch.resolved_grid(),
        constexprs={k: v for k, v in consts.items() if k not in ("num_warps", "num_stages")},
        num_warps=consts.get("num_warps"),
        num_stages=consts.get("num_stages"),
        tensor_bytes=nbytes,
    )


# --------------------------------------------------------------------------- recording
@dataclass
class LaunchRecorder:
    launches: list[CapturedLaunch] = field(default_factory=list)
    # neutralise: record but do not execute; instead fill what the launch would write with
    # NaN / -1 (the check that Triton, not torch, produces the outputs)
    neutralise: bool = False
    # kernel name -> argument names the original's launches write (what to poison when neutralised)
    writes: dict[str, list[str]] = field(default_factory=dict)
    track_writes: bool = True  # fingerprint tensor arguments around each launch
    # keep a copy of every storage the launches touch as it was before the first launch
    # that touched it (a kept run: its replay check and every timed replay restore that
    # state, so in-place kernels are checked and stateful ones timed doing the call's work)
    prestate: PreState = field(default_factory=lambda: PreState(0))
    # first fingerprint of every tensor argument seen (inputs must stay unchanged)
    first_seen: dict[tuple[Any, ...], tuple[torch.Tensor, tuple[int, int], str]] = field(default_factory=dict)
    # called with (launch, named tensor args) just before and just after each real launch
    # (the higher-precision reference copies the inputs, then reruns the frozen launch)
    before_launch: Optional[Callable[[CapturedLaunch, dict[str, Any]], None]] = None
    after_launch: Optional[Callable[[CapturedLaunch, dict[str, Any]], None]] = None
    _inner_calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    harness_locals: dict[str, Any] = field(default_factory=dict)  # the harness's tensors when it returned


_state = threading.local()


def _active() -> Optional[LaunchRecorder]:
    return getattr(_state, "recorder", None)


def set_active(rec: Optional[LaunchRecorder]) -> Optional[LaunchRecorder]:
    """Make ``rec`` this thread's recorder (None: none); returns the one it replaces."""
    previous = _active()
    _state.recorder = rec
    return previous


def _depth() -> int:
    return getattr(_state, "depth", 0)


def poison(t: torch.Tensor) -> None:
    t.fill_(float("nan") if (t.is_floating_point() or t.is_complex()) else -1)


def _tensors(named: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {n: a for n, a in named.items() if isinstance(a, torch.Tensor)}


def _current_stream() -> int:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.current_stream().cuda_stream)
    return 0


def _cpu_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    """Triton's autotuner benchmarks configs through a GPU driver; under the interpreter
    it gets wall time of a few calls instead (only which config wins matters here)."""
    import time

    kernel_call()
    samples = []
    for _attempt in range(3):
        t0 = time.perf_counter()
        kernel_call()
        samples.append((time.perf_counter() - t0) * 1e3)
    samples.sort()
    median = samples[1]
    if quantiles is None:
        return median
    return [samples[min(int(q * 3), 2)] for q in quantiles]


def _interpretable(obj: Any) -> None:
    """Let every Autotuner in a kernel's chain pick its config under the interpreter."""
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    seen = 0
    while obj is not None and seen < 8:
        if isinstance(obj, _autotuner.Autotuner):
            if "_do_bench" in vars(obj):
                obj._do_bench = _cpu_bench
            else:
                obj.do_bench = _cpu_bench
        obj = getattr(obj, "fn", None)
        seen += 1


def _neutralised(
    rec: LaunchRecorder,
    launch: CapturedLaunch,
    original: Callable[..., Any],
    self: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """Stand in for a launch that computes nothing."""
    named = _tensors(launch.named_args())
    known = rec.writes.get(launch.name)
    if known is None:
        # a kernel the original never launched: find what it writes on copies
        copies = {n: same_layout_copy(t) for n, t in named.items()}
        cargs = tuple(copies.get(n, a) if isinstance(a, torch.Tensor) else a for n, a in zip(arg_names_of(self), args))
        ckw = {k: copies.get(k, v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        _state.depth = 1
        try:
            original(self, *cargs, **ckw)
        finally:
            _state.depth = 0
        known = [n for n, t in named.items() if not torch.equal(copies[n], t)]
    for n in known:
        if n in named:
            poison(named[n])


def same_layout_copy(t: torch.Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """A copy with the same strides (a clone of a strided view would be contiguous, and
    the kernel, launched with the view's strides, would read past it)."""
    c = torch.empty_strided(t.size(), t.stride(), dtype=dtype or t.dtype, device=t.device)
    c.copy_(t)
    return c


class StatefulGrid(Exception):
    """A grid callable that gives another grid when asked again with the same arguments:
    a grid must be a pure function of the launch (else what is timed is not what ran)."""


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    inner_classes = innermost_classes()

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _active()
        if rec is None or kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        if _depth() > 0:
            if isinstance(self, inner_classes):
                return _record_inner(rec, original, self, args, kwargs)
            _state.depth += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                _state.depth -= 1
        _state.busy = True
        try:
            return _recorded_launch(rec, original, self, args, kwargs)
        finally:
            _state.busy = False

    run.__kernelband_wrapped__ = original  # type: ignore[attr-defined]
    return run


def _recorded_launch(
    rec: LaunchRecorder, original: Callable[..., Any], self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """An outermost launch while recording: its state kept, run, what it wrote noted."""
    inner_classes = innermost_classes()
    launch = CapturedLaunch(self, args, dict(kwargs), kernel_name(self), stream=_current_stream(), recorded=True)
    rec.launches.append(launch)
    _interpretable(self)
    if rec.neutralise:
        _neutralised(rec, launch, original, self, args, kwargs)
        return None
    named = _tensors(launch.named_args())
    if rec.prestate.active:
        rec.prestate.take(launch.name, launch_tensors(launch.named_args()))
    before = {}
    if rec.track_writes:
        for n, t in named.items():
            fp = fingerprint(t)
            before[n] = fp
            rec.first_seen.setdefault(tensor_key(t), (t, fp, f"{launch.name}.{n}"))
    if rec.before_launch is not None:
        rec.before_launch(launch, named)
    rec._inner_calls = []
    _state.depth = 1
    try:
        if isinstance(self, inner_classes):
            launch.result = _record_inner(rec, original, self, args, kwargs)
        else:
            launch.result = original(self, *args, **kwargs)
    finally:
        _state.depth = 0
    # the last inner call is the real launch (an autotuner benchmarks configs first)
    if rec._inner_calls:
        launch.inner = rec._inner_calls[-1]
    if rec.track_writes:
        launch.written = [n for n, t in named.items() if fingerprint(t) != before[n]]
    if rec.after_launch is not None:
        rec.after_launch(launch, named)
    return launch.result


def restore_pre_state(rec: LaunchRecorder) -> bool:
    """Put every storage the launches touched back as the first of them found it; False
    (nothing restored) when the run kept no copy of one they changed."""
    return rec.prestate.restore()


def busy() -> bool:
    """Inside the recorder's own handling of a launch (its copies, the launch itself):
    torch work there is not the module's."""
    return bool(getattr(_state, "busy", False))


def _record_inner(
    rec: LaunchRecorder, original: Callable[..., Any], self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run an innermost JIT call, recording the grid it resolves to."""
    grid = kwargs.get("grid")
    resolved: list[tuple[int, ...]] = []
    metas: list[Any] = []
    if callable(grid):

        def recording_grid(meta: Any) -> Any:
            g = grid(meta)
            resolved.append(_normalize_grid(g))
            metas.append(dict(meta) if isinstance(meta, dict) else meta)
            return g

        call_kwargs = dict(kwargs, grid=recording_grid)
    else:
        resolved.append(_normalize_grid(grid))
        call_kwargs = kwargs
    _state.depth = _depth() + 1
    try:
        result = original(self, *args, **call_kwargs)
    finally:
        _state.depth -= 1
    if resolved and metas and callable(grid):  # metas come only from a callable grid
        again = _normalize_grid(grid(metas[-1]))
        if again != resolved[-1]:
            raise StatefulGrid(
                f"the grid of {kernel_name(self)} gave {resolved[-1]} at launch and {again} when asked "
                "again with the same arguments: a grid must not depend on hidden state"
            )
    if resolved:
        frozen = dict(kwargs, grid=resolved[-1], warmup=False)
        rec._inner_calls.append((self, args, frozen))
    return result


def install() -> None:
    """Wrap ``run`` on every Triton kernel class once per process (idempotent)."""
    for cls in _kernel_classes():
        current = cls.__dict__.get("run")
        if current is None or hasattr(current, "__kernelband_wrapped__"):
            continue
        setattr(cls, "run", _wrap(current))


@contextlib.contextmanager
def recording(
    neutralise: bool = False,
    writes: Optional[dict[str, list[str]]] = None,
    track_writes: bool = True,
    snapshot_bytes: int = 0,
    host_snapshot_bytes: int = 0,
    snapshot_reserve: int = 0,
    before_launch: Optional[Callable[[CapturedLaunch, dict[str, Any]], None]] = None,
    after_launch: Optional[Callable[[CapturedLaunch, dict[str, Any]], None]] = None,
) -> Iterator[LaunchRecorder]:
    """Record the launches made inside the block (this thread only). ``snapshot_bytes``
    (and on a GPU ``host_snapshot_bytes``; beyond them, device copies that leave
    ``snapshot_reserve`` free): keep what the launches found, for replays."""
    install()
    rec = LaunchRecorder(
        neutralise=neutralise,
        writes=dict(writes or {}),
        track_writes=track_writes,
        prestate=PreState(snapshot_bytes, host_snapshot_bytes, snapshot_reserve),
        before_launch=before_launch,
        after_launch=after_launch,
    )
    prev = _active()
    _state.recorder = rec
    _state.depth = 0
    try:
        yield rec
    finally:
        _state.recorder = prev


class HookDuringReplay(Exception):
    """Python code would run beside the replayed launches (a trace or profile function, a
    Triton launch hook, a JIT pre-run hook): the timing would not be of the launches alone."""


def _hook_set(value: Any) -> bool:
    """A Triton hook slot holds something: a function (older Triton) or a chain with calls."""
    if value is None:
        return False
    calls = getattr(value, "calls", None)
    return bool(calls) if isinstance(calls, list) else True


def hooks_installed(launches: list[CapturedLaunch]) -> Optional[str]:
    """What Python code would run during a frozen replay besides Triton's launch path, or None."""
    import sys

    if sys.gettrace() is not None or sys.getprofile() is not None:
        return "a trace or profile function is installed"
    try:
        from triton import knobs

        runtime = knobs.runtime
        for name in ("launch_enter_hook", "launch_exit_hook"):
            if _hook_set(getattr(runtime, name, None)):
                return f"a Triton {name.replace('_', ' ')} is installed"
    except ImportError:  # older Triton: the hooks live on CompiledKernel
        from triton.compiler import CompiledKernel

        for name in ("launch_enter_hook", "launch_exit_hook"):
            if _hook_set(getattr(CompiledKernel, name, None)):
                return f"a Triton {name.replace('_', ' ')} is installed"
    for launch in launches:
        obj = launch.inner[0] if launch.inner is not None else launch.obj
        if getattr(obj, "pre_run_hooks", None):
            return f"{launch.name} has a pre-run hook"
    return None


def replay_all(launches: list[CapturedLaunch]) -> None:
    """Replay the launches, frozen; refused when any Python code would run beside them."""
    why = hooks_installed(launches)
    if why:
        raise HookDuringReplay(f"{why}: nothing may run beside the replayed launches")
    for launch in launches:
        launch.replay()
