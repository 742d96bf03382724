"""The offline ``rules`` generator: what a tuner can change, as source-preserving edits.

The generator over the typed space (``space.py``: knobs found by data flow from the
launch site, configs that know Triton's defaults), the rewrites that are not one knob's
value (``coderewrites.py``: a module each under ``code/``) and the source edits they are
made of (``edits.py``). ``analysis.py`` lists what can be proposed for a source; this
module chooses among it.

Rewrite families (``Strategy.offline_rewrites`` maps strategies onto them):

- ``block_size``: BLOCK_*/TILE_* constexpr values reached from a launch (see space.py),
  moved over powers of two in [BLOCK_MIN, BLOCK_MAX_1D] (one block parameter) or
  [BLOCK_MIN, BLOCK_MAX_ND] (several). A value computed from the data (softmax's
  ``triton.next_power_of_2(n_cols)``) is never touched. A block that neither the grid
  reads (``meta["BLOCK"]``, the same wrapper variable, or a grid literal that moves with
  it) nor a loop of the kernel steps over covers a fixed extent, so it is only grown. A
  block that bounds a reduction with no loop (or atomics across the grid) combining its
  tiles is never moved, up or down: a softmax over one ``tl.arange(0, BLOCK)`` reduces
  the first BLOCK elements of a row, and another block reduces others (``reductions.py``
  decides; a K loop or a layernorm's loop over the row keeps the block tunable).
- ``num_warps``: the launch keyword (added when absent; Triton's default): 1..16.
- ``num_stages``: the launch keyword, 1..5, only for kernels with a loop.
- ``group_m``: GROUP_M / GROUP_SIZE_M-style constexprs: 1, 4, 8, 16.
- ``hints``: after ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` (also through a
  ``start = pid * BLOCK`` temporary) insert
  ``offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)``.
- ``cache_modifiers``: eviction_policy ``evict_first`` / ``evict_last`` or
  ``cache_modifier=".cg"`` on every ``tl.load`` that has neither, ``cache_modifier=".cs"``
  on stores. All four are hints that never change results.
- ``pipeline_loop`` / ``pid_swizzle`` / ``persistent``: code rewrites of the kernel body
  (``coderewrites.py``): loops become ``tl.range(..., num_stages=S)``; row-major tile
  order of a 1D-launched tl.dot kernel becomes grouped (swizzled) ordering; a 1D kernel
  becomes a grid-stride loop on a grid capped at a multiple of the SM count
  (``persistent``, tiling); a row-wise kernel handles several rows per program
  (``rows_per_program``, vectorization); pointer blocks of a tl.dot kernel become block
  pointers (``block_ptr``, access_layout).
- ``autotune``: wrap the kernel in ``@triton.autotune`` with a few configs around the
  current one, keyed on its size arguments, and drop the tuned keywords from the
  launch. Only when every launch passes the tuned constexprs as keyword literals, the
  grid is a callable taking ``meta``, the kernel has no atomics and does not load from
  the pointer it stores to (an autotuner re-runs the kernel while benchmarking), and
  ``triton`` (or ``autotune`` and ``Config``) is importable by name in the module.
  For a kernel that already has a decorator: extend its config list, or pin one config.
  Off with ``autotune=False`` (Triton's interpreter cannot benchmark configs without a
  GPU driver, so a CPU-only session should turn it off).

Every edit goes through libcst, so formatting and comments survive. Rewrites of one
parent within a strategy are ranked (``ranking="model"``, the default) by the cost
model shipped in ``costmodel.json`` (fitted on measured landscapes by
``benchmarks/landscape_costmodel.py``): highest predicted gain first; the autotune wrap
scores above every launch-tuning move of the same parent, so it comes first where it is
legal (91% of its recorded pulls gained). With
``ranking="nearest"`` (or without the model file) they go by distance from the current
value (neighbours first). Ties are broken by a ``random.Random`` seeded from (seed,
parent id, strategy, rewrites already used), so the sequence is a pure function of the
seed and the calls made. A rewrite is used at most once per parent, and no config
(``config_key``: the syntax tree with default launch keywords dropped) the generator
has produced or been given as a parent is produced again. ``GenContext.rng`` is not
used: determinism must not depend on the caller's draws.
"""

from __future__ import annotations

import math
import random
from typing import Callable, Iterable, Optional

from .. import strategies as _strategies
from ..model import Variant, sha256_text
from ..screen import screen_variant
from .analysis import (  # noqa: F401  (FAMILIES and cost_model are re-exported: callers know them from here)
    FAMILIES,
    Analysis,
    AnalysisCache,
    ANALYSIS_ERRORS,
    KernelAnalyzer,
    ProposedRewrite,
    cost_model,
)
from .base import GenContext, Generation, GenerationOutcome
from .costmodel import CostModel
from .edits import Edits
from .edits import merge as _merge
from .space import (  # noqa: F401  (re-exported: the constants callers know from here)
    DEFAULT_STAGES,
    DEFAULT_WARPS,
    config_key,
)

RANKINGS: tuple[str, ...] = ("model", "nearest")
ENUMERATE_LIMIT = 256  # most variants enumerate_space returns (deterministic subsample beyond)


# --------------------------------------------------------------------------- generator


class RulesGenerator:
    """Deterministic offline generator (see the module docstring)."""

    name = "rules"

    def __init__(
        self,
        seed: int = 0,
        strategies: Optional[Iterable[str]] = None,
        enumerate_limit: int = ENUMERATE_LIMIT,
        autotune: bool = True,
        ranking: str = "model",
        ranking_model: Optional[CostModel] = None,
        analyses: Optional[AnalysisCache] = None,
        screen: Callable[[str, str, str, Optional[str]], Optional[str]] = screen_variant,
        **_ignored: object,
    ) -> None:
        """``ranking_model`` ranks with another cost model than the shipped one (a replay
        holds the replayed kernel out of it); ``analyses`` shares a cache of analyses made
        with the same families and model (ValueError otherwise); ``screen`` is the static
        screen every proposal passes (a replay memoizes it)."""
        if ranking not in RANKINGS:
            raise ValueError(f"unknown ranking {ranking!r}; known: {', '.join(RANKINGS)}")
        self.model = (ranking_model or cost_model()) if ranking == "model" else None
        self.ranking = ranking if self.model is not None else "nearest"
        self.seed = int(seed)
        self.strategies = tuple(s for s in (strategies or _strategies.STRATEGY_NAMES) if s in _strategies.STRATEGIES)
        self.enumerate_limit = int(enumerate_limit)
        self.families = frozenset(FAMILIES) - (frozenset() if autotune else {"autotune"})
        if analyses is None:
            analyses = AnalysisCache(self.families, self.model)
        elif analyses.families != self.families or analyses.model is not self.model:
            raise ValueError("a shared AnalysisCache must use the generator's families and cost model")
        self._analyses = analyses
        self._screen = screen
        self._used: dict[str, set[str]] = {}  # parent id -> rewrite keys used
        self._seen: set[str] = set()  # config keys of every source produced or seen as a parent
        self._parents: set[tuple[str, str]] = set()  # (source hash, kernel) of parents already in _seen
        # (family, key) of the rewrite behind the last variant generate() returned (None: none);
        # replays and pull records use it to name the rewrite, not only the strategy
        self.last_rewrite: Optional[tuple[str, str]] = None

    def warm(self, parent: Variant, kernel: str) -> None:
        """Analyse ``parent`` now (the session calls this while the original is prepared)."""
        self._analysis(parent, kernel)

    # ---- internals
    def _analysis(self, parent: Variant, kernel: str) -> Optional[Analysis]:
        an = self._analyses.get(parent.source, kernel)
        key = (sha256_text(parent.source), kernel)
        if key not in self._parents:  # config_key parses the source: once per parent, not per offered() call
            self._parents.add(key)
            self._seen.add(config_key(parent.source, kernel))
        return an

    def _available(self, parent: Variant, kernel: str, strategy: str) -> list[ProposedRewrite]:
        an = self._analysis(parent, kernel)
        if an is None or strategy not in self.strategies:
            return []
        families = set(_strategies.STRATEGIES[strategy].offline_rewrites) & self.families
        used = self._used.get(parent.id, set())
        out = []
        for rw in an.rewrites:
            if rw.family in families and rw.key not in used:
                if an.key_of(rw, kernel) in self._seen:
                    continue
                out.append(rw)
        return out

    # ---- protocol
    def offered(self, parent: Variant, kernel: str) -> list[str]:
        return [s for s in self.strategies if self._available(parent, kernel, s)]

    def generate(self, parent: Variant, strategy: str, ctx: GenContext) -> Generation:
        self.last_rewrite = None
        an = self._analysis(parent, ctx.kernel)
        if an is None:
            return Generation(GenerationOutcome.NOTHING, message=f"rules: cannot analyse kernel {ctx.kernel}")
        used = self._used.setdefault(parent.id, set())
        while True:
            avail = self._available(parent, ctx.kernel, strategy)
            if not avail:
                return Generation(
                    GenerationOutcome.NOTHING, message=f"rules: no untried {strategy} rewrite for this kernel"
                )
            if self.ranking == "model":  # highest predicted gain first
                top = max(rw.score for rw in avail)
                group = sorted((rw for rw in avail if rw.score >= top - 1e-9), key=lambda r: r.key)
            else:  # nearest first (the order before the cost model)
                nearest = min(rw.distance for rw in avail)
                group = sorted((rw for rw in avail if rw.distance == nearest), key=lambda r: r.key)
            rng = random.Random(f"{self.seed}:{parent.id}:{strategy}:{len(used)}")
            rw = rng.choice(group)
            used.add(rw.key)
            source = an.source_of(rw)
            self._seen.add(an.key_of(rw, ctx.kernel))
            reason = self._screen(parent.source, source, ctx.kernel, ctx.harness or None)
            if reason is None:
                break
            # a rewrite that fails the screen is a bug here; never hand it on
        variant = Variant(source, parent=parent.id, strategy=strategy, generator=self.name, description=rw.description)
        self.last_rewrite = (rw.family, rw.key)
        return Generation(GenerationOutcome.PRODUCED, variant, message=rw.description)

    def every_rewrite(self, original: Variant, kernel: str) -> list[tuple[str, str, str]]:
        """(family, key, source) of every code rewrite the analysis of ``original`` holds,
        whatever the strategy, use or screen (a sweep of the whole space); [] when the
        kernel cannot be analysed."""
        an = self._analysis(original, kernel)
        return [(rw.family, rw.key, an.source_of(rw)) for rw in an.rewrites] if an is not None else []

    def enumerate_space(self, original: Variant, kernel: str) -> list[Variant]:
        """The product of the launch-site tunables (block sizes x num_warps x num_stages x
        group size), without the original's own point. Beyond ``enumerate_limit`` points,
        a deterministic (seeded) subsample of that many. Variants have strategy None."""
        try:
            analyzer = KernelAnalyzer(original.source, kernel)
        except ANALYSIS_ERRORS:
            return []
        knobs = analyzer.knobs()
        if not knobs:
            return []
        sizes = [len(k.values) for k in knobs]
        total = math.prod(sizes)
        current = [k.values.index(k.current) for k in knobs]
        cur_index = 0
        for c, n in zip(current, sizes):
            cur_index = cur_index * n + c
        indices: Iterable[int]
        if total - 1 <= self.enumerate_limit:
            indices = (i for i in range(total) if i != cur_index)
        else:
            rng = random.Random(f"{self.seed}:enumerate:{original.id}:{kernel}")
            picked: set[int] = set()
            while len(picked) < self.enumerate_limit:
                i = rng.randrange(total)
                if i != cur_index:
                    picked.add(i)
            indices = sorted(picked)
        out: list[Variant] = []
        seen = {config_key(original.source, kernel)}
        for index in indices:
            point = []
            for n in reversed(sizes):
                point.append(index % n)
                index //= n
            point.reverse()
            edits: Edits = {}
            parts = []
            for k, vi in zip(knobs, point):
                v = k.values[vi]
                parts.append(f"{k.name}={v}")
                if v != k.current:
                    edits = _merge(edits, k.edits(v))
            source = analyzer.render(edits)
            h = config_key(source, kernel)
            if h in seen:
                continue
            seen.add(h)
            out.append(
                Variant(source, parent=original.id, strategy=None, generator=self.name, description=", ".join(parts))
            )
        return out
