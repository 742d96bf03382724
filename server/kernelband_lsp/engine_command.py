"""How a job runs the engine: ``python -m kernelband optimize|profile FILE --kernel K
--events jsonl --stdin-source`` plus the flags the settings ask for; a re-verification
is ``check FILE --kernel K --stdin-source --json --variant VARIANT`` (the original on
stdin, one JSON object on stdout)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from typing import Optional

from .jobmodel import CHECK, OPTIMIZE, JobSpec
from .settings import engine_args

log = logging.getLogger(__name__)


def default_command_prefix() -> list[str]:
    """How to run the engine: env KERNELBAND_LSP_JOB_COMMAND (a JSON list) overrides."""
    raw = os.environ.get("KERNELBAND_LSP_JOB_COMMAND")
    if raw:
        with contextlib.suppress(ValueError):
            cmd = json.loads(raw)
            if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
                return cmd
        log.warning("ignoring KERNELBAND_LSP_JOB_COMMAND (expected a JSON list of strings)")
    return [sys.executable, "-m", "kernelband"]


class EngineCommand:
    """How to start the engine for a job (``prefix``). The flags come from the settings
    through ``kernelband/options.py`` (``settings.engine_args``), never from ``--help``."""

    def __init__(self, prefix: Optional[list[str]] = None) -> None:
        self.prefix = list(prefix) if prefix else default_command_prefix()

    def argv(self, spec: JobSpec) -> list[str]:
        """The engine's command line for a job; flags from kernelband/options.py, not --help."""
        argv = [*self.prefix, spec.kind, spec.path, "--kernel", spec.kernel, "--stdin-source"]
        if spec.kind == CHECK:
            argv += ["--json", "--variant", spec.variant_path or ""]
        else:
            argv += ["--events", "jsonl"] + (["--json"] if spec.kind == OPTIMIZE else [])
        if spec.harness:
            argv.extend(["--harness", spec.harness])
        return argv + engine_args(spec.kind, spec.settings) + list(spec.extra_args)
