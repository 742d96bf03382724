"""WRONG variants of kernels/matmul.py."""
from redteam.corpus import edit, wrong

STRIDES = "                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),\n"
LAUNCH = "    matmul_kernel[grid](a, b, c, M, N, K,\n"
ALLOC = "    c = torch.empty((M, N), dtype=torch.float16, device=a.device)\n"
CAST = "    c = acc.to(tl.float16)\n"
LOAD_A = "        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)\n"
STORE = "    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))\n"

VARIANTS = [
    wrong("fp16_accumulation", "precision",
          "accumulates in fp16 (tl.dot out_dtype=fp16): error grows with K; inside the flat fp16 tolerance at "
          "small K, caught by the float64-reference bound (test_matmul has K=301)",
          edit("    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n",
               "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)\n"),
          edit("        acc = tl.dot(a, b, acc)\n", "        acc = tl.dot(a, b, acc, out_dtype=tl.float16)\n")),
    wrong("bf16_rounded_output", "precision", "rounds the fp32 accumulator through bf16 before the fp16 store",
          edit(CAST, "    c = acc.to(tl.bfloat16).to(tl.float16)\n")),
    wrong("scaled_0p1pct", "precision",
          "scales C by 1.001: inside the flat fp16 tolerance, four times the original's own rounding error",
          edit(CAST, "    c = (acc * 1.001).to(tl.float16)\n")),
    wrong("transposed_b", "wrong-math", "swaps B's strides: computes A @ B.T (same shape on square inputs)",
          edit(STRIDES, "                        a.stride(0), a.stride(1), b.stride(1), b.stride(0), c.stride(0), c.stride(1),\n")),
    wrong("assumes_row_major_a", "strides",
          "passes (K, 1) as A's strides: right for contiguous A (bench), wrong for test_matmul's transposed view",
          edit(STRIDES, "                        K, 1, b.stride(0), b.stride(1), c.stride(0), c.stride(1),\n")),
    wrong("k_tail_dropped", "odd-size",
          "the K loop runs K // BLOCK_K times: right when K is a multiple of 32 (bench), wrong at K=301",
          edit("    for k in range(0, tl.cdiv(K, BLOCK_K)):\n", "    for k in range(0, K // BLOCK_K):\n")),
    wrong("torch_matmul_dummy_tile", "torch-fallback",
          "torch computes C; the kernel runs on a 1x1x1 problem into a scratch tensor",
          edit(LAUNCH, "    scratch = torch.empty((1, 1), dtype=torch.float16, device=a.device)\n"
                       "    matmul_kernel[(1, 1)](a, b, scratch, 1, 1, 1, 1, 1, 1, 1, 1, 1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)\n"
                       "    c = (a.float() @ b.float()).half()\n"
                       "    return c\n" + LAUNCH)),
    wrong("zeros_buffer_skips_odd_column_tiles", "hidden-dropped-store",
          "C from torch.zeros and the kernel stores only even column tiles",
          edit(ALLOC, "    c = torch.zeros((M, N), dtype=torch.float16, device=a.device)\n"),
          edit(STORE, "    if pid_n % 2 == 0:\n    " + STORE)),
    wrong("first_call_full_grid_only", "stateful",
          "a closure counter in the module: after 3 calls the grid covers only the first row of tiles",
          edit("def matmul(a, b):\n", "_CALLS = [0]\n\n\ndef matmul(a, b):\n    _CALLS[0] += 1\n"),
          edit('    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))\n',
               '    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) if _CALLS[0] <= 3 else 1, triton.cdiv(N, meta["BLOCK_N"]))\n')),
    wrong("zeroes_b_after_use", "input-mutation", "right C, but zeroes the caller's B afterwards",
          edit("    return c\n\n\ndef test_matmul", "    b.zero_()\n    return c\n\n\ndef test_matmul")),
    wrong("no_m_mask_oob_write", "gpu-memory",
          "no M mask on the A load and the C store: the last row tile writes past the end of C when M is not a "
          "multiple of BLOCK_M (test_matmul's M=33)",
          edit(LOAD_A, "        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)\n"),
          edit(STORE, "    tl.store(c_ptrs, c, mask=offs_n[None, :] < N)\n"), gpu_only=True),
    wrong("no_m_mask_oob_load", "gpu-memory",
          "no M mask on the A load only: reads past the end of A (the rows read are masked at the store)",
          edit(LOAD_A, "        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)\n"), gpu_only=True),
]
