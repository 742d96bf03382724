""".ci/run: the README's two commands, then the slow tier of the tests, in a virtual
environment it creates empty, so a dependency missing from pyproject.toml fails CI. Run for
real on a copy of the script whose setup and test commands report where they ran (the real
ones take minutes)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO
import pytest

REPORT = '''#!/usr/bin/env bash
set -euo pipefail
"${PYTHON:-python3}" - "$0" "$@" <<'PY' >> "$CI_LOG"
import importlib.util, os, shutil, sys
print(os.path.basename(sys.argv[1]), repr(sys.argv[2:]), sys.prefix, sys.base_prefix,
      importlib.util.find_spec("pytest") is not None, shutil.which("python"), os.environ.get("PYTHON"))
PY
'''


def _quick_start_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [part.strip() for line in block.strip().splitlines() for part in line.split("&&")
            if part.strip().startswith("bash ")]


def test_the_readme_commands_are_the_ones_ci_runs():
    assert _quick_start_commands() == ["bash scripts/setup.sh", "bash scripts/test.sh"]
    lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    # the README's test command runs the default tier; CI then runs the slow one: every test
    assert [ln for ln in lines if ln.startswith("bash ")] == ["bash scripts/setup.sh", "bash scripts/test.sh",
                                                              "bash scripts/test.sh --slow"]
    assert not any("system-site-packages" in ln for ln in lines)


@pytest.mark.slow
def test_ci_sets_up_and_tests_inside_a_fresh_environment(tmp_path):
    tree = tmp_path / "tree"
    (tree / ".ci").mkdir(parents=True)
    (tree / "scripts").mkdir()
    shutil.copy(REPO / ".ci" / "run", tree / ".ci" / "run")
    for name in ("setup.sh", "test.sh"):
        (tree / "scripts" / name).write_text(REPORT)
    log, tmp = tmp_path / "ci.log", tmp_path / "tmp"
    tmp.mkdir()
    # PYTHON names the interpreter of this test run, which has pytest: the scripts
    # must not use it, and the environment must not see its packages
    env = {**os.environ, "CI_LOG": str(log), "TMPDIR": str(tmp), "PYTHON": sys.executable}
    r = subprocess.run(["bash", str(tree / ".ci" / "run")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    runs = [ln.split(" ") for ln in log.read_text().splitlines()]
    assert [run[0] for run in runs] == ["setup.sh", "test.sh", "test.sh"]
    assert [run[1] for run in runs] == ["[]", "[]", "['--slow']"]
    (_, _, prefix, base, has_pytest, which_python, python_var), *later = runs
    assert all(run[2] == prefix for run in later)  # all in the same environment
    assert prefix != base and Path(prefix) != Path(sys.prefix)  # a venv, not the caller's
    assert Path(prefix).is_relative_to(tmp)  # made by .ci/run, outside the checkout
    assert has_pytest == "False"  # empty: nothing from the caller's site-packages
    assert Path(which_python).parent == Path(prefix) / "bin" and python_var == str(Path(prefix) / "bin" / "python")
    assert not list(tmp.iterdir()), "the environment is removed afterwards"
    assert re.search(r"fresh environment", r.stderr)


@pytest.mark.slow
def test_a_failing_step_fails_ci(tmp_path):
    tree = tmp_path / "tree"
    (tree / ".ci").mkdir(parents=True)
    (tree / "scripts").mkdir()
    shutil.copy(REPO / ".ci" / "run", tree / ".ci" / "run")
    (tree / "scripts" / "setup.sh").write_text("exit 3\n")
    (tree / "scripts" / "test.sh").write_text("echo tests ran > \"$CI_LOG\"\n")
    env = {**os.environ, "CI_LOG": str(tmp_path / "ci.log"), "TMPDIR": str(tmp_path)}
    r = subprocess.run(["bash", str(tree / ".ci" / "run")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 3 and not (tmp_path / "ci.log").exists()
