"""Shared fixtures. Everything runs on the CPU: the worker switches to Triton's
interpreter by itself when there is no GPU."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from helpers.paths import EXAMPLES, REPO

# benchmark scripts import their siblings (common, landscape_configs, run) by name, as a
# script run from benchmarks/ can: the tests that load them need the same path
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.fixture
def examples_dir(tmp_path: Path) -> Path:
    """A private copy of examples/ as a workspace (sessions write .kernelband/ there)."""
    dst = tmp_path / "ws"
    shutil.copytree(EXAMPLES, dst, ignore=shutil.ignore_patterns("__pycache__", ".kernelband"))
    (dst / "pyproject.toml").write_text("[project]\nname = 'ws'\n", encoding="utf-8")
    return dst


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadgroup: the work units of helpers/xdist_groups.py."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from helpers.xdist_groups import SharedFixtureScheduling

    return SharedFixtureScheduling(config, log)
