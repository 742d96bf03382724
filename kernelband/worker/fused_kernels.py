"""The Triton kernels of ``fused_checks`` (the judge's own code, never a variant's).

Each program strides over the flat tensor in blocks of ``BLOCK`` elements, keeps its
statistics per lane, and stores one row of partial results; ``fused_checks`` reduces the
rows. Offsets are int64: outputs of more than 2**31 elements are read whole. They are launched
with ``enable_fp_fusion=False``: a fused multiply-add rounds once where torch rounds twice,
and an element at the tolerance's edge would be counted differently.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n"])
def float_stats_kernel(
    a_ptr, b_ptr, counts_ptr, maxima_ptr, sums_ptr, n, tol_ptr, BLOCK: tl.constexpr, WIDE: tl.constexpr
):
    pid = tl.program_id(0).to(tl.int64)
    # the tolerances come as float64 and are rounded to the compute dtype once, as torch
    # rounds a Python float for a float32 tensor (a float32 kernel argument would round
    # float64 data's tolerances too)
    if WIDE:
        atol = tl.load(tol_ptr)
        rtol = tl.load(tol_ptr + 1)
        clamp = tl.load(tol_ptr + 2)
        edge = tl.load(tol_ptr + 3)
    else:
        atol = tl.load(tol_ptr).to(tl.float32)
        rtol = tl.load(tol_ptr + 1).to(tl.float32)
        clamp = tl.load(tol_ptr + 2).to(tl.float32)
        edge = tl.load(tol_ptr + 3).to(tl.float32)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    lanes = tl.arange(0, BLOCK)
    nan_diff = tl.zeros([BLOCK], dtype=tl.int64)
    unwritten = tl.zeros([BLOCK], dtype=tl.int64)
    inf_bad = tl.zeros([BLOCK], dtype=tl.int64)
    bad = tl.zeros([BLOCK], dtype=tl.int64)
    max_abs = tl.zeros([BLOCK], dtype=tl.float64)
    max_rel = tl.zeros([BLOCK], dtype=tl.float64)
    err_sq = tl.zeros([BLOCK], dtype=tl.float64)
    ref_sq = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(pid * BLOCK, n, step):
        offs = start + lanes
        inside = offs < n
        # the data's own precision for the elementwise work (float32 for half types)
        if WIDE:
            r = tl.load(a_ptr + offs, mask=inside, other=0.0).to(tl.float64)
            o = tl.load(b_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        else:
            r = tl.load(a_ptr + offs, mask=inside, other=0.0).to(tl.float32)
            o = tl.load(b_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        r_nan = r != r
        o_nan = o != o
        r_inf = tl.abs(r) == float("inf")
        o_inf = tl.abs(o) == float("inf")
        finite = ~r_nan & ~o_nan & ~r_inf & ~o_inf
        err = tl.where(finite, tl.abs(o - r), 0.0)
        mag = tl.where(finite, tl.abs(r), 0.0)
        nan_diff += (r_nan != o_nan).to(tl.int64)
        unwritten += (o_nan & ~r_nan).to(tl.int64)
        finite_side = tl.where(r_inf, o, r)
        at_edge = ((r > 0) == (o > 0)) & (tl.abs(finite_side) >= edge) & (finite_side == finite_side)
        inf_bad += ((r_inf != o_inf) & ~at_edge).to(tl.int64) + (r_inf & o_inf & (r != o)).to(tl.int64)
        bad += (err > atol + rtol * mag).to(tl.int64)
        max_abs = tl.maximum(max_abs, err.to(tl.float64))
        if WIDE:
            rel = err / tl.maximum(mag, clamp)
        else:
            rel = tl.math.div_rn(err, tl.maximum(mag, clamp))  # IEEE division, as torch's (not the approximate one)
        max_rel = tl.maximum(max_rel, rel.to(tl.float64))
        err64 = err.to(tl.float64)
        mag64 = mag.to(tl.float64)
        err_sq += err64 * err64
        ref_sq += mag64 * mag64
    tl.store(counts_ptr + pid * 4, tl.sum(nan_diff, axis=0))
    tl.store(counts_ptr + pid * 4 + 1, tl.sum(unwritten, axis=0))
    tl.store(counts_ptr + pid * 4 + 2, tl.sum(inf_bad, axis=0))
    tl.store(counts_ptr + pid * 4 + 3, tl.sum(bad, axis=0))
    tl.store(maxima_ptr + pid * 2, tl.max(max_abs, axis=0))
    tl.store(maxima_ptr + pid * 2 + 1, tl.max(max_rel, axis=0))
    tl.store(sums_ptr + pid * 2, tl.sum(err_sq, axis=0))
    tl.store(sums_ptr + pid * 2 + 1, tl.sum(ref_sq, axis=0))


@triton.jit(do_not_specialize=["n"])
def diff_stats_kernel(a_ptr, b_ptr, counts_ptr, sums_ptr, maxima_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    lanes = tl.arange(0, BLOCK)
    count = tl.zeros([BLOCK], dtype=tl.int64)
    err_sq = tl.zeros([BLOCK], dtype=tl.float64)
    ref_sq = tl.zeros([BLOCK], dtype=tl.float64)
    max_abs = tl.zeros([BLOCK], dtype=tl.float64)
    max_ref = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(pid * BLOCK, n, step):
        offs = start + lanes
        inside = offs < n
        a = tl.load(a_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        b = tl.load(b_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        ok = inside & (a == a) & (b == b) & (tl.abs(a) != float("inf")) & (tl.abs(b) != float("inf"))
        d = tl.where(ok, b - a, 0.0)
        kept = tl.where(ok, a, 0.0)
        count += ok.to(tl.int64)
        err_sq += d * d
        ref_sq += kept * kept
        max_abs = tl.maximum(max_abs, tl.abs(d))
        max_ref = tl.maximum(max_ref, tl.abs(kept))
    tl.store(counts_ptr + pid, tl.sum(count, axis=0))
    tl.store(sums_ptr + pid * 2, tl.sum(err_sq, axis=0))
    tl.store(sums_ptr + pid * 2 + 1, tl.sum(ref_sq, axis=0))
    tl.store(maxima_ptr + pid * 2, tl.max(max_abs, axis=0))
    tl.store(maxima_ptr + pid * 2 + 1, tl.max(max_ref, axis=0))


@triton.jit(do_not_specialize=["n"])
def fingerprint_kernel(x_ptr, w_ptr, salt_ptr, parts_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    lanes = tl.arange(0, BLOCK)
    s1 = tl.zeros([BLOCK], dtype=tl.int64)
    s2 = tl.zeros([BLOCK], dtype=tl.int64)
    for start in range(pid * BLOCK, n, step):
        offs = start + lanes
        inside = offs < n
        v = tl.load(x_ptr + offs, mask=inside, other=0).to(tl.int64)  # unsigned bytes zero-extend
        w = tl.load(w_ptr + offs % CHUNK)
        salt = tl.load(salt_ptr + offs // CHUNK, mask=inside, other=0)
        s1 += v
        s2 += v * (w ^ salt)  # int64 products and sums wrap, as torch's do
    tl.store(parts_ptr + pid * 2, tl.sum(s1, axis=0))
    tl.store(parts_ptr + pid * 2 + 1, tl.sum(s2, axis=0))
