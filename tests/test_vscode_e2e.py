"""End to end in a real VS Code (code-server, driven by a headless Chromium): the
extension registers its agent tools, and a tool call made the way agent mode makes it
(``vscode.lm.invokeTool``) reaches ``kernelband mcp`` and comes back.

Needs what CI does not install: code-server (``KERNELBAND_CODE_SERVER``, its executable:
``npm install code-server`` with Node 24), Chromium (``KERNELBAND_CHROMIUM``, default
``chromium``) and npm (to package the extension). Skipped, saying which is missing,
otherwise. The driver is vscode-client/test/e2e/driver (an extension that calls the
tools and writes what came back).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.mcp_client import server_env
from helpers.paths import REPO

CLIENT = REPO / "vscode-client"
DRIVER = CLIENT / "test" / "e2e" / "driver"
CODE_SERVER = os.environ.get("KERNELBAND_CODE_SERVER", "")
CHROMIUM = os.environ.get("KERNELBAND_CHROMIUM", "chromium")
NODE = os.environ.get("KERNELBAND_E2E_NODE", "node")  # a Node with WebSocket (22+) presses the confirmation
WAIT_S = 420

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CODE_SERVER or not Path(CODE_SERVER).exists(),
                       reason="KERNELBAND_CODE_SERVER (a code-server executable) is not set"),
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} (headless browser) not found"),
    pytest.mark.skipif(shutil.which("npm") is None, reason="npm (to package the extension) not found"),
    pytest.mark.skipif(shutil.which(NODE) is None, reason=f"{NODE} (Node 22+, for the confirmation) not found"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vsix(folder: Path, out: Path) -> Path:
    """The extension in ``folder`` packaged with the workspace's vsce (its prepublish script builds it)."""
    vsce = REPO / "node_modules" / ".bin" / "vsce"
    target = out / f"{folder.name}.vsix"
    subprocess.run([str(vsce), "package", "--no-dependencies", "--allow-missing-repository", "--skip-license",
                    "-o", str(target)], cwd=folder, check=True, capture_output=True, text=True, timeout=600)
    return target


def test_an_agent_tool_call_in_vscode_reaches_kernelband_mcp(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(REPO / "examples" / "add_scale.py", ws / "add_scale.py")
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\n", encoding="utf-8")
    user, exts, build = tmp_path / "user", tmp_path / "exts", tmp_path / "build"
    build.mkdir()
    settings = json.dumps({"security.workspace.trust.enabled": False, "kernelband.pythonPath": sys.executable,
                           "workbench.startupEditor": "none", "extensions.autoUpdate": False})
    for scope in ("User", "Machine"):  # pythonPath is machine-overridable: a remote window reads Machine/
        (user / scope).mkdir(parents=True)
        (user / scope / "settings.json").write_text(settings, encoding="utf-8")
    driver = build / "driver"
    shutil.copytree(DRIVER, driver)
    for vsix in (_vsix(CLIENT, build), _vsix(driver, build)):
        subprocess.run([CODE_SERVER, "--extensions-dir", str(exts), "--user-data-dir", str(user),
                        "--install-extension", str(vsix)], check=True, capture_output=True, text=True, timeout=300)
    out = tmp_path / "result.json"
    port = _free_port()
    env = server_env({"KB_E2E_OUT": str(out), "PASSWORD": ""})
    logs = (tmp_path / "code-server.log").open("w")
    server = subprocess.Popen([CODE_SERVER, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}", "--disable-telemetry",
                               "--disable-update-check", "--extensions-dir", str(exts), "--user-data-dir", str(user),
                               str(ws)], env=env, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True)
    browser = clicker = None
    devtools, dialog = _free_port(), tmp_path / "dialog.json"
    try:
        _wait_port(port, 120)
        browser = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                                    f"--user-data-dir={tmp_path / 'chromium'}", f"--remote-debugging-port={devtools}",
                                    f"http://127.0.0.1:{port}/?folder={ws}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        clicker = subprocess.Popen([NODE, str(CLIENT / "test" / "e2e" / "confirm.mjs"), str(devtools), str(dialog),
                                    str(WAIT_S)], start_new_session=True)
        deadline = time.monotonic() + WAIT_S
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(1)
        assert out.exists(), "the driver extension wrote nothing: " + _tail(tmp_path / "code-server.log")
        result = json.loads(out.read_text(encoding="utf-8"))
    finally:
        for proc in (clicker, browser, server):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, 9)
        logs.close()
    assert result["ok"], json.dumps(result)
    assert result["tools"] == ["kernelband_check_variant", "kernelband_list_kernels", "kernelband_optimize_kernel",
                               "kernelband_profile_kernel"]
    (entry,) = result["list_kernels"]["files"]
    assert entry["file"] == "add_scale.py" and [k["name"] for k in entry["kernels"]] == ["axpy_kernel"]
    assert "outside the workspace root" in result["outside"]
    # the job tool asked first (prepareInvocation's confirmation), then ran the check
    asked = json.loads(dialog.read_text(encoding="utf-8"))
    assert "axpy_kernel" in asked["message"] or "add_scale.py" in asked["message"], asked
    assert "GPU" in asked["detail"] and "Nothing is written to your files" in asked["detail"], asked
    check = result["check"]
    assert isinstance(check, dict), check
    assert check["correct"] is False and check["status"] == "rejected" and "os" in check["reason"], check


def _wait_port(port: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"code-server did not listen on {port}")


def _tail(path: Path) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-15:])
    except OSError:
        return ""
