"""The registry of the rewrite families that are not one knob's value, each in its own
module under ``code/``, recognising its pattern and editing with libcst (formatting and
comments of untouched lines kept). Hints that never change results:

- ``hints`` (``code/hints.py``): tl.multiple_of / tl.max_contiguous on 1D offsets;
- ``cache_modifiers`` (``code/cache.py``): eviction policies and cache modifiers.

Code rewrites of the kernel body:

- ``pipeline_loop`` (``code/pipeline.py``): a loop over ``range(...)`` that loads
  becomes ``tl.range(..., num_stages=S)`` or ``tl.range(..., loop_unroll_factor=U)``,
  where the installed Triton's ``tl.range`` takes that keyword;
- ``pid_swizzle`` (``code/swizzle.py``): row-major tile order of a 1D-launched tl.dot
  kernel becomes grouped (GROUP_M) ordering, for L2 reuse;
- ``persistent`` (``code/persistent.py``): a 1D kernel becomes a grid-stride loop on a
  grid capped at a multiple of the SM count;
- ``rows_per_program`` (``code/rows.py``): a row-wise kernel handles R rows per program;
- ``block_ptr`` (``code/block_ptr.py``): pointer blocks of a tl.dot kernel become block
  pointers, where the installed Triton's work.

Both loop rewrites refuse kernels whose body mutates a parameter (``X += row * s``) or
carries a value across what would become iterations (``code/shapes.py``). What the
installed Triton offers is feature-detected in ``triton_features.py``. The
``autotune`` family (``code/autotune.py``) is scored apart, by rules.py.
"""

from __future__ import annotations

from typing import Callable

from .code import block_ptr, cache, hints, persistent, pipeline, rows, swizzle
from .edits import Edits
from .rewrites import Rewrites

CodeRewrite = Callable[[Rewrites], list[tuple[str, str, Edits]]]  # (key, description, edits) per variant

HINT_REWRITES: dict[str, CodeRewrite] = {"hints": hints.rewrites, "cache_modifiers": cache.rewrites}
# family -> its rewrites of one analysed (source, kernel), in the order they are offered
CODE_REWRITES: dict[str, CodeRewrite] = {
    "pipeline_loop": pipeline.rewrites,
    "pid_swizzle": swizzle.rewrites,
    "persistent": persistent.rewrites,
    "rows_per_program": rows.rewrites,
    "block_ptr": block_ptr.rewrites,
}
