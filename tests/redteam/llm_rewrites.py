"""Correct rewrites in the style an LLM (or a person tuning by hand) writes them: new
helper @triton.jit functions, tl.range pipelining, heuristics, autotune configs,
persistent loops, grouped program ordering, wrappers rewritten with new locals, other
allocations and grids, early exits, dtype tables, f-string errors, ``with`` a device.
Every one computes what its base computes; the screen must let each through
(tests/test_screen_false_rejections.py), and the ones without autotune are run against
their base under the interpreter there too.

Same format as ``correct_rewrites.py``: exact text edits of a real kernel module.
"""
from __future__ import annotations

from redteam.correct_rewrites import Rewrite

AXPY = ("examples/add_scale.py", "axpy_kernel", "harness_axpy")
MATMUL = ("examples/matmul.py", "matmul_kernel", "harness_matmul")
SOFTMAX = ("examples/softmax.py", "softmax_kernel", "harness_softmax")
LAYERNORM = ("benchmarks/suite/layernorm_fp32.py", "layernorm_kernel", "harness_layernorm")
ROW_SUM = ("benchmarks/suite/row_sum_fp32.py", "row_sum_kernel", "harness_row_sum")
TRANSPOSE = ("benchmarks/suite/transpose_fp32.py", "transpose_kernel", "harness_transpose")
ADD_RMSNORM = ("benchmarks/realworld/fused_add_rmsnorm.py", "fused_add_rmsnorm_kernel", "bench_fused_add_rms_norm")
SOFTMAX_OUT = ("benchmarks/realworld/softmax_out.py", "online_softmax_kernel", "bench_softmax_out")

AXPY_KERNEL = """    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)
"""
AXPY_WRAPPER = """    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=128)
    return out
"""
MATMUL_LOOP = """    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
"""
SOFTMAX_BODY = """    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)
"""
ROW_SUM_LOOP = """    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
        acc += x
"""


def _r(name: str, where: tuple[str, str, str], *edits: tuple[str, str]) -> Rewrite:
    return Rewrite(name, where[0], where[1], where[2], tuple(edits))


REWRITES: tuple[Rewrite, ...] = (
    _r("llm_axpy_vectorised_helper_and_wrapper", AXPY,
       ("@triton.jit\ndef axpy_kernel",
        "@triton.jit\ndef _load_block(ptr, offsets, mask):\n"
        "    \"\"\"One masked, streaming load of a block.\"\"\"\n"
        "    return tl.load(ptr + offsets, mask=mask, other=0.0, eviction_policy=\"evict_first\")\n\n\n"
        "@triton.jit\ndef axpy_kernel"),
       (AXPY_KERNEL,
        "    pid = tl.program_id(axis=0)\n"
        "    block_start = pid * BLOCK_SIZE\n"
        "    offsets = block_start + tl.arange(0, BLOCK_SIZE)\n"
        "    offsets = tl.multiple_of(offsets, 16)\n"
        "    mask = offsets < n_elements\n"
        "    x = _load_block(x_ptr, offsets, mask)\n"
        "    y = _load_block(y_ptr, offsets, mask)\n"
        "    result = alpha * x + y\n"
        "    tl.store(out_ptr + offsets, result, mask=mask)\n"),
       (AXPY_WRAPPER,
        "    if x.numel() == 0:\n        return torch.empty_like(x)\n"
        "    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n"
        "    n_elements = out.numel()\n"
        "    BLOCK_SIZE = 1024\n"
        "    num_warps = 4 if BLOCK_SIZE <= 1024 else 8\n"
        "    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)\n"
        "    axpy_kernel[grid](x, y, out, alpha, n_elements, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)\n"
        "    return out\n")),
    _r("llm_axpy_persistent_with_sm_count", AXPY,
       (AXPY_KERNEL,
        "    pid = tl.program_id(axis=0)\n"
        "    num_programs = tl.num_programs(axis=0)\n"
        "    num_blocks = tl.cdiv(n_elements, BLOCK_SIZE)\n"
        "    for block in tl.range(pid, num_blocks, num_programs, num_stages=3):\n"
        "        offsets = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
        "        mask = offsets < n_elements\n"
        "        x = tl.load(x_ptr + offsets, mask=mask)\n"
        "        y = tl.load(y_ptr + offsets, mask=mask)\n"
        "        tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n"),
       (AXPY_WRAPPER,
        "    out = torch.empty_like(x)\n"
        "    n = out.numel()\n"
        "    if x.is_cuda:\n"
        "        sm_count = torch.cuda.get_device_properties(x.device).multi_processor_count\n"
        "    else:\n"
        "        sm_count = 4  # the CPU interpreter: a few programs\n"
        "    block = 2048\n"
        "    programs = max(1, min(sm_count * 4, triton.cdiv(n, block)))\n"
        "    axpy_kernel[(programs,)](x, y, out, alpha, n, BLOCK_SIZE=block, num_warps=8)\n"
        "    return out\n")),
    _r("llm_axpy_autotune_with_fstring_checks", AXPY,
       ("@triton.jit\ndef axpy_kernel",
        "@triton.autotune(\n"
        "    configs=[\n"
        "        triton.Config({\"BLOCK_SIZE\": bs}, num_warps=w, num_stages=s)\n"
        "        for bs in (512, 1024, 2048)\n"
        "        for w in (4, 8)\n"
        "        for s in (2, 3)\n"
        "    ],\n"
        "    key=[\"n_elements\"],\n"
        ")\n"
        "@triton.jit\ndef axpy_kernel"),
       (AXPY_WRAPPER,
        "    if x.shape != y.shape:\n"
        "        raise ValueError(f\"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}\")\n"
        "    if not (x.is_contiguous() and y.is_contiguous()):\n"
        "        x, y = x.contiguous(), y.contiguous()\n"
        "    out = torch.empty_like(x)\n"
        "    n = out.numel()\n"
        "    axpy_kernel[lambda meta: (triton.cdiv(n, meta[\"BLOCK_SIZE\"]),)](x, y, out, alpha, n)\n"
        "    return out\n")),
    _r("llm_axpy_math_and_dtype_table", AXPY,
       ("import torch\n", "import math\nfrom typing import Dict\n\nimport torch\n"),
       ("\n\ndef axpy(", "\n\n# widest block per element size that keeps each program's loads at 16 KiB\n"
        "_BLOCK_BY_ITEMSIZE: Dict[int, int] = {2: 8192, 4: 4096, 8: 2048}\n\n\ndef axpy("),
       (AXPY_WRAPPER,
        "    out = torch.empty_like(x)\n"
        "    n = out.numel()\n"
        "    block = _BLOCK_BY_ITEMSIZE.get(x.element_size(), 1024)\n"
        "    block = min(block, triton.next_power_of_2(max(n, 1)))\n"
        "    warps = max(1, min(8, 2 ** int(math.log2(max(block // 512, 1)))))\n"
        "    axpy_kernel[(triton.cdiv(n, block),)](x, y, out, alpha, n, BLOCK_SIZE=block, num_warps=warps)\n"
        "    return out\n")),
    _r("llm_matmul_even_k_heuristic", MATMUL,
       ("@triton.jit\ndef matmul_kernel",
        "@triton.heuristics({\"EVEN_K\": lambda args: args[\"K\"] % args[\"BLOCK_K\"] == 0})\n@triton.jit\ndef matmul_kernel"),
       ("    GROUP_M: tl.constexpr,\n):", "    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,\n):"),
       (MATMUL_LOOP,
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
        "    for k in range(0, tl.cdiv(K, BLOCK_K)):\n"
        "        if EVEN_K:  # every K tile is full: only the M and N edges need masks\n"
        "            a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)\n"
        "            b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)\n"
        "        else:\n"
        "            k_mask = offs_k < K - k * BLOCK_K\n"
        "            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)\n"
        "            b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)\n"
        "        acc = tl.dot(a, b, acc)\n"
        "        a_ptrs += BLOCK_K * stride_ak\n"
        "        b_ptrs += BLOCK_K * stride_bk\n")),
    _r("llm_matmul_grouped_pid_helper_and_pipelining", MATMUL,
       ("@triton.jit\ndef matmul_kernel",
        "@triton.jit\ndef _tile_coords(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):\n"
        "    \"\"\"Grouped ordering: GROUP_M row tiles share each column tile while it is in L2.\"\"\"\n"
        "    num_pid_m = tl.cdiv(M, BLOCK_M)\n"
        "    num_pid_n = tl.cdiv(N, BLOCK_N)\n"
        "    width = GROUP_M * num_pid_n\n"
        "    first_m = (pid // width) * GROUP_M\n"
        "    rows = min(num_pid_m - first_m, GROUP_M)\n"
        "    return first_m + (pid % width) % rows, (pid % width) // rows\n\n\n"
        "@triton.jit\ndef matmul_kernel"),
       ("    num_pid_m = tl.cdiv(M, BLOCK_M)\n    num_pid_n = tl.cdiv(N, BLOCK_N)\n"
        "    num_pid_in_group = GROUP_M * num_pid_n\n    group_id = pid // num_pid_in_group\n"
        "    first_pid_m = group_id * GROUP_M\n    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)\n"
        "    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)\n"
        "    pid_n = (pid % num_pid_in_group) // group_size_m\n",
        "    pid_m, pid_n = _tile_coords(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)\n"),
       ("    for k in range(0, tl.cdiv(K, BLOCK_K)):", "    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=3):"),
       ("BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=1,", "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4,")),
    _r("llm_matmul_autotune_prune", MATMUL,
       ("@triton.jit\ndef matmul_kernel",
        "def _prune(configs, named_args, **kwargs):\n"
        "    \"\"\"Drop tiles larger than the problem.\"\"\"\n"
        "    m, n = named_args[\"M\"], named_args[\"N\"]\n"
        "    kept = [c for c in configs if c.kwargs[\"BLOCK_M\"] <= max(m, 16) and c.kwargs[\"BLOCK_N\"] <= max(n, 16)]\n"
        "    return kept or configs[:1]\n\n\n"
        "@triton.autotune(\n"
        "    configs=[\n"
        "        triton.Config({\"BLOCK_M\": 64, \"BLOCK_N\": 64, \"BLOCK_K\": 32, \"GROUP_M\": 8}, num_warps=4, num_stages=3),\n"
        "        triton.Config({\"BLOCK_M\": 128, \"BLOCK_N\": 64, \"BLOCK_K\": 32, \"GROUP_M\": 8}, num_warps=4, num_stages=4),\n"
        "        triton.Config({\"BLOCK_M\": 32, \"BLOCK_N\": 32, \"BLOCK_K\": 32, \"GROUP_M\": 4}, num_warps=2),\n"
        "    ],\n"
        "    key=[\"M\", \"N\", \"K\"],\n"
        "    prune_configs_by={\"early_config_prune\": _prune},\n"
        ")\n"
        "@triton.jit\ndef matmul_kernel"),
       ("        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=1,\n", "")),
    _r("llm_softmax_exp2_multirow", SOFTMAX,
       ("def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):\n"
        + SOFTMAX_BODY,
        "def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr,\n"
        "                   ROWS: tl.constexpr):\n"
        "    LOG2E: tl.constexpr = 1.4426950408889634\n"
        "    cols = tl.arange(0, BLOCK_SIZE)\n"
        "    mask = cols < n_cols\n"
        "    for r in tl.static_range(ROWS):\n"
        "        row = tl.program_id(0) * ROWS + r\n"
        "        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float(\"inf\"))\n"
        "        z = (x - tl.max(x, axis=0)) * LOG2E\n"
        "        num = tl.exp2(z)\n"
        "        tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)\n"),
       ("    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=1)\n",
        "    rows_per_program = 2 if n_rows % 2 == 0 else 1\n"
        "    grid = (n_rows // rows_per_program,)\n"
        "    softmax_kernel[grid](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE,\n"
        "                         ROWS=rows_per_program, num_warps=4 if BLOCK_SIZE >= 1024 else 2)\n")),
    _r("llm_softmax_libdevice_and_heuristics", SOFTMAX,
       ("import triton.language as tl\n", "import triton.language as tl\nfrom triton.language.extra import libdevice\n"),
       ("@triton.jit\ndef softmax_kernel",
        "@triton.heuristics({\"NUM_WARPS\": lambda args: 8 if args[\"BLOCK_SIZE\"] >= 2048 else 4})\n"
        "@triton.jit\ndef softmax_kernel"),
       ("def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):\n",
        "def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr,\n"
        "                   NUM_WARPS: tl.constexpr):\n"),
       ("    num = tl.exp(x)\n", "    num = libdevice.exp(x)\n")),
    _r("llm_layernorm_rsqrt_fma_pipelined", LAYERNORM,
       ("    # mean\n", "    # mean (the block loop is software pipelined)\n"),
       ("    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)\n    for off in range(0, n_cols, BLOCK_SIZE):",
        "    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)\n    for off in tl.range(0, n_cols, BLOCK_SIZE, num_stages=2):"),
       ("    rstd = 1.0 / tl.sqrt(var + eps)\n", "    rstd = tl.rsqrt(var + eps)\n"),
       ("        y = (a - mean) * rstd * w + b\n", "        y = tl.fma((a - mean) * rstd, w, b)\n"),
       ("    layernorm_kernel[(n_rows,)](x, y, weight, bias, mean, rstd, x.stride(0), n_cols, eps, BLOCK_SIZE=256)\n",
        "    block = min(1024, triton.next_power_of_2(n_cols))\n"
        "    warps = 8 if block >= 1024 else 4\n"
        "    layernorm_kernel[(n_rows,)](x, y, weight, bias, mean, rstd, x.stride(0), n_cols, eps,\n"
        "                                BLOCK_SIZE=block, num_warps=warps)\n")),
    _r("llm_row_sum_two_accumulators", ROW_SUM,
       (ROW_SUM_LOOP,
        "    acc0 = tl.zeros([BLOCK_SIZE], dtype=tl.float32)\n"
        "    acc1 = tl.zeros([BLOCK_SIZE], dtype=tl.float32)\n"
        "    base = x_ptr + row.to(tl.int64) * row_stride\n"
        "    for off in tl.range(0, n_cols, 2 * BLOCK_SIZE):\n"
        "        cols0 = off + tl.arange(0, BLOCK_SIZE)\n"
        "        cols1 = cols0 + BLOCK_SIZE\n"
        "        acc0 += tl.load(base + cols0, mask=cols0 < n_cols, other=0.0)\n"
        "        acc1 += tl.load(base + cols1, mask=cols1 < n_cols, other=0.0)\n"
        "    acc = acc0 + acc1\n"),
       ("    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)\n",
        "    out = torch.zeros(n_rows, device=x.device, dtype=torch.float32)\n"),
       ("BLOCK_SIZE=512)", "BLOCK_SIZE=256, num_warps=4)")),
    _r("llm_transpose_tiles_and_hints", TRANSPOSE,
       ("    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)\n",
        "    offs_m = tl.max_contiguous(tl.multiple_of(offs_m, BLOCK_M), BLOCK_M)\n"
        "    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)\n"
        "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)\n"),
       ("    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)\n",
        "    tile = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)\n"
        "    x = tl.trans(tl.trans(tile))\n"),
       ("    grid = lambda meta: (triton.cdiv(M, meta[\"BLOCK_M\"]), triton.cdiv(N, meta[\"BLOCK_N\"]))\n"
        "    transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=16, BLOCK_N=16)\n",
        "    block_m, block_n = 32, 64\n"
        "    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))\n"
        "    transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)\n")),
    _r("llm_fused_add_rmsnorm_int64_rows_and_warps", ADD_RMSNORM,
       ("    rstd = 1.0 / tl.sqrt(tl.sum(r * r, axis=0) / n_cols + eps)\n",
        "    mean_sq = tl.sum(r * r, axis=0) / n_cols\n    rstd = tl.rsqrt(mean_sq + eps)\n"),
       ("    n_rows, n_cols = x.shape\n    fused_add_rmsnorm_kernel[(n_rows,)](x, residual, weight, x.stride(0), n_cols, eps,\n"
        "                                        BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=1)\n",
        "    n_rows, n_cols = x.shape\n"
        "    assert residual.shape == x.shape and residual.stride(0) == x.stride(0), \"x and residual must share a layout\"\n"
        "    block = triton.next_power_of_2(n_cols)\n"
        "    warps = min(max(block // 256, 1), 16)\n"
        "    with torch.cuda.device(x.device) if x.is_cuda else torch.no_grad():\n"
        "        fused_add_rmsnorm_kernel[(n_rows,)](x, residual, weight, x.stride(0), n_cols, eps,\n"
        "                                            BLOCK_SIZE=block, num_warps=warps)\n")),
    _r("llm_online_softmax_wrapper_and_cache_hints", SOFTMAX_OUT,
       ("        x = tl.load(in_ptr + cols, mask=mask, other=float(\"-inf\")).to(tl.float32)\n"
        "        tl.store(out_ptr + cols, (tl.exp(x - m_row) / z_row).to(out_ptr.dtype.element_ty), mask=mask)\n",
        "        x = tl.load(in_ptr + cols, mask=mask, other=float(\"-inf\"), cache_modifier=\".cg\").to(tl.float32)\n"
        "        inv_z = 1.0 / z_row\n"
        "        tl.store(out_ptr + cols, (tl.exp(x - m_row) * inv_z).to(out_ptr.dtype.element_ty), mask=mask)\n"),
       ("    if out is None:\n        out = torch.empty_like(x)\n"
        "    online_softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=128, num_warps=1)\n",
        "    if out is None:\n        out = torch.empty_like(x)\n"
        "    elif out.shape != x.shape:\n        raise ValueError(f\"out has shape {tuple(out.shape)}, expected {tuple(x.shape)}\")\n"
        "    block = 1024 if n_cols >= 4096 else 256\n"
        "    config = {\"BLOCK_SIZE\": block, \"num_warps\": 4 if block >= 1024 else 2}\n"
        "    online_softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, **config)\n")),
    _r("llm_axpy_grid_function_and_zeros", AXPY,
       ("\n\ndef axpy(", "\n\ndef _grid(n: int, block: int) -> tuple[int, ...]:\n"
        "    programs = triton.cdiv(n, block)\n"
        "    assert programs < 2**31, f\"too many programs: {programs}\"\n"
        "    return (programs,)\n\n\ndef axpy("),
       (AXPY_WRAPPER,
        "    out = torch.zeros_like(x)  # zero-filled: a masked-off lane never leaves garbage\n"
        "    n = out.numel()\n"
        "    sizes = [256, 512, 1024]\n"
        "    block = next((s for s in sizes if s >= n // 64), sizes[-1])\n"
        "    axpy_kernel[_grid(n, block)](x, y, out, alpha, n, BLOCK_SIZE=block)\n"
        "    return out\n")),
    _r("llm_matmul_wrapper_validation_and_empty_strided", MATMUL,
       ("    M, K = a.shape\n    K2, N = b.shape\n    assert K == K2, \"inner dimensions differ\"\n"
        "    c = torch.empty((M, N), device=a.device, dtype=torch.float16)\n",
        "    if a.dim() != 2 or b.dim() != 2:\n"
        "        raise ValueError(\"matmul expects 2-D operands\")\n"
        "    (M, K), (K2, N) = a.shape, b.shape\n"
        "    if K != K2:\n"
        "        raise ValueError(f\"inner dimensions differ: {K} vs {K2}\")\n"
        "    c = torch.empty_strided((M, N), (N, 1), device=a.device, dtype=torch.float16)\n"),
       ("BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=1,", "BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_stages=3,")),
)
