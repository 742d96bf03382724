"""Shared fixtures. Everything runs on the CPU: the worker switches to Triton's
interpreter by itself when there is no GPU."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.paths import EXAMPLES


@pytest.fixture
def examples_dir(tmp_path: Path) -> Path:
    """A private copy of examples/ as a workspace (sessions write .kernelband/ there)."""
    dst = tmp_path / "ws"
    shutil.copytree(EXAMPLES, dst, ignore=shutil.ignore_patterns("__pycache__", ".kernelband"))
    (dst / "pyproject.toml").write_text("[project]\nname = 'ws'\n", encoding="utf-8")
    return dst
