"""The JSON ``kernelband check FILE --kernel K --variant OTHER --json`` prints, pinned: its
keys, their order and the type of each value, on every path the interpreter can take
(rejected by the screen, a mismatch, correct without a speed claim, and the paired
CPU-time re-measurement of --cpu-tuning). The editor, the agent tools and users' scripts
read this object, so a change to how it is built must print the same thing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.paths import REPO, example_source

from kernelband.verification import WIDE_ON_INTERPRETER

SMALL = example_source("add_scale.py").replace("50_003", "4_099")
MASK = "mask = offsets < n_elements"

HEAD = ["file", "kernel", "harness", "variant", "checked"]
PREPARED = ["interpreted", "clock", "speed_claim", "paired", "deterministic", "status", "message", "errors"]
PAIRED = ["baseline_ms", "variant_ms", "speedup", "speedup_ci", "paired_medians_ms", "rounds"]
NUM = (int, float)
TYPES: dict[str, Any] = {
    "file": str, "kernel": str, "harness": str, "variant": str, "checked": dict, "interpreted": bool, "clock": str,
    "speed_claim": bool, "paired": bool, "deterministic": bool, "status": str, "message": str,
    "errors": (dict, type(None)), "baseline_ms": NUM, "variant_ms": NUM, "speedup": NUM, "speedup_ci": list,
    "paired_medians_ms": list, "rounds": int, "verdict": str, "min_speedup": NUM,
}
ERRORS = {"max_abs": float, "max_rel": float, "rel_l2": float, "mismatched": int, "total": int, "worst_output": str}


def check_json(ws: Path, variant: str, *extra: str, code: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-m", "kernelband", "check", "orig.py", "--kernel", "axpy_kernel",
                        "--variant", variant, "--device", "cpu", "--json", *extra],
                       capture_output=True, text=True, cwd=ws, env=env, timeout=300)
    assert p.returncode == code, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert isinstance(out, dict)
    return out


def assert_shape(out: dict[str, Any], keys: list[str], memcheck_reason: str) -> None:
    assert list(out) == keys
    for k in keys:
        assert isinstance(out[k], TYPES[k]) and not (TYPES[k] is int and isinstance(out[k], bool)), (k, out[k])
    checked = out["checked"]
    assert list(checked) == ["seeds", "harness", "harnesses", "checks", "memcheck", "wide"]
    assert checked["seeds"] and all(type(s) is int for s in checked["seeds"])
    assert checked["harness"] == out["harness"] == "harness_axpy" and checked["harnesses"] == ["harness_axpy"]
    assert checked["checks"] and all(isinstance(c, str) for c in checked["checks"])
    assert checked["memcheck"] == {"ran": False, "reason": memcheck_reason}
    # the calls past int32 offsets: GPU only, never asked of the judge under the interpreter
    wide_reason = WIDE_ON_INTERPRETER if memcheck_reason == ON_INTERPRETER else memcheck_reason
    assert checked["wide"] == {"ran": False, "reason": wide_reason}
    assert Path(out["file"]).name == "orig.py" and out["kernel"] == "axpy_kernel"
    if out["errors"] is not None:
        assert list(out["errors"]) == list(ERRORS)
        assert all(type(out["errors"][k]) is t for k, t in ERRORS.items()), out["errors"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "orig.py").write_text(SMALL, encoding="utf-8")
    (tmp_path / "fast.py").write_text(SMALL.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=1024)"), encoding="utf-8")
    return tmp_path


NOT_CORRECT = "the variant did not pass correctness"
ON_INTERPRETER = "GPU only: the Triton interpreter has no device memory for compute-sanitizer to check"


def test_rejected_variant_json(ws):
    (ws / "rej.py").write_text("import os\n" + SMALL, encoding="utf-8")
    out = check_json(ws, "rej.py", code=1)
    assert_shape(out, HEAD + ["status", "message", "errors", "speed_claim", "paired"], NOT_CORRECT)
    assert out["status"] == "rejected" and out["errors"] is None and out["variant"] == "rej.py"
    assert out["speed_claim"] is False and out["paired"] is False


@pytest.mark.slow
def test_mismatch_json(ws):
    (ws / "bad.py").write_text(SMALL.replace(MASK, MASK + " - 1"), encoding="utf-8")
    out = check_json(ws, "bad.py", code=1)
    assert_shape(out, HEAD + PREPARED, NOT_CORRECT)
    assert out["status"] == "mismatch" and out["errors"]["mismatched"] > 0 and out["clock"] == "cpu-interpreter"


@pytest.mark.slow
def test_verified_correct_json(ws):
    out = check_json(ws, "fast.py", code=0)
    assert_shape(out, HEAD + PREPARED + ["verdict"], ON_INTERPRETER)
    assert out["status"] == "ok" and out["verdict"] == "verified_correct" and out["interpreted"] is True


@pytest.mark.slow
def test_cpu_tuning_paired_json(ws):
    out = check_json(ws, "fast.py", "--rounds", "2", "--cpu-tuning", code=0)
    assert_shape(out, HEAD + PREPARED + PAIRED + ["verdict", "min_speedup"], ON_INTERPRETER)
    assert out["paired"] is True and out["verdict"] in ("improved", "no_improvement") and out["rounds"] == 2
    assert len(out["speedup_ci"]) == 2 and len(out["paired_medians_ms"]) == 2
    assert all(isinstance(x, NUM) for x in out["speedup_ci"] + out["paired_medians_ms"])
