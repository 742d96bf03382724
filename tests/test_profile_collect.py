"""collect_profile end to end on the CPU: the GPU path with a stand-in compiled kernel
and given device facts, the interpreter path, and the profile contract."""
from __future__ import annotations

import json
import math

from kernelband.worker.counters import COUNTERS_IN_SESSION
from kernelband.worker.profiling import collect_profile
from dataclasses import replace

from kernelband.profile.device import cached_or_measure, interpreter_facts
from kernelband.profile.schema import DeviceFacts
from kernelband.store import Store

from helpers.profiles import AXPY, FACTS, fake_launch as _launch


def _strict_json(obj):
    return json.loads(json.dumps(obj, allow_nan=False))


def test_gpu_path_with_given_facts():
    n = 1 << 20
    bytes_total = 3 * 4 * n
    time_ms = bytes_total / (3600.0 * 1e9) * 1e3  # 3.6 TB/s = 90% of the 4 TB/s copy peak
    prof = collect_profile([_launch(n)], time_ms, 2, FACTS, AXPY, "axpy_kernel", False).to_dict()
    _strict_json(prof)
    st, tm = prof["tiers"]["static"], prof["tiers"]["timing"]
    assert st["n_regs"] == 16 and st["occupancy"]["theoretical"] == 1.0 and st["source"] == "launch result"
    assert tm["bytes_read"] == 8 * n and tm["bytes_written"] == 4 * n
    assert tm["bandwidth_frac"] == 0.9 and tm["flops"] is None and tm["clock"] == "cuda-events"
    assert tm["roofline"]["bound"] == "memory"
    assert prof["launch"]["grid"] == [n // 1024] and prof["launch"]["block_elems"] == 1024
    assert prof["diagnosis"]["bottleneck"] == "memory-bound"
    assert prof["diagnosis"]["evidence"] == "memory-bound: 90% of measured copy bandwidth."
    assert prof["saturation"] == {"L2": None, "DRAM": 0.9, "SM": None}
    assert prof["unavailable"] == {"counters": "not requested (tier < 3)"}
    assert prof["phi"] is None
    v1, v2 = prof["runtime_vectors"]["v1"], prof["runtime_vectors"]["v2"]
    assert len(v1) == 5 and len(v2) == 5
    assert v1[0] == round(math.log(time_ms), 6) and v1[3] == 10.0 and v1[4] == 1.0
    assert v2[1] == 16.0 and v2[3] == round(math.log(128), 6)  # registers, log threads per program


def test_tier1_only_and_tier3_left_to_the_session():
    p1 = collect_profile([_launch(4096)], 0.01, 1, FACTS, AXPY, "axpy_kernel", False).to_dict()
    assert p1["tiers"]["timing"] is None and p1["unavailable"]["timing"].startswith("not requested")
    assert p1["diagnosis"]["bottleneck"] == "unknown" and "tier 1" in p1["diagnosis"]["evidence"]
    p3 = collect_profile([_launch(4096)], 0.01, 3, FACTS, AXPY, "axpy_kernel", False).to_dict()
    assert p3["unavailable"]["counters"] == COUNTERS_IN_SESSION


def test_interpreter_path():
    prof = collect_profile([_launch(4096, compiled=False)], 50.0, 3, DeviceFacts(), AXPY, "axpy_kernel", True).to_dict()
    _strict_json(prof)
    assert prof["interpreted"] and prof["device"]["placeholder"]
    assert prof["unavailable"]["static"] == "interpreter: no compiled binary"
    assert prof["unavailable"]["counters"] == "interpreter: no compiled binary"
    tm = prof["tiers"]["timing"]
    assert tm["bytes_total"] == 3 * 4 * 4096 and tm["bandwidth_gbs"] is None and tm["clock"] == "cpu-interpreter"
    assert prof["diagnosis"]["bottleneck"] == "unknown"
    assert prof["diagnosis"]["evidence"].startswith("unknown: no GPU peaks under the interpreter")
    assert prof["saturation"] == {"L2": None, "DRAM": None, "SM": None}


def test_only_this_kernels_launches_count_and_are_retimed():
    other = _launch(4096, name="other_kernel")
    prof = collect_profile([_launch(4096), other], 123.0, 2, FACTS, AXPY, "axpy_kernel", False).to_dict()
    assert prof["retimed"] and prof["time_ms"] != 123.0
    assert prof["tiers"]["timing"]["launches"] == 1
    none = collect_profile([other], 1.0, 2, FACTS, AXPY, "axpy_kernel", False).to_dict()
    assert "launched no axpy_kernel" in none["unavailable"]["timing"] and none["diagnosis"]["bottleneck"] == "unknown"


def test_repeated_launches_add_up():
    l1, l2 = _launch(4096), _launch(4096)
    prof = collect_profile([l1, l2], 0.02, 2, FACTS, AXPY, "axpy_kernel", False).to_dict()
    tm = prof["tiers"]["timing"]
    assert tm["launches"] == 2 and tm["bytes_total"] == 2 * 3 * 4 * 4096 and tm["time_per_launch_ms"] == 0.01


def test_device_facts_placeholder_and_cache(tmp_path):
    ph = interpreter_facts()
    assert ph.placeholder and ph.copy_gbs is None and not ph.has_peaks
    assert FACTS.has_peaks
    store = Store(tmp_path / "kb.db")
    calls = []

    def measure():
        calls.append(1)
        return replace(FACTS, facts_version=1)

    a = cached_or_measure(store, "Test GPU", "3.9.0", measure)
    b = cached_or_measure(store, "Test GPU", "3.9.0", measure)
    assert a == b and len(calls) == 1
    cached_or_measure(store, "Test GPU", "3.9.0", measure, refresh=True)
    assert len(calls) == 2
    assert cached_or_measure(store, "cpu", "3.9.0", interpreter_facts).placeholder
    assert store.get_device_facts("cpu", "3.9.0") is None  # placeholders are never stored
    store.close()


def test_device_facts_wire_form():
    """The JSON the facts had as a plain dict: nothing known is {}, the placeholder states its
    unknown peaks, and an older or newer engine's stored facts still read (unknown keys ignored)."""
    assert DeviceFacts().to_dict() == {} and not DeviceFacts().known
    ph = interpreter_facts()
    assert ph.to_dict() == {"name": ph.name, "interpreted": True, "placeholder": True, "note": ph.note, "sm_count": None,
                            "copy_gbs": None, "matmul_tflops": {"bf16": None, "fp32": None, "tf32": None},
                            "facts_version": 1}
    assert DeviceFacts.from_dict(ph.to_dict()) == ph and DeviceFacts.from_dict(FACTS.to_dict()) == FACTS
    old = DeviceFacts.from_dict({"name": "Old GPU", "copy_gbs": 900, "dram_gbps": 1.0, "sm_count": None})
    assert old == DeviceFacts(name="Old GPU", copy_gbs=900.0) and old.has_peaks
    assert FACTS.peak_tflops("bf16") == 800.0 and FACTS.peak_tflops(None) is None


def test_the_timing_tier_is_built_as_a_reader_decodes_it():
    """The worker builds the TimingTier itself (no dict decoded in between): it must be the
    record its JSON decodes to on the session's side, with no integer where a float goes
    and no NaN or infinity (JSON has neither)."""
    from kernelband.profile.schema import TimingTier, decode, encode

    n = 1 << 20
    cases = [(0.004, FACTS, False), (50.0, DeviceFacts(), True), (float("nan"), FACTS, False), (0.0, FACTS, False),
             (None, FACTS, False)]
    for time_ms, facts, interpreted in cases:
        prof = collect_profile([_launch(n, compiled=not interpreted)], time_ms, 2, facts, AXPY, "axpy_kernel",
                               interpreted)
        timing = prof.tiers.timing
        assert isinstance(timing, TimingTier), (time_ms, prof.unavailable)
        wire = _strict_json(encode(timing))
        assert decode(TimingTier, wire, "timing") == timing, time_ms
    nan = collect_profile([_launch(n)], float("nan"), 2, FACTS, AXPY, "axpy_kernel", False).tiers.timing
    assert nan is not None and nan.time_ms is None and nan.note == "no time measured: no bandwidth or FLOP/s"
