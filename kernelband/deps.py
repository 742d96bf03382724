"""Optional pieces: one clear line when one is missing, never a traceback.

The language server's packages (pygls, lsprotocol, watchdog) and openai are plain
dependencies of the wheel; this covers environments where they are missing anyway
(a partial install, a vendored copy) and the pieces that stay optional.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingDependency(RuntimeError):
    """A package a feature needs is not installed; the message is one line."""

    def __init__(self, module: str, purpose: str, install: str) -> None:
        super().__init__(f"{purpose} needs the {module} package, which is not installed: {install}")
        self.module = module


def require(module: str, purpose: str, install: str = "") -> ModuleType:
    """Import ``module`` or raise MissingDependency saying what needs it and how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        # only the package itself (or one of its own imports) missing counts; other errors propagate
        missing = getattr(e, "name", None)
        if missing is None or missing.split(".")[0] != module.split(".")[0]:
            raise
        raise MissingDependency(module, purpose, install or f"pip install {module}") from None
