"""CORRECT rewrites of kernels/axpy.py: each must pass the whole evaluation."""
from redteam.corpus import correct, edit

LAUNCH = '    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n'
DECORATOR = "@triton.jit\ndef axpy_kernel("
STORE = "    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n"
BODY = """    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets * stride_x, mask=mask)
    y = tl.load(y_ptr + offsets * stride_y, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)
"""

VARIANTS = [
    correct("block_1024", "tuning", "BLOCK_SIZE 1024; the grid reads META so it follows",
            edit(LAUNCH, LAUNCH.replace("256", "1024"))),
    correct("num_warps_8_stages_1", "tuning", "num_warps=8, num_stages=1 at the launch",
            edit(LAUNCH, LAUNCH.replace("BLOCK_SIZE=256)", "BLOCK_SIZE=256, num_warps=8, num_stages=1)"))),
    correct("autotuned_block", "autotune", "@triton.autotune over BLOCK_SIZE keyed on n_elements; the launch drops BLOCK_SIZE",
            edit(DECORATOR, "@triton.autotune(configs=[triton.Config({'BLOCK_SIZE': 128}, num_warps=4),\n"
                            "                          triton.Config({'BLOCK_SIZE': 512}, num_warps=8)],\n"
                            "                 key=['n_elements'])\n" + DECORATOR),
            edit(LAUNCH, "    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0))\n")),
    correct("persistent_grid_stride_loop", "restructure",
            "a persistent kernel: at most 4 programs loop over the blocks with tl.range",
            edit(BODY, """    pid = tl.program_id(axis=0)
    num_blocks = tl.cdiv(n_elements, BLOCK_SIZE)
    for block in tl.range(pid, num_blocks, tl.num_programs(0)):
        offsets = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets * stride_x, mask=mask)
        y = tl.load(y_ptr + offsets * stride_y, mask=mask)
        tl.store(out_ptr + offsets, alpha * x + y, mask=mask)
"""),
            edit('    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)\n',
                 '    grid = lambda meta: (min(triton.cdiv(n, meta["BLOCK_SIZE"]), 4),)\n')),
    correct("helper_jit_function", "refactor", "the arithmetic moves into a @triton.jit helper",
            edit(DECORATOR, "@triton.jit\ndef _axpy_math(a, x, y):\n    return a * x + y\n\n\n" + DECORATOR),
            edit(STORE, "    tl.store(out_ptr + offsets, _axpy_math(alpha, x, y), mask=mask)\n")),
    correct("reordered_arithmetic_other0", "arithmetic", "y + alpha * x, and masked loads with other=0.0",
            edit(STORE, "    tl.store(out_ptr + offsets, y + alpha * x, mask=mask)\n"),
            edit("    x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n", "    x = tl.load(x_ptr + offsets * stride_x, mask=mask, other=0.0)\n")),
]
