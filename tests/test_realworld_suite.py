"""benchmarks/realworld/ under the interpreter.

Fast: `kernelband list` finds each module's kernel and names a bench_* harness as the
timing workload and the test_* harness as a correctness check.
Slow (three modules, one per class that used to end without a verdict): `kernelband check`
of the module against itself is ok: in-place RoPE whose harnesses return None, an
autotuned kernel with a META grid and reset_to_zero, a wrapper returning a dataclass
(sampler_logprobs; quant_int8's dataclass is refused today for an engine reason, see the
report)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from benchmarks.realworld import MODULES
from helpers.paths import REPO

RW = REPO / "benchmarks" / "realworld"


def cli(*args: str, cwd: Path, env: Optional[dict[str, str]] = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return subprocess.run([sys.executable, "-m", "kernelband", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def test_suite_has_ten_modules_on_disk():
    assert len(MODULES) >= 10
    for name in MODULES:
        assert (RW / name).is_file(), name


@pytest.mark.parametrize("module", sorted(MODULES))
def test_list_finds_kernel_with_bench_timing_and_test_check(module: str, tmp_path: Path):
    shutil.copy(RW / module, tmp_path / module)
    p = cli("list", module, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = {r["kernel"]["name"]: r for r in json.loads(p.stdout)["kernels"]}
    kernel = MODULES[module]
    assert kernel in rows, sorted(rows)
    h = rows[kernel]["harness"]
    # the production-size harness times; the small pytest-style one checks correctness too
    assert h["timing"].startswith("bench_"), h
    assert any(c.startswith("test_") for c in h["checks"]), h
    assert rows[kernel]["kernel"]["launch_sites"], "no launch site found"


# A whole check under the interpreter: 100-140 s alone on 2 cores for the autotuned SwiGLU
# (three configs at each size beyond the harness), past 300 s beside the slow tier's others.
SELF_CHECK_S = 1200


def _self_check(module: str, tmp_path: Path) -> dict:
    shutil.copy(RW / module, tmp_path / module)
    p = cli("check", module, "--variant", module, "--kernel", MODULES[module], "--device", "cpu", "--json",
            cwd=tmp_path, timeout=SELF_CHECK_S)
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


@pytest.mark.slow
@pytest.mark.timeout(SELF_CHECK_S + 60)
def test_check_inplace_rope_against_itself(tmp_path: Path):
    out = _self_check("rope_inplace.py", tmp_path)
    assert out["status"] == "ok", out.get("message")
    assert out["verdict"] == "verified_correct" and out["speed_claim"] is False


@pytest.mark.slow
@pytest.mark.timeout(SELF_CHECK_S + 60)
def test_check_dataclass_wrapper_against_itself(tmp_path: Path):
    out = _self_check("sampler_logprobs.py", tmp_path)
    assert out["status"] == "ok", out.get("message")
    assert out["verdict"] == "verified_correct"


# Once refused as "a shared output buffer": the amax an atomic_max writes, changed by the
# judge's own replay of the kept run (replays of an accumulating kernel are not idempotent).
@pytest.mark.slow
@pytest.mark.timeout(SELF_CHECK_S + 60)
def test_check_autotuned_swiglu_against_itself(tmp_path: Path):
    out = _self_check("swiglu_autotune.py", tmp_path)
    assert out["status"] == "ok", out.get("message")
