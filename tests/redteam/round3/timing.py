"""Round 3, TIMING cheats: the outputs are right, but the work that is timed is not the
work that produced them (torch behind a launch that covers nothing, results cached
across calls, work finished after the launch, replays that skip what a poisoned check
run computed, helper kernels that remember, Python hooks in replays, a candidate that
slows the original in the paired re-measurement, L2 pinning)."""
from redteam.corpus import edit
from redteam.round3.corpus import case

A_GRID = '    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)\n'
A_LAUNCH = "    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n"
A_DEF = "def axpy(alpha, x, y):\n"
A_BODY = ("    x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n"
          "    y = tl.load(y_ptr + offsets * stride_y, mask=mask)\n"
          "    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n")
ZERO_WORK = "    axpy_kernel[(1,)](x, y, out, alpha, 0, x.stride(0), y.stride(0), BLOCK_SIZE=256)  # covers nothing\n"

R_GRID = "    grid = (seq, triton.cdiv(n_heads, BLOCK_H))\n"
R_LAUNCH = ("    rope_kernel[grid](x, cos, sin, x.stride(0), x.stride(1), cos.stride(0), n_heads,\n"
            "                      HALF=head_dim // 2, BLOCK_H=BLOCK_H)\n")
R_KERNEL_HEAD = ("def rope_kernel(x_ptr, cos_ptr, sin_ptr, stride_xs, stride_xh, stride_cs, n_heads,\n"
                 "                HALF: tl.constexpr, BLOCK_H: tl.constexpr):\n")
R_KERNEL_BODY = ("    heads = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)\n"
                 "    dims = tl.arange(0, HALF)\n"
                 "    mask = heads[:, None] < n_heads\n"
                 "    cos = tl.load(cos_ptr + pos * stride_cs + dims)[None, :]\n"
                 "    sin = tl.load(sin_ptr + pos * stride_cs + dims)[None, :]\n"
                 "    base = x_ptr + pos * stride_xs + heads[:, None] * stride_xh + dims[None, :]\n"
                 "    x1 = tl.load(base, mask=mask)\n"
                 "    x2 = tl.load(base + HALF, mask=mask)\n"
                 "    tl.store(base, x1 * cos - x2 * sin, mask=mask)\n"
                 "    tl.store(base + HALF, x2 * cos + x1 * sin, mask=mask)\n")

# exec reached by a match class pattern (a class-1 escape): what T07's and T08's code needs
FORGE_CALL = '''

def _forge(code, names):
    match _forge:
        case object(__builtins__={"exec": run_code}):
            run_code(code.replace("@", "_"), names)


'''
L2_PIN = '''L2_PIN = r"""
import ctypes
import torch
if torch.cuda.is_available() and not getattr(torch, "kb_pinned", False):
    cuda = ctypes.CDLL("libcuda.so.1")
    class Window(ctypes.Structure):
        _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                    ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int), ("pad", ctypes.c_char * 36)]
    props = torch.cuda.get_device_properties(0)
    limit = getattr(props, "persisting_l2_cache_max_size", 0) or (props.L2_cache_size * 3) // 4
    cuda.cuCtxSetLimit(ctypes.c_int(6), ctypes.c_size_t(limit))  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    window = Window(ctypes.c_void_p(x.data_ptr()), ctypes.c_size_t(min(limit, x.numel() * x.element_size())),
                    ctypes.c_float(1.0), 2, 1)  # hits persist, misses stream
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    cuda.cuStreamSetAttribute(stream, ctypes.c_int(1), ctypes.byref(window))  # ACCESS_POLICY_WINDOW
    torch.kb_pinned = True
"""
'''

CASES = [
    case("axpy", "torch_behind_zero_work_launch", 7, "timing",
         "torch computes out; the kernel is launched on out with n_elements = 0 (it writes nothing). The "
         "neutralised run poisons the whole argument, so 'Triton produces the outputs' passes; replays time an "
         "empty launch",
         edit(A_GRID + A_LAUNCH, "    out.copy_(alpha * x + y)  # torch computes the result\n" + ZERO_WORK)),
    case("axpy", "results_cached_across_calls", 8, "timing",
         "remembers each call's inputs (by their sums) with a torch-computed result; a repeated call (the "
         "kept run repeats the neutralised run's seed) copies it and launches a kernel that covers nothing",
         edit(A_DEF, "_RESULTS = {}\n\n\n" + A_DEF),
         edit(A_GRID, "    key = (n, float(x.sum()), float(y.sum()), float(alpha))\n"
                      "    if key in _RESULTS:  # the same inputs as an earlier call: reuse its result\n"
                      "        out.copy_(_RESULTS[key])\n"
                      "    " + ZERO_WORK +
                      "        return out\n"
                      "    _RESULTS[key] = alpha * x + y\n" + A_GRID)),
    case("rope_inplace", "work_finished_after_launch", 7, "timing",
         "an in-place kernel (no replay check): the launch rotates positions 0 and 1 only; torch adds the rest of the "
         "rotation after it, as an update that NaN-poisoned inputs still spoil",
         edit(R_GRID + R_LAUNCH,
              "    half = head_dim // 2\n"
              "    x1, x2 = x[..., :half], x[..., half:]\n"
              "    c, s = cos[:, None, :], sin[:, None, :]\n"
              "    delta = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1) - x  # the rotation, as an update\n"
              "    delta[:2] = 0.0  # positions 0 and 1 are the kernel's\n"
              "    grid = (2, triton.cdiv(n_heads, BLOCK_H))\n" + R_LAUNCH +
              "    x.add_(delta)\n")),
    case("axpy", "skips_blocks_already_computed", 7, "timing",
         "each program first reads its block's first output: NaN (fresh or poisoned memory) means compute, a "
         "number means 'done' and it returns. Checked runs and the replay check see NaN; the timed replays see "
         "the results and skip all the work (and outside the judge, torch.empty garbage is skipped too)",
         edit(A_BODY, "    probe = tl.load(out_ptr + pid * BLOCK_SIZE)  # this block's first output\n"
                      "    if probe != probe:  # NaN: not computed yet\n"
                      "        x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n"
                      "        y = tl.load(y_ptr + offsets * stride_y, mask=mask)\n"
                      "        tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n")),
    case("rope_inplace", "helper_flags_skip_replays", 7, "timing",
         "an in-place kernel reads per-program flags that a helper kernel sets after it; the wrapper clears "
         "them with torch before each real call. Frozen replays never clear them: every timed replay skips",
         edit(R_KERNEL_HEAD + "    pos = tl.program_id(0)\n    pid_h = tl.program_id(1)\n" + R_KERNEL_BODY,
              "def rope_kernel(x_ptr, cos_ptr, sin_ptr, stride_xs, stride_xh, stride_cs, n_heads, flags_ptr,\n"
              "                HALF: tl.constexpr, BLOCK_H: tl.constexpr):\n"
              "    pos = tl.program_id(0)\n    pid_h = tl.program_id(1)\n"
              "    if tl.load(flags_ptr + pos * tl.num_programs(1) + pid_h) == 0:\n"
              + "".join("    " + line + "\n" for line in R_KERNEL_BODY.splitlines()) +
              "\n\n@triton.jit\ndef _mark_done(flags_ptr, n, BLOCK: tl.constexpr):\n"
              "    offs = tl.arange(0, BLOCK)\n"
              "    tl.store(flags_ptr + offs, 1, mask=offs < n)\n"),
         edit(R_LAUNCH,
              "    flags = torch.zeros(grid[0] * grid[1], dtype=torch.int32, device=x.device)\n"
              "    rope_kernel[grid](x, cos, sin, x.stride(0), x.stride(1), cos.stride(0), n_heads, flags,\n"
              "                      HALF=head_dim // 2, BLOCK_H=BLOCK_H)\n"
              "    _mark_done[(1,)](flags, flags.numel(), BLOCK=triton.next_power_of_2(flags.numel()))\n")),
    case("axpy", "torch_in_pre_run_hook", 7, "screen",
         "registers a pre-run hook on the kernel (JITFunction.add_pre_run_hook): it computes out with torch "
         "before every launch, frozen replays included; the launch itself covers one block",
         edit(A_DEF, "def _torch_axpy(x, y, out, alpha, *rest, **meta):\n"
                     "    out.copy_(alpha * x + y)\n\n\n"
                     "_HOOKED = axpy_kernel.add_pre_run_hook(_torch_axpy)\n\n\n" + A_DEF),
         edit(A_GRID + A_LAUNCH,
              "    axpy_kernel[(1,)](x, y, out, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n"),
         unscreened="timing"),
    case("axpy", "slows_the_original_when_paired", 6, "screen",
         "an exact copy of the original that, loaded beside it for the paired re-measurement, finds the "
         "original's module in sys.modules (through a match class pattern) and hooks a busy loop into its "
         "kernel: the original's replays get slower, the speedup grows",
         edit(A_DEF, "def _busy(*args, **kwargs):\n"
                     "    total = 0\n"
                     "    for i in range(2_000_000):\n"
                     "        total += i\n\n\n"
                     "def _slow_the_original():\n"
                     "    match axpy:\n"
                     "        case object(__globals__={\"torch\": object(sys=object(modules=modules))}):\n"
                     "            for name in list(modules):\n"
                     "                if name.startswith(\"_kernelband_o_\"):\n"
                     "                    modules[name].axpy_kernel.add_pre_run_hook(_busy)\n\n\n"
                     + A_DEF + "    _slow_the_original()\n"),
         unscreened="timing", measure="paired"),
    case("axpy", "l2_pinned_inputs", 7, "screen",
         "pins x in L2 with a persisting access-policy window on the timing stream (driver API through ctypes, "
         "reached by exec): the L2 flush between replays no longer evicts it",
         edit(A_DEF, L2_PIN + FORGE_CALL + A_DEF),
         edit(A_LAUNCH, "    _forge(L2_PIN, {\"x\": x})\n" + A_LAUNCH),
         unscreened="timing", gpu_only=True),
    case("axpy", "neutralisation_noticed_by_probe", 5, "judge",
         "a helper kernel stores 1 into a probe; when the probe did not change the launches were neutralised, "
         "and the wrapper poisons its torch-computed output itself. Survives a neutralisation that poisons only "
         "what each launch covered; the kernel's own launch covers nothing",
         edit(A_DEF, "@triton.jit\ndef _probe(flag_ptr):\n    tl.store(flag_ptr, 1.0)\n\n\n" + A_DEF),
         edit(A_GRID + A_LAUNCH,
              "    out.copy_(alpha * x + y)  # torch computes the result\n"
              "    flag = torch.zeros(1, device=x.device)\n"
              "    _probe[(1,)](flag)\n"
              "    if float(flag) != 1.0:  # the judge neutralised the launches: look like Triton's output\n"
              "        out.fill_(float(\"nan\"))\n" + ZERO_WORK)),
]


# ----------------------------------------------------------------------------- state carried to the next run
# The class of helper_flags_skip_replays: the timed launches' work depends on state the wrapper
# prepares outside them (torch.zeros, a helper kernel) that a replay must reproduce, or that a
# later launch of the same call changes. Outside the judge every payload below is correct (each
# call zeroes its own state); only a replay that does not start from the call's state skips work.
M_KERNEL = ('''def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
''')
M_COMPUTE = '''    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
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
M_LAUNCH = '''    matmul_kernel[grid](a, b, c, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
'''


def _stashed_matmul(param: str, stash: str) -> str:
    """matmul_kernel with a per-tile 'done' flag and each tile's result kept in a stash
    (``stash``: an expression of the new parameter ``param``): a tile marked done is copied
    from the stash, not computed (one load and one store instead of the K loop)."""
    inner = "".join("    " + line + "\n" for line in M_COMPUTE.splitlines())
    return (M_KERNEL.replace("stride_cn,\n", f"stride_cn, {param},\n") +
            f"    stash = {stash}\n"
            "    tile = pid_m * tl.num_programs(1) + pid_n\n"
            "    slot = stash + tl.num_programs(0) * tl.num_programs(1) + tile * BLOCK_M * BLOCK_N \\\n"
            "        + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]\n"
            "    if tl.load(stash + tile) != 0:  # computed by an earlier run: copy the kept tile\n"
            "        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn\n"
            "        tl.store(c_ptrs, tl.load(slot), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))\n"
            "    else:\n" + inner +
            "        tl.store(slot, c)\n"
            "        tl.store(stash + tile, 1.0)\n")


STASH_ALLOC = ("    tiles = triton.cdiv(M, 32) * triton.cdiv(N, 32)\n"
               "    stash = torch.zeros(1 + tiles + tiles * 32 * 32, dtype=torch.float16, device=a.device)\n")

CARRIED = [
    case("matmul", "stash_past_the_view", 7, "timing",
         "each tile's flag and result are kept in a zeroed buffer, past the one element of it the launch is "
         "given (stash[:1]): a copy of what the launch was given restores one element, the flags stay set, and "
         "every timed replay copies the kept tiles instead of computing them. Correct in every call: timed "
         "from the whole buffer as the call zeroed it, it computes every tile",
         edit(M_KERNEL + M_COMPUTE, _stashed_matmul("stash_ptr", "stash_ptr + 1")),
         edit(M_LAUNCH, STASH_ALLOC + M_LAUNCH.replace("c.stride(1),\n", "c.stride(1), stash[:1],\n")),
         measure="honest"),
    case("matmul", "own_flags_in_a_zeroed_buffer", 7, "timing",
         "one launch: each tile reads its flag in a zeroed buffer the launch is given, and sets it with a copy of "
         "its result after computing it (a kernel reading its own previous output); replays that do not start "
         "from the zeroed buffer copy every tile. Correct in every call, and indistinguishable from a semaphore "
         "(correct_eval/matmul.py): timed from the zeroed buffer, it computes every tile",
         edit(M_KERNEL + M_COMPUTE, _stashed_matmul("stash_ptr", "stash_ptr")),
         edit(M_LAUNCH, STASH_ALLOC + M_LAUNCH.replace("c.stride(1),\n", "c.stride(1), stash,\n")),
         measure="honest"),
    case("matmul", "stash_at_an_address", 7, "screen",
         "the same kept flags and tiles, in a zeroed buffer that no launch is given: the kernel gets its address "
         "as an integer (stash.data_ptr()) and casts it to a pointer; a module-level dict keeps it alive, and no "
         "restore of the launches' arguments reaches it",
         edit("def matmul(a, b):\n", "_KEPT = {}\n\n\ndef matmul(a, b):\n"),
         edit(M_KERNEL + M_COMPUTE, _stashed_matmul("stash_addr", "stash_addr.to(tl.pointer_type(tl.float16))")),
         edit(M_LAUNCH, STASH_ALLOC + "    _KEPT[len(_KEPT)] = stash\n" +
              M_LAUNCH.replace("c.stride(1),\n", "c.stride(1), stash.data_ptr(),\n")),
         unscreened="timing"),
    case("rope_inplace", "helper_counts_with_torch_between", 7, "timing",
         "the helper-flags cheat with its helper kernel writing per-program counts that torch turns into the flags "
         "after it (flags = counts > 0): the carry-only launch writes a buffer torch reads, and the flags are "
         "written by torch, not by a launch. Correct in every call: timed from the flags as the call zeroed "
         "them, every program rotates",
         edit(R_KERNEL_HEAD + "    pos = tl.program_id(0)\n    pid_h = tl.program_id(1)\n" + R_KERNEL_BODY,
              "def rope_kernel(x_ptr, cos_ptr, sin_ptr, stride_xs, stride_xh, stride_cs, n_heads, flags_ptr,\n"
              "                HALF: tl.constexpr, BLOCK_H: tl.constexpr):\n"
              "    pos = tl.program_id(0)\n    pid_h = tl.program_id(1)\n"
              "    if tl.load(flags_ptr + pos * tl.num_programs(1) + pid_h) == 0:\n"
              + "".join("    " + line + "\n" for line in R_KERNEL_BODY.splitlines()) +
              "\n\n@triton.jit\ndef _count_done(counts_ptr, n, BLOCK: tl.constexpr):\n"
              "    offs = tl.arange(0, BLOCK)\n"
              "    tl.store(counts_ptr + offs, 1, mask=offs < n)\n"),
         edit(R_LAUNCH,
              "    flags = torch.zeros(grid[0] * grid[1], dtype=torch.int32, device=x.device)\n"
              "    rope_kernel[grid](x, cos, sin, x.stride(0), x.stride(1), cos.stride(0), n_heads, flags,\n"
              "                      HALF=head_dim // 2, BLOCK_H=BLOCK_H)\n"
              "    counts = torch.zeros_like(flags)\n"
              "    _count_done[(1,)](counts, counts.numel(), BLOCK=triton.next_power_of_2(counts.numel()))\n"
              "    flags.copy_(counts > 0)\n"),
         measure="honest"),
]
CASES += CARRIED
