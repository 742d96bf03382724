"""Helpers shared by the subcommands: input reading, kernel selection, exit codes."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

from ..detect import DetectionResult, detect
from ..model import KernelInfo

EXIT_OK = 0
EXIT_VERDICT = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage or unreadable input: reported in one line, exit code 2."""


def read_module(path: str, stdin_source: bool = False) -> tuple[str, str]:
    """(absolute path, text). With stdin_source the text comes from standard input
    (the editor's unsaved buffer) while the path still locates imports and the store."""
    abspath = os.path.abspath(path)
    if stdin_source:
        return abspath, sys.stdin.read()
    try:
        return abspath, Path(abspath).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a Python file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read ({e})") from None


def detect_or_fail(path: str, source: str) -> DetectionResult:
    result = detect(source, path)
    if result.error:
        raise UsageError(f"{path}:{result.error.line}:{result.error.col + 1}: does not parse: {result.error.message}")
    return result


def pick_kernel(result: DetectionResult, path: str, name: Optional[str]) -> KernelInfo:
    if not result.kernels:
        raise UsageError(f"{path}: no @triton.jit kernels found")
    if name is None:
        if len(result.kernels) == 1:
            return result.kernels[0]
        names = ", ".join(k.name for k in result.kernels)
        raise UsageError(f"{path}: several kernels ({names}); choose one with --kernel")
    k = result.kernel(name)
    if k is None:
        names = ", ".join(k.name for k in result.kernels)
        raise UsageError(f"{path}: no kernel named {name!r} (found: {names})")
    return k


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))
