"""Diagnosis rules from given numbers (kernelband/profile/diagnose.py)."""
import pytest

from kernelband.profile.diagnose import Numbers, diagnose, diagnose_profile
from kernelband.profile.schema import Profile
from kernelband.strategies import STRATEGIES


def test_interpreter_is_unknown_and_honest():
    d = diagnose(Numbers(interpreted=True, time_per_launch_ms=800.0, bytes_total=600_036, dram_frac=0.9))
    assert d.bottleneck == "unknown"
    assert d.evidence.startswith("unknown: no GPU peaks under the interpreter")
    assert "CPU time" in d.evidence and "FLOPs unknown" in d.evidence and d.strategies == []


def test_no_peaks_no_counters():
    d = diagnose(Numbers(time_per_launch_ms=1.0))
    assert d.bottleneck == "unknown" and "no measured device peaks" in d.evidence


def test_tier1_reports_static_facts():
    d = diagnose(Numbers(occupancy=0.125, occupancy_limiter="registers", n_regs=220, n_spills=3))
    assert d.bottleneck == "unknown" and "tier 1" in d.evidence
    assert "theoretical occupancy 12%, limited by registers" in d.evidence and "3 registers spilled" in d.evidence
    assert d.strategies == ["tiling"]


def test_memory_bound_from_timing():
    d = diagnose(Numbers(time_per_launch_ms=0.5, dram_frac=0.83))
    assert d.bottleneck == "memory-bound"
    assert d.evidence == "memory-bound: 83% of measured copy bandwidth."
    assert d.strategies[0] == "fusion"


def test_memory_bound_with_uncoalesced_loads():
    d = diagnose(Numbers(time_per_launch_ms=0.5, dram_frac=0.8, dram_pct=83.0, sm_pct=20.0,
                         load_efficiency_pct=25.0, sectors_per_request=4.0))
    assert d.evidence == ("memory-bound: 83% of DRAM peak; loads are not coalesced "
                          "(4.0 sectors/request, 25% of fetched bytes used).")
    assert d.strategies[:2] == ["vectorization", "access_layout"]


def test_memory_bound_matmul_with_poor_l2_reuse():
    d = diagnose(Numbers(time_per_launch_ms=2.0, dram_pct=75.0, sm_pct=40.0, l2_hit_pct=30.0, has_dot=True))
    assert "L2 hit rate 30%" in d.evidence and d.strategies[0] == "reordering"


def test_l2_bound_only_when_l2_far_busier_than_dram():
    d = diagnose(Numbers(time_per_launch_ms=1.1, dram_pct=12.0, sm_pct=47.0, l2_pct=87.0, has_dot=True))
    assert d.bottleneck == "memory-bound" and d.evidence.startswith("memory-bound: L2 at 87% of peak (DRAM 12%)")
    assert d.strategies[0] == "tiling"
    streaming = diagnose(Numbers(time_per_launch_ms=0.08, dram_pct=48.0, sm_pct=25.0, l2_pct=61.0))
    assert streaming.bottleneck == "latency-bound"  # L2 only carries the DRAM stream


def test_compute_bound():
    d = diagnose(Numbers(time_per_launch_ms=1.6, dram_frac=0.06, compute_frac=0.87, compute_peak="bf16", has_dot=True))
    assert d.bottleneck == "compute-bound" and d.evidence == "compute-bound: 87% of the measured bf16 matrix rate."
    assert d.strategies == ["tiling", "pipeline", "reordering"]
    d = diagnose(Numbers(time_per_launch_ms=1.6, dram_pct=20.0, sm_pct=85.0, tensor_pct=20.0, has_dot=True, n_spills=4))
    assert "SM throughput 85%" in d.evidence and "tensor cores busy only 20%" in d.evidence and "4 registers spilled" in d.evidence


def test_latency_bound_small_grid_and_low_occupancy():
    d = diagnose(Numbers(time_per_launch_ms=0.2, dram_frac=0.2, compute_frac=0.1, programs=64, sm_count=132,
                         occupancy=0.125, occupancy_limiter="registers"))
    assert d.bottleneck == "latency-bound"
    assert "only 64 programs for 132 SMs" in d.evidence
    assert "theoretical occupancy 12%, limited by registers" in d.evidence
    assert d.strategies[0] == "tiling"


def test_latency_bound_too_little_work_per_thread():
    d = diagnose(Numbers(time_per_launch_ms=0.084, dram_frac=0.57, block_elems=128, threads=128,
                         achieved_occupancy_pct=43.0, occupancy=1.0, occupancy_limiter="warps"))
    assert d.bottleneck == "latency-bound" and "FLOPs unknown" in d.evidence
    assert "1 element per thread (128 per program)" in d.evidence
    assert "achieved occupancy 43% of a theoretical 100%" in d.evidence


def test_latency_bound_starved_matrix_units():
    d = diagnose(Numbers(time_per_launch_ms=1.1, dram_frac=0.02, compute_frac=0.16, has_dot=True))
    assert d.bottleneck == "latency-bound" and "matrix units are starved" in d.evidence
    d = diagnose(Numbers(time_per_launch_ms=1.1, dram_pct=20.0, sm_pct=30.0, tensor_pct=15.0, has_dot=True,
                         bank_conflicts_per_request=2.5))
    assert "tensor cores busy only 15%" in d.evidence and "2.5 shared-memory bank conflicts" in d.evidence
    assert "access_layout" in d.strategies


def test_launch_bound():
    d = diagnose(Numbers(time_per_launch_ms=0.004, dram_frac=0.05, programs=4, sm_count=132))
    assert d.bottleneck == "launch-bound" and "4.0 us per launch" in d.evidence and "4 programs for 132 SMs" in d.evidence
    assert d.strategies == ["fusion", "tiling"]


@pytest.mark.parametrize("n", [
    Numbers(interpreted=True), Numbers(), Numbers(dram_frac=0.9), Numbers(compute_frac=0.9, has_dot=True),
    Numbers(dram_frac=0.1, compute_frac=0.1, n_spills=8, load_efficiency_pct=10.0),
    Numbers(time_per_launch_ms=0.001, dram_frac=0.01), Numbers(dram_pct=10, sm_pct=10, l2_pct=90),
])
def test_strategies_are_known_names_and_evidence_is_short(n):
    d = diagnose(n)
    assert all(s in STRATEGIES for s in d.strategies)
    assert len(d.strategies) == len(set(d.strategies))
    assert d.evidence.startswith(d.bottleneck.split("-")[0]) and d.evidence.count(". ") <= 1


def test_from_a_profile_dict():
    prof = {
        "interpreted": False, "has_dot": False, "time_ms": 0.5,
        "device": {"sm_count": 132},
        "launch": {"count": 1, "programs": 1000, "block_elems": 4096, "num_warps": 8},
        "tiers": {"static": {"n_regs": 32, "n_spills": 0, "threads_per_program": 256,
                             "occupancy": {"theoretical": 1.0, "limiter": "warps"}},
                  "timing": {"time_per_launch_ms": 0.5, "launches": 1, "bytes_total": 2 << 30, "flops": None,
                             "bandwidth_frac": 0.96},
                  "counters": {"values": {"dram_throughput": 85.0, "sm_throughput": 6.0}}},
    }
    d = diagnose_profile(Profile.from_dict(prof))
    assert d.bottleneck == "memory-bound" and d.evidence == "memory-bound: 85% of DRAM peak."
