"""A missing package ends in one clear line on stderr, never a traceback: the language
server without its packages, the openai generator without openai. Real subprocesses;
the package is hidden by an import hook (helpers/blocked.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.blocked import env_without
from helpers.paths import EXAMPLES


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err
    return err


def test_the_hook_really_hides_a_package(tmp_path):
    """The cheat check: without the hook the import works, with it it fails."""
    code = ["-c", "import pygls, openai; print('ok')"]
    assert _run(code, env_without(tmp_path)).stdout.strip() == "ok"
    proc = _run(code, env_without(tmp_path, "openai"))
    assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr


@pytest.mark.parametrize("package", ["pygls", "lsprotocol"])
def test_language_server_without_its_packages_says_so_in_one_line(tmp_path, package):
    proc = _run(["-m", "kernelband_lsp"], env_without(tmp_path, package))
    assert proc.returncode == 2
    assert proc.stdout == ""  # stdout is the protocol's
    _one_line_error(proc, f"needs the {package} package", "pip install")


def test_language_server_starts_when_its_packages_are_there(tmp_path):
    proc = _run(["-m", "kernelband_lsp", "--version"], env_without(tmp_path, "openai"))
    assert proc.returncode == 0 and proc.stdout.startswith("kernelband-lsp"), proc.stderr


def test_openai_generator_without_openai_is_a_usage_error(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "add_scale.py").write_text((EXAMPLES / "add_scale.py").read_text())
    proc = _run(["-m", "kernelband", "optimize", str(ws / "add_scale.py"), "--generator", "openai",
                 "--device", "cpu", "--no-store"], env_without(tmp_path, "openai"))
    assert proc.returncode == 2
    _one_line_error(proc, "the openai generator needs the openai package", "pip install openai")


def test_rules_cli_works_without_openai(tmp_path):
    proc = _run(["-m", "kernelband", "list", str(EXAMPLES / "add_scale.py")], env_without(tmp_path, "openai", "sklearn"))
    assert proc.returncode == 0 and "axpy_kernel" in proc.stdout, proc.stderr
