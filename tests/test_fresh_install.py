"""``pip install kernelband`` in a fresh venv (torch installed
first) gives a working ``kernelband-lsp``. scripts/check_fresh_install.sh builds a wheel
of this tree, installs it in a new plain venv, answers ``kernelband --version`` and an
LSP ``initialize`` over stdio. It installs the dependencies through pip as set up on the
machine (PyPI, and the torch CPU wheel this machine keeps on disk): a few minutes."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from helpers.paths import REPO
from kernelband import __version__

SCRIPT = REPO / "scripts" / "check_fresh_install.sh"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_fresh_venv_gets_a_working_kernelband_lsp():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("the check copies the tree through git ls-files")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1100)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert f"kernelband {__version__}" in r.stdout.splitlines(), out[-4000:]
    assert "initialize: serverInfo={'name': 'kernelband-lsp'" in r.stdout, out[-4000:]
    assert "the server ended with code 0" in r.stdout and "OK: a fresh venv" in r.stdout
