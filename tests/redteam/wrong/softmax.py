"""WRONG variants of kernels/softmax.py."""
from redteam.corpus import edit, wrong

LAUNCH = "    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n"
ALLOC = "    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)\n"
LOAD = '    row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float("inf"))\n'
OUTPUT = "    softmax_output = numerator / denominator\n"

VARIANTS = [
    wrong("no_max_subtraction", "numerics",
          "exp without subtracting the row max: right for randn logits (bench), inf/inf = NaN for test_softmax's "
          "logits of size ~100",
          edit("    row_minus_max = row - tl.max(row, axis=0)\n", "    row_minus_max = row\n")),
    wrong("fp16_rounded_output", "precision",
          "rounds the fp32 probabilities through fp16 (relative error ~5e-4, inside the flat fp32 tolerance); "
          "caught by the error bound against a float64 reference of the original",
          edit(OUTPUT, "    softmax_output = (numerator / denominator).to(tl.float16).to(tl.float32)\n")),
    wrong("bf16_rounded_output", "precision", "rounds the fp32 probabilities through bf16 (relative error ~4e-3)",
          edit(OUTPUT, "    softmax_output = (numerator / denominator).to(tl.bfloat16).to(tl.float32)\n")),
    wrong("ignores_input_row_stride", "strides",
          "reads row i at i * n_cols: right on contiguous inputs (bench), wrong on test_softmax's x[:, :129]",
          edit(LAUNCH, "    softmax_kernel[(n_rows,)](y, x, n_cols, y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n")),
    wrong("load_mask_removed", "odd-size",
          "loads the whole block without a mask: padding lanes read the next row's data into the max and the "
          "sum; invisible when n_cols is a power of two (bench)",
          edit(LOAD, "    row = tl.load(row_start_ptr + col_offsets)\n")),
    wrong("exp2_without_log2e", "wrong-math", "uses exp2 where exp is needed (a base-2 softmax)",
          edit("    numerator = tl.exp(row_minus_max)\n", "    numerator = tl.exp2(row_minus_max)\n")),
    wrong("first_row_only", "partial-write", "launches one program: only row 0 is written",
          edit(LAUNCH, "    softmax_kernel[(1,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n")),
    wrong("zeros_buffer_skips_half_the_rows", "hidden-dropped-store",
          "the wrapper allocates with torch.zeros (defeating NaN-filled fresh memory) and the kernel stores only "
          "even rows; neutralised launches leave zeros too",
          edit(ALLOC, "    y = torch.zeros((n_rows, n_cols), dtype=x.dtype, device=x.device)\n"),
          edit("    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)\n",
               "    if row_idx % 2 == 0:\n"
               "        tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)\n")),
    wrong("torch_softmax_dummy_row", "torch-fallback",
          "torch.softmax computes the result; the kernel runs on one row into a scratch buffer",
          edit(LAUNCH, "    softmax_kernel[(1,)](torch.empty_like(y), x, x.stride(0), y.stride(0), 1, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n"
                       "    y = torch.softmax(x, dim=-1)\n")),
    wrong("output_written_into_input", "input-mutation",
          "saves an allocation by writing the result over a contiguous x and returning it: right values, "
          "clobbered input",
          edit(ALLOC, "    y = x if x.is_contiguous() else torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)\n")),
    wrong("grid_from_first_call", "timing-replay",
          "remembers the first launch's grid in a module-level dict; later launches (and replays of the "
          "captured launch) use a stale 1-program grid after the first call",
          edit("def softmax(x):\n", "_GRID = {}\n\n\ndef softmax(x):\n"),
          edit(LAUNCH, "    grid = lambda meta: (_GRID.setdefault('rows', n_rows) if not _GRID.get('done') else 1,)\n"
                       "    softmax_kernel[grid](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n"
                       "    _GRID['done'] = True\n")),
]
