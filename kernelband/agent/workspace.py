"""Which files an agent's tool call may name: those under the workspace root.

A path is resolved the way the operating system will open it (relative to the root,
every symlink followed) and refused unless the result is inside the root: ``..``, an
absolute path elsewhere, or a symlink out of the root all end at a refusal, in one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_VARIANT_BYTES = 2 * 1024 * 1024  # a whole module; more is not a kernel variant


class PathRefused(ValueError):
    """A path outside the workspace root, missing, or not a Python file (one line)."""


@dataclass(frozen=True)
class Workspace:
    root: Path  # resolved, absolute

    @classmethod
    def at(cls, root: str | os.PathLike[str]) -> "Workspace":
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise PathRefused(f"workspace root {root}: not a directory")
        return cls(resolved)

    def resolve(self, path: str, what: str = "file") -> Path:
        """The real path of ``path`` (relative to the root, or absolute), inside the root."""
        if not isinstance(path, str) or not path.strip():
            raise PathRefused(f"{what}: expected a path")
        if "\0" in path:
            raise PathRefused(f"{what}: a path cannot contain a NUL character")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = candidate.resolve()  # symlinks followed: where the file really is
        if not real.is_relative_to(self.root):
            raise PathRefused(f"{what} {path}: outside the workspace root {self.root}; refused")
        return real

    def python_file(self, path: str, what: str = "file") -> Path:
        """An existing ``.py`` file inside the root."""
        real = self.resolve(path, what)
        if not real.exists():
            raise PathRefused(f"{what} {path}: no such file")
        if not real.is_file():
            raise PathRefused(f"{what} {path}: not a regular file")
        if real.suffix != ".py":
            raise PathRefused(f"{what} {path}: not a Python file (.py)")
        return real

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` as the agent should name it: relative to the root."""
        try:
            return Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(path)
