"""CORRECT rewrites of kernels/matmul.py."""
from redteam.corpus import correct, edit

LAUNCH_CONSTS = "                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)\n"
GRID = '    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))\n'
PIDS = "    pid_m = tl.program_id(0)\n    pid_n = tl.program_id(1)\n"
DECORATOR = "@triton.jit\ndef matmul_kernel("
SIGNATURE_END = "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):\n"
LOOP = "    for k in range(0, tl.cdiv(K, BLOCK_K)):\n"

VARIANTS = [
    correct("blocks_64x64x32_warps_stages", "tuning", "64x64x32 tiles, num_warps=4, num_stages=3",
            edit(LAUNCH_CONSTS, "                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=3)\n")),
    correct("block_k_64", "tuning", "BLOCK_K=64 (the K mask handles K=301)",
            edit(LAUNCH_CONSTS, "                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=64)\n")),
    correct("grouped_program_ids", "restructure",
            "the tutorial's grouped ordering: a 1-D grid remapped to (pid_m, pid_n) in groups of GROUP_M rows",
            edit(SIGNATURE_END, "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,\n"
                                "                  GROUP_M: tl.constexpr = 4):\n"),
            edit(PIDS, "    pid = tl.program_id(0)\n"
                       "    num_pid_m = tl.cdiv(M, BLOCK_M)\n"
                       "    num_pid_n = tl.cdiv(N, BLOCK_N)\n"
                       "    num_pid_in_group = GROUP_M * num_pid_n\n"
                       "    group_id = pid // num_pid_in_group\n"
                       "    first_pid_m = group_id * GROUP_M\n"
                       "    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)\n"
                       "    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)\n"
                       "    pid_n = (pid % num_pid_in_group) // group_size_m\n"),
            edit(GRID, '    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)\n')),
    correct("autotuned_tiles", "autotune", "@triton.autotune over tile sizes keyed on M, N, K; the launch drops them",
            edit(DECORATOR, "@triton.autotune(configs=[\n"
                            "    triton.Config({'BLOCK_M': 32, 'BLOCK_N': 32, 'BLOCK_K': 32}, num_warps=4),\n"
                            "    triton.Config({'BLOCK_M': 64, 'BLOCK_N': 32, 'BLOCK_K': 64}, num_warps=4, num_stages=3),\n"
                            "], key=['M', 'N', 'K'])\n" + DECORATOR),
            edit("                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),\n"
                 + LAUNCH_CONSTS,
                 "                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))\n")),
    correct("k_loop_tl_range_pipelined", "pipelining", "the K loop as tl.range(..., num_stages=3)",
            edit(LOOP, "    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=3):\n")),
    correct("acc_plus_dot_and_mask_helper", "refactor",
            "acc += tl.dot(a, b) and the store mask from a @triton.jit helper",
            edit(DECORATOR, "@triton.jit\ndef _in_bounds(offs_m, offs_n, M, N):\n"
                            "    return (offs_m[:, None] < M) & (offs_n[None, :] < N)\n\n\n" + DECORATOR),
            edit("        acc = tl.dot(a, b, acc)\n", "        acc += tl.dot(a, b)\n"),
            edit("    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))\n",
                 "    tl.store(c_ptrs, c, mask=_in_bounds(offs_m, offs_n, M, N))\n")),
]
