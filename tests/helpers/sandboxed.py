"""Run a payload straight in the sandbox (no screen, no judge), or the same payload
without it (the proof that the attack works when nothing stops it).

The payload is Python run at the top level of a fresh process started the way the judge
starts a variant process: the scrubbed environment, a private job directory as cwd,
HOME and TMPDIR, a Triton cache inside it, the interpreter on. Sandboxed, the process
calls ``sandbox.enter()`` first. The payload fills the dict ``result`` (JSON values),
printed at the end; the sandbox's report comes back too.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from helpers.paths import REPO

from kernelband.worker import sandbox

BOOT = r"""
import json, os, sys
if sys.argv[1] == "1":
    from kernelband.worker import sandbox
    report = sandbox.enter()
    print("KB-REPORT " + json.dumps(report.to_dict()), file=sys.stderr, flush=True)
result = {}
try:
    path = os.path.abspath(sys.argv[2])
    exec(compile(open(path).read(), path, "exec"), {"result": result, "argv": sys.argv[3:], "__name__": "payload"})
finally:
    print("KB-RESULT " + json.dumps(result, default=str), flush=True)
"""

# Started with a secret in its own environment, it starts the variant process with the
# scrubbed one: a stand-in for the judge's ancestors (the editor, the session).
ANCESTOR = r"""
import json, os, subprocess, sys
env = json.loads(os.environ.pop("KB_CHILD_ENV"))
sys.exit(subprocess.call(sys.argv[1:] + [str(os.getpid())], env=env))
"""


@dataclass
class Run:
    returncode: int
    result: dict[str, Any]
    report: Optional[dict[str, Any]]
    stdout: str
    stderr: str
    layers: dict[str, str] = field(default_factory=dict)  # layer -> state

    def held(self, *names: str) -> bool:
        return all(self.layers.get(n) == "held" for n in names)


def job_dir() -> str:
    """A private directory like the judge's (``mkdtemp``: 0700, owned by us)."""
    return tempfile.mkdtemp(prefix="kernelband-variant-")


def variant_env(workdir: str, **extra: str) -> dict[str, str]:
    env = sandbox.scrubbed_env(workdir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["TRITON_INTERPRET"] = "1"
    env["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton-cache")
    env.update(extra)
    return env


def run_payload(code: str, *, sandboxed: bool, args: Sequence[str] = (), skip: str = "", policy: str = "",
                ancestor_env: Optional[dict[str, str]] = None, wrapper: Sequence[str] = (),
                timeout: float = 180.0, extra_env: Optional[dict[str, str]] = None) -> Run:
    workdir = job_dir()
    try:
        os.makedirs(os.path.join(workdir, "triton-cache"))
        with open(os.path.join(workdir, "payload.py"), "w", encoding="utf-8") as fh:
            fh.write(code)
        env = variant_env(workdir, **(extra_env or {}))
        if skip:
            env[sandbox.SKIP_ENV] = skip
        if policy:
            env[sandbox.POLICY_ENV] = policy
        argv = [*wrapper, sys.executable, "-c", BOOT, "1" if sandboxed else "0", "payload.py", *args]
        if ancestor_env is not None:
            outer = {**env, **ancestor_env, "KB_CHILD_ENV": json.dumps(env)}
            argv = [sys.executable, "-c", ANCESTOR, *argv]
            env = outer
        proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True)
        return parse(proc.returncode, proc.stdout, proc.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def parse(returncode: int, stdout: str, stderr: str) -> Run:
    result: dict[str, Any] = {}
    report = None
    for line in stdout.splitlines():
        if line.startswith("KB-RESULT "):
            result = json.loads(line[len("KB-RESULT "):])
    for line in stderr.splitlines():
        if line.startswith("KB-REPORT "):
            report = json.loads(line[len("KB-REPORT "):])
    layers = {layer["name"]: layer["state"] for layer in report["layers"]} if report else {}
    return Run(returncode, result, report, stdout, stderr, layers)
