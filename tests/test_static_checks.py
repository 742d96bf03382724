"""The static checks of scripts/test.sh: ruff (check, then format --check) and mypy run before the suite and stop it
when they fail, and the project's settings for them catch what they are there to catch.
The tree itself is checked by scripts/test.sh (a full mypy run takes about a minute)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.paths import REPO

# stands in for the interpreter: logs each `python -m TOOL` (ruff as ruff:SUBCOMMAND) and fails
# the one named in FAIL
FAKE_PYTHON = """#!/usr/bin/env bash
name="$2"; [ "$2" = ruff ] && name="ruff:$3"
echo "$name" >> "$STATIC_LOG"
[ -n "${ARGS_LOG:-}" ] && echo "$*" >> "$ARGS_LOG"
[ "$name" = "${FAIL:-}" ] && exit 1
exit 0
"""
STATIC = ["ruff:check", "ruff:format", "mypy"]


def _run_test_sh(tmp_path: Path, fail: str = "", *args: str, **env: str) -> tuple[int, list[str]]:
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "test.sh", tree / "scripts" / "test.sh")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "static.log"
    r = subprocess.run(["bash", str(tree / "scripts" / "test.sh"), *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHON": str(fake), "STATIC_LOG": str(log), "FAIL": fail, **env})
    return r.returncode, log.read_text().split() if log.exists() else []


def test_static_checks_run_before_the_suite(tmp_path):
    rc, ran = _run_test_sh(tmp_path)
    assert rc == 0 and ran == STATIC + ["pytest"]


@pytest.mark.parametrize("tool, ran", [("ruff:check", STATIC[:1]), ("ruff:format", STATIC[:2]), ("mypy", STATIC)])
def test_a_failing_static_check_stops_the_script_before_the_suite(tmp_path, tool, ran):
    rc, got = _run_test_sh(tmp_path, fail=tool)
    assert rc != 0 and got == ran


def test_the_static_checks_can_be_skipped_to_rerun_tests(tmp_path):
    rc, ran = _run_test_sh(tmp_path, KERNELBAND_SKIP_STATIC="1")
    assert rc == 0 and ran == ["pytest"]


def test_the_default_tier_leaves_out_the_slow_tests_and_slow_runs_only_them(tmp_path):
    """The README's command runs the tests not marked slow; `--slow` (CI's second step)
    runs only those, without the static checks again; other arguments go to pytest."""
    for args, ran, mark in [((), STATIC + ["pytest"], "-m not slow tests/x.py"),
                            (("--slow",), ["pytest"], "-m slow tests/x.py")]:
        work = tmp_path / (args[0].strip("-") if args else "default")
        work.mkdir()
        rc, got = _run_test_sh(work, "", *args, "tests/x.py", ARGS_LOG=str(work / "args.log"))
        pytest_args = (work / "args.log").read_text().splitlines()[-1]
        assert rc == 0 and got == ran and pytest_args.endswith(mark), pytest_args
        assert "-n 4 --dist loadgroup" in pytest_args


def _check(tool: list[str], tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    mod = tmp_path / "mod.py"
    mod.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-m", *tool, str(mod)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    # the project's settings, a cache of its own (the file is outside the configured tree)
    return _check(["mypy", "--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache")],
                  tmp_path, source)


def test_mypy_settings_catch_a_wrong_type_and_an_unchecked_none(tmp_path):
    r = _mypy(tmp_path, """
        from typing import Optional

        def size(text: Optional[str]) -> int:
            return len(text)

        count: int = "three"
    """)
    assert r.returncode == 1, r.stdout + r.stderr
    assert '"Optional[str]"' in r.stdout or '"str | None"' in r.stdout, r.stdout
    assert "[assignment]" in r.stdout and "[arg-type]" in r.stdout, r.stdout


def test_mypy_settings_report_an_ignore_that_hides_nothing(tmp_path):
    r = _mypy(tmp_path, """
        count: int = 3  # type: ignore[assignment]
    """)
    assert r.returncode == 1 and "[unused-ignore]" in r.stdout, r.stdout


def test_mypy_passes_correct_code(tmp_path):
    r = _mypy(tmp_path, """
        from typing import Optional

        def size(text: Optional[str]) -> int:
            return len(text) if text is not None else 0
    """)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("source, rule", [
    ("import os\n", "F401"),  # unused import
    ("def f():\n    return missing_name\n", "F821"),  # undefined name
    ("def f():\n    unused = 1\n", "F841"),  # unused local
    ("l = [1]\n", "E741"),  # ambiguous name
    ("def f(:\n", "invalid-syntax"),
])
def test_ruff_settings_catch_the_default_rules(tmp_path, source, rule):
    r = _check(["ruff", "check", "--config", str(REPO / "pyproject.toml"), "--no-cache"], tmp_path, source)
    assert r.returncode == 1 and rule in r.stdout + r.stderr, r.stdout + r.stderr


def test_ruff_format_check_catches_code_not_in_its_format(tmp_path):
    r = _check(["ruff", "format", "--check", "--config", str(REPO / "pyproject.toml"), "--no-cache"], tmp_path,
               "x = {'a':1}\n")
    assert r.returncode == 1 and "would be reformatted" in r.stdout + r.stderr, r.stdout + r.stderr
    formatted = _check(["ruff", "format", "--check", "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                       tmp_path, 'x = {"a": 1}\n')
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
