"""Tier 3: ncu command line, CSV parsing from recorded samples, the 9-dim vector,
caching, and the degradation path when ncu is missing or may not read counters."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from kernelband.model import Task
from kernelband.profile import ncu
from kernelband.profile.assemble import PHI_NAMES, attach_counters
from kernelband.profile.schema import Profile
from kernelband.worker import counters
from kernelband.worker.counters import COUNTERS_IN_SESSION, add_counters
from kernelband.store import Store

DATA = Path(__file__).parent / "data"
RAW = (DATA / "ncu_raw_sample.csv").read_text()
DETAILS = (DATA / "ncu_details_sample.csv").read_text()


def test_parse_raw_page():
    rows = ncu.parse_csv(RAW)
    assert [r["id"] for r in rows] == [0, 1]
    assert rows[0]["kernel"] == "matmul_kernel"
    m = rows[0]["metrics"]
    assert m["dram__bytes.sum"] == 201_326_592  # thousands separators
    assert m["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == 71.2
    assert rows[1]["metrics"]["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] is None  # n/a


def test_parse_a_real_recording():
    """ncu 2025.3 on an H200 (--page raw, the command of build_command): it prints every
    raw metric it collected, after warning lines, with a units row."""
    (row,) = ncu.parse_csv((DATA / "ncu_raw_h200_axpy.csv").read_text())
    assert row["kernel"] == "axpy_kernel"
    v = ncu.derive(row["metrics"], ncu.metric_list())
    assert v["dram_throughput"] == 48.42 and v["registers_per_thread"] == 16 and v["warp_efficiency"] == 100.0
    assert v["sectors_per_request"] == pytest.approx(4.0, abs=1e-3) and v["load_efficiency"] == 100.0
    assert all(v[n] is not None for n in PHI_NAMES)


def test_parse_details_page_with_scaled_units():
    (row,) = ncu.parse_csv(DETAILS)
    assert row["kernel"] == "axpy_kernel"
    assert row["metrics"]["dram__bytes.sum"] == pytest.approx(201.33e6)  # Mbyte -> bytes
    assert row["metrics"]["gpu__time_duration.sum"] == pytest.approx(48930)  # usecond -> ns


def test_parse_nothing():
    assert ncu.parse_csv("==PROF== No kernels were profiled.\n") == []
    assert ncu.parse_csv("") == []


def test_derive_the_vector():
    (row,) = ncu.parse_csv(DETAILS)
    v = ncu.derive(row["metrics"], ncu.metric_list())
    assert v["warp_efficiency"] == 100.0  # 32 threads per instruction
    assert v["sectors_per_request"] == pytest.approx(1_048_584 / 262_146)
    assert v["shared_bank_conflicts"] == 0.0  # no shared instructions at all
    assert v["load_efficiency"] == 25.0 and v["dram_throughput"] == 83.4
    assert set(PHI_NAMES) <= set(v)
    rows = ncu.parse_csv(RAW)
    v0 = ncu.derive(rows[0]["metrics"], ncu.metric_list())
    assert v0["shared_bank_conflicts"] == pytest.approx(1024 / (32768 + 8192))
    assert v0["warp_efficiency"] == pytest.approx(31.6 / 32 * 100)


def test_load_efficiency_zero_means_no_ldg():
    v = ncu.derive({"smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct": 0.0}, ncu.metric_list())
    assert v["load_efficiency"] is None


def test_aggregate_is_time_weighted():
    per = [ncu.derive(r["metrics"], ncu.metric_list()) for r in ncu.parse_csv(RAW)]
    agg = ncu.aggregate(per)
    w0, w1 = 1_250_112, 250_000
    assert agg["dram_throughput"] == pytest.approx((45.21 * w0 + 30.0 * w1) / (w0 + w1))
    assert agg["duration_ns"] == w0 + w1 and agg["dram_bytes"] == 201_326_592 + 50_331_648
    assert agg["tensor_core_utilisation"] == 62.3  # the n/a launch does not count
    assert ncu.aggregate(per[:1]) == per[0]


def test_command_line():
    cmd = ncu.build_command("/x/ncu", "/t/spec.json", "/t/out.csv", "matmul_kernel", ncu.metric_list(),
                            launch_skip=2, launch_count=3, python="/py")
    s = " ".join(cmd)
    assert cmd[:3] == ["/x/ncu", "--clock-control", "none"]
    assert "--profile-from-start off" in s and "--csv" in s and "--log-file /t/out.csv" in s
    assert "--launch-skip 2" in s and "--launch-count 3" in s
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:^matmul_kernel(_[0-9a-zA-Z]+)?$"
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert set(metrics) == set(ncu.metric_list().values()) and len(metrics) == len(ncu.METRICS)
    assert cmd[-4:] == ["/py", "-m", "kernelband.worker.ncu_target", "/t/spec.json"]


def test_kernel_regex_matches_triton_names():
    import re

    rx = re.compile(ncu.kernel_regex("axpy_kernel").split(":", 1)[1])
    assert rx.match("axpy_kernel") and rx.match("axpy_kernel_0d1d2d3de")
    assert not rx.match("my_axpy_kernel") and not rx.match("axpy_kernel2")


def test_explain_failures():
    assert ncu.explain_failure(1, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission") == ncu.NO_PERMISSION
    assert "cannot start its profiler" in ncu.explain_failure(1, "==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
    assert "profiled no launch" in ncu.explain_failure(0, "==WARNING== No kernels were profiled.")
    assert ncu.explain_failure(3, "boom\n==ERROR== something odd").startswith("ncu failed (exit 3): ==ERROR== something odd")


# --------------------------------------------------------------------------- running (faked)


def _task(tmp_path: Path) -> Task:
    p = tmp_path / "k.py"
    p.write_text("# kernel\n")
    return Task(str(p), "# kernel\n", "matmul_kernel", "harness_matmul")


class FakeNcu:
    """Stands in for subprocess.run on ncu: answers --version, writes a CSV to --log-file."""

    def __init__(self, csv_text: str = RAW, stderr: str = "", rc: int = 0, unknown_first: str = ""):
        self.csv_text, self.stderr, self.rc, self.unknown_first = csv_text, stderr, rc, unknown_first
        self.calls: list[list[str]] = []

    def __call__(self, cmd, **kwargs):
        if "--version" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "NVIDIA (R) Nsight Compute Command Line Profiler\n"
                                                        "Version 2025.3.1.0 (build 36398880) (public-release)\n", "")
        self.calls.append(cmd)
        metrics = cmd[cmd.index("--metrics") + 1]
        if self.unknown_first and self.unknown_first in metrics:
            return subprocess.CompletedProcess(cmd, 1, "", f"==ERROR== Failed to find metric {self.unknown_first}\n")
        if self.csv_text:
            Path(cmd[cmd.index("--log-file") + 1]).write_text(self.csv_text)
        return subprocess.CompletedProcess(cmd, self.rc, "", self.stderr)


def test_collect_counters_parses_and_caches(tmp_path):
    fake = FakeNcu()
    store = Store(tmp_path / "kb.db")
    task = _task(tmp_path)
    r = counters.collect_counters(task, store=store, gpu="H200", triton_version="3.6", ncu="/fake/ncu", run=fake,
                             launches=2, keep_dir=str(tmp_path / "keep"))
    assert r["ok"] and not r["cached"] and r["ncu"] == "2025.3.1.0" and r["kernel_names"] == ["matmul_kernel"]
    assert len(r["per_launch"]) == 2 and r["values"]["registers_per_thread"] == 128
    assert (tmp_path / "keep" / "matmul_kernel.ncu.csv").read_text() == RAW
    spec = json.loads(Path(fake.calls[0][-1]).read_text()) if Path(fake.calls[0][-1]).exists() else None
    assert spec is None  # the spec lived in a temporary folder, gone now
    again = counters.collect_counters(task, store=store, gpu="H200", triton_version="3.6", ncu="/fake/ncu", run=fake, launches=2)
    assert again["cached"] and len(fake.calls) == 1 and again["values"] == r["values"]
    other_gpu = counters.collect_counters(task, store=store, gpu="H100", triton_version="3.6", ncu="/fake/ncu", run=fake, launches=2)
    assert not other_gpu["cached"] and len(fake.calls) == 2
    store.close()


def test_unknown_metric_falls_back_to_the_next_name(tmp_path):
    first = ncu.METRICS["tensor_core_utilisation"][0]
    fake = FakeNcu(unknown_first=first)
    r = counters.collect_counters(_task(tmp_path), ncu="/fake/ncu", run=fake)
    assert r["ok"] and r["metrics"]["tensor_core_utilisation"] == ncu.METRICS["tensor_core_utilisation"][1]
    assert len(fake.calls) == 2


def test_degradation_paths(tmp_path, monkeypatch):
    task = _task(tmp_path)
    assert counters.collect_counters(task, interpreted=True) == {"ok": False, "reason": ncu.INTERPRETER}
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    r = counters.collect_counters(task)
    assert not r["ok"] and "not found" in r["reason"]
    perm = FakeNcu(csv_text="", rc=1, stderr="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                                                "NVIDIA GPU Performance Counters on the target device 0.")
    r = counters.collect_counters(task, ncu="/fake/ncu", run=perm)
    assert r == {"ok": False, "reason": ncu.NO_PERMISSION}

    def timeout(cmd, **kw):
        if "--version" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "Version 1\n", "")
        raise subprocess.TimeoutExpired(cmd, 5)

    assert "timed out" in counters.collect_counters(task, ncu="/fake/ncu", run=timeout, timeout_s=5)["reason"]


def test_find_ncu_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBAND_NCU", str(tmp_path / "missing"))
    assert ncu.find_ncu() is None
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("KERNELBAND_NCU", str(exe))
    assert ncu.find_ncu() == str(exe)


def test_announce_once():
    said: list[str] = []
    ncu.announce_once("test reason xyz", said.append)
    ncu.announce_once("test reason xyz", said.append)
    assert said == ["counters unavailable: test reason xyz; carrying on with tiers 1-2"]


def _base_profile():
    return Profile.from_dict({
        "kernel": "matmul_kernel", "tier": 3, "interpreted": False, "time_ms": 1.1, "has_dot": True,
        "device": {"name": "H200", "sm_count": 132},
        "launch": {"count": 2, "programs": 16384, "block_elems": 32768, "num_warps": 4, "footprint_bytes": 100_663_296},
        "tiers": {"static": {"n_regs": 42, "n_spills": 0, "shared_bytes": 8192, "threads_per_program": 128,
                             "occupancy": {"theoretical": 0.625, "limiter": "registers"}},
                  "timing": {"time_per_launch_ms": 0.55, "launches": 2, "bytes_total": 100_663_296, "flops": 137e9,
                             "arithmetic_intensity": 1365.3, "bandwidth_frac": 0.02, "compute_frac": 0.16},
                  "counters": None},
        "unavailable": {"counters": COUNTERS_IN_SESSION},
    })


def test_attach_counters_builds_phi_and_saturation():
    vals = ncu.aggregate([ncu.derive(r["metrics"], ncu.metric_list()) for r in ncu.parse_csv(RAW)])
    prof = attach_counters(_base_profile(), {"ok": True, "values": vals, "cached": False}).to_dict()
    assert "counters" not in prof["unavailable"]
    assert prof["phi"] == [vals[n] for n in PHI_NAMES] and len(prof["phi"]) == 9
    assert prof["saturation"] == {"L2": round(vals["l2_throughput"] / 100, 4), "DRAM": round(vals["dram_throughput"] / 100, 4),
                                  "SM": round(vals["sm_throughput"] / 100, 4)}
    assert prof["saturation_basis"]["DRAM"] == "ncu"
    assert prof["runtime_values"]["occupancy"] == pytest.approx(vals["achieved_occupancy"] / 100)
    assert prof["diagnosis"]["bottleneck"] in ("latency-bound", "compute-bound")
    failed = attach_counters(_base_profile(), {"ok": False, "reason": ncu.NO_PERMISSION}).to_dict()
    assert failed["unavailable"]["counters"] == ncu.NO_PERMISSION and failed["phi"] is None
    assert failed["saturation"]["DRAM"] == 0.02 and failed["saturation"]["L2"] is None


def test_add_counters_from_the_session(tmp_path):
    task = _task(tmp_path)
    prof = add_counters(_base_profile(), task, ncu="/fake/ncu", run=FakeNcu())
    assert prof.counter("registers_per_thread") == 128
    fake = FakeNcu()
    again = add_counters(prof, task, ncu="/fake/ncu", run=fake)
    assert again is prof and fake.calls == []  # already has counters
    interp = replace(_base_profile(), interpreted=True, unavailable={"counters": ncu.INTERPRETER})
    assert add_counters(interp, task, ncu="/fake/ncu", run=fake).tiers.counters is None and fake.calls == []


def test_target_usage_and_spec(tmp_path):
    from kernelband.worker import ncu_target

    assert ncu_target.main([]) == 2
    spec = {"task": {"module_path": "/m.py", "source": "", "kernel": "k", "harness": "h"}, "launches": 2}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(spec))
    assert ncu_target._load_spec(str(p)) == spec
    assert ncu_target._load_spec(json.dumps(spec["task"])) == {"task": spec["task"]}


def _counter_session(tmp_path):
    from types import SimpleNamespace

    from kernelband.events import EventEmitter
    from kernelband.session import Session, SessionConfig

    events: list = []
    s = Session(_task(tmp_path), SessionConfig(profile_tier=3), EventEmitter(events.append), evaluator=SimpleNamespace())
    return s, events


@pytest.mark.parametrize("failure", ["permission", "missing"])
def test_session_gives_up_counters_once_after_a_lasting_failure(tmp_path, monkeypatch, failure):
    from kernelband.model import Variant

    perm = FakeNcu(csv_text="", rc=1, stderr="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    calls: list[int] = []
    real = counters.collect_counters

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw) if failure == "missing" else real(*args, ncu="/fake/ncu", run=perm, **kw)

    if failure == "missing":
        monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    monkeypatch.setattr(counters, "collect_counters", counted)
    s, events = _counter_session(tmp_path)
    cands = [s.pool.candidate(Variant(f"# v{i}\n"), 1.0, _base_profile(), None) for i in range(3)]
    assert len(calls) == 1 and len(perm.calls) == (1 if failure == "permission" else 0)  # ncu tried once only
    reason = ncu.NO_PERMISSION if failure == "permission" else "ncu (Nsight Compute) not found"
    assert all(s.pool.profiles[c.id].unavailable["counters"].startswith(reason) for c in cands)
    said = [w for w in s.warnings if "counters unavailable" in w]
    assert len(said) == 1 and reason in said[0]
    logs = [e for e in events if e.type == "log" and "counters unavailable" in e.data["message"]]
    assert len(logs) == 1 and logs[0].data["level"] == "warning"


def test_session_keeps_trying_counters_after_a_passing_failure(tmp_path, monkeypatch):
    from kernelband.model import Variant

    def timeout(cmd, **kw):
        if "--version" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "Version 1\n", "")
        raise subprocess.TimeoutExpired(cmd, 5)

    real = counters.collect_counters
    monkeypatch.setattr(counters, "collect_counters", lambda *a, **kw: real(*a, ncu="/fake/ncu", run=timeout, **kw))
    s, _ = _counter_session(tmp_path)
    ok = FakeNcu()
    for i in range(2):
        s.pool.candidate(Variant(f"# v{i}\n"), 1.0, _base_profile(), None)
    assert s.pool._counters_off is None and not s.warnings  # a timeout may be this candidate's: try the next one
    monkeypatch.setattr(counters, "collect_counters", lambda *a, **kw: real(*a, ncu="/fake/ncu", run=ok, **kw))
    c = s.pool.candidate(Variant("# v2\n"), 1.0, _base_profile(), None)
    assert len(ok.calls) == 1 and s.pool.profiles[c.id].counter("registers_per_thread") == 128
