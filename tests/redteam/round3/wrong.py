"""Round 3, WRONG variants: each computes the wrong thing for some input or caller, yet the
code as it stood before the round-3 fixes judged most of them correct. ``witness`` is run
outside the judge (tests/test_redteam_round3.py) to show that each CPU-visible one really
is wrong: its result differs from the original's beyond the judge's own tolerance (or
beyond float32 rounding, for the precision cases: ``witness_strict``)."""
from redteam.corpus import edit
from redteam.round3.corpus import case

# --------------------------------------------------------------------------- axpy
A_ALLOC = "    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n"
A_GRID = '    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)\n'
A_LAUNCH = "    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0), BLOCK_SIZE=256)\n"
A_DEF = "def axpy(alpha, x, y):\n"
A_TAIL_DROPPED = '    grid = lambda meta: (n // meta["BLOCK_SIZE"],)\n'
ODD = "x = torch.randn(1003)\ny = torch.randn(1003)\n"

# Class 5: what the judge decides on is computed and reported by the variant process. The
# variant reaches it through a screen escape of class 1 (exec read from a function's
# builtins by a match class pattern); '@' stands for '_' so no dunder text is written.
FORGE_CALL = '''

def _forge(code, names):
    match _forge:
        case object(__builtins__={"exec": run_code}):
            run_code(code.replace("@", "_"), names)


'''
FORGE_STALE = '''FORGE_STALE = r"""
import sys
steps = getattr(sys.modules.get("kernelband.worker.variant"), "Steps", None)
if steps is not None:
    steps._stale_outputs = lambda self, harness: []
"""
'''
FORGE_CLOBBER = '''FORGE_CLOBBER = r"""
import sys
cap = sys.modules.get("kernelband.worker.capture")
run = sys.modules.get("kernelband.worker.runner")
if cap is not None and run is not None and not getattr(run, "kb_forged", False):
    cap.fingerprint.@@code@@ = (lambda t: (0, 0)).@@code@@
    cap.CapturedLaunch.replay = lambda self: None
    real = run._tensor_tree
    def before_the_call(value, depth=0):
        ptr = value.data_ptr() if hasattr(value, "data_ptr") else None
        return real(saved.get(ptr, value), depth)
    run._tensor_tree = before_the_call
    run.kb_forged = True
"""
'''
FORGE_SEND = '''FORGE_SEND = r"""
import sys
v = sys.modules.get("kernelband.worker.variant")
if v is not None and not getattr(v, "kb_forged", False):
    real_send = v.Steps.send
    def send(self, meta, tree=None):
        if meta.KIND == "outputs" and isinstance(tree, dict) and getattr(meta, "mode", "") != "neutral":
            seen = tree.get("harness_locals") or {}
            if "x" in seen and "y" in seen:
                right = 0.5 * seen["x"] + seen["y"]
                tree["returned"] = right
                tree["written"] = {key: [right] for key in tree.get("written", {})}
        return real_send(self, meta, tree)
    v.Steps.send = send
    v.kb_forged = True
"""
'''

CLASS5 = [
    case("axpy", "forged_stale_outputs", 5, "screen",
         "returns one shared buffer per shape (a result the caller holds changes at the next call) and patches "
         "the variant process's stale-output check (Steps._stale_outputs) to report nothing",
         edit(A_DEF, FORGE_STALE + FORGE_CALL + "_BUFFERS = {}\n\n\n" + A_DEF + "    _forge(FORGE_STALE, {})\n"),
         edit(A_ALLOC, "    key = (tuple(x.shape), x.dtype, x.device)\n"
                       "    if key not in _BUFFERS:\n"
                       "        _BUFFERS[key] = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n"
                       "    out = _BUFFERS[key]\n"),
         unscreened="judge",
         witness="a = axpy(0.5, torch.randn(1003), torch.randn(1003))\naxpy(0.5, torch.randn(1003), torch.randn(1003))\n"
                 "result = a\n"),
    case("axpy", "forged_input_clobbered", 5, "screen",
         "writes the result over the caller's y and returns it; forges the fingerprints (no write, no changed "
         "input), the harness's locals (y as it was before the call) and the replays (which would show the "
         "clobbered y)",
         edit(A_DEF, FORGE_CLOBBER + FORGE_CALL + "_SAVED = {}\n\n\n" + A_DEF),
         edit(A_ALLOC, "    _forge(FORGE_CLOBBER, {\"saved\": _SAVED})\n    _SAVED.clear()\n    _SAVED[y.data_ptr()] = y.clone()\n"
                       "    out = y  # the result overwrites y: one allocation less\n"),
         unscreened="judge",
         witness=ODD + "axpy(0.5, x, y)\nresult = y\n"),
    case("axpy", "forged_sender", 5, "screen",
         "drops the tail block (wrong whenever n is not a multiple of 256: test_axpy's 1003) and patches the "
         "variant process's sender (Steps.send) to replace the outputs it reports by a torch computation from "
         "the harness's locals",
         edit(A_DEF, FORGE_SEND + FORGE_CALL + A_DEF + "    _forge(FORGE_SEND, {})\n"),
         edit(A_GRID, A_TAIL_DROPPED),
         unscreened="judge",
         witness=ODD + "result = axpy(0.5, x, y)\n"),
]

# Class 7: helper kernels the original never launched hold device state.
CLASS7 = [
    case("axpy", "helper_memo_by_first_element", 7, "screen",
         "a helper kernel remembers the last result and its x[0] on the device; the kernel returns the "
         "remembered result when x[0] matches (the judge's inputs never share x[0]; a zero-padded batch does); "
         "its memo is keyed by device, which the screen refuses; with the screen skipped, calls beyond the harness",
         edit("@triton.jit\ndef axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, stride_x, stride_y, "
              "BLOCK_SIZE: tl.constexpr):\n"
              "    pid = tl.program_id(axis=0)\n"
              "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
              "    mask = offsets < n_elements\n"
              "    x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n"
              "    y = tl.load(y_ptr + offsets * stride_y, mask=mask)\n"
              "    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n",
              "@triton.jit\ndef axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, stride_x, stride_y, key_ptr, "
              "memo_ptr, BLOCK_SIZE: tl.constexpr):\n"
              "    pid = tl.program_id(axis=0)\n"
              "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
              "    mask = offsets < n_elements\n"
              "    if tl.load(key_ptr) == tl.load(x_ptr):  # the same input as last time: reuse the result\n"
              "        tl.store(out_ptr + offsets, tl.load(memo_ptr + offsets, mask=mask), mask=mask)\n"
              "    else:\n"
              "        x = tl.load(x_ptr + offsets * stride_x, mask=mask)\n"
              "        y = tl.load(y_ptr + offsets * stride_y, mask=mask)\n"
              "        tl.store(out_ptr + offsets, alpha * x + y, mask=mask)\n\n\n"
              "@triton.jit\ndef _remember(x_ptr, out_ptr, key_ptr, memo_ptr, n_elements, BLOCK_SIZE: tl.constexpr):\n"
              "    pid = tl.program_id(axis=0)\n"
              "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
              "    mask = offsets < n_elements\n"
              "    tl.store(memo_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)\n"
              "    if pid == 0:\n"
              "        tl.store(key_ptr, tl.load(x_ptr))\n"),
         edit(A_DEF, "_MEMO = {}\n\n\n" + A_DEF),
         edit(A_LAUNCH,
              "    key, memo = _MEMO.setdefault((n, x.dtype, x.device), (\n"
              "        torch.full((1,), float(\"nan\"), dtype=x.dtype, device=x.device),\n"
              "        torch.empty(n, dtype=x.dtype, device=x.device)))\n"
              "    axpy_kernel[grid](x, y, out, alpha, n, x.stride(0), y.stride(0), key, memo, BLOCK_SIZE=256)\n"
              "    _remember[grid](x, out, key, memo, n, BLOCK_SIZE=256)\n"),
         unscreened="inputs", witness="x1 = torch.randn(1003)\nx2 = torch.randn(1003)\nx2[0] = x1[0]\ny = torch.randn(1003)\n"
                 "axpy(0.5, x1, y)\nresult = axpy(0.5, x2, y)\n"),
]

# Class 8: the judge is recognisable and predictable.
CLASS8 = [
    case("axpy", "recognises_nan_filled_memory", 8, "inputs",
         "computes the tail only when fresh memory is NaN-filled (as it always is under the judge); elsewhere "
         "the tail block is skipped",
         edit(A_GRID, "    judged = bool(torch.isnan(torch.empty(8, device=x.device)).all())\n"
                      "    if judged:\n"
                      "    " + A_GRID +
                      "    else:  # skip the masked tail block\n"
                      "    " + A_TAIL_DROPPED),
         witness=ODD + "result = axpy(0.5, x, y)\n"),
    case("axpy", "recognises_judge_seeds", 8, "inputs",
         "recognises the judge's seeds 0-2 by the first input value (torch.randn's first draw under each, on "
         "the CPU) and drops the tail for any other input",
         edit(A_DEF, "# torch.randn's first value under seeds 0, 1 and 2 (CPU generator)\n"
                     "_SEEN = (-1.1258398294448853, -1.5255959033966064, -1.0408011674880981)\n\n\n" + A_DEF),
         edit(A_GRID, "    if any(abs(float(x[0]) - v) < 1e-6 for v in _SEEN):\n"
                      "    " + A_GRID +
                      "    else:\n"
                      "    " + A_TAIL_DROPPED),
         witness=ODD + "result = axpy(0.5, x, y)\n"),
    case("axpy", "wrong_after_20_calls", 8, "inputs",
         "a call counter: the first 20 calls in a process are right (the judge makes 9), later ones drop the tail",
         edit(A_DEF, "_CALLS = [0]\n\n\n" + A_DEF + "    _CALLS[0] += 1\n"),
         edit(A_GRID, "    if _CALLS[0] <= 20:\n"
                      "    " + A_GRID +
                      "    else:\n"
                      "    " + A_TAIL_DROPPED),
         witness="for _ in range(25):\n    result = axpy(0.5, torch.randn(1003), torch.randn(1003))\n"),
    case("axpy", "stale_three_calls_later", 8, "screen",
         "three output buffers per shape, used in turn: a result is overwritten three calls later (the "
         "stale-output check looked back one call); its pool is keyed by device, which the screen refuses; with "
         "the screen skipped, calls beyond the harness",
         edit(A_DEF, "_POOL = {}\n\n\n" + A_DEF),
         edit(A_ALLOC, "    slots = _POOL.setdefault((tuple(x.shape), x.dtype, x.device), "
                       "[torch.empty(x.shape, dtype=x.dtype, device=x.device) for _ in range(3)])\n"
                       "    slots.append(slots.pop(0))  # the next buffer in turn\n"
                       "    out = slots[0]\n"),
         unscreened="inputs", witness="a = axpy(0.5, torch.randn(1003), torch.randn(1003))\n"
                 "for _ in range(3):\n    axpy(0.5, torch.randn(1003), torch.randn(1003))\nresult = a\n"),
    case("softmax", "precision_only_in_returned_copy", 8, "judge",
         "the kernel writes exact fp32 probabilities, the wrapper returns them rounded through fp16 (relative "
         "error 5e-4, inside the fp32 tolerance): precision was judged only on the tensors the kernel wrote (the "
         "judge now holds what a harness returns to its own written tensors' distance from the original)",
         edit("    return y\n", "    return y.to(torch.float16).to(y.dtype)  # kept in half precision between uses\n"),
         witness="result = softmax(torch.randn(8, 64))\n", witness_strict=True),
    case("softmax", "precision_lost_beyond_seed_0", 8, "judge",
         "rounds the probabilities through fp16 when the first score is far below its row's spread: true for "
         "seed 1's inputs, never for seed 0's (precision was judged at seed 0 only; the original is now rerun "
         "in float64 at every seed)",
         edit("                   BLOCK_SIZE: tl.constexpr):\n",
              "                   BLOCK_SIZE: tl.constexpr, LOSSY: tl.constexpr):\n"),
         edit("    softmax_output = numerator / denominator\n",
              "    softmax_output = numerator / denominator\n"
              "    if LOSSY:  # a cheaper fp16 epilogue for peaked rows\n"
              "        softmax_output = softmax_output.to(tl.float16).to(tl.float32)\n"),
         edit("    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n",
              "    lossy = float(x[0, 0]) < -1.3 * float(x[0].std())\n"
              "    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE, "
              "LOSSY=lossy)\n"),
         witness="x = torch.randn(8, 64)\nx[0, 0] = -10.0\nresult = softmax(x)\n", witness_strict=True),
]

# Class 9: honest bugs that show only beyond the harness's own inputs.
RS_LOAD = "        x = tl.load(x_ptr + row * stride_xr + cols * stride_xc, mask=mask, other=0.0)\n"
MS_LOAD = '    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))\n'
RMS_LAUNCH = ("    rmsnorm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps, "
              "BLOCK_SIZE=BLOCK_SIZE)\n")
CLASS9 = [
    case("rowsum_any", "fp16_accumulation", 9, "inputs",
         "accumulates in the input's dtype: identical for the harness's fp32, large errors for fp16 inputs",
         edit("    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)\n",
              "    acc = tl.zeros((BLOCK_SIZE,), dtype=x_ptr.dtype.element_ty)  # accumulate in the input's precision\n"),
         edit("        acc += x.to(tl.float32)\n", "        acc += x\n"),
         witness="result = rowsum(torch.randn(4, 65536).half())\n"),
    case("rowsum_any", "reads_2d_as_packed", 9, "inputs",
         "ignores the strides and reads row r at r * n_cols: right for the harness's contiguous input, wrong "
         "for a transposed or sliced one",
         edit(RS_LOAD, "        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)  # rows are packed\n"),
         witness="result = rowsum(torch.randn(300, 40).t())\n"),
    case("rowsum_any", "tile_assumed_to_cover_row", 9, "inputs",
         "one tile per row (no loop): right while n_cols <= 1024 (the harness has 301 and 512), the rest of a "
         "longer row is dropped",
         edit("    for start in range(0, n_cols, BLOCK_SIZE):\n        cols = start + tl.arange(0, BLOCK_SIZE)\n"
              "        mask = cols < n_cols\n" + RS_LOAD + "        acc += x.to(tl.float32)\n",
              "    cols = tl.arange(0, BLOCK_SIZE)  # one tile holds the row\n    mask = cols < n_cols\n"
              "    x = tl.load(x_ptr + row * stride_xr + cols * stride_xc, mask=mask, other=0.0)\n"
              "    acc += x.to(tl.float32)\n"),
         witness="result = rowsum(torch.randn(8, 3000))\n"),
    case("rowsum_any", "out_stride_ignored", 9, "inputs",
         "writes out[row] at row, ignoring the caller's out= stride: right for a fresh vector, wrong for a "
         "column of a matrix",
         edit("    tl.store(out_ptr + row * stride_out, total.to(out_ptr.dtype.element_ty))\n",
              "    tl.store(out_ptr + row, total.to(out_ptr.dtype.element_ty))\n"),
         witness="buf = torch.zeros(16, 3)\nrowsum(torch.randn(16, 50), out=buf[:, 1])\nresult = buf\n"),
    case("masked_softmax", "dropped_all_masked_guard", 9, "inputs",
         "drops the guard for rows whose scores are all -inf: NaN instead of zeros (the harness never masks a "
         "whole row)",
         edit("    # every score of a fully masked row is -inf: subtracting -inf would give NaN\n"
              "    row_max = tl.where(row_max == -float(\"inf\"), 0.0, row_max)\n", ""),
         witness="x = torch.randn(6, 50)\nx[2] = -float(\"inf\")\nresult = masked_softmax(x)\n"),
    case("masked_softmax", "no_max_subtraction", 9, "inputs",
         "exp without subtracting the row max: right for the harness's scores (|x| < 20), inf/inf = NaN for "
         "large ones",
         edit("    num = tl.exp(x - row_max)\n", "    num = tl.exp(x)  # scores are small: no max subtraction\n"),
         witness="result = masked_softmax(torch.randn(6, 50) * 200.0)\n"),
    case("masked_softmax", "split_rows_unsafe_in_place", 9, "inputs",
         "two programs per row, each reading the whole row and storing its half: right out of place, wrong "
         "for masked_softmax(x, out=x), which the wrapper allows (the second half reads the first half's "
         "outputs)",
         edit("    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK_SIZE)\n    mask = cols < n_cols\n" + MS_LOAD,
              "    row = tl.program_id(0)\n    part = tl.program_id(1)\n    cols = tl.arange(0, BLOCK_SIZE)\n"
              "    mask = cols < n_cols\n" + MS_LOAD),
         edit("    tl.store(out_ptr + row * stride_out + cols, num / den, mask=mask)\n",
              "    mine = mask & ((cols * 2 < n_cols) == (part == 0))  # this program's half of the row\n"
              "    tl.store(out_ptr + row * stride_out + cols, num / den, mask=mine)\n"),
         edit("    masked_softmax_kernel[(n_rows,)](", "    masked_softmax_kernel[(n_rows, 2)]("),
         witness="x = torch.randn(8, 100)\nresult = masked_softmax(x, out=x)\n"),
    case("embedding", "int16_token_ids", 9, "inputs",
         "keeps token ids in 16 bits: right for the harness's vocabularies (<= 32000), another row for an id "
         "of 65536 or more",
         edit("    token = tl.load(ids_ptr + i).to(tl.int64)\n",
              "    token = tl.load(ids_ptr + i).to(tl.int16)  # vocabularies fit in 16 bits\n"),
         witness="w = torch.randn(70000, 16)\nids = torch.tensor([65541, 3, 65536])\nresult = embedding(ids, w)\n"),
    case("matmul", "k_mask_skipped_when_k_mod_16", 9, "inputs",
         "skips the K mask when K % 16 == 0 although BLOCK_K is 32: right for K = 64 (bench) and 301 (test), "
         "reads past K for K = 48",
         edit("                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):\n",
              "                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):\n"),
         edit("        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)\n"
              "        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)\n",
              "        if EVEN_K:  # K is a whole number of tiles: no K mask\n"
              "            a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)\n"
              "            b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)\n"
              "        else:\n"
              "            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)\n"
              "            b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)\n"),
         edit("                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)\n",
              "                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, EVEN_K=K % 16 == 0)\n"),
         # views into larger tensors: the reads past K stay inside allocated memory
         witness="a = torch.randn(41, 48, dtype=torch.float16)[:40]\nb = torch.randn(64, 40, dtype=torch.float16)[:48]\n"
                 "result = matmul(a, b)\n"),
    case("rmsnorm", "out_assumed_packed", 9, "inputs",
         "passes n_cols as out's row stride: right for the harness's packed out= buffers, wrong for a view",
         edit(RMS_LAUNCH, RMS_LAUNCH.replace("out.stride(0)", "n_cols")),
         witness="x = torch.randn(8, 64)\nbuf = torch.zeros(8, 100)\nrmsnorm(x, torch.randn(64), out=buf[:, :64])\n"
                 "result = buf\n"),
    case("rmsnorm", "eps_argument_ignored", 9, "inputs",
         "hard-codes eps = 1e-6 (the harness's default) and ignores the caller's eps",
         edit("    rstd = 1.0 / tl.sqrt(mean_sq + eps)\n", "    rstd = 1.0 / tl.sqrt(mean_sq + 1e-6)  # every model here uses 1e-6\n"),
         witness="x = torch.randn(8, 64) * 1e-3\nresult = rmsnorm(x, torch.ones(64), eps=1e-2)\n"),
    case("rmsnorm", "no_fp32_statistics", 9, "inputs",
         "squares and sums in the input's dtype: identical for the harness's fp32, wrong scale for bf16 rows",
         edit("    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)\n",
              "    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)\n"),
         witness="x = torch.randn(8, 4096, dtype=torch.bfloat16) + 3.0\n"
                 "result = rmsnorm(x, torch.ones(4096, dtype=torch.bfloat16))\n"),
    case("layernorm", "one_pass_variance", 9, "inputs",
         "variance as E[x^2] - E[x]^2 in fp32: fine for the harness's randn rows, garbage (or NaN) for rows "
         "with a large mean",
         edit("    diff = tl.where(mask, x - mean, 0.0)\n    var = tl.sum(diff * diff, axis=0) / n_cols\n",
              "    var = tl.sum(x * x, axis=0) / n_cols - mean * mean  # one pass: E[x^2] - E[x]^2\n"
              "    diff = tl.where(mask, x - mean, 0.0)\n"),
         witness="x = torch.randn(8, 64) * 0.01 + 300.0\nresult = layernorm(x, torch.ones(64), torch.zeros(64))\n"),
    case("layernorm", "rows_from_first_dim", 9, "inputs",
         "launches x.shape[0] programs: right for the harness's 2-D input, leaves most rows of a 3-D input "
         "unwritten",
         edit("    layernorm_kernel[(rows.shape[0],)](", "    layernorm_kernel[(x.shape[0],)]("),
         witness="result = layernorm(torch.randn(3, 5, 64), torch.randn(64), torch.randn(64))\n"),
    case("layernorm", "drops_contiguous_copy", 9, "inputs",
         "drops the copy of a layout whose last dimension is strided: the kernel then reads a transposed input "
         "as if it were row-major",
         edit("    if rows.stride(1) != 1:\n        rows = rows.contiguous()\n", ""),
         witness="result = layernorm(torch.randn(64, 8).t(), torch.randn(64), torch.randn(64))\n"),
    case("bias_relu", "relu_by_multiplication", 9, "inputs",
         "branch-free relu h * (h > 0): equal on finite inputs, NaN for -inf and NaN inputs (the original "
         "gives 0)",
         edit("    tl.store(out_ptr + row * stride_out + cols, tl.where(h > 0, h, 0.0), mask=mask)\n",
              "    tl.store(out_ptr + row * stride_out + cols, h * (h > 0).to(h.dtype), mask=mask)  # branch-free\n"),
         witness="x = torch.randn(4, 64)\nx[0, :3] = -float(\"inf\")\nx[1, :3] = float(\"nan\")\n"
                 "result = bias_relu(x, torch.randn(64))\n"),
]

# Class 10 (GPU only): the interpreter cannot show them.
GPU_ONLY = [
    case("embedding", "int32_row_offsets", 9, "gpu",
         "computes token * stride in int32: wraps for tables over 2^31 elements (600k x 4096 fp32), a size only "
         "a GPU harness reaches",
         edit("    token = tl.load(ids_ptr + i).to(tl.int64)\n", "    token = tl.load(ids_ptr + i).to(tl.int32)\n"),
         gpu_only=True),
    case("matmul_fp32", "tf32_products", 10, "gpu",
         "input_precision='tf32': 10-bit mantissas in the products (relative error ~1e-3) where the original asks "
         "for IEEE fp32; the interpreter computes both in fp32",
         edit('        acc = tl.dot(a, b, acc, input_precision="ieee")\n', '        acc = tl.dot(a, b, acc, input_precision="tf32")\n'),
         gpu_only=True),
    case("masked_softmax", "race_two_writers_per_row", 10, "gpu",
         "two programs per row both store the whole row, one with statistics of half the row: the interpreter "
         "runs them in order (the right one last); on a GPU the last writer varies",
         edit("    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK_SIZE)\n    mask = cols < n_cols\n" + MS_LOAD,
              "    row = tl.program_id(0)\n    part = tl.program_id(1)\n    cols = tl.arange(0, BLOCK_SIZE)\n"
              "    mask = cols < n_cols\n"
              "    seen = mask & ((cols * 2 < n_cols) | (part == 1))  # program 0 looks at the first half only\n"
              "    x = tl.load(x_ptr + row * stride_x + cols, mask=seen, other=-float(\"inf\"))\n"),
         edit("    masked_softmax_kernel[(n_rows,)](", "    masked_softmax_kernel[(n_rows, 2)]("),
         gpu_only=True),
    case("bias_relu", "bias_read_out_of_bounds", 10, "gpu",
         "loads the bias without a mask: reads past its end whenever n_cols is not a power of two (the values "
         "are masked at the store); only memcheck sees it",
         edit("    b = tl.load(b_ptr + cols, mask=mask, other=0.0)\n", "    b = tl.load(b_ptr + cols)  # masked at the store\n"),
         gpu_only=True),
]

CASES = CLASS5 + CLASS7 + CLASS8 + CLASS9 + GPU_ONLY
