"""How scripts/test.sh spreads the suite over pytest-xdist workers (--dist loadgroup).

A test file that defines a fixture of module (or wider) scope is one work unit: its
tests run on one worker, which builds the fixture once (a prepared worker, a local Ray
instance; its tests may also share its state). Every other test is a unit of its own
and goes to whichever worker is free.

The units are decided here, in the controlling process, from the test files' text:
xdist's own loadgroup reads ``xdist_group`` marks through a node id it rewrites, and
pytest 9.2 no longer lets a plugin rewrite node ids, so marks would be ignored.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Optional

from xdist.scheduler import LoadScopeScheduling

WIDE_SCOPES = frozenset({"module", "package", "session"})


def _wide_scope(decorator: ast.expr) -> bool:
    """``@pytest.fixture(scope="module")`` or ``@fixture(scope=...)`` of a wide scope."""
    if not isinstance(decorator, ast.Call):
        return False
    func = decorator.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name != "fixture":
        return False
    return any(kw.arg == "scope" and isinstance(kw.value, ast.Constant) and kw.value.value in WIDE_SCOPES
               for kw in decorator.keywords)


def defines_wide_fixture(path: Path) -> bool:
    """Whether the file defines a fixture of module, package or session scope."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    return any(_wide_scope(d) for node in ast.walk(tree)
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for d in node.decorator_list)


class SharedFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]  (xdist ships no type hints)
    """Work units: a whole file where it defines a wide-scoped fixture, else one test."""

    def __init__(self, config: Any, log: Optional[Any] = None) -> None:
        super().__init__(config, log)
        self._root = Path(config.rootpath)
        self._grouped: dict[str, bool] = {}

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        if path not in self._grouped:
            self._grouped[path] = defines_wide_fixture(self._root / path)
        return path if self._grouped[path] else nodeid
