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

# --------------------------------------------------------------------------- state a kernel prepares for itself
# Look-alikes of the round-3 timing cheats that keep state for a later run
# (tests/redteam/round3/timing.py, CARRIED): each keeps real state in a buffer the wrapper
# zeroes with torch (atomics, a semaphore, a pipeline's intermediate, state carried between
# launches), and each is correct and timed doing its work (every replay starts from the zeroed
# buffers). None of them may be refused.
KERNEL_BLOCK = '''@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
'''
WRAPPER_LAUNCH = GRID + '''    matmul_kernel[grid](a, b, c, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
'''
# the product of one K range [k_lo, k_hi) for a (BLOCK_M, BLOCK_N) tile, added to ``acc``
K_RANGE = '''@triton.jit
def _k_range(a_ptr, b_ptr, acc, offs_m, offs_n, M, N, K, k_lo, k_hi, stride_am, stride_ak, stride_bk, stride_bn,
             BLOCK_K: tl.constexpr):
    for k in range(k_lo, k_hi, BLOCK_K):
        offs_k = k + tl.arange(0, BLOCK_K)
        k_mask = offs_k < K
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


'''
TILE = '''    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    in_c = (offs_m[:, None] < M) & (offs_n[None, :] < N)
'''
SPLIT_K = '''    k_chunk = triton.cdiv(triton.cdiv(K, 32), 2) * 32  # two K ranges, whole blocks each
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32), 2)
'''
SEMAPHORE_KERNEL = K_RANGE + '''@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, part_ptr, count_ptr, k_chunk,
                  SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
''' + TILE + '''    tile = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    n_tiles = tl.num_programs(0) * tl.num_programs(1)
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    k_lo = tl.program_id(2) * k_chunk
    acc = _k_range(a_ptr, b_ptr, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), offs_m, offs_n, M, N, K,
                   k_lo, k_lo + k_chunk, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_K)
    tl.store(part_ptr + (tl.program_id(2) * n_tiles + tile) * BLOCK_M * BLOCK_N + in_tile, acc)
    # the semaphore: how many of the tile's K ranges are done; the last one sums them, in order
    if tl.atomic_add(count_ptr + tile, 1) == SPLIT - 1:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            total += tl.load(part_ptr + (s * n_tiles + tile) * BLOCK_M * BLOCK_N + in_tile)
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, total.to(tl.float16), mask=in_c)
'''
SEMAPHORE_LAUNCH = SPLIT_K + '''    tiles = grid[0] * grid[1]
    part = torch.empty(2 * tiles * 32 * 32, dtype=torch.float32, device=a.device)
    count = torch.zeros(tiles, dtype=torch.int32, device=a.device)
    matmul_kernel[grid](a, b, c, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        part, count, k_chunk, SPLIT=2, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
'''

VARIANTS += [
    correct("split_k_atomics_into_zeroed_fp32_then_cast", "state",
            "split-K: two K ranges per tile atomically added into an fp32 buffer the wrapper zeroes with torch, "
            "then matmul_kernel reads it and writes C (a two-kernel pipeline, the second reading the first's output)",
            edit(KERNEL_BLOCK, K_RANGE + '''@triton.jit
def _partial_products(a_ptr, b_ptr, acc_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, k_chunk,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
''' + TILE + '''    k_lo = tl.program_id(2) * k_chunk
    acc = _k_range(a_ptr, b_ptr, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), offs_m, offs_n, M, N, K,
                   k_lo, k_lo + k_chunk, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_K)
    tl.atomic_add(acc_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=in_c)


@triton.jit
def matmul_kernel(acc_ptr, c_ptr, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
''' + TILE + '''    acc = tl.load(acc_ptr + offs_m[:, None] * N + offs_n[None, :], mask=in_c)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(tl.float16), mask=in_c)
'''),
            edit(WRAPPER_LAUNCH, SPLIT_K + '''    acc = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    _partial_products[grid](a, b, acc, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), k_chunk,
                            BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    matmul_kernel[grid[:2]](acc, c, M, N, c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32)
''')),
    correct("split_k_semaphore_in_zeroed_counts", "state",
            "split-K in one launch: each K range stores its partial tile and bumps the tile's counter (a semaphore in "
            "an int32 buffer the wrapper zeroes); the range that arrives last sums the partials and writes C",
            edit(KERNEL_BLOCK, SEMAPHORE_KERNEL), edit(WRAPPER_LAUNCH, SEMAPHORE_LAUNCH)),
    correct("split_k_semaphore_reset_by_a_later_kernel", "state",
            "the semaphore split-K, and a second kernel that only zeroes the counters again after it (a launch "
            "whose only effect is on a buffer the call drops, but it leaves it as the call found it)",
            edit(KERNEL_BLOCK, SEMAPHORE_KERNEL + '''

@triton.jit
def _zero_counts(count_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(count_ptr + offs, tl.zeros((BLOCK,), dtype=tl.int32), mask=offs < n)
'''),
            edit(WRAPPER_LAUNCH, SEMAPHORE_LAUNCH +
                 "    if tiles:  # an empty batch has no counters (a block of next_power_of_2(0) is no block)\n"
                 "        _zero_counts[(1,)](count, tiles, BLOCK=triton.next_power_of_2(tiles))\n")),
    correct("k_in_two_launches_carrying_state", "state",
            "the K loop over two launches that carry the fp32 tile through ping-pong buffers (the first zeroed by "
            "torch); the last launch writes C and also its state, which nothing reads again",
            edit(KERNEL_BLOCK, K_RANGE + '''@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, state_in, state_out, k_lo, k_hi,
                  LAST: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
''' + TILE + '''    state = offs_m[:, None] * N + offs_n[None, :]
    acc = _k_range(a_ptr, b_ptr, tl.load(state_in + state, mask=in_c, other=0.0), offs_m, offs_n, M, N, K,
                   k_lo, k_hi, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_K)
    tl.store(state_out + state, acc, mask=in_c)
    if LAST:
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(tl.float16), mask=in_c)
'''),
            edit(WRAPPER_LAUNCH, '''    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    k_mid = triton.cdiv(triton.cdiv(K, 32), 2) * 32
    first = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    second = torch.empty_like(first)
    for state_in, state_out, k_lo, k_hi, last in ((first, second, 0, k_mid, False), (second, first, k_mid, K, True)):
        matmul_kernel[grid](a, b, c, M, N, K,
                            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                            state_in, state_out, k_lo, k_hi, LAST=last, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
''')),
]
