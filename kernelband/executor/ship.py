"""What a Ray worker needs besides the module and harness texts: the modules of the
kernel's own folder that it imports (``import helpers``, ``from helpers import f``,
``import mypkg.ops``: ``helpers.py`` or the package folder ``mypkg/`` beside the kernel
file), followed transitively through the modules found, and those of a companion
harness file. They go to each actor with the module text (arguments of the actor, so
Ray's object store carries them, over Ray Client too), and the actor writes them beside
its copy of the module, where the variant process's ``sys.path`` finds them as on this
machine.

Why not a ``runtime_env``: Ray refuses local paths in a per-actor ``working_dir`` or
``py_modules`` (only URIs; ``_validate_no_local_paths``), and the job-level one is set
once per driver, while ``optimize-all`` runs kernels of many folders in one job.

A limit keeps a stray import of a big folder from uploading it to the cluster:
``KERNELBAND_RAY_SHIP_MAX_MB`` (default 16 MiB); above it the job stops with one line.
Nothing else of the user's folder (data, notebooks, ``.env`` files) is sent.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Iterable

from .base import ExecutorUnavailable

DEFAULT_MAX_MB = 16.0
MAX_ENV = "KERNELBAND_RAY_SHIP_MAX_MB"
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def _imported_names(source: str, top_level: bool) -> set[str]:
    """First components of what ``source`` imports absolutely, and, for a file of the
    folder itself (not inside a package), of its ``from . import x`` / ``from .x import``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif node.level == 1 and top_level:
                if node.module:
                    names.add(node.module.split(".")[0])
                else:
                    names.update(a.name for a in node.names)
    return names


def _package_files(folder: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        out += [Path(root, f) for f in sorted(files) if not f.endswith((".pyc", ".pyo"))]
    return out


def local_imports(module_path: str, sources: Iterable[tuple[str, str]]) -> list[Path]:
    """The files and package folders of ``module_path``'s folder that the given
    (path, source) texts import, directly or through each other; the module and the
    harness files themselves excluded (their texts travel separately)."""
    folder = Path(module_path).resolve().parent
    given = [(Path(p).resolve(), text) for p, text in sources]
    own = {p for p, _ in given}
    found: dict[str, Path] = {}
    todo = [(text, p.parent == folder) for p, text in given]
    while todo:
        text, top_level = todo.pop()
        for name in sorted(_imported_names(text, top_level)):
            if name in found or not name.isidentifier():
                continue
            file, pkg = folder / f"{name}.py", folder / name
            if file.is_file() and file.resolve() not in own:
                found[name] = file
                todo.append((file.read_text(encoding="utf-8", errors="replace"), True))
            elif pkg.is_dir() and any(pkg.glob("*.py")):
                found[name] = pkg
                todo += [
                    (f.read_text(encoding="utf-8", errors="replace"), False)
                    for f in _package_files(pkg)
                    if f.suffix == ".py"
                ]
    return [found[k] for k in sorted(found)]


def max_bytes() -> int:
    raw = os.environ.get(MAX_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        raise ExecutorUnavailable(f"{MAX_ENV} must be a number of MiB, got {raw!r}") from None
    return int(mb * 2**20)


def _size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        files = _package_files(p) if p.is_dir() else [p]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def collect(module_path: str, sources: Iterable[tuple[str, str]]) -> dict[str, bytes]:
    """The local modules to send: {path relative to the kernel's folder: bytes}, empty
    when the kernel imports none. Raises ExecutorUnavailable (one line) over the limit."""
    paths = local_imports(module_path, sources)
    if not paths:
        return {}
    size, limit = _size(paths), max_bytes()
    if size > limit:
        names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in paths)
        raise ExecutorUnavailable(
            f"the modules {Path(module_path).name} imports from its folder ({names}) are {size / 2**20:.1f} MiB, over "
            f"the {limit / 2**20:g} MiB that may be sent to Ray workers ({MAX_ENV} raises it)"
        )
    folder = Path(module_path).resolve().parent
    files: dict[str, bytes] = {}
    for p in paths:
        for f in _package_files(p) if p.is_dir() else [p]:
            if f.is_file() and not f.is_symlink():
                files[f.resolve().relative_to(folder).as_posix()] = f.read_bytes()
    return files


def unpack(files: dict[str, bytes], into: Path) -> None:
    """On the actor: write the modules beside its copy of the kernel module."""
    root = into.resolve()
    for rel, data in files.items():
        target = (root / rel).resolve()
        if root not in target.parents:  # only ever below the actor's own folder
            raise ValueError(f"refusing to write {rel!r} outside {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
