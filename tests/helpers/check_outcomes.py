"""Objects as ``kernelband check --json`` prints them, for the tests of its readers."""
from __future__ import annotations

from typing import Any

from kernelband.check_outcome import CheckOutcome

CHECK_OK_INTERPRETED: dict[str, Any] = {
    "file": "/ws/k.py", "kernel": "k", "harness": "bench_k", "variant": "v.py",
    "checked": {"seeds": [0, 1, 2], "harness": "bench_k", "harnesses": ["bench_k", "test_k"], "checks": ["a", "b"],
                "memcheck": {"ran": False, "reason": "GPU only: ..."},
                "wide": {"ran": False, "reason": "GPU only: ..."}},
    "interpreted": True, "clock": "cpu-interpreter", "speed_claim": False, "paired": False, "deterministic": True,
    "status": "ok",
    "message": "matches the original on seeds [0, 1, 2] of bench_k, test_k; correct; its speed cannot be measured",
    "errors": {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0, "mismatched": 0, "total": 10, "worst_output": "output"},
    "verdict": "verified_correct",
}

# a GPU check with the interleaved re-measurement, and what compute-sanitizer found
CHECK_GPU_PAIRED: dict[str, Any] = {
    **{k: v for k, v in CHECK_OK_INTERPRETED.items() if k != "verdict"},
    "interpreted": False, "clock": "cuda-events", "speed_claim": True, "paired": True, "weak_harness": "one output",
    "sanitizer": {"ran": True, "ok": True, "tool": "racecheck", "exit_code": 0, "job": "ok", "findings": [],
                  "harnesses": ["test_k"], "tools": ["memcheck", "racecheck"]},
    "baseline_ms": 1.0, "variant_ms": 0.714, "speedup": 1.4, "speedup_ci": [1.35, 1.45],
    "paired_medians_ms": [1.0, 0.714], "rounds": 10, "verdict": "improved", "min_speedup": 1.03,
    "warnings": ["noisy"],
}


def outcome(**changes: Any) -> CheckOutcome:
    """CHECK_OK_INTERPRETED with ``changes``, decoded as its readers decode it."""
    return CheckOutcome.from_dict({**CHECK_OK_INTERPRETED, **changes})
