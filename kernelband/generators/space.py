"""The typed search space of a kernel: knobs found where real code keeps them.

A ``Knob`` is one tunable value (a BLOCK_* constexpr, GROUP_M, num_warps, num_stages)
with its domain, current value, Triton's default (warps and stages), where it lives in
the source and how to render a new value: the integer literals (``Site``) that move
with it. The literals are found by simple data flow from the launch site:

- a literal at the launch, or a keyword to add (num_warps / num_stages when absent);
- a variable, through its assignments in the wrapper or at module level (several
  assignments, e.g. in the arms of an ``if``, are all sites);
- conditional expressions (``4 if BLOCK < 2048 else 8``: both arms);
- dict literals indexed by a constant (``CFG["BLOCK_M"]``) or by anything else, e.g. the
  dtype in use (``CONFIGS[x.dtype]["BLOCK_M"]``: the entry of every dtype moves, by the
  same ratio, so the knob acts whichever dtype runs), and ``**cfg`` at the launch;
- small helper functions whose returns are such values;
- the ``triton.Config`` list of an ``@triton.autotune`` decorator (each parameter of
  every config moves by the same ratio).
Values computed from the data (``triton.next_power_of_2(n_cols)``) stop the flow: that
parameter is left alone.

A BLOCK that bounds a reduction one block covers (``reductions.py``: a softmax whose
``tl.arange(0, BLOCK)`` is the whole row, with no loop over it) is not a knob: another
value reduces other elements, so it would change what the kernel computes. A block a
loop steps over (a K loop, a layernorm's loop over the row) stays one.

A BLOCK change must not leave a grid that was computed for the old block: literals of
the grid (and of ``cdiv`` / ``//`` divisors in the wrapper) that equal the block move
with it (``(n + 255) // 256`` included); where two blocks of one launch share the value,
so that the grid's literal cannot be attributed, neither is tuned.

A ``Config`` is one value per knob; equality fills in defaults, so ``num_warps=4`` given
explicitly equals no keyword. ``config_key`` is the same identity for whole sources.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

import libcst as cst

from ..detect import name_of
from ..model import sha256_text
from .edits import Edits, int_value, merge, names_in, pow2_range, set_kwarg, str_value, walk
from .launch_sites import callee_name
from .reductions import ReductionFacts
from .shadow import ModuleShadows

WARPS: tuple[int, ...] = (1, 2, 4, 8, 16)
STAGES: tuple[int, ...] = (1, 2, 3, 4, 5)
GROUPS: tuple[int, ...] = (1, 4, 8, 16)
BLOCK_MIN = 16
BLOCK_MAX_1D = 8192
BLOCK_MAX_ND = 256

BLOCK_RE = re.compile(r"block|tile", re.IGNORECASE)
GROUP_RE = re.compile(r"^group(_size)?(_[mn])?$", re.IGNORECASE)


def _launch_defaults() -> tuple[int, int]:
    """(num_warps, num_stages) a launch gets when it does not say: read from the installed
    Triton's CUDA options (4 and 3 from Triton 2.1 through 3.9); those when unknown."""
    try:
        import dataclasses

        from triton.backends.nvidia.compiler import CUDAOptions

        fields = {f.name: f.default for f in dataclasses.fields(CUDAOptions)}
        w, s = fields.get("num_warps"), fields.get("num_stages")
        if isinstance(w, int) and isinstance(s, int):
            return w, s
    except Exception:  # no triton, another layout of its backends: keep the documented defaults
        pass
    return 4, 3


DEFAULT_WARPS, DEFAULT_STAGES = _launch_defaults()
DEFAULTS: dict[str, int] = {"num_warps": DEFAULT_WARPS, "num_stages": DEFAULT_STAGES}


# --------------------------------------------------------------------------- identity


class _DropDefaultLaunchKeywords(ast.NodeTransformer):
    """Remove ``num_warps=4`` / ``num_stages=3`` (the defaults) from launches of one kernel."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Subscript) and name_of(node.func.value) == self.kernel:
            node.keywords = [
                k
                for k in node.keywords
                if not (k.arg in DEFAULTS and isinstance(k.value, ast.Constant) and k.value.value == DEFAULTS[k.arg])
            ]
        return node


def config_key(source: str, kernel: str) -> str:
    """Identity of a variant for dedup: its syntax tree (formatting and comments do not
    count) with launch keywords that equal Triton's defaults dropped."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return sha256_text(source)
    return sha256_text(ast.dump(_DropDefaultLaunchKeywords(kernel).visit(tree)))


# --------------------------------------------------------------------------- value objects


@dataclass(frozen=True)
class Site:
    """A literal that moves with a knob: it holds ``anchor + offset`` when the knob is at
    its current value, and ``scaled(anchor) + offset`` at another value."""

    node: cst.Integer = field(compare=False, hash=False)
    anchor: int
    offset: int = 0
    line: int = 0


@dataclass(eq=False)
class Knob:
    kind: str  # "block" | "group" | "num_warps" | "num_stages"
    name: str  # constexpr parameter or launch keyword (a dict key for ** configs)
    current: int
    domain: tuple[int, ...]  # allowed values, current included, ascending
    default: Optional[int]  # Triton's value when nothing is given (warps, stages)
    where: str  # enclosing function of the launch, or "@autotune"
    line: int
    origin: str  # "launch" | "variable" | "dict" | "conditional" | "helper" | "autotune" | "default"
    sites: tuple[Site, ...] = ()  # empty: add ``name=`` to ``call``
    call: Optional[cst.Call] = None
    keyword_literal: bool = False  # passed as ``name=<int>`` directly at the launch
    ties: tuple[Site, ...] = ()  # grid literals that follow a block
    shadow: Edits = field(default_factory=dict)  # module-level sites: copy under a new name (see shadow_edits)

    @property
    def ident(self) -> str:
        """Stable across variants of one kernel (no line numbers)."""
        return f"{self.kind}:{self.name}:{self.where}"

    @property
    def family(self) -> str:
        return {"block": "block_size", "group": "group_m"}.get(self.kind, self.kind)

    @property
    def values(self) -> list[int]:
        return list(self.domain)

    def site_value(self, site: Site, value: int) -> int:
        if self.kind == "num_stages":
            return max(1, site.anchor + value - self.current) + site.offset
        if site.anchor == self.current:
            return value + site.offset
        scaled = max(1, int(round(site.anchor * value / self.current)))  # other entries: the same ratio
        if self.kind == "block":  # never below the smallest tile (tl.dot needs 16) unless it started there
            scaled = max(scaled, min(BLOCK_MIN, site.anchor))
        return scaled + site.offset

    def edits(self, value: int) -> Edits:
        out: Edits = {}
        if not self.sites:
            assert self.call is not None
            lit = cst.Integer(str(value))
            return {id(self.call): [lambda n, lit=lit: set_kwarg(n, self.name, lit)]}
        for s in (*self.sites, *self.ties):
            lit = cst.Integer(str(self.site_value(s, value)))
            out = merge(out, {id(s.node): [lambda _n, lit=lit: lit]})
        return merge(out, self.shadow)

    def distance(self, value: int) -> float:
        if self.kind == "num_stages":
            return float(abs(value - self.current))
        if self.kind == "group":
            idx = {v: i for i, v in enumerate(self.domain)}
            return float(abs(idx[value] - idx[self.current]))
        return abs(math.log2(value) - math.log2(self.current))

    def label(self) -> str:
        extra = " (default)" if not self.sites else "" if self.origin in ("launch", "variable") else f" ({self.origin})"
        return f"{self.name} {self.current}{extra}"


@dataclass(frozen=True)
class AutotuneConfigs:
    """The ``configs`` of an existing ``@triton.autotune``: the literal list (or tuple) the
    decorator reads, and its ``triton.Config(...)`` calls in order."""

    node: cst.List | cst.Tuple
    calls: list[cst.Call]


@dataclass(frozen=True)
class Config:
    """One value per knob ident. Equality knows defaults: a knob missing on one side
    compares at its default (an explicit ``num_warps=4`` equals none)."""

    values: tuple[tuple[str, int], ...]
    defaults: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, knobs: Iterable[Knob], chosen: Optional[dict[str, int]] = None) -> "Config":
        chosen = chosen or {}
        vals, defs = {}, {}
        for k in knobs:
            vals[k.ident] = chosen.get(k.ident, k.current)
            if k.default is not None:
                defs[k.ident] = k.default
        return cls(tuple(sorted(vals.items())), tuple(sorted(defs.items())))

    def _normal(self) -> tuple[tuple[str, int], ...]:
        d = dict(self.defaults)
        return tuple((k, v) for k, v in self.values if d.get(k) != v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._normal() == other._normal()

    def __hash__(self) -> int:
        return hash(self._normal())

    def delta(self, base: "Config") -> dict[str, tuple[int, int]]:
        """Knobs whose value differs from ``base``: ident -> (base value, value)."""
        b, d = dict(base.values), dict(self.defaults) | dict(base.defaults)
        out = {}
        for k, v in self.values:
            bv = b.get(k, d.get(k))
            if bv != v:
                out[k] = (bv if bv is not None else v, v)
        return out


# --------------------------------------------------------------------------- discovery


class SpaceFinder(ModuleShadows):
    """The knobs reachable from the launch sites (``launch_sites.py``) by data flow
    (``dataflow.py``), module-level ones copied under new names (``shadow.py``), and
    those of an existing ``@triton.autotune``; grid literals that follow a block."""

    def _grid_literals(self, grid_def: cst.CSTNode, fn: Optional[cst.FunctionDef]) -> list[cst.Integer]:
        """Integer literals the grid is computed from: in its expression, and one step of
        data flow through the names it reads; plus, anywhere in the wrapper, the divisor of
        ``cdiv(x, B)`` and of ``(x + B - 1) // B`` (not other divisions: ``BLOCK // 256``
        in a warps heuristic is not a grid)."""
        out: list[cst.Integer] = [n for n in walk(grid_def) if isinstance(n, cst.Integer)]
        for name in names_in(grid_def):
            r = self.resolve(cst.Name(name), fn) if fn is not None else None
            if r is None:
                binds = self.assignments(fn.body, name) if fn is not None else []
                for b in binds:
                    if isinstance(b, cst.Assign):
                        out += [n for n in walk(b.value) if isinstance(n, cst.Integer)]
                continue
            out += [e for e, _ in r if isinstance(e, cst.Integer)]
        if fn is not None:  # ceil-divisions elsewhere in the wrapper (buffers sized per program)
            for n in walk(fn):
                if isinstance(n, cst.Call) and callee_name(n) in ("cdiv", "ceil_div") and len(n.args) == 2:
                    if isinstance(n.args[1].value, cst.Integer):
                        out.append(n.args[1].value)
                elif (
                    isinstance(n, cst.BinaryOperation)
                    and isinstance(n.operator, cst.FloorDivide)
                    and isinstance(n.right, cst.Integer)
                    and isinstance(n.left, cst.BinaryOperation)
                    and isinstance(n.left.operator, cst.Add)
                    and isinstance(n.left.right, cst.Integer)
                    and int_value(n.left.right) == (int_value(n.right) or 0) - 1
                ):
                    out += [n.right, n.left.right]  # (x + B - 1) // B
        uniq: dict[int, cst.Integer] = {}
        for n in out:
            uniq[id(n)] = n
        return list(uniq.values())

    def _ties(self, current: int, literals: list[cst.Integer], own: set[int]) -> list[Site]:
        out = []
        for n in literals:
            v = int_value(n)
            if id(n) in own or v is None:
                continue
            if v == current:
                out.append(Site(n, current, 0, self.line(n)))
            elif v == current - 1 and current > 2:  # (n + 255) // 256
                out.append(Site(n, current, -1, self.line(n)))
        # a lone ``current - 1`` with no divisor beside it is a coincidence, not a tie
        if not any(s.offset == 0 for s in out):
            return []
        return out

    @functools.cached_property
    def reduction_blocks(self) -> frozenset[str]:
        """Constexprs that bound a reduction one block covers (``reductions.py``): another
        value reduces other elements, so they are never tuned."""
        return ReductionFacts(self).fixed

    # ---- knobs
    def knobs(self) -> list[Knob]:
        knobs: list[Knob] = []
        claimed: set[int] = set()
        n_blocks = sum(1 for p in self.constexprs if BLOCK_RE.search(p))
        block_hi = BLOCK_MAX_1D if n_blocks <= 1 else BLOCK_MAX_ND
        for call, fn in self.launches():
            where = fn.name.value if fn is not None else "module level"
            mine, given = self._launch_knobs(call, fn, where, claimed, block_hi)
            # a grid literal two blocks could own cannot be attributed: tune neither
            owners: dict[int, list[Knob]] = {}
            for k in mine:
                for s in k.ties:
                    owners.setdefault(id(s.node), []).append(k)
            ambiguous = {id(k) for ks in owners.values() if len(ks) > 1 for k in ks}
            for k in mine:
                if id(k) in ambiguous:
                    continue
                for s in k.ties:
                    claimed.add(id(s.node))
                if len(k.domain) > 1:
                    knobs.append(k)
            if not self.info.is_autotuned:
                for kw, allowed, wanted in (("num_warps", WARPS, True), ("num_stages", STAGES, self.has_loop)):
                    if wanted and kw not in given:
                        knobs.append(
                            Knob(
                                kw,
                                kw,
                                DEFAULTS[kw],
                                tuple(allowed),
                                DEFAULTS[kw],
                                where,
                                self.line(call),
                                "default",
                                (),
                                call,
                            )
                        )
        knobs += self.autotune_knobs(claimed)
        return knobs

    def _launch_knobs(
        self, call: cst.Call, fn: Optional[cst.FunctionDef], where: str, claimed: set[int], block_hi: int
    ) -> tuple[list[Knob], set[str]]:
        """The knobs of one launch's arguments (their literals added to ``claimed``), and
        the names the launch passes."""
        grid_def, _ = self.grid_definition(call, fn)
        grid_lits = self._grid_literals(grid_def, fn)
        passed = self.passed_args(call, fn) or []
        mine: list[Knob] = []
        for pname, value, as_kw, how in passed:
            kind = (
                pname
                if pname in ("num_warps", "num_stages")
                else "block"
                if BLOCK_RE.search(pname) and pname in self.constexprs
                else "group"
                if GROUP_RE.search(pname) and pname in self.constexprs
                else None
            )
            if kind is None or (kind in DEFAULTS and self.info.is_autotuned):
                continue
            got = self.int_sites(value, fn)
            if got is None:
                continue  # computed from the data: not ours to change
            nodes, origin = got.nodes, got.origin
            if how != "launch" and origin == "launch":
                origin = how
            nodes = [n for n in nodes if id(n) not in claimed]
            if not nodes:
                continue
            claimed |= {id(n) for n in nodes}
            cur = int_value(nodes[0])
            assert cur is not None
            ties: tuple[Site, ...] = tuple(self._ties(cur, grid_lits, claimed)) if kind == "block" else ()
            domain = self._domain(kind, pname, value, cur, grid_def, fn, ties, block_hi)
            if domain is None:
                continue
            shadow = self.shadow_edits([*nodes, *(t.node for t in ties)])
            if shadow is None:
                continue
            sites = tuple(Site(n, int_value(n) or cur, 0, self.line(n)) for n in nodes)
            mine.append(
                Knob(
                    kind,
                    pname,
                    cur,
                    tuple(domain),
                    DEFAULTS.get(kind),
                    where,
                    self.line(nodes[0]),
                    origin,
                    sites,
                    call,
                    keyword_literal=as_kw and how == "launch" and value is nodes[0],
                    ties=ties,
                    shadow=shadow,
                )
            )
        return mine, {p for p, *_ in passed}

    def _domain(
        self,
        kind: str,
        pname: str,
        value: cst.BaseExpression,
        cur: int,
        grid_def: cst.CSTNode,
        fn: Optional[cst.FunctionDef],
        ties: tuple[Site, ...],
        block_hi: int,
    ) -> Optional[list[int]]:
        """The values a launch knob may take (None: not a knob here: stages without a loop)."""
        if kind == "block" and pname in self.reduction_blocks:
            return [cur]  # still a knob until its grid ties are claimed, then dropped: one value
        if kind == "block":
            grid_strings = {s for s in (str_value(n) for n in walk(grid_def)) if s}
            # the grid reads the same variable (or it is used beyond the launch)
            shared = isinstance(value, cst.Name) and (
                value.value in names_in(grid_def) or self.uses(fn, value.value) > 2
            )
            free = pname in grid_strings or shared or pname in self.loop_names or bool(ties)
            lo = cur if not free else min(BLOCK_MIN, cur)
            return sorted(set(pow2_range(lo, max(block_hi, cur))) | {cur})
        if kind == "group":
            return sorted(set(GROUPS) | {cur})
        if kind == "num_warps":
            return sorted(set(WARPS) | {cur})
        return sorted(set(STAGES) | {cur}) if self.has_loop else None

    # ---- an existing @triton.autotune
    def autotune_decorator(self) -> Optional[cst.Call]:
        for d in self.kdef.decorators:
            if isinstance(d.decorator, cst.Call) and callee_name(d.decorator) == "autotune":
                return d.decorator
        return None

    def autotune_configs(self) -> Optional[AutotuneConfigs]:
        """The decorator's ``configs`` list (or tuple) and its triton.Config calls."""
        deco = self.autotune_decorator()
        if deco is None:
            return None
        arg = next((a for a in deco.args if a.keyword is not None and a.keyword.value == "configs"), None)
        if arg is None and deco.args and deco.args[0].keyword is None:
            arg = deco.args[0]
        if arg is None:
            return None
        got = self.resolve(arg.value, None)
        lst = got[0][0] if got and len(got) == 1 else None
        if not isinstance(lst, (cst.List, cst.Tuple)):
            return None
        calls = [e.value for e in lst.elements if isinstance(e.value, cst.Call) and callee_name(e.value) == "Config"]
        if not calls or len(calls) != len(lst.elements):
            return None
        return AutotuneConfigs(lst, calls)

    def autotune_knobs(self, claimed: set[int]) -> list[Knob]:
        """Each parameter (and num_warps / num_stages) of the decorator's configs, every
        config moving by the same ratio (step for stages)."""
        got = self.autotune_configs()
        if got is None:
            return []
        calls = got.calls
        per: dict[tuple[str, str], list[cst.Integer]] = {}
        for c in calls:
            if c.args and c.args[0].keyword is None:
                items = self.dict_items(c.args[0].value) or []
                for k, v in items:
                    kind = "block" if BLOCK_RE.search(k) else "group" if GROUP_RE.search(k) else None
                    if kind and isinstance(v, cst.Integer):
                        per.setdefault((kind, k), []).append(v)
            for a in c.args:
                if a.keyword is not None and a.keyword.value in DEFAULTS and isinstance(a.value, cst.Integer):
                    per.setdefault((a.keyword.value, a.keyword.value), []).append(a.value)
        out = []
        for (kind, name), nodes in per.items():
            nodes = [n for n in nodes if id(n) not in claimed]
            if not nodes:
                continue
            cur = int_value(nodes[0]) or 1
            if kind == "block" and name in self.reduction_blocks:
                domain = [cur]  # the extent of a reduction: left alone
            elif kind == "block":
                domain = [
                    v for v in (cur // 4, cur // 2, cur, cur * 2, cur * 4) if BLOCK_MIN <= v <= max(BLOCK_MAX_1D, cur)
                ]
            elif kind == "num_warps":
                domain = [v for v in (cur // 2, cur, cur * 2) if 1 <= v <= 16]
            elif kind == "num_stages":
                domain = [v for v in (cur - 1, cur, cur + 1) if 1 <= v <= 6]
            else:
                domain = sorted(set(GROUPS) | {cur})
            sites = tuple(Site(n, int_value(n) or cur, 0, self.line(n)) for n in nodes)
            shadow = self.shadow_edits(nodes)
            if len(set(domain)) > 1 and shadow is not None:
                out.append(
                    Knob(
                        kind,
                        name,
                        cur,
                        tuple(sorted(set(domain))),
                        None,
                        "@autotune",
                        self.line(nodes[0]),
                        "autotune",
                        sites,
                        shadow=shadow,
                    )
                )
        return out
