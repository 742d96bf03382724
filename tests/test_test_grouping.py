"""How scripts/test.sh spreads the suite over pytest-xdist workers: the tests of a file
that defines a module-scoped fixture run on one worker, which builds it once; every
other test goes to any free worker. Real pytest runs on a small planted suite."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers.paths import REPO
from helpers.xdist_groups import defines_wide_fixture
import pytest

CONFTEST = f'''
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
import pytest


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from helpers.xdist_groups import SharedFixtureScheduling
    return SharedFixtureScheduling(config, log)
'''

SHARED = '''
import os, pytest

@pytest.fixture(scope="module")
def prepared():
    with open(os.environ["BUILDS"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return object()

@pytest.mark.parametrize("i", range(8))
def test_uses_it(prepared, i):
    pass
'''

FREE = '''
import os, time, pytest

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    time.sleep(0.5)  # long enough that a free worker takes the next one
    with open(os.environ["WHERE"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_files_with_a_wide_fixture_are_found(tmp_path):
    cases = {
        "@pytest.fixture(scope='module')\ndef f(): pass\n": True,
        "@fixture(scope='session')\ndef f(): pass\n": True,
        "@pytest.fixture(scope='package')\nasync def f(): pass\n": True,
        "@pytest.fixture\ndef f(): pass\n": False,
        "@pytest.fixture(scope='function')\ndef f(): pass\n": False,
        "def test(): pass\n": False,
        "def (:\n": False,
    }
    for i, (text, wide) in enumerate(cases.items()):
        (tmp_path / f"t{i}.py").write_text(text)
        assert defines_wide_fixture(tmp_path / f"t{i}.py") is wide, text
    # the suite's own: the red-team corpus prepares one evaluator per kernel, per module
    assert defines_wide_fixture(REPO / "tests" / "test_redteam_wrong.py")
    assert not defines_wide_fixture(REPO / "tests" / "test_session.py")


@pytest.mark.slow
def test_a_module_fixture_is_built_once_and_other_tests_spread(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_shared.py").write_text(textwrap.dedent(SHARED))
    (suite / "test_free.py").write_text(textwrap.dedent(FREE))
    builds, where = tmp_path / "builds.txt", tmp_path / "where.txt"
    env = {**__import__("os").environ, "BUILDS": str(builds), "WHERE": str(where)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
                        "--dist", "loadgroup", str(suite)], capture_output=True, text=True, cwd=suite, env=env,
                       timeout=300)
    assert r.returncode == 0 and "14 passed" in r.stdout, r.stdout + r.stderr
    assert len(builds.read_text().split()) == 1  # one worker ran the eight tests that share it
    assert len(set(where.read_text().split())) >= 2  # the independent ones were spread
