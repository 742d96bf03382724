"""The profiling report writer (benchmarks/profile_suite.py) over the committed GPU results:
the ncu vector stands beside the tier 1-2 numbers of the same kernel."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "profile_suite.json"


@pytest.fixture(scope="module")
def suite_mod():
    spec = importlib.util.spec_from_file_location("kb_profile_suite", ROOT / "benchmarks" / "profile_suite.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def test_vector_table_from_recorded_results(suite_mod, tmp_path):
    shutil.copy(RESULTS, tmp_path / "profile_suite.json")
    md = suite_mod.rewrite_markdown(tmp_path)
    assert (tmp_path / "profile_suite.md").read_text() == md
    table = md.split("## Tier 3 vector beside tiers 1-2", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| kernel")
            and not line.startswith("| ---")]
    data = json.loads(RESULTS.read_text())
    with_phi = {r["kernel"] for r in data["rows"] if (r.get("profile") or {}).get("phi")}
    assert len(rows) == len(with_phi) >= 2
    big = next(line for line in rows if line.startswith("| matmul 8192"))
    cells = [c.strip() for c in big.strip("|").split("|")]
    assert len(cells) == 5 + 9  # kernel, 4 tier 1-2 numbers, the 9-dim vector
    assert cells[1] == "220" and cells[3] == "0.06" and cells[4] == "0.82"
    assert float(cells[-1]) > 90  # tensor cores busy: the compute-bound matmul


def test_vector_table_is_empty_without_counters(suite_mod):
    rows = [{"kernel": "k", "tier": 2, "cached": None, "bandwidth_frac": 0.5, "compute_frac": None,
             "profile": {"phi": None}}]
    assert suite_mod.vector_table(rows) == []
