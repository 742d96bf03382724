"""CORRECT rewrites of kernels/rmsnorm.py."""
from redteam.corpus import correct, edit

LAUNCH = "    rmsnorm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)\n"

VARIANTS = [
    correct("rsqrt", "arithmetic", "tl.rsqrt instead of 1 / tl.sqrt",
            edit("    rstd = 1.0 / tl.sqrt(mean_sq + eps)\n", "    rstd = tl.rsqrt(mean_sq + eps)\n")),
    correct("mean_by_reciprocal_warps_8", "tuning", "sum * (1 / n_cols) and num_warps=8",
            edit("    mean_sq = tl.sum(x * x, axis=0) / n_cols\n", "    mean_sq = tl.sum(x * x, axis=0) * (1.0 / n_cols)\n"),
            edit(LAUNCH, LAUNCH.replace("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=8)"))),
    correct("persistent_rows", "restructure", "min(n_rows, 4) programs loop over rows with tl.range",
            edit("""    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * w
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
""", """    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        mean_sq = tl.sum(x * x, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(mean_sq + eps)
        y = x * rstd * w
        tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
"""),
            edit("def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, n_cols, eps, BLOCK_SIZE: tl.constexpr):\n",
                 "def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, n_cols, eps, n_rows, BLOCK_SIZE: tl.constexpr):\n"),
            edit(LAUNCH, "    rmsnorm_kernel[(min(n_rows, 4),)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps, n_rows,\n"
                         "                                    BLOCK_SIZE=BLOCK_SIZE)\n")),
]
