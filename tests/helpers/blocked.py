"""Run a Python subprocess as if some packages were not installed: a sitecustomize on
PYTHONPATH installs an import hook that refuses them (ModuleNotFoundError with the
package's name, as a missing package gives)."""
from __future__ import annotations

import os
from pathlib import Path

from helpers.paths import REPO

_SITE = '''import importlib.abc, sys
BLOCKED = {blocked!r}


class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{fullname!r}}", name=fullname)
        return None


sys.meta_path.insert(0, _Missing())
'''


def env_without(tmp_path: Path, *packages: str) -> dict[str, str]:
    """An environment for subprocess.run in which ``packages`` cannot be imported."""
    site = tmp_path / "blocked-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITE.format(blocked=tuple(packages)), encoding="utf-8")
    path = [str(site), str(REPO), str(REPO / "server")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")])}
