"""WRONG variants, one file per kernel module: VARIANTS = [wrong(...), ...]."""
