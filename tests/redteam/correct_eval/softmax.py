"""CORRECT rewrites of kernels/softmax.py."""
from redteam.corpus import correct, edit

LAUNCH = "    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n"
SIGNATURE = """def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
"""
BODY = """    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)
"""


def _indented(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))


ROW = BODY.split("\n", 1)[1]  # everything after row_idx = ...

VARIANTS = [
    correct("num_warps_by_block", "tuning", "num_warps chosen from BLOCK_SIZE as the Triton tutorial does",
            edit(LAUNCH, "    num_warps = 4 if BLOCK_SIZE < 2048 else 8\n"
                         + LAUNCH.replace("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)"))),
    correct("persistent_rows_tl_range", "restructure",
            "a persistent kernel: min(n_rows, 8) programs loop over rows with tl.range(num_stages=2)",
            edit(BODY, "    for row_idx in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=2):\n"
                       + _indented(ROW)),
            edit(LAUNCH, LAUNCH.replace("[(n_rows,)]", "[(min(n_rows, 8),)]"))),
    correct("two_rows_per_program", "restructure", "ROWS rows per program (static_range), guarded at the end",
            edit(SIGNATURE, SIGNATURE.replace("BLOCK_SIZE: tl.constexpr):", "BLOCK_SIZE: tl.constexpr, ROWS: tl.constexpr = 2):")),
            edit(BODY, "    for r in tl.static_range(ROWS):\n"
                       "        row_idx = tl.program_id(0) * ROWS + r\n"
                       "        if row_idx < n_rows:\n"
                       + _indented(_indented(ROW))),
            edit(LAUNCH, LAUNCH.replace("[(n_rows,)]", "[(triton.cdiv(n_rows, 2),)]"))),
    correct("exp2_with_log2e", "arithmetic", "exp(x) as exp2(x * log2(e)), as fast-math kernels write it",
            edit("    numerator = tl.exp(row_minus_max)\n", "    numerator = tl.exp2(row_minus_max * 1.4426950408889634)\n")),
    correct("multiply_by_reciprocal", "arithmetic", "one reciprocal per row, then a multiply",
            edit("    softmax_output = numerator / denominator\n", "    softmax_output = numerator * (1.0 / denominator)\n")),
]
