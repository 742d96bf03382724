"""The language service stays split by concept: no class of its modules over 300 lines
(service.py holds the state; each mixin module one concern), and the server's
package never imports torch or triton through the typed Result or the options."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE = sorted((ROOT / "server" / "kernelband_lsp").glob("service*.py"))
MAX_CLASS_LINES = 300


def long_classes(source: str, limit: int = MAX_CLASS_LINES) -> list[tuple[str, int]]:
    tree = ast.parse(source)
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef) and n.end_lineno - n.lineno + 1 > limit]


def test_no_service_class_is_over_300_lines():
    assert len(SERVICE) >= 6
    assert {p.name: long_classes(p.read_text(encoding="utf-8")) for p in SERVICE} == {p.name: [] for p in SERVICE}


def test_the_size_check_sees_a_long_class():
    body = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(120))
    assert long_classes(f"class Big:\n{body}") == [("Big", 360)]


def test_result_and_options_do_not_pull_torch_or_triton_into_the_server():
    code = ("import sys; import kernelband.model, kernelband.options, kernelband_lsp.service, kernelband_lsp.settings; "
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": f"{ROOT}:{ROOT / 'server'}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stderr
