"""WRONG variants of kernels/axpy.py."""
from redteam.corpus import edit, wrong

GRID = '    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)\n'
LAUNCH = '    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n'
RETURN = "    return out\n\n\ndef test_axpy"
MASK = "    mask = offsets < n_elements\n"
STORE = "    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n"

VARIANTS = [
    wrong("dummy_launch_torch_result", "torch-fallback",
          "computes alpha*x+y with torch and launches the kernel once on a 1-element dummy; "
          "caught only by 'Triton must produce the outputs' (neutralised launches must change them)",
          edit(GRID + LAUNCH,
               "    out = alpha * x + y\n"
               "    dummy = torch.empty(1, dtype=x.dtype, device=x.device)\n"
               "    axpy_kernel[(1,)](x, y, dummy, alpha, 1, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n")),
    wrong("launch_then_torch_overwrite", "torch-fallback",
          "launches the real kernel, then discards its result and returns a torch computation",
          edit(LAUNCH, LAUNCH + "    out = alpha * x + y\n")),
    wrong("grid_closure_zero", "timing-replay",
          "the grid callable returns 0 programs after its first call, so timing replays launch nothing "
          "(a huge fake speedup); caught by validating replays (launch grid and outputs)",
          edit(GRID,
               "    state = {'programs': triton.cdiv(n, 256)}\n\n"
               "    def grid(meta):\n"
               "        programs = state['programs']\n"
               "        state['programs'] = 0\n"
               "        return (programs,)\n\n")),
    wrong("correct_first_3_calls", "stateful",
          "a module-level call counter: the first 3 calls (one per judge seed) are right, later ones launch "
          "half the grid; caught by more calls per process (second call, extra harnesses)",
          edit("def axpy(alpha, x, y):\n", "_CALLS = [0]\n\n\ndef axpy(alpha, x, y):\n    _CALLS[0] += 1\n"),
          edit(GRID, '    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]) // (1 if _CALLS[0] <= 3 else 2),)\n')),
    wrong("cached_by_shape", "stateful",
          "caches the first result per (shape, dtype) in a module-level dict and returns it for new inputs",
          edit("def axpy(alpha, x, y):\n", "_CACHE = {}\n\n\ndef axpy(alpha, x, y):\n"),
          edit(RETURN, "    return _CACHE.setdefault((tuple(x.shape), x.dtype), out)\n\n\ndef test_axpy")),
    wrong("reused_output_buffer", "stateful",
          "returns one module-level buffer per shape, overwritten by the next call: a result the caller "
          "holds changes under it; caught by a second call in the same process",
          edit("def axpy(alpha, x, y):\n", "_BUFFERS = {}\n\n\ndef axpy(alpha, x, y):\n"),
          edit("    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n",
               "    key = (tuple(x.shape), x.dtype, x.device)\n"
               "    if key not in _BUFFERS:\n"
               "        _BUFFERS[key] = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n"
               "    out = _BUFFERS[key]\n")),
    wrong("zeroes_input_y", "input-mutation",
          "right output, but zeroes the caller's y afterwards; caught by 'inputs must stay unchanged'",
          edit(RETURN, "    y.zero_()\n    return out\n\n\ndef test_axpy")),
    wrong("result_written_into_y", "input-mutation",
          "the kernel stores into y's buffer and the wrapper returns y: right values, clobbered input",
          edit(LAUNCH, "    axpy_kernel[grid](x, y, y, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n"),
          edit(RETURN, "    return y\n\n\ndef test_axpy")),
    wrong("tail_dropped", "odd-size",
          "the grid is rounded down, so the last partial block is never computed: right on multiples of "
          "256 (the bench harness), wrong on test_axpy's n=1003",
          edit(GRID, '    grid = lambda meta: (n // meta["BLOCK_SIZE"],)\n')),
    wrong("tail_masked_out", "odd-size",
          "the mask covers whole blocks only (the tail is left unwritten); invisible at multiples of the block",
          edit(MASK, "    mask = offsets < (n_elements // BLOCK_SIZE) * BLOCK_SIZE\n")),
    wrong("ignores_stride_x", "strides",
          "assumes x is contiguous: right on bench_axpy, wrong on test_axpy's x[::2]",
          edit("    x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n", "    x = tl.load(x_ptr + offsets, mask=mask)\n")),
    wrong("harness_tamper_test_size", "harness-tamper",
          "drops the tail (grid rounded down) and edits test_axpy to a contiguous multiple of the block so "
          "the check harness cannot see it; the screen must keep every harness unchanged",
          edit(GRID, '    grid = lambda meta: (n // meta["BLOCK_SIZE"],)\n'),
          edit("    n = 1000 + 3  # not a multiple of the block\n    x = torch.randn(2 * n, device=DEVICE)[::2]  # strided input\n",
               "    n = 1024\n    x = torch.randn(n, device=DEVICE)\n")),
    wrong("off_by_one_mask", "wrong-math", "the last element is never written",
          edit(MASK, "    mask = offsets < n_elements - 1\n")),
    wrong("wrong_scale_0p05pct", "wrong-math",
          "alpha scaled by 1.0005: a small systematic error; caught by the float64-reference precision bound",
          edit(STORE, "    tl.store(out_ptr + offsets, (alpha * 1.0005) * x + y, mask=mask)\n")),
    wrong("first_block_only", "partial-write", "launches one program: only the first 256 elements are written",
          edit(GRID, "    grid = (1,)\n")),
    wrong("returns_input", "aliasing", "launches the kernel but returns y",
          edit(RETURN, "    return y\n\n\ndef test_axpy")),
    wrong("predicts_judge_seeds", "rng",
          "replays the harness's RNG for seeds 0-2 to precompute answers with torch, matches the input to "
          "them and returns the precomputed answer (the kernel runs on a dummy); caught by fresh/unpredictable "
          "seeds and by 'Triton must produce the outputs'",
          edit("def axpy(alpha, x, y):\n",
               "def _precomputed(alpha, n, device):\n"
               "    table = {}\n"
               "    for seed in (0, 1, 2):\n"
               "        torch.manual_seed(seed)\n"
               "        xs = torch.randn(n, device=device)\n"
               "        ys = torch.randn(n, device=device)\n"
               "        table[float(xs[0])] = alpha * xs + ys\n"
               "    return table\n\n\n"
               "def axpy(alpha, x, y):\n"),
          edit(GRID + LAUNCH,
               "    hit = _precomputed(alpha, n, x.device).get(float(x[0]))\n"
               "    if hit is not None:\n"
               "        axpy_kernel[(1,)](x, y, torch.empty_like(out), alpha, 1, 1, 1, BLOCK_SIZE=256)\n"
               "        return hit\n" + GRID + LAUNCH)),
    wrong("output_dtype_fp16", "output-structure", "returns fp16 instead of the input's fp32",
          edit("    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n",
               "    out = torch.empty(x.shape, dtype=torch.float16, device=x.device)\n")),
    wrong("extra_output", "output-structure", "returns (out, x) instead of out",
          edit(RETURN, "    return out, x\n\n\ndef test_axpy")),
    wrong("missing_output", "output-structure", "the kernel writes out but the wrapper returns nothing",
          edit(RETURN, "    return\n\n\ndef test_axpy")),
    wrong("side_stream_launch", "concurrency",
          "launches on a side stream the caller does not wait on (no event/synchronize): the output is read "
          "before it is written unless something synchronises the device",
          edit(LAUNCH,
               "    if x.is_cuda:\n"
               "        side = torch.cuda.Stream()\n"
               "        with torch.cuda.stream(side):\n"
               "        " + LAUNCH +
               "    else:\n"
               "    " + LAUNCH),
          gpu_only=True),
    wrong("oob_write_le_mask", "gpu-memory",
          "mask uses <=: one element is written past the end of out when n is not a multiple of the block "
          "(test_axpy); needs canary-padded buffers or compute-sanitizer memcheck",
          edit(MASK, "    mask = offsets <= n_elements\n"), gpu_only=True),
    wrong("oob_load_unmasked", "gpu-memory", "x is loaded without a mask: reads past the end of x (stores are masked)",
          edit("    x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n", "    x = tl.load(x_ptr + offsets * stride_x)\n"),
          gpu_only=True),
    wrong("race_next_block_first", "race",
          "each program also writes 0 into the first element of the next block: last writer wins; the "
          "interpreter runs programs in order, so the right value always lands last there",
          edit(STORE, "    nxt = (pid + 1) * BLOCK_SIZE\n    tl.store(out_ptr + nxt, 0.0, mask=nxt < n_elements)\n" + STORE),
          gpu_only=True),
    wrong("uninitialised_read", "gpu-memory",
          "adds 0 * out (torch.empty, never initialised) to the result: NaN/Inf garbage propagates; "
          "a NaN-filled/canary allocation shows it (today's worker fills fresh memory with NaN, even on the CPU)",
          edit(STORE, "    prev = tl.load(out_ptr + offsets, mask=mask)\n"
                      "    tl.store(out_ptr + offsets, alpha * x + y + prev * 0.0, mask=mask)\n")),
]
