"""kernelband-lsp in a real, headless Neovim (scripts/nvim_e2e.sh); skipped without nvim."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim is not installed (apt-get install -y neovim)")
def test_neovim_end_to_end(tmp_path):
    env = dict(os.environ, KB_PYTHON=sys.executable)
    r = subprocess.run(["bash", str(REPO / "scripts" / "nvim_e2e.sh"), str(tmp_path / "nvim.json")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
