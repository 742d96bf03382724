"""WRONG variants of kernels/rope_inplace.py (in place: the harnesses return nothing)."""
from redteam.corpus import edit, wrong

LAUNCH = ("    rope_kernel[grid](x, cos, sin, x.stride(0), x.stride(1), cos.stride(0), n_heads,\n"
          "                      HALF=head_dim // 2, BLOCK_H=BLOCK_H)\n")
GRID = "    grid = (seq, triton.cdiv(n_heads, BLOCK_H))\n"
STORE2 = "    tl.store(base + HALF, x2 * cos + x1 * sin, mask=mask)\n"

VARIANTS = [
    wrong("writes_contiguous_copy", "inplace",
          "rotates x.contiguous(): the same tensor when x is contiguous (bench), a temporary copy for "
          "test_rope's strided view, so the caller's q is never updated",
          edit(GRID, "    x = x.contiguous()\n" + GRID)),
    wrong("writes_new_buffer", "inplace",
          "clones x and rotates the clone: the caller's tensor is left unchanged",
          edit(GRID, "    x = x.clone()\n" + GRID)),
    wrong("second_half_not_stored", "partial-write", "stores only the first half of each head",
          edit(STORE2, "")),
    wrong("wrong_rotation_sign", "wrong-math", "rotates the other way (sin sign flipped in the second half)",
          edit(STORE2, "    tl.store(base + HALF, x2 * cos - x1 * sin, mask=mask)\n")),
    wrong("heads_tail_dropped", "odd-size",
          "grid over n_heads // BLOCK_H: right for 8 heads (bench), no head rotated for test_rope's 3",
          edit(GRID, "    grid = (seq, n_heads // BLOCK_H)\n")),
    wrong("assumes_packed_seq_stride", "strides",
          "uses n_heads * head_dim as the sequence stride: right on a packed q, wrong on a view into qkv",
          edit(LAUNCH, "    rope_kernel[grid](x, cos, sin, n_heads * head_dim, x.stride(1), cos.stride(0), n_heads,\n"
                       "                      HALF=head_dim // 2, BLOCK_H=BLOCK_H)\n")),
    wrong("torch_rotation_dummy_launch", "torch-fallback",
          "rotates with torch (x.copy_) and launches the kernel on a scratch copy of one position",
          edit(GRID + LAUNCH,
               "    half = head_dim // 2\n"
               "    x1, x2 = x[..., :half].clone(), x[..., half:].clone()\n"
               "    c, s = cos[:, None, :], sin[:, None, :]\n"
               "    x.copy_(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1))\n"
               "    scratch = x[:1].clone()\n"
               "    rope_kernel[(1, 1)](scratch, cos, sin, scratch.stride(0), scratch.stride(1), cos.stride(0), 1,\n"
               "                        HALF=half, BLOCK_H=BLOCK_H)\n")),
    wrong("negates_sin_in_place", "input-mutation",
          "flips sin in place to use a kernel with the signs swapped and does not restore it: right rotation, "
          "the caller's sin table is corrupted",
          edit("    tl.store(base, x1 * cos - x2 * sin, mask=mask)\n", "    tl.store(base, x1 * cos + x2 * sin, mask=mask)\n"),
          edit(STORE2, "    tl.store(base + HALF, x2 * cos - x1 * sin, mask=mask)\n"),
          edit(GRID, "    sin.neg_()\n" + GRID)),
    wrong("rotates_once_per_shape", "stateful",
          "remembers the shapes it has rotated and skips the launch for a shape seen before (a 'cache' of the "
          "embedding); after the first call per shape q is left unrotated",
          edit("def apply_rotary_(x, cos, sin):\n", "_SEEN = set()\n\n\ndef apply_rotary_(x, cos, sin):\n"),
          edit(GRID, "    if tuple(x.shape) in _SEEN:\n        x = x.clone()\n    _SEEN.add(tuple(x.shape))\n" + GRID)),
]
