"""What the rules generator can propose for one (source, kernel), as data: the knobs
found, and every rewrite with its family, key, description, edits and the cost model's
predicted gain. ``RulesGenerator`` chooses among these; the benchmarks that measure and
replay landscapes read them through the same functions (``analyse``, ``AnalysisCache``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import libcst as cst

from ..model import KernelInfo, sha256_text
from .code import autotune
from .coderewrites import CODE_REWRITES, HINT_REWRITES
from .costmodel import CostModel, KernelTraits
from .edits import Edits, walk
from .rewrites import Rewrites
from .space import Knob, config_key

FAMILIES: tuple[str, ...] = (
    "block_size",
    "num_warps",
    "num_stages",
    "group_m",
    "hints",
    "cache_modifiers",
    "autotune",
    "pipeline_loop",
    "pid_swizzle",
    "persistent",
    "rows_per_program",
    "block_ptr",
)


@dataclass
class ProposedRewrite:
    """One rewrite the generator can make of an analysed source."""

    family: str
    key: str
    description: str
    distance: float
    edits: Edits
    delta: dict[str, tuple[int, int]] = field(default_factory=dict)  # knob ident -> (from, to)
    score: float = 0.0  # the cost model's predicted log speedup (the ranking within a strategy)
    _source: Optional[str] = field(default=None, repr=False)  # rendered once, on demand
    _key: Optional[str] = field(default=None, repr=False)


@dataclass
class Analysis:
    """Everything the generator can propose for one (source, kernel): its knobs and rewrites."""

    info: KernelInfo
    render: Callable[[Edits], str]
    knobs: list[Knob] = field(default_factory=list)
    rewrites: list[ProposedRewrite] = field(default_factory=list)

    def source_of(self, rw: ProposedRewrite) -> str:
        if rw._source is None:
            rw._source = self.render(rw.edits)
        return rw._source

    def key_of(self, rw: ProposedRewrite, kernel: str) -> str:
        """The config key of the rewritten source (equal keys: the same config)."""
        if rw._key is None:
            rw._key = config_key(self.source_of(rw), kernel)
        return rw._key

    def rewrite(self, key: str) -> Optional[ProposedRewrite]:
        """The proposed rewrite with this key, or None."""
        return next((rw for rw in self.rewrites if rw.key == key), None)


_MODEL: Optional[CostModel] = None
_MODEL_LOADED = False


def cost_model() -> Optional[CostModel]:
    """The shipped cost model (costmodel.json), loaded once; None when absent."""
    global _MODEL, _MODEL_LOADED
    if not _MODEL_LOADED:
        _MODEL, _MODEL_LOADED = CostModel.load(), True
    return _MODEL


AUTOTUNE_MARGIN = 0.05  # the autotuner keeps the best of configs that include the current one
EXTEND_SCORE = 0.02  # more configs for an autotuner: never slower in steady state
PIN_SCORE = -0.02  # one config of the list: at best what the autotuner picked
CODE_DISTANCE = 2.0  # nearest-first order: after the neighbouring launch values
CODE_SCORE = 0.01  # code rewrites: no measurements yet to rank them, tried before launch-knob no-ops


class KernelAnalyzer(Rewrites):
    """Finds everything the generator can propose for one (source, kernel); raises one of
    ``ANALYSIS_ERRORS`` when the source or kernel cannot be analysed."""

    def traits(self) -> KernelTraits:
        """What the cost model knows of the kernel besides its knobs."""
        return KernelTraits(
            has_dot=any(self.is_lang_call(n, "dot") for n in walk(self.kdef.body)), has_loop=self.has_loop
        )

    def analyse(self, families: Iterable[str] = FAMILIES, model: Optional[CostModel] = None) -> Analysis:
        families = set(families)
        an = Analysis(self.info, self.render, self.knobs())
        traits = self.traits()
        base = [(k.kind, k.current) for k in an.knobs]

        def predict(child: list[tuple[str, int]]) -> float:
            return model.predict(base, child, traits) if model is not None else 0.0

        for i, k in enumerate(an.knobs):
            if k.family not in families:
                continue
            for v in k.domain:
                if v == k.current:
                    continue
                desc = f"{k.label()} -> {v} at {k.where} line {k.line}"
                child = base[:i] + [(k.kind, v)] + base[i + 1 :]
                an.rewrites.append(
                    ProposedRewrite(
                        k.family,
                        f"{k.kind}:{k.name}:{k.line}:{v}",
                        desc,
                        k.distance(v),
                        k.edits(v),
                        {k.ident: (k.current, v)},
                        score=predict(child),
                    )
                )
        for table, distance, score in ((HINT_REWRITES, 1.0, 0.0), (CODE_REWRITES, CODE_DISTANCE, CODE_SCORE)):
            for family, find in table.items():
                if family in families:
                    for key, desc, edits in find(self):
                        an.rewrites.append(ProposedRewrite(family, key, desc, distance, edits, score=score))
        if "autotune" in families:
            at = autotune.wrap(self, an.knobs)
            if at is not None:
                kinds = {k for k, _ in base}
                # the autotuner measures its configs and keeps the best: at least the best of them
                best = max(predict([kv for kv in base if kv[0] not in {c[0] for c in cfg}] + cfg) for cfg in at[2])
                # offered first where legal: it gained in 91% of its recorded pulls
                others = [rw.score for rw in an.rewrites if rw.family in ("block_size", "num_warps")]
                top = max([best, 0.0, *others]) if kinds else 0.0
                an.rewrites.append(
                    ProposedRewrite("autotune", "autotune", at[0], 1.0, at[1], score=top + AUTOTUNE_MARGIN)
                )
            for key, desc, edits in autotune.list_rewrites(self):
                score = EXTEND_SCORE if key == "autotune_extend" else PIN_SCORE
                an.rewrites.append(ProposedRewrite("autotune", key, desc, 1.0, edits, score=score))
        return an


# what an unanalysable (source, kernel) raises: the generator offers nothing for it
ANALYSIS_ERRORS: tuple[type[BaseException], ...] = (
    LookupError,
    SyntaxError,
    ValueError,
    cst.ParserSyntaxError,
    RecursionError,
)


def analyse(
    source: str, kernel: str, families: Iterable[str] = FAMILIES, model: Optional[CostModel] = None
) -> Optional[Analysis]:
    """The analysis of ``kernel`` in ``source``, or None when it cannot be analysed."""
    try:
        return KernelAnalyzer(source, kernel).analyse(families, model)
    except ANALYSIS_ERRORS:
        return None


class AnalysisCache:
    """Analyses by (source hash, kernel) for one set of families and one cost model: an
    analysis is a pure function of those, so a generator and a replay can share one
    (the libcst analysis is the slow part of a proposal: 0.2-0.8 s per source)."""

    def __init__(self, families: Iterable[str] = FAMILIES, model: Optional[CostModel] = None) -> None:
        self.families = frozenset(families)
        self.model = model
        self._by_key: dict[tuple[str, str], Optional[Analysis]] = {}

    def get(self, source: str, kernel: str) -> Optional[Analysis]:
        key = (sha256_text(source), kernel)
        if key not in self._by_key:
            self._by_key[key] = analyse(source, kernel, self.families, self.model)
        return self._by_key[key]
