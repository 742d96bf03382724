"""Inside the worker: turn source text into a live module and run its harness.

Each module version is written to its own file (Triton reads kernel source through
``inspect``, which needs a real file) and imported under a unique name, so the
original and any number of variants live side by side in one process.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import types
from pathlib import Path
from typing import Any, Optional

import torch

from ..model import Task
from .capture import LaunchRecorder, recording
from .timing import gpu_lock


class HarnessError(Exception):
    """The harness (or the kernel it launched) raised. ``phase`` says where."""

    def __init__(self, phase: str, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.phase = phase  # "import" | "compile" | "run" | "assert" (the harness's own check failed)
        self.exc = exc


def _is_compile_error(exc: BaseException) -> bool:
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(
        names & {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "OutOfResources"}
    )


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    cur: Optional[BaseException] = exc
    while cur is not None and id(cur) not in seen:
        out.append(cur)
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return out


class ModuleVersion:
    """A loaded version of the user's module (the original or a variant)."""

    def __init__(self, module: types.ModuleType, harness_module: types.ModuleType, harness: str) -> None:
        self.module = module
        self.harness_module = harness_module
        self.harness_name = harness

    def harness(self) -> Any:
        fn = getattr(self.harness_module, self.harness_name, None)
        if not callable(fn):
            raise HarnessError("import", AttributeError(f"harness {self.harness_name!r} is not defined"))
        return fn


def _exec_file(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_module(task: Task, source: str, tag: str, workdir: Optional[str] = None) -> ModuleVersion:
    """Write ``source`` to ``<workdir>/<tag>/<stem>.py`` and import it.

    With a companion harness file, the variant is registered under the original
    module's import name while the companion is executed, so ``from kernels import
    wrapper`` in the companion picks up this version.
    """
    from ..screen_source import SourceRefused, canonical_source

    text = canonical_source(source)  # the bytes written are the text that was screened
    if isinstance(text, SourceRefused):
        raise HarnessError("import", ValueError(f"the module's text is refused: {text.reason}"))
    base = Path(workdir or os.environ.get("KERNELBAND_WORKDIR") or "/tmp/kernelband-worker")
    stem = Path(task.module_path).stem
    folder = base / tag
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.py"
    path.write_text(text, encoding="utf-8")
    user_dir = str(Path(task.module_path).parent)
    if user_dir not in sys.path:
        sys.path.insert(0, user_dir)  # sibling imports of the user's module keep working
    try:
        module = _exec_file(path, f"_kernelband_{tag}_{stem}")
    except BaseException as e:  # noqa: BLE001 - user code may raise anything
        raise HarnessError("compile" if _is_compile_error(e) else "import", e) from e
    if not task.harness_path:
        return ModuleVersion(module, module, task.harness)
    saved = sys.modules.get(stem)
    sys.modules[stem] = module
    try:
        comp = _exec_file(Path(task.harness_path), f"_kernelband_{tag}_harness_{Path(task.harness_path).stem}")
    except BaseException as e:  # noqa: BLE001
        raise HarnessError("import", e) from e
    finally:
        if saved is not None:
            sys.modules[stem] = saved
        else:
            sys.modules.pop(stem, None)
    return ModuleVersion(module, comp, task.harness)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover
        pass


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _tensor_tree(value: Any, depth: int = 0) -> Any:
    """``value`` if it is a tensor or a container holding tensors, else None."""
    if isinstance(value, torch.Tensor):
        return value
    if depth < 4 and isinstance(value, (list, tuple)):
        items = [_tensor_tree(v, depth + 1) for v in value]
        return items if any(i is not None for i in items) else None
    if depth < 4 and isinstance(value, dict):
        trees = {k: _tensor_tree(v, depth + 1) for k, v in value.items() if isinstance(k, (str, int))}
        trees = {k: v for k, v in trees.items() if v is not None}
        return trees or None
    return None


class _LocalsAtReturn:
    """The harness's local tensors when it returns: its inputs and the buffers it handed
    to the kernel, seen as the caller sees them (a kernel that rotated a private copy, or
    a wrapper that changed an input, shows here). Traces only the harness's own frame."""

    def __init__(self, fn: Any) -> None:
        self.code = getattr(fn, "__code__", None)
        self.values: dict[str, Any] = {}
        self._previous: Any = None

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        return self._local if event == "call" and frame.f_code is self.code else None

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "return":
            found = {k: _tensor_tree(v) for k, v in frame.f_locals.items()}
            self.values = {k: v for k, v in found.items() if v is not None}
        return self._local

    def __enter__(self) -> "_LocalsAtReturn":
        if self.code is not None:
            self._previous = sys.gettrace()
            sys.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.code is not None:
            sys.settrace(self._previous)


def run_harness(version: ModuleVersion, seed: int, **recording_options: Any) -> tuple[Any, LaunchRecorder]:
    """Run the harness under a seed, recording its kernel launches (``recording_options``
    go to ``capture.recording``: neutralise, writes, before_launch, after_launch). The
    recorder's ``harness_locals`` holds the harness's local tensors at its return."""
    fn = version.harness()
    seed_everything(seed)
    with gpu_lock(exclusive=False), recording(**recording_options) as rec:
        try:
            with _LocalsAtReturn(fn) as seen:
                out = fn()
            rec.harness_locals = seen.values
            synchronize()
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            phase = "assert" if isinstance(e, AssertionError) else ("compile" if _is_compile_error(e) else "run")
            raise HarnessError(phase, e) from e
    return out, rec
