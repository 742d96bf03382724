"""The six KernelBand (v2) optimization strategies.

Each has the text given to an LLM, the hardware resource it targets (used by v2's
masked UCB: a strategy is masked where its resource is already saturated), and the
families of offline rewrites the ``rules`` generator may apply under it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    name: str
    resource: str  # "L2" | "DRAM" | "SM"
    summary: str
    prompt: str
    offline_rewrites: tuple[str, ...]  # rule families (see generators/rules.py); empty = LLM only


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "tiling",
            "SM",
            "block sizes and warps per program",
            "Re-tile the computation: choose BLOCK_* sizes (powers of two) and num_warps so each "
            "program does enough independent work to hide latency without spilling registers. Keep "
            "masks correct for sizes that are not multiples of the block.",
            ("block_size", "num_warps", "autotune", "persistent"),
        ),
        Strategy(
            "vectorization",
            "DRAM",
            "wide, aligned, contiguous memory accesses",
            "Make global loads and stores wide and contiguous: arrange offsets so each thread touches "
            "consecutive elements, and tell the compiler with tl.multiple_of / tl.max_contiguous where "
            "alignment and contiguity hold, so it emits 128-bit accesses.",
            ("hints", "rows_per_program"),
        ),
        Strategy(
            "fusion",
            "DRAM",
            "fewer passes over memory",
            "Fuse work so intermediates stay in registers or shared memory instead of round-tripping "
            "through global memory: merge adjacent elementwise steps, fold reductions into the "
            "producing loop, and avoid re-reading inputs.",
            (),
        ),
        Strategy(
            "pipeline",
            "SM",
            "software pipelining of loads",
            "Overlap memory and compute with software pipelining: set num_stages for loops over K, "
            "prefetch the next tile while computing the current one, and keep the loop body free of "
            "dependencies that stop the compiler from pipelining.",
            ("num_stages", "pipeline_loop"),
        ),
        Strategy(
            "reordering",
            "L2",
            "program and loop order for cache reuse",
            "Reorder the mapping of program ids to tiles (grouped / swizzled ordering, GROUP_M) and the "
            "loop order so that programs running together share inputs in L2.",
            ("group_m", "pid_swizzle"),
        ),
        Strategy(
            "access_layout",
            "L2",
            "cache and eviction behaviour of accesses",
            "Improve how data flows through the cache hierarchy: use cache modifiers and eviction "
            "policies (evict_first for streamed data, evict_last for reused data), and lay out "
            "accesses so reused data stays resident.",
            ("cache_modifiers", "block_ptr"),
        ),
    )
}

STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)


def get(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}") from None
