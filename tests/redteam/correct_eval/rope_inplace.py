"""CORRECT rewrites of kernels/rope_inplace.py."""
from redteam.corpus import correct, edit

VARIANTS = [
    correct("block_h_8", "tuning", "8 heads per program (the grid is computed from BLOCK_H)",
            edit("    BLOCK_H = 4\n", "    BLOCK_H = 8\n")),
    correct("one_head_per_program_warps_1", "tuning", "BLOCK_H=1 with num_warps=1",
            edit("    BLOCK_H = 4\n", "    BLOCK_H = 1\n"),
            edit("HALF=head_dim // 2, BLOCK_H=BLOCK_H)\n", "HALF=head_dim // 2, BLOCK_H=BLOCK_H, num_warps=1)\n")),
    correct("loads_before_any_store_reordered", "arithmetic",
            "both halves computed first, then stored in the other order (fma-style expressions)",
            edit("    tl.store(base, x1 * cos - x2 * sin, mask=mask)\n"
                 "    tl.store(base + HALF, x2 * cos + x1 * sin, mask=mask)\n",
                 "    out2 = x1 * sin + x2 * cos\n"
                 "    out1 = x1 * cos + (-x2) * sin\n"
                 "    tl.store(base + HALF, out2, mask=mask)\n"
                 "    tl.store(base, out1, mask=mask)\n")),
]
