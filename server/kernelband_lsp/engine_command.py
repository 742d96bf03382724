"""How a job runs the engine: ``python -m kernelband optimize|profile FILE --kernel K
--events jsonl --stdin-source`` plus the flags the settings ask for."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import sys
from typing import Any, Optional

from .jobmodel import OPTIMIZE, JobSpec
from .proctree import killpg

log = logging.getLogger(__name__)


def default_command_prefix() -> list[str]:
    """How to run the engine: env KERNELBAND_LSP_JOB_COMMAND (a JSON list) overrides."""
    raw = os.environ.get("KERNELBAND_LSP_JOB_COMMAND")
    if raw:
        try:
            cmd = json.loads(raw)
            if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
                return cmd
        except ValueError:
            pass
        log.warning("ignoring KERNELBAND_LSP_JOB_COMMAND (expected a JSON list of strings)")
    return [sys.executable, "-m", "kernelband"]


class EngineCommand:
    """The engine's command line for a job (``prefix``: how to start the engine)."""

    def __init__(self, prefix: Optional[list[str]] = None) -> None:
        self.prefix = list(prefix) if prefix else default_command_prefix()
        self._flags: dict[str, Optional[set[str]]] = {}

    async def _supported_flags(self, sub: str) -> Optional[set[str]]:
        """Flags the engine's subcommand accepts (from --help), probed once; None if unknown."""
        if sub in self._flags:
            return self._flags[sub]
        flags: Optional[set[str]] = None
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.prefix, sub, "--help",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
            except asyncio.TimeoutError:
                killpg(proc.pid, signal.SIGKILL)
                out = b""
            if proc.returncode == 0:
                flags = set(re.findall(r"(--[A-Za-z0-9][A-Za-z0-9-]*)", out.decode("utf-8", "replace")))
        except OSError as e:
            log.warning("cannot probe `%s %s --help`: %s", " ".join(self.prefix), sub, e)
        self._flags[sub] = flags
        return flags

    async def argv(self, spec: JobSpec) -> list[str]:
        s = spec.settings
        argv = [*self.prefix, spec.kind, spec.path, "--kernel", spec.kernel, "--events", "jsonl",
                "--stdin-source"]
        flags = await self._supported_flags(spec.kind)

        def add(flag: str, value: Any, always: bool = False) -> None:
            if value in (None, "", 0, 0.0, [], ()) and not always:
                return
            if flags is not None and flag not in flags:
                log.info("the engine's `%s` has no %s; not passed", spec.kind, flag)
                return
            argv.extend([flag, str(value)])

        if spec.kind == OPTIMIZE:
            argv.append("--json")
            add("--budget", s.budget_evaluations)
            add("--seconds", s.budget_seconds)
            add("--tokens", s.budget_tokens)
            add("--dollars", s.budget_dollars)
            add("--generator", s.generator if s.generator != "rules" else None)
            if s.generator == "openai":
                add("--model", s.model)
                add("--base-url", s.base_url)
            add("--search", s.search if s.search != "kernelband" else None)
            add("--strategies", ",".join(s.strategies))
            add("--min-speedup", s.min_speedup)  # the engine decides "improved" with the editor's floor
        add("--harness", spec.harness)
        add("--device", s.device if s.device and s.device != "auto" else None)
        return argv
