"""Occupancy from compile metadata and device limits (kernelband/profile/occupancy.py)."""
from kernelband.profile.occupancy import arch_limits, limits_from_facts, occupancy
from kernelband.profile.schema import DeviceFacts

H100 = arch_limits(9, 0)


def test_small_kernel_fills_the_sm():
    occ = occupancy(num_warps=4, regs_per_thread=32, shared_bytes=0, limits=H100)
    assert occ["blocks_per_sm"] == 16  # 64 warps / 4
    assert occ["theoretical"] == 1.0
    assert occ["limiter"] == "warps"  # registers tie with the warp cap: not the binding resource


def test_registers_limit():
    # 128 regs * 32 threads = 4096 per warp -> 16 warps -> 2 programs of 8 warps
    occ = occupancy(num_warps=8, regs_per_thread=128, shared_bytes=0, limits=H100)
    assert occ["blocks_per_sm"] == 2
    assert occ["theoretical"] == 0.25
    assert occ["limiter"] == "registers"


def test_register_allocation_granularity():
    # 33 regs -> 33*32 = 1056 rounds up to 1280 per warp -> 51 warps -> 12 programs of 4 warps
    occ = occupancy(num_warps=4, regs_per_thread=33, shared_bytes=0, limits=H100)
    assert occ["limits"]["registers"] == 12
    assert occ["theoretical"] == 0.75


def test_shared_memory_limit_includes_reservation():
    # 100 KB + 1 KB reserved, rounded to 128 B, into 228 KB -> 2 programs
    occ = occupancy(num_warps=4, regs_per_thread=32, shared_bytes=100 * 1024, limits=H100)
    assert occ["blocks_per_sm"] == 2
    assert occ["limiter"] == "shared_memory"
    assert occ["theoretical"] == 0.125


def test_waves_and_fill():
    occ = occupancy(num_warps=8, regs_per_thread=128, shared_bytes=0, limits=H100, programs=264, sm_count=132)
    assert occ["waves"] == 1.0
    assert occ["sm_fill"] == 1.0
    small = occupancy(num_warps=4, regs_per_thread=32, shared_bytes=0, limits=H100, programs=33, sm_count=132)
    assert small["sm_fill"] == 0.25


def test_limits_by_compute_capability_and_facts():
    assert arch_limits(8, 6)["max_warps_per_sm"] == 48
    assert arch_limits(7, 5)["max_warps_per_sm"] == 32
    assert arch_limits(9, 9)["max_warps_per_sm"] == 64  # unknown minor: nearest lower known
    lim = limits_from_facts(DeviceFacts(compute_capability="8.6", shared_per_sm=102400, max_warps_per_sm=48))
    assert lim["shared_per_sm"] == 102400 and lim["max_blocks_per_sm"] == 16
    occ = occupancy(num_warps=4, regs_per_thread=32, shared_bytes=0, limits=lim)
    assert occ["theoretical"] == 1.0 and occ["blocks_per_sm"] == 12
