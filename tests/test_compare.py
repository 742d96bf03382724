"""Output comparison: structure, dtype, NaN/Inf positions and dtype-aware tolerances."""
from __future__ import annotations

import torch

from kernelband.worker.compare import bitwise_equal, compare_outputs


def test_identical_and_within_tolerance():
    x = torch.randn(1000)
    assert compare_outputs(x, x.clone()).ok
    assert compare_outputs(x, x + 1e-6).ok  # reduction-order noise in fp32
    h = x.half()
    assert compare_outputs(h, (x * (1 + 1e-4)).half()).ok


def test_scaled_output_fails_every_float_dtype():
    x = torch.randn(4096)
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        v = compare_outputs(x.to(dt), (x * 1.01).to(dt))
        assert not v.ok, dt
    v = compare_outputs(x, x * 1.01)
    assert "relative L2" in v.message and v.stats.rel_l2 > 1e-3
    # a uniform 0.05% error stays element-wise in bounds but the L2 check still sees it
    v = compare_outputs(x.half(), (x * 1.004).half())
    assert not v.ok and "relative L2" in v.message


def test_single_wrong_element_fails():
    x = torch.randn(1000)
    y = x.clone()
    y[-1] += 0.5
    v = compare_outputs(x, y)
    assert not v.ok and v.stats.mismatched == 1 and "1 of 1000" in v.message


def test_structure_shape_dtype():
    a = torch.randn(4, 4)
    assert "shape" in compare_outputs(a, a.reshape(16)).message
    assert "dtype" in compare_outputs(a, a.double()).message
    assert "tuple of 2" in compare_outputs((a, a), (a,)).message
    assert "keys" in compare_outputs({"y": a}, {"z": a}).message
    assert "expected a tensor" in compare_outputs([a], [1.0]).message
    assert compare_outputs({"y": [a, (a, 3)]}, {"y": [a.clone(), (a.clone(), 3)]}).ok
    assert not compare_outputs({"y": [a, (a, 3)]}, {"y": [a.clone(), (a.clone(), 4)]}).ok


def test_nan_and_inf_positions():
    a = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare_outputs(a, a.clone()).ok
    b = a.clone()
    b[0] = float("nan")
    assert "NaN positions" in compare_outputs(a, b).message
    c = a.clone()
    c[2] = -float("inf")
    assert "Inf" in compare_outputs(a, c).message


def test_integers_exact_and_bitwise():
    i = torch.arange(10)
    assert compare_outputs(i, i.clone()).ok
    j = i.clone()
    j[3] = 4
    assert "integer" in compare_outputs(i, j).message
    x = torch.randn(10)
    assert bitwise_equal(x, x.clone())
    assert not bitwise_equal(x, x + 1e-7)
