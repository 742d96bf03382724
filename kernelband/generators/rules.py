"""The offline ``rules`` generator: what a tuner can change, as source-preserving edits.

Rewrite families (``Strategy.offline_rewrites`` maps strategies onto them):

- ``block_size``: integer literals given at launch sites for BLOCK_*/TILE_* constexpr
  parameters (or a variable assigned once from a literal in the wrapper), moved over
  powers of two in [BLOCK_MIN, BLOCK_MAX_1D] (one block parameter) or
  [BLOCK_MIN, BLOCK_MAX_ND] (several). A value computed from the data (softmax's
  ``triton.next_power_of_2(n_cols)``) is never touched. A block that neither the grid
  reads (``meta["BLOCK"]``, or the same wrapper variable) nor a loop of the kernel
  steps over covers a fixed extent, so it is only ever grown.
- ``num_warps``: the launch keyword (added when absent; Triton's default is 4): 1..16.
- ``num_stages``: the launch keyword, 1..5, only for kernels with a loop (default 3).
- ``group_m``: GROUP_M / GROUP_SIZE_M-style constexpr literals at launch: 1, 4, 8, 16.
- ``hints``: after ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` (also through a
  ``start = pid * BLOCK`` temporary) insert
  ``offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)``.
- ``cache_modifiers``: eviction_policy ``evict_first`` / ``evict_last`` or
  ``cache_modifier=".cg"`` on every ``tl.load`` that has none, ``cache_modifier=".cs"``
  on stores. All four are hints that never change results.
- ``autotune``: wrap the kernel in ``@triton.autotune`` with a few configs around the
  current one, keyed on its size arguments, and drop the tuned keywords from the
  launch. Only when every launch passes the tuned constexprs as keyword literals, the
  grid is a callable taking ``meta``, the kernel has no atomics and does not load from
  the pointer it stores to (an autotuner re-runs the kernel while benchmarking), and
  ``triton`` (or ``autotune`` and ``Config``) is importable by name in the module.
  Off with ``autotune=False`` (Triton's interpreter cannot benchmark configs without a
  GPU driver, so a CPU-only session should turn it off).

Every edit goes through libcst, so formatting and comments survive. Rewrites of one
parent are ordered by distance from the current value (neighbours first: double or
halve a block, the next warps value) and ties are broken by a ``random.Random`` seeded
from (seed, parent id, strategy, rewrites already used), so the sequence is a pure
function of the seed and the calls made. A rewrite is used at most once per parent,
and no source the generator has produced or been given as a parent is produced again.
``GenContext.rng`` is not used: determinism must not depend on the caller's draws.
"""
from __future__ import annotations

import ast
import math
import random
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .. import strategies as _strategies
from ..detect import detect
from ..model import KernelInfo, Variant, sha256_text
from ..screen import screen_variant
from .base import GenContext, Generation

FAMILIES: tuple[str, ...] = ("block_size", "num_warps", "num_stages", "group_m", "hints", "cache_modifiers", "autotune")
WARPS: tuple[int, ...] = (1, 2, 4, 8, 16)
STAGES: tuple[int, ...] = (1, 2, 3, 4, 5)
GROUPS: tuple[int, ...] = (1, 4, 8, 16)


def _launch_defaults() -> tuple[int, int]:
    """(num_warps, num_stages) a launch gets when it does not say: read from the installed
    Triton's CUDA options (4 and 3 from Triton 2.1 through 3.9); those when unknown."""
    try:
        import dataclasses

        from triton.backends.nvidia.compiler import CUDAOptions  # type: ignore[import-not-found]

        fields = {f.name: f.default for f in dataclasses.fields(CUDAOptions)}
        w, s = fields.get("num_warps"), fields.get("num_stages")
        if isinstance(w, int) and isinstance(s, int):
            return w, s
    except Exception:  # no triton, another layout of its backends: keep the documented defaults
        pass
    return 4, 3


DEFAULT_WARPS, DEFAULT_STAGES = _launch_defaults()  # Triton's defaults when the launch does not say
BLOCK_MIN = 16
BLOCK_MAX_1D = 8192
BLOCK_MAX_ND = 256
ENUMERATE_LIMIT = 256  # most variants enumerate_space returns (deterministic subsample beyond)
AUTOTUNE_MAX_CONFIGS = 8

_BLOCK_RE = re.compile(r"block|tile", re.IGNORECASE)
_GROUP_RE = re.compile(r"^group(_size)?(_[mn])?$", re.IGNORECASE)
_SIZE_RE = re.compile(
    r"^[nmkNMKBHDLSTC]$|^(n|num)_|numel|size|len|elements|rows|cols|^seq|^dim", re.IGNORECASE
)
_MODIFIER_KWS = ("eviction_policy", "cache_modifier")
_NOT_SIZE_RE = re.compile(r"ptr|stride|^alpha$|^beta$|^eps|scale|^p$|seed", re.IGNORECASE)


# --------------------------------------------------------------------------- config identity


class _DropDefaultLaunchKeywords(ast.NodeTransformer):
    """Remove ``num_warps=4`` / ``num_stages=3`` (the defaults) from launches of one kernel."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Subscript):
            v = f.value
            name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
            if name == self.kernel:
                defaults = {"num_warps": DEFAULT_WARPS, "num_stages": DEFAULT_STAGES}
                node.keywords = [
                    k for k in node.keywords
                    if not (k.arg in defaults and isinstance(k.value, ast.Constant) and k.value.value == defaults[k.arg])
                ]
        return node


def config_key(source: str, kernel: str) -> str:
    """Identity of a variant for dedup: its syntax tree (formatting and comments do not
    count) with launch keywords that equal Triton's defaults dropped, so an explicit
    ``num_warps=4`` is the same config as none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return sha256_text(source)
    return sha256_text(ast.dump(_DropDefaultLaunchKeywords(kernel).visit(tree)))


# --------------------------------------------------------------------------- edits

Edit = Callable[[cst.CSTNode], Union[cst.CSTNode, cst.FlattenSentinel]]


class _Apply(cst.CSTTransformer):
    """Apply edits keyed by the id() of nodes of the tree being transformed."""

    def __init__(self, edits: dict[int, list[Edit]]) -> None:
        super().__init__()
        self.edits = edits

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        out = updated_node
        for fn in self.edits.get(id(original_node), ()):
            out = fn(out)
        return out


def _no_ws() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Append ``name=value`` keeping the call's comma and line-break style."""
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=_no_ws())
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        new = new.with_changes(comma=last.comma)
    new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args[-1] = last.with_changes(
        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), whitespace_after_arg=cst.SimpleWhitespace("")
    )
    return call.with_changes(args=[*args, new])


def _remove_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    args = list(call.args)
    keep = [a for a in args if not (a.keyword is not None and a.keyword.value in names)]
    if keep and keep[-1] is not args[-1]:
        keep[-1] = keep[-1].with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
    return call.with_changes(args=keep)


def _set_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Add ``name=value``, or add the keyword ``name`` to an existing argument."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == name:
            args = list(call.args)
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    return _add_kwarg(call, name, value)


def _int_value(node: cst.CSTNode) -> Optional[int]:
    if isinstance(node, cst.Integer):
        try:
            return int(node.evaluated_value)
        except (TypeError, ValueError):
            return None
    return None


def _str_value(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    return None


def _walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if isinstance(n, cst.Name)}


def _pow2_range(lo: int, hi: int) -> list[int]:
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


# --------------------------------------------------------------------------- analysis


@dataclass
class _Knob:
    """One launch-site tunable: a literal to replace, or a keyword to add to a call."""

    kind: str  # "block" | "group" | "num_warps" | "num_stages"
    name: str  # constexpr parameter or launch keyword
    current: int
    values: list[int]  # allowed values, current included, ascending
    call: cst.Call  # the launch
    literal: Optional[cst.Integer]  # None: the keyword is absent, add it
    line: int
    where: str  # enclosing function name
    keyword_literal: bool  # passed as ``name=<int>`` directly at the launch

    @property
    def family(self) -> str:
        return {"block": "block_size", "group": "group_m"}.get(self.kind, self.kind)

    def edits(self, value: int) -> dict[int, list[Edit]]:
        lit = cst.Integer(str(value))
        if self.literal is not None:
            return {id(self.literal): [lambda n, lit=lit: lit]}
        return {id(self.call): [lambda n, lit=lit: _set_kwarg(n, self.name, lit)]}  # type: ignore[arg-type]

    def distance(self, value: int) -> float:
        if self.kind == "num_stages":
            return float(abs(value - self.current))
        if self.kind == "group":
            idx = {v: i for i, v in enumerate(self.values)}
            return float(abs(idx[value] - idx[self.current]))
        return abs(math.log2(value) - math.log2(self.current))

    def label(self) -> str:
        return f"{self.name} {self.current}" + (" (default)" if self.literal is None else "")


@dataclass
class _Rewrite:
    family: str
    key: str
    description: str
    distance: float
    edits: dict[int, list[Edit]]
    _source: Optional[str] = None
    _key: Optional[str] = None


@dataclass
class _Analysis:
    info: KernelInfo
    render: Callable[[dict[int, list[Edit]]], str]
    knobs: list[_Knob] = field(default_factory=list)
    rewrites: list[_Rewrite] = field(default_factory=list)

    def source_of(self, rw: _Rewrite) -> str:
        if rw._source is None:
            rw._source = self.render(rw.edits)
        return rw._source

    def key_of(self, rw: _Rewrite, kernel: str) -> str:
        if rw._key is None:
            rw._key = config_key(self.source_of(rw), kernel)
        return rw._key


def _merge(*parts: dict[int, list[Edit]]) -> dict[int, list[Edit]]:
    out: dict[int, list[Edit]] = {}
    for p in parts:
        for k, fns in p.items():
            out.setdefault(k, []).extend(fns)
    return out


class _Analyzer:
    def __init__(self, source: str, kernel: str) -> None:
        self.source = source
        self.kernel = kernel
        self.tree = ast.parse(source)
        det = detect(source)
        info = det.kernel(kernel)
        if info is None:
            raise LookupError(f"no Triton kernel {kernel!r}")
        self.info = info
        self.module = cst.parse_module(source)
        self.wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        self.pos = self.wrapper.resolve(PositionProvider)
        self.kdef = next(
            (s for s in self.module.body if isinstance(s, cst.FunctionDef) and s.name.value == kernel), None
        )
        if self.kdef is None:
            raise LookupError(f"no top-level definition of {kernel!r}")
        self._nodes: Optional[dict[int, cst.CSTNode]] = None
        self._line_starts: list[int] = []
        self.params = [p.name for p in info.params]
        self.constexprs = set(info.constexpr_params)
        self.lang = self._language_names()
        self.has_loop = any(isinstance(n, (cst.For, cst.While)) for n in _walk(self.kdef.body))
        self.loop_names: set[str] = set()
        for n in _walk(self.kdef.body):
            if isinstance(n, cst.For):
                self.loop_names |= _names_in(n.iter)
            elif isinstance(n, cst.While):
                self.loop_names |= _names_in(n.test)

    # ---- rendering
    def render(self, edits: dict[int, list[Edit]]) -> str:
        """The module with the edits applied. Edits that only touch integer literals and
        launch calls are spliced into the text (a whole-module visit costs ~10 ms, and
        enumerate_space renders hundreds of points); anything else visits the module."""
        fast = self._splice_text(edits)
        return fast if fast is not None else self.module.visit(_Apply(edits)).code

    def _splice_text(self, edits: dict[int, list[Edit]]) -> Optional[str]:
        if self._nodes is None:
            self._nodes = {id(n): n for n in _walk(self.module) if isinstance(n, (cst.Integer, cst.Call))}
            starts = [0]
            for ln in self.source.splitlines(keepends=True):
                starts.append(starts[-1] + len(ln))
            self._line_starts = starts
        spans = []
        for key in edits:
            node = self._nodes.get(key)
            if node is None or node not in self.pos:
                return None
            r = self.pos[node]
            spans.append((self._line_starts[r.start.line - 1] + r.start.column,
                          self._line_starts[r.end.line - 1] + r.end.column, node))
        spans.sort(key=lambda t: (t[0], -t[1]))
        top: list[tuple[int, int, cst.CSTNode]] = []
        for span in spans:
            if top and span[0] < top[-1][1]:
                if span[1] > top[-1][1]:
                    return None  # overlapping, not nested: let libcst sort it out
                continue  # nested: rendered with its enclosing node
            top.append(span)
        out = self.source
        for start, end, node in reversed(top):
            # code_for_node leaves out the indentation of the enclosing block on
            # continuation lines: put it back, and check it reproduces the original
            line = self.source[self._line_starts[self.pos[node].start.line - 1]:]
            indent = line[: len(line) - len(line.lstrip(" \t"))]

            def text(n: cst.CSTNode) -> str:
                return self.module.code_for_node(n).replace("\n", "\n" + indent)

            if text(node) != self.source[start:end]:
                return None
            new = node.visit(_Apply(edits))
            if not isinstance(new, cst.CSTNode):
                return None
            out = out[:start] + text(new) + out[end:]
        return out

    # ---- helpers
    def _language_names(self) -> set[str]:
        """Expressions (as code) that name triton.language: "tl", "triton.language"."""
        out = {"triton.language"}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "triton.language" and a.asname:
                        out.add(a.asname)
                    elif a.name == "triton" and a.asname:
                        out.add(f"{a.asname}.language")
            elif isinstance(node, ast.ImportFrom) and node.module == "triton":
                for a in node.names:
                    if a.name == "language":
                        out.add(a.asname or "language")
        return out

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line(self, node: cst.CSTNode) -> int:
        return self.pos[node].start.line

    def is_lang_call(self, node: cst.CSTNode, attr: str) -> bool:
        return (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == attr
            and self.code(node.func.value) in self.lang
        )

    def triton_names(self) -> Optional[tuple[str, str]]:
        """How to spell triton.autotune and triton.Config in this module."""
        direct: dict[str, str] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "triton":
                        m = a.asname or "triton"
                        return f"{m}.autotune", f"{m}.Config"
            elif isinstance(node, ast.ImportFrom) and node.module == "triton":
                for a in node.names:
                    direct[a.name] = a.asname or a.name
        if "autotune" in direct and "Config" in direct:
            return direct["autotune"], direct["Config"]
        return None

    # ---- launch sites
    def launches(self) -> list[tuple[cst.Call, Optional[cst.FunctionDef]]]:
        out = []
        for stmt in self.module.body:
            fn = stmt if isinstance(stmt, cst.FunctionDef) else None
            if fn is not None and fn.name.value == self.kernel:
                continue
            for n in _walk(stmt):
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Subscript):
                    v = n.func.value
                    name = v.value if isinstance(v, cst.Name) else v.attr.value if isinstance(v, cst.Attribute) else None
                    if name == self.kernel:
                        out.append((n, fn))
        return out

    def _assignments(self, scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
        """Statements in scope that bind ``name`` (assign, aug-assign, def, for target...)."""
        out: list[cst.CSTNode] = []
        for n in _walk(scope):
            if isinstance(n, cst.Assign):
                if any(name in _names_in(t.target) for t in n.targets):
                    out.append(n)
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
                if name in _names_in(n.target):
                    out.append(n)
            elif isinstance(n, cst.FunctionDef) and n.name.value == name:
                out.append(n)
            elif isinstance(n, (cst.For, cst.CompFor)) and name in _names_in(n.target):
                out.append(n)
        return out

    def _literal_var(self, fn: Optional[cst.FunctionDef], name: str) -> Optional[cst.Integer]:
        """The literal of ``name = <int>`` when that is the only binding in the function."""
        if fn is None:
            return None
        binds = self._assignments(fn.body, name)
        if len(binds) != 1 or not isinstance(binds[0], cst.Assign) or len(binds[0].targets) != 1:
            return None
        a = binds[0]
        if isinstance(a.targets[0].target, cst.Name) and _int_value(a.value) is not None:
            return a.value  # type: ignore[return-value]
        return None

    @staticmethod
    def _uses(fn: Optional[cst.FunctionDef], name: str) -> int:
        """How often ``name`` appears in fn as a variable (keyword names excluded)."""
        if fn is None:
            return 0
        keywords = {id(a.keyword) for a in _walk(fn) if isinstance(a, cst.Arg) and a.keyword is not None}
        return sum(1 for n in _walk(fn) if isinstance(n, cst.Name) and n.value == name and id(n) not in keywords)

    def grid_definition(self, call: cst.Call, fn: Optional[cst.FunctionDef]) -> tuple[cst.CSTNode, bool]:
        """(the node that computes the grid, whether it is a callable taking meta)."""
        sub = call.func
        assert isinstance(sub, cst.Subscript)
        el = sub.slice[0].slice
        grid = el.value if isinstance(el, cst.Index) else el
        if isinstance(grid, cst.Name):
            scopes = [fn.body] if fn is not None else []
            for scope in scopes + [self.module]:
                binds = self._assignments(scope, grid.value)
                if binds:
                    b = binds[-1]
                    if isinstance(b, cst.FunctionDef):
                        return b, len(b.params.params) >= 1
                    value = getattr(b, "value", None)
                    if isinstance(value, cst.Lambda):
                        return value, len(value.params.params) >= 1
                    return b, False
            return grid, False
        if isinstance(grid, cst.Lambda):
            return grid, len(grid.params.params) >= 1
        return grid, False

    # ---- knobs
    def knobs(self) -> list[_Knob]:
        knobs: list[_Knob] = []
        seen: set[int] = set()
        n_blocks = sum(1 for p in self.constexprs if _BLOCK_RE.search(p))
        block_hi = BLOCK_MAX_1D if n_blocks <= 1 else BLOCK_MAX_ND
        for call, fn in self.launches():
            where = fn.name.value if fn is not None else "module level"
            line = self.line(call)
            grid_def, _ = self.grid_definition(call, fn)
            grid_strings = {s for s in (_str_value(n) for n in _walk(grid_def)) if s}
            passed: dict[str, cst.Arg] = {}
            for i, a in enumerate(call.args):
                if a.star:
                    break
                if a.keyword is not None:
                    passed[a.keyword.value] = a
                elif i < len(self.params) and not self.params[i].startswith("*"):
                    passed[self.params[i]] = a
            for pname, arg in passed.items():
                if pname in ("num_warps", "num_stages"):
                    continue
                kind = "block" if _BLOCK_RE.search(pname) else "group" if _GROUP_RE.search(pname) else None
                if kind is None or pname not in self.constexprs:
                    continue
                lit: Optional[cst.Integer] = arg.value if _int_value(arg.value) is not None else None  # type: ignore[assignment]
                shared = False
                if lit is None and isinstance(arg.value, cst.Name):
                    lit = self._literal_var(fn, arg.value.value)
                    shared = self._uses(fn, arg.value.value) > 2  # assigned, launched, and e.g. in the grid
                if lit is None or id(lit) in seen:
                    continue
                seen.add(id(lit))
                cur = _int_value(lit)
                assert cur is not None
                if kind == "block":
                    free = pname in grid_strings or shared or pname in self.loop_names
                    lo = cur if not free else min(BLOCK_MIN, cur)
                    values = sorted(set(_pow2_range(lo, max(block_hi, cur))) | {cur})
                else:
                    values = sorted(set(GROUPS) | {cur})
                if len(values) > 1:
                    knobs.append(
                        _Knob(kind, pname, cur, values, call, lit, self.line(lit), where,
                              keyword_literal=arg.keyword is not None and arg.value is lit)
                    )
            if self.info.is_autotuned:
                continue  # warps and stages come from the autotuner's configs
            for kw, default, allowed, wanted in (
                ("num_warps", DEFAULT_WARPS, WARPS, True),
                ("num_stages", DEFAULT_STAGES, STAGES, self.has_loop),
            ):
                if not wanted:
                    continue
                arg = passed.get(kw)
                if arg is None:
                    knobs.append(_Knob(kw, kw, default, list(allowed), call, None, line, where, False))
                elif _int_value(arg.value) is not None:
                    cur = _int_value(arg.value)
                    assert cur is not None
                    knobs.append(
                        _Knob(kw, kw, cur, sorted(set(allowed) | {cur}), call, arg.value, line, where, True)  # type: ignore[arg-type]
                    )
        return knobs

    # ---- hints
    def hint_edits(self) -> tuple[dict[int, list[Edit]], list[str]]:
        edits: dict[int, list[Edit]] = {}
        done: list[str] = []
        for block in (n for n in _walk(self.kdef) if isinstance(n, cst.IndentedBlock)):
            body = list(block.body)
            products: dict[str, str] = {}  # temp name -> BLOCK it is a multiple of
            for i, stmt in enumerate(body):
                target, value = self._simple_assign(stmt)
                if target is None or value is None:
                    continue
                mult = self._multiple_of_block(value)
                if mult:
                    products[target] = mult
                    continue
                b = self._offsets_block(value, products)
                if not b:
                    continue
                nxt = body[i + 1] if i + 1 < len(body) else None
                if nxt is not None and ("multiple_of" in self.code(nxt) or "max_contiguous" in self.code(nxt)):
                    continue
                lang = self._arange_lang(value)
                new = cst.parse_statement(f"{target} = {lang}.max_contiguous({lang}.multiple_of({target}, {b}), {b})\n")
                edits[id(stmt)] = [lambda n, new=new: cst.FlattenSentinel([n, new])]  # type: ignore[misc]
                done.append(f"{target} (line {self.line(stmt)})")
        return edits, done

    @staticmethod
    def _simple_assign(stmt: cst.CSTNode) -> tuple[Optional[str], Optional[cst.BaseExpression]]:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None, None
        a = stmt.body[0]
        if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
        return None, None

    def _multiple_of_block(self, e: cst.BaseExpression) -> Optional[str]:
        """``x * B`` or ``B * x`` with B a constexpr parameter -> B."""
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply):
            for side in (e.left, e.right):
                if isinstance(side, cst.Name) and side.value in self.constexprs:
                    return side.value
        return None

    def _arange_block(self, e: cst.BaseExpression) -> Optional[str]:
        if self.is_lang_call(e, "arange"):
            args = e.args  # type: ignore[attr-defined]
            if len(args) == 2 and _int_value(args[0].value) == 0 and isinstance(args[1].value, cst.Name):
                return args[1].value.value
        return None

    def _arange_lang(self, e: cst.BinaryOperation) -> str:  # type: ignore[override]
        for side in (e.left, e.right):
            if self._arange_block(side):
                return self.code(side.func.value)  # type: ignore[attr-defined]
        return "tl"

    def _offsets_block(self, e: cst.BaseExpression, products: dict[str, str]) -> Optional[str]:
        if not (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add)):
            return None
        for ar, other in ((e.left, e.right), (e.right, e.left)):
            b = self._arange_block(ar)
            if not b or b not in self.constexprs:
                continue
            if self._multiple_of_block(other) == b:
                return b
            if isinstance(other, cst.Name) and products.get(other.value) == b:
                return b
        return None

    # ---- memory accesses
    def accesses(self, attr: str) -> list[cst.Call]:
        return [n for n in _walk(self.kdef.body) if self.is_lang_call(n, attr)]  # type: ignore[misc]

    @staticmethod
    def _has_kw(call: cst.Call, name: str) -> bool:
        return any(a.keyword is not None and a.keyword.value == name for a in call.args)

    def cache_rewrites(self) -> list[tuple[str, str, dict[int, list[Edit]]]]:
        out = []
        loads = [c for c in self.accesses("load") if sum(1 for a in c.args if a.keyword is None) <= 3]
        stores = [c for c in self.accesses("store") if sum(1 for a in c.args if a.keyword is None) <= 3]
        loads = [c for c in loads if not self._has_kw(c, "volatile")]
        for key, calls, kw, value, what in (
            ("evict_first", loads, "eviction_policy", '"evict_first"', "loads"),
            ("evict_last", loads, "eviction_policy", '"evict_last"', "loads"),
            ("load_cg", loads, "cache_modifier", '".cg"', "loads"),
            ("store_cs", stores, "cache_modifier", '".cs"', "stores"),
        ):
            # one modifier per access: a load given both an eviction policy and a cache
            # modifier (access_layout applied twice) fails to compile on the GPU
            todo = [c for c in calls if not any(self._has_kw(c, k) for k in _MODIFIER_KWS)]
            if not todo:
                continue
            v = cst.SimpleString(value)
            edits = {id(c): [lambda n, v=v, kw=kw: _add_kwarg(n, kw, v)] for c in todo}  # type: ignore[misc]
            lines = ", ".join(str(self.line(c)) for c in todo)
            out.append((key, f"{kw}={value} on {len(todo)} {what} of {self.kernel} (lines {lines})", edits))
        return out

    # ---- autotune
    def pointer_roots(self, e: cst.CSTNode, roots: dict[str, set[str]]) -> set[str]:
        """Parameters an address expression is based on: its leftmost term, through
        locals (``a_ptrs = a_ptr + ...``), subscripts and ``tl.make_block_ptr``."""
        while True:
            if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Add, cst.Subtract)):
                e = e.left
            elif isinstance(e, cst.Subscript):
                e = e.value
            elif (self.is_lang_call(e, "make_block_ptr") or self.is_lang_call(e, "advance")) and e.args:  # type: ignore[attr-defined]
                base = next((a for a in e.args if a.keyword is not None and a.keyword.value == "base"), e.args[0])  # type: ignore[attr-defined]
                e = base.value
            else:
                break
        if isinstance(e, cst.Name):
            return roots.get(e.value, {e.value} if e.value in self.params else set())
        return set()

    def in_place_or_atomic(self) -> bool:
        """Atomics, or a store through a pointer parameter the kernel also loads from."""
        if any(
            isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value.startswith("atomic_")
            for n in _walk(self.kdef.body)
        ):
            return True
        roots: dict[str, set[str]] = {}
        loaded: set[str] = set()
        stored: set[str] = set()
        for n in _walk(self.kdef.body):  # pre-order walk follows statement order
            if isinstance(n, cst.Assign):
                r = self.pointer_roots(n.value, roots)
                for t in n.targets:
                    if isinstance(t.target, cst.Name):
                        roots[t.target.value] = roots.get(t.target.value, set()) | r
            elif self.is_lang_call(n, "load") and n.args:  # type: ignore[attr-defined]
                loaded |= self.pointer_roots(n.args[0].value, roots)  # type: ignore[attr-defined]
            elif self.is_lang_call(n, "store") and n.args:  # type: ignore[attr-defined]
                stored |= self.pointer_roots(n.args[0].value, roots)  # type: ignore[attr-defined]
        return bool(loaded & stored)

    def size_args(self) -> list[str]:
        cands = [p for p in self.params if p not in self.constexprs and not p.startswith("*")]
        return [p for p in cands if _SIZE_RE.search(p) and not _NOT_SIZE_RE.search(p)]

    def autotune_rewrite(self, knobs: list[_Knob]) -> Optional[tuple[str, dict[int, list[Edit]]]]:
        if self.info.is_autotuned or self.in_place_or_atomic():
            return None
        names = self.triton_names()
        key = self.size_args()
        launches = self.launches()
        if names is None or not key or not launches:
            return None
        tuned: dict[str, _Knob] = {}
        extra: dict[str, _Knob] = {}
        for call, fn in launches:
            grid_def, callable_meta = self.grid_definition(call, fn)
            if not callable_meta:
                return None
            mine = [k for k in knobs if k.call is call]
            for k in mine:
                if k.kind in ("block", "group"):
                    if not k.keyword_literal:
                        return None
                    other = tuned.get(k.name)
                    if other is not None and other.current != k.current:
                        return None
                    tuned[k.name] = k
                elif k.literal is not None and not k.keyword_literal:
                    return None
                else:
                    extra[k.kind] = k
            # a constexpr the kernel needs that this launch gives in any other form
            for a in call.args:
                if a.keyword is not None and a.keyword.value in ("num_warps", "num_stages") and _int_value(a.value) is None:
                    return None
        if not any(k.kind == "block" for k in tuned.values()):
            return None
        configs = self._configs(tuned, extra)
        atune, config = names
        lines = [f"@{atune}(", "    configs=["]
        for params, w, s in configs:
            kv = ", ".join(f'"{p}": {v}' for p, v in params.items())
            stages = f", num_stages={s}" if s is not None else ""
            lines.append(f"        {config}({{{kv}}}, num_warps={w}{stages}),")
        keys = ", ".join(f'"{k}"' for k in key)
        lines += ["    ],", f"    key=[{keys}],", ")"]
        deco = cst.parse_module("\n".join(lines) + "\ndef _f():\n    pass\n").body[0].decorators[0]  # type: ignore[attr-defined]
        edits: dict[int, list[Edit]] = {
            id(self.kdef): [lambda n: n.with_changes(decorators=[deco, *n.decorators])]  # type: ignore[attr-defined]
        }
        drop = set(tuned) | {k.name for k in extra.values() if k.literal is not None}
        for call, _fn in launches:
            edits.setdefault(id(call), []).append(lambda n, drop=drop: _remove_kwargs(n, drop))  # type: ignore[misc]
        desc = f"@autotune over {len(configs)} configs of {', '.join(sorted(tuned))}, num_warps" + (
            ", num_stages" if "num_stages" in extra else ""
        ) + f" keyed on {', '.join(key)} for {self.kernel}"
        return desc, edits

    @staticmethod
    def _configs(tuned: dict[str, _Knob], extra: dict[str, _Knob]) -> list[tuple[dict[str, int], int, Optional[int]]]:
        w0 = extra["num_warps"].current if "num_warps" in extra else DEFAULT_WARPS
        s0 = extra["num_stages"].current if "num_stages" in extra else None
        base = {n: k.current for n, k in tuned.items()}
        blocks = [n for n, k in tuned.items() if k.kind == "block"]

        def scaled(names: list[str], f: float) -> Optional[dict[str, int]]:
            out = dict(base)
            for n in names:
                v = int(base[n] * f)
                if v not in tuned[n].values:
                    return None
                out[n] = v
            return out

        def grouped(params: Optional[dict[str, int]]) -> Optional[dict[str, int]]:
            groups = [n for n, k in tuned.items() if k.kind == "group" and 8 in k.values]
            if params is None or not groups or all(params[n] == 8 for n in groups):
                return None
            return {**params, **{n: 8 for n in groups}}

        w_up = min(w0 * 2, WARPS[-1])
        s_up = None if s0 is None else min(s0 + 1, STAGES[-1])
        cands: list[tuple[Optional[dict[str, int]], int, Optional[int]]] = [
            (base, w0, s0),
            (scaled(blocks, 2), w0, s0),
            (scaled(blocks, 2), w_up, s0),
            (grouped(scaled(blocks, 2)), w0, s0),
            (base, w_up, s0),
            (scaled(blocks, 0.5), w0, s0),
            (base, w0, s_up),
            (scaled(blocks, 2), w0, s_up),
        ]
        for n in blocks:
            cands += [(scaled([n], 2), w0, s0), (scaled([n], 0.5), w0, s0)]
        out: list[tuple[dict[str, int], int, Optional[int]]] = []
        seen: set[str] = set()
        for params, w, s in cands:
            if params is None:
                continue
            sig = repr((sorted(params.items()), w, s))
            if sig not in seen:
                seen.add(sig)
                out.append((params, w, s))
        return out[:AUTOTUNE_MAX_CONFIGS]

    # ---- everything
    def analyse(self, families: set[str]) -> _Analysis:
        an = _Analysis(self.info, self.render, self.knobs())
        for k in an.knobs:
            if k.family not in families:
                continue
            for v in k.values:
                if v == k.current:
                    continue
                desc = f"{k.label()} -> {v} at {k.where} line {k.line}"
                an.rewrites.append(_Rewrite(k.family, f"{k.kind}:{k.name}:{k.line}:{v}", desc, k.distance(v), k.edits(v)))
        if "hints" in families:
            edits, done = self.hint_edits()
            if edits:
                desc = f"tl.multiple_of/tl.max_contiguous hints on {', '.join(done)} in {self.kernel}"
                an.rewrites.append(_Rewrite("hints", "hints", desc, 1.0, edits))
        if "cache_modifiers" in families:
            for key, desc, edits in self.cache_rewrites():
                an.rewrites.append(_Rewrite("cache_modifiers", key, desc, 1.0, edits))
        if "autotune" in families:
            at = self.autotune_rewrite(an.knobs)
            if at is not None:
                an.rewrites.append(_Rewrite("autotune", "autotune", at[0], 1.0, at[1]))
        return an


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
        **_ignored: object,
    ) -> None:
        self.seed = int(seed)
        self.strategies = tuple(s for s in (strategies or _strategies.STRATEGY_NAMES) if s in _strategies.STRATEGIES)
        self.enumerate_limit = int(enumerate_limit)
        self.families = set(FAMILIES) - (set() if autotune else {"autotune"})
        self._analyses: dict[tuple[str, str], Optional[_Analysis]] = {}
        self._used: dict[str, set[str]] = {}  # parent id -> rewrite keys used
        self._seen: set[str] = set()  # config keys of every source produced or seen as a parent

    # ---- internals
    def _analysis(self, parent: Variant, kernel: str) -> Optional[_Analysis]:
        key = (sha256_text(parent.source), kernel)
        if key not in self._analyses:
            try:
                self._analyses[key] = _Analyzer(parent.source, kernel).analyse(self.families)
            except (LookupError, SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError):
                self._analyses[key] = None
        self._seen.add(config_key(parent.source, kernel))
        return self._analyses[key]

    def _available(self, parent: Variant, kernel: str, strategy: str) -> list[_Rewrite]:
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
        an = self._analysis(parent, ctx.kernel)
        if an is None:
            return Generation(None, message=f"rules: cannot analyse kernel {ctx.kernel}")
        used = self._used.setdefault(parent.id, set())
        while True:
            avail = self._available(parent, ctx.kernel, strategy)
            if not avail:
                return Generation(None, message=f"rules: no untried {strategy} rewrite for this kernel")
            nearest = min(rw.distance for rw in avail)
            group = sorted((rw for rw in avail if rw.distance == nearest), key=lambda r: r.key)
            rng = random.Random(f"{self.seed}:{parent.id}:{strategy}:{len(used)}")
            rw = rng.choice(group)
            used.add(rw.key)
            source = an.source_of(rw)
            self._seen.add(an.key_of(rw, ctx.kernel))
            reason = screen_variant(parent.source, source, ctx.kernel, ctx.harness or None)
            if reason is None:
                break
            # a rewrite that fails the screen is a bug here; never hand it on
        variant = Variant(source, parent=parent.id, strategy=strategy, generator=self.name, description=rw.description)
        return Generation(variant, message=rw.description)

    def enumerate_space(self, original: Variant, kernel: str) -> list[Variant]:
        """The product of the launch-site tunables (block sizes x num_warps x num_stages x
        group size), without the original's own point. Beyond ``enumerate_limit`` points,
        a deterministic (seeded) subsample of that many. Variants have strategy None."""
        try:
            analyzer = _Analyzer(original.source, kernel)
        except (LookupError, SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError):
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
            edits: dict[int, list[Edit]] = {}
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

