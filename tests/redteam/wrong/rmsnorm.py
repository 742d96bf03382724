"""WRONG variants of kernels/rmsnorm.py (out= buffer API)."""
from redteam.corpus import edit, wrong

LAUNCH = "    rmsnorm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)\n"
STORE = "    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)\n"
MEAN = "    mean_sq = tl.sum(x * x, axis=0) / n_cols\n"

VARIANTS = [
    wrong("ignores_out_buffer", "inplace",
          "writes into a fresh tensor instead of the caller's out= buffer (returned, but the caller reads out)",
          edit("    if out is None:\n        out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)\n",
               "    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)\n")),
    wrong("mean_over_block", "odd-size",
          "divides the sum of squares by BLOCK_SIZE instead of n_cols: right when n_cols is a power of two "
          "(bench), wrong at 77 columns",
          edit(MEAN, "    mean_sq = tl.sum(x * x, axis=0) / BLOCK_SIZE\n")),
    wrong("assumes_contiguous_rows", "strides",
          "reads row i at i * n_cols: wrong on test_rmsnorm's x[:, :77]",
          edit(LAUNCH, "    rmsnorm_kernel[(n_rows,)](x, weight, out, n_cols, out.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)\n")),
    wrong("fp16_rounded_output", "precision",
          "rounds the fp32 result through fp16: inside the flat tolerance, caught by the float64-reference bound",
          edit(STORE, "    tl.store(out_ptr + row * stride_out + cols, y.to(tl.float16).to(out_ptr.dtype.element_ty), mask=mask)\n")),
    wrong("weight_ignored", "wrong-math", "does not multiply by the weight",
          edit("    y = x * rstd * w\n", "    y = x * rstd\n")),
    wrong("torch_result_into_out", "torch-fallback",
          "computes RMSNorm with torch into out and launches the kernel on one row of a scratch buffer",
          edit(LAUNCH, "    scratch = torch.empty((1, n_cols), dtype=x.dtype, device=x.device)\n"
                       "    rmsnorm_kernel[(1,)](x, weight, scratch, x.stride(0), scratch.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)\n"
                       "    out.copy_(x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight)\n")),
    wrong("normalises_x_in_place_too", "input-mutation",
          "also stores the result back into x (a 'fused' in-place update the caller did not ask for)",
          edit(STORE, STORE + "    tl.store(x_ptr + row * stride_x + cols, y.to(out_ptr.dtype.element_ty), mask=mask)\n")),
    wrong("grid_closure_zero", "timing-replay",
          "a grid callable that returns 0 programs after its first call: replays launch nothing",
          edit(LAUNCH, "    state = {'rows': n_rows}\n\n"
                       "    def grid(meta):\n"
                       "        rows = state['rows']\n"
                       "        state['rows'] = 0\n"
                       "        return (rows,)\n\n"
                       "    rmsnorm_kernel[grid](x, weight, out, x.stride(0), out.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)\n")),
    wrong("race_next_row_first", "race",
          "each program also writes 0 into the first element of the next row: last writer wins on a GPU; "
          "the interpreter runs rows in order, so the right value always lands last",
          edit(STORE, "    tl.store(out_ptr + (row + 1) * stride_out, 0.0, mask=row + 1 < tl.num_programs(0))\n" + STORE),
          gpu_only=True),
]
