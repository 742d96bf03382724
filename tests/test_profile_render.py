"""The terminal table and the hover card (kernelband/profile/render.py)."""
import subprocess
import sys

from kernelband.profile.render import profile_card_markdown, render_table
from kernelband.profile.schema import Profile

GPU_PROFILE = Profile.from_dict({
    "kernel": "axpy_kernel", "tier": 3, "interpreted": False, "time_ms": 0.0841,
    "device": {"name": "NVIDIA H200", "sm_count": 132},
    "launch": {"count": 1, "grid": [131073], "programs": 131073, "constexprs": {"BLOCK_SIZE": 128}},
    "tiers": {
        "static": {"n_regs": 14, "n_spills": 0, "shared_bytes": 0, "num_warps": 4, "num_stages": 3,
                   "occupancy": {"theoretical": 1.0, "limiter": "warps", "waves": 62.06}},
        "timing": {"time_per_launch_ms": 0.0841, "launches": 1, "bytes_total": 201_326_628, "bytes_read": 134_217_752,
                   "bytes_written": 67_108_876, "bandwidth_gbs": 2394.0, "bandwidth_frac": 0.568, "copy_peak_gbs": 4215.2,
                   "flops": None, "flops_note": "FLOPs unknown: no tl.dot in the kernel (elementwise work is not counted)",
                   "roofline": {"bound": "memory", "ridge": None, "fraction_of_attainable": 0.568}},
        "counters": {"values": {"dram_throughput": 48.4, "sm_throughput": 24.8, "l2_hit_rate": 33.4,
                                "achieved_occupancy": 43.5, "warp_efficiency": 100.0, "sectors_per_request": 4.0,
                                "shared_bank_conflicts": 0.0, "tensor_core_utilisation": 1.3}},
    },
    "unavailable": {},
    "diagnosis": {"bottleneck": "latency-bound", "evidence": "latency-bound: 48% of DRAM peak and SM throughput 25%.",
                  "strategies": ["tiling", "vectorization"]},
})

INTERP_PROFILE = Profile.from_dict({
    "kernel": "axpy_kernel", "tier": 2, "interpreted": True, "time_ms": 812.0,
    "device": {"name": "CPU (x86_64, Triton interpreter)", "placeholder": True},
    "launch": {"count": 1, "grid": [391], "programs": 391, "constexprs": {"BLOCK_SIZE": 128}},
    "tiers": {"static": None, "counters": None,
              "timing": {"time_per_launch_ms": 812.0, "launches": 1, "bytes_total": 600_036, "bytes_read": 400_024,
                         "bytes_written": 200_012, "flops": None, "flops_note": "FLOPs unknown: no tl.dot in the kernel"}},
    "unavailable": {"static": "interpreter: no compiled binary", "counters": "not requested (tier < 3)"},
    "diagnosis": {"bottleneck": "unknown", "evidence": "unknown: no GPU peaks under the interpreter.", "strategies": []},
})


def test_terminal_table():
    text = render_table(GPU_PROFILE)
    assert text.splitlines()[0] == "axpy_kernel  ·  NVIDIA H200  ·  tier 3"
    for piece in ("84.1 us per launch", "2.39 TB/s = 57% of measured copy peak 4.22 TB/s", "201.33 MB (134.22 MB read",
                  "14/thread, 0 spilled", "100% theoretical (limited by warps), 62.06 waves", "DRAM 48%",
                  "4.0 sectors/req", "latency-bound: 48% of DRAM peak", "tiling, vectorization"):
        assert piece in text, piece
    interp = render_table(INTERP_PROFILE)
    assert "(CPU time, interpreter)" in interp and "unavailable: interpreter: no compiled binary" in interp
    assert "not requested" not in interp


def test_card():
    md = profile_card_markdown(GPU_PROFILE)
    assert md.startswith("**axpy_kernel** · NVIDIA H200 · latency-bound")
    assert "| --- | --- |" in md and "| bandwidth | 2.39 TB/s" in md
    assert "**Bottleneck:** latency-bound: 48% of DRAM peak and SM throughput 25%. Suggested: tiling, vectorization." in md
    assert "Last optimization" not in md  # the editor words the result from its typed Result
    md = profile_card_markdown(INTERP_PROFILE)
    assert "_static: interpreter: no compiled binary_" in md and "(CPU time, interpreter)" in md


def test_pipes_are_escaped_in_the_card():
    prof = Profile.from_dict({**INTERP_PROFILE.to_dict(), "diagnosis": {"bottleneck": "unknown", "evidence": "a | b"}})
    assert "a \\| b" in profile_card_markdown(prof)


def test_render_imports_without_torch_or_triton():
    code = ("import sys, kernelband.profile.render, kernelband.profile.ncu, kernelband.profile.traffic, kernelband.profile.device; "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
