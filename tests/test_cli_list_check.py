"""The ``list`` and ``check`` subcommands end to end (a real CLI process, the interpreter).

Inputs are a copy of examples/add_scale.py with a smaller problem so each check takes
seconds; ``--rounds 2`` keeps the interleaved re-measurement short."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from helpers.paths import REPO, example_source

SMALL = example_source("add_scale.py").replace("50_003", "4_099")
MASK = "mask = offsets < n_elements"
GRID = 'grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)'
# A grid that fails once the launch is replayed more often than one evaluation does
# (its run + at most 51 timing replays): correctness passes, the re-measurement fails.


def cli(*args: str, cwd: Path, env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return subprocess.run([sys.executable, "-m", "kernelband", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "orig.py").write_text(SMALL, encoding="utf-8")
    return tmp_path


def write_variant(ws: Path, old: str, new: str, name: str = "variant.py") -> str:
    assert old in SMALL, old
    (ws / name).write_text(SMALL.replace(old, new), encoding="utf-8")
    return name


def test_list_json_and_text(ws):
    p = cli("list", "orig.py", "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    (row,) = out["kernels"]
    assert row["kernel"]["name"] == "axpy_kernel"
    assert [s["enclosing_function"] for s in row["kernel"]["launch_sites"]] == ["axpy"]
    assert (row["harness"]["name"], row["harness"]["how"]) == ("harness_axpy", "convention")
    p = cli("list", "orig.py", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert "axpy_kernel" in p.stdout and "launch:    line" in p.stdout and "harness:   harness_axpy" in p.stdout


def test_list_and_check_with_bom_and_missing_harness(ws):
    (ws / "bom.py").write_bytes(b"\xef\xbb\xbf" + SMALL.encode("utf-8"))
    p = cli("list", "bom.py", cwd=ws)
    assert p.returncode == 0 and "harness:   harness_axpy" in p.stdout, p.stderr
    (ws / "pyproject.toml").write_text('[tool.kernelband.harness]\naxpy_kernel = "gone.py:h"\n', encoding="utf-8")
    p = cli("list", "orig.py", cwd=ws)
    assert p.returncode == 0 and "harness:   none:" in p.stdout and "does not exist" in p.stdout, p.stdout + p.stderr
    p = cli("check", "orig.py", "--variant", "orig.py", "--harness", str(ws / "missing.py") + ":h", cwd=ws)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "does not exist" in p.stderr


@pytest.mark.slow
def test_check_correct_variant_under_the_interpreter_makes_no_speed_claim(ws):
    v = write_variant(ws, "BLOCK_SIZE=128)", "BLOCK_SIZE=1024)")
    p = cli("check", "orig.py", "--variant", v, "--device", "cpu", "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["verdict"] == "verified_correct" and out["speed_claim"] is False
    assert "speedup" not in out and not out["paired"] and "cannot be measured without a GPU" in out["message"]
    p = cli("check", "orig.py", "--variant", v, "--device", "cpu", cwd=ws)
    assert p.returncode == 0 and "verified_correct" in p.stdout and " ms" not in p.stdout, p.stdout


@pytest.mark.slow
def test_check_cpu_tuning_prints_the_paired_pair(ws):
    v = write_variant(ws, "BLOCK_SIZE=128)", "BLOCK_SIZE=1024)")
    p = cli("check", "orig.py", "--variant", v, "--device", "cpu", "--rounds", "2", "--cpu-tuning", "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["kernel"] == "axpy_kernel" and out["paired"] and out["speed_claim"] is False
    assert out["speedup"] > 0 and len(out["speedup_ci"]) == 2 and out["rounds"] == 2
    assert out["verdict"] in ("improved", "no_improvement") and out["min_speedup"] == 1.03
    # the two times printed are the interleaved ones, and their ratio is the speedup printed beside them
    assert out["baseline_ms"] / out["variant_ms"] == pytest.approx(out["speedup"])


@pytest.mark.slow
def test_check_off_by_one_mask_is_a_mismatch(ws):
    v = write_variant(ws, MASK, MASK + " - 1")
    p = cli("check", "orig.py", "--variant", v, "--device", "cpu", "--rounds", "2", "--json", cwd=ws)
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "mismatch" and "speedup" not in out


@pytest.mark.slow
def test_check_reports_a_failed_re_measurement_in_one_line(ws):
    """The variant passes correctness but its interleaved re-measurement fails: a failed
    verdict (exit 1) with a one-line reason, not a traceback."""
    # replays are frozen (no module code runs while timing), so no variant can make them fail:
    # the judge's test hook stands in for a failure (a lost GPU, say)
    (ws / "flaky.py").write_text(SMALL.replace("BLOCK_SIZE=128", "BLOCK_SIZE=256"), encoding="utf-8")
    p = cli("check", "orig.py", "--variant", "flaky.py", "--device", "cpu", "--rounds", "6", "--cpu-tuning", "--json",
            cwd=ws, env={"KERNELBAND_TEST_PAIRED_FAILURE": "flaky replay"})
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "runtime_error" and "re-measurement failed" in out["message"]
    assert "flaky replay" in out["message"]


def test_version_and_help_say_what_they_should(ws):
    from kernelband import __version__

    p = cli("--version", cwd=ws)
    assert p.returncode == 0 and p.stdout.strip() == f"kernelband {__version__}"
    p = cli("list", "-h", cwd=ws)
    assert p.returncode == 0 and "Exit codes" in p.stdout and "@triton.jit" in p.stdout
    p = cli("check", "-h", cwd=ws)
    text = " ".join(p.stdout.split())
    assert p.returncode == 0 and "Exit codes" in text
    for needle in ("(at least 3; default: 3)", "(default: 120.0)", "(at least 2; default: 10)", "(default: 1.03",
                   "--cpu-tuning", "verified_correct"):
        assert needle in text, needle
    p = cli("optimize", "-h", cwd=ws)
    text = " ".join(p.stdout.split())
    for needle in ("--seed SEED random seed", "--llm-timeout", "(default: 60.0)", "(default: 1.03", "--cpu-tuning"):
        assert needle in text, needle


def test_list_into_a_closed_pipe_is_quiet(ws):
    kernel = SMALL[SMALL.index("@triton.jit"):SMALL.index("def axpy(")]
    many = SMALL + "".join(kernel.replace("def axpy_kernel", f"def axpy_kernel_{i}") for i in range(300))
    (ws / "many.py").write_text(many, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run(f"{sys.executable} -m kernelband list --json many.py | head -1", shell=True, cwd=ws, env=env,
                       capture_output=True, text=True, timeout=120)
    # one kernel a line after the file's head (the indenting JSON encoder is 5x slower)
    assert p.stdout.startswith('{"file": ') and p.stdout.strip().endswith('"kernels": [') and p.stderr == "", p.stderr
