"""Configs of a suite kernel as the rules generator reaches them: recipes and typed keys.

Shared by ``landscape_measure.py`` (which measures configs) and ``replay_landscapes.py``
(which looks the generator's proposals up in the measured tables).

- A *recipe* is the list of rewrite keys (``RulesGenerator`` rewrite keys: knob moves
  ``block:BLOCK_M:12:128``, code rewrites ``tl_range:3``, ``persistent:264``, ...)
  applied one after the other from the original, each to the previous result, exactly
  as a search session chains them (a child's proposals come from analysing the child).
- A *typed key* identifies the config a source is, whatever order the steps came in:
  the set of non-knob rewrites in its lineage (code rewrites, hints, cache modifiers,
  the autotune wrap) plus its knob values (those of the original, moved by each knob
  step; read from the source after an autotune wrap), a value equal to Triton's
  default counting as absent (``space.Config``'s rule). The AST hash
  (``space.config_key``) is recorded too, as a cheap first lookup.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Optional

import common  # noqa: F401  (puts the repository root on sys.path)

from kernelband import strategies as _strategies  # noqa: E402
from kernelband.generators import triton_features  # noqa: E402
from kernelband.generators.analysis import FAMILIES, Analysis, AnalysisCache, ProposedRewrite, cost_model  # noqa: E402
from kernelband.generators.costmodel import CostModel  # noqa: E402
from kernelband.generators.space import config_key  # noqa: E402
from kernelband.model import sha256_text  # noqa: E402

KNOB_FAMILIES = frozenset({"block_size", "num_warps", "num_stages", "group_m"})


def families(autotune: bool) -> set[str]:
    return set(FAMILIES) - (set() if autotune else {"autotune"})


def force_block_pointers(enabled: bool) -> None:
    """Make this process's generator offer block pointers or not, as the measuring
    machine's Triton did (3.6 has them, 3.9 removed them), so replay and measurement
    propose the same rewrites."""
    triton_features.assume_block_pointers(enabled)


class Analyses:
    """Analyses and typed keys of sources, cached by source hash (libcst analysis is the
    slow part of a replay: ~0.2-0.8 s per source)."""

    def __init__(self, kernel: str, fams: set[str]) -> None:
        self.kernel, self.fams = kernel, fams
        self.use_model(cost_model())
        self._knobs: dict[str, dict[str, int]] = {}
        self._ast: dict[str, str] = {}
        self.defaults: dict[str, int] = {}  # knob ident -> Triton's default (num_warps, num_stages)

    def use_model(self, model: Optional[CostModel]) -> None:
        """Rank with ``model`` (a held-out fit) from now on; analyses made with another are dropped."""
        self.model = model
        self.cache = AnalysisCache(self.fams, model)  # shared with the replay's RulesGenerator

    def analysis(self, source: str) -> Optional[Analysis]:
        return self.cache.get(source, self.kernel)

    def knobs_of(self, source: str) -> dict[str, int]:
        """Knob values found by analysing a source (slow; cached)."""
        h = sha256_text(source)
        if h not in self._knobs:
            an = self.analysis(source)
            self._knobs[h] = {k.ident: k.current for k in an.knobs} if an is not None else {}
            for k in an.knobs if an is not None else []:
                if k.default is not None:
                    self.defaults[k.ident] = k.default
        return dict(self._knobs[h])

    def child_knobs(self, parent_source: str, parent_knobs: dict[str, int], rw: ProposedRewrite) -> dict[str, int]:
        """The child's knob values without analysing it: a knob move changes its knob; other
        rewrites keep them, except the autotune wrap, which moves them into its decorator."""
        if rw.family == "autotune":
            an = self.analysis(parent_source)
            assert an is not None
            return self.knobs_of(an.source_of(rw))
        out = dict(parent_knobs)
        for ident, (_old, new) in rw.delta.items():
            out[ident] = new
        return out

    def typed_key(self, knobs: dict[str, int], code: Iterable[str]) -> str:
        normal = sorted((k, v) for k, v in knobs.items() if self.defaults.get(k) != v)
        return json.dumps([sorted(set(code)), [list(kv) for kv in normal]])

    def ast_key(self, source: str) -> str:
        h = sha256_text(source)
        if h not in self._ast:
            self._ast[h] = config_key(source, self.kernel)
        return self._ast[h]


@dataclass
class Built:
    recipe: list[str]
    families: list[str]
    source: str
    code: list[str]  # non-knob rewrite keys of the lineage
    description: str
    knobs: dict[str, int]  # knob ident -> value

    def key(self, an_cache: "Analyses") -> str:
        return an_cache.typed_key(self.knobs, self.code)


def original(an_cache: "Analyses", source: str) -> Built:
    return Built([], [], source, [], "", an_cache.knobs_of(source))


def step(an_cache: Analyses, parent: Built, rw: ProposedRewrite) -> Built:
    an = an_cache.analysis(parent.source)
    assert an is not None
    code = parent.code + ([rw.key] if rw.family not in KNOB_FAMILIES else [])
    return Built(parent.recipe + [rw.key], parent.families + [rw.family], an.source_of(rw), code,
                 "; ".join(filter(None, [parent.description, rw.description])),
                 an_cache.child_knobs(parent.source, parent.knobs, rw))


def build(an_cache: Analyses, source: str, recipe: list[str]) -> Built:
    """Apply a recipe; KeyError when a step is not offered at that point."""
    cur = original(an_cache, source)
    for key in recipe:
        an = an_cache.analysis(cur.source)
        rw = an.rewrite(key) if an else None
        if rw is None:
            raise KeyError(f"step {key!r} is not offered after {cur.recipe}")
        cur = step(an_cache, cur, rw)
    return cur


def ranked_children(an_cache: Analyses, parent: Built, per_strategy: Optional[int] = None) -> list[ProposedRewrite]:
    """The rewrites the generator offers on ``parent``, in its order within each strategy
    (highest predicted gain first; ties by key), strategies interleaved round-robin, at
    most ``per_strategy`` of each (None: all)."""
    an = an_cache.analysis(parent.source)
    if an is None:
        return []
    queues = []
    for s in _strategies.STRATEGY_NAMES:
        fams = set(_strategies.STRATEGIES[s].offline_rewrites) & an_cache.fams
        q = sorted((rw for rw in an.rewrites if rw.family in fams), key=lambda r: (-r.score, r.key))
        queues.append(q[:per_strategy] if per_strategy is not None else q)
    out, seen = [], set()
    for i in range(max((len(q) for q in queues), default=0)):
        for q in queues:
            if i < len(q) and q[i].key not in seen:
                seen.add(q[i].key)
                out.append(q[i])
    return out
