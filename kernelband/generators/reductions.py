"""Which constexprs bound a reduction that one block covers: the block sizes a rewrite
must leave alone, because another value changes what the kernel computes.

A reduction (``tl.sum``, ``tl.max``, ``tl.min``, ``tl.reduce``, ``tl.argmax``, ``tl.xor_sum``,
a scan: ``tl.cumsum``, ``tl.associative_scan``; ``tl.sort``, ``tl.flip``, ``tl.gather``...;
``tl.dot``'s K) over an axis whose extent is ``BLOCK`` combines the ``BLOCK`` elements
that axis holds. A softmax with ``cols = tl.arange(0, BLOCK)`` and no loop over the row
reduces the first ``BLOCK`` columns of a row: another block reduces other columns, a
different result whenever the row is longer than the smaller of the two. The block only
changes the order of the combination when the kernel covers the whole reduced dimension
tile by tile and combines the tiles:

- a loop steps over the dimension by that block (``for off in range(0, n, BLOCK)``, or
  ``range(0, tl.cdiv(n, BLOCK))``, neither bound reading the block) and the reduction
  either runs in the loop, its result carried into the next iteration and stored nowhere
  in it (``acc += tl.sum(...)``, ``m_i = tl.maximum(m_i, tl.max(s, 1))``), or comes after
  the loop and reduces a value the loop carries (``_mean += x`` ... ``tl.sum(_mean)``);
- the programs tile the dimension (``pid * BLOCK + tl.arange(0, BLOCK)``) and the
  reduction's result goes only into atomics whose address does not depend on that
  program id (``tl.atomic_max(amax_ptr, tl.max(y))``).

The axes come from a small shape inference over the kernel body: a value's shape is a
tuple of dimensions, each the set of constexprs its extent is computed from
(``tl.arange(0, BLOCK)``, ``tl.zeros([BLOCK_M, BLOCK_N])``, ``x[:, None]``, broadcasting,
``tl.load`` of a block of pointers, block pointers, ``tl.trans``...). What it cannot
follow counts against the rewrite: an operand of unknown shape is reduced over every
constexpr it is computed from, a function it does not know (or a helper of the module
that reduces) reduces all of its arguments' constexprs, and a loop or an atomic of
another form covers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

import libcst as cst

from .edits import KernelSource, int_value
from .launch_sites import callee_name

Dim = Optional[frozenset[str]]  # the constexprs an extent is computed from; None: a broadcast 1
Shape = Optional[tuple[Dim, ...]]  # None: not known

# along one axis: name -> (position of the axis argument, counting the input; its
# keyword; whether the result drops the axis). No axis: every axis (cumsum: axis 0).
_AXIS_OPS: dict[str, tuple[int, str, bool]] = {
    **{n: (1, "axis", True) for n in ("sum", "max", "min", "xor_sum", "argmax", "argmin", "reduce", "reduce_or")},
    **{n: (1, "axis", False) for n in ("cumsum", "cumprod", "associative_scan")},
    **{n: (1, "dim", False) for n in ("sort", "flip", "softmax", "bitonic_merge")},
    "topk": (2, "dim", False),
    "gather": (2, "axis", False),
}
_AXIS_ZERO = {"cumsum", "cumprod"}
_MIX_ALL = {"dot", "dot_scaled", "histogram", "cat"}  # across the axes of every argument (dot: when not followed)
_ELEMENTWISE = {
    "abs",
    "add",
    "sub",
    "mul",
    "cast",
    "ceil",
    "floor",
    "clamp",
    "cos",
    "sin",
    "div_rn",
    "erf",
    "exp",
    "exp2",
    "fdiv",
    "fma",
    "log",
    "log2",
    "maximum",
    "minimum",
    "rsqrt",
    "sigmoid",
    "sqrt",
    "sqrt_rn",
    "umulhi",
    "where",
    "inline_asm_elementwise",
    "map_elementwise",
    "to",
    "rand",
    "randn",
    "randint",
    "rand4x",
    "randn4x",
    "randint4x",
    "logical_and",
    "logical_or",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
}
_SAME_SHAPE = {"load", "advance", "zeros_like", "multiple_of", "max_contiguous", "max_constancy"}
_SCALAR = {
    "program_id",
    "num_programs",
    "cdiv",
    "float",
    "int",
    "bool",
    "len",
    "range",
    "static_range",
    "store",
    "device_assert",
    "device_print",
    "static_assert",
    "static_print",
    "debug_barrier",
    "assume",
    "store_tensor_descriptor",
    "atomic_store",
}
# known, reducing nothing, the shape of their result not followed
_UNFOLLOWED = {
    "split",
    "join",
    "interleave",
    "swizzle2d",
    "squeeze",
    "slice",
    "broadcast",
    "item",
    "philox",
    "philox_impl",
    "pair_uniform_to_normal",
    "uint_to_uniform_float",
    "make_tensor_descriptor",
    "load_tensor_descriptor",
    "to_tensor",
    "tuple",
    "atomic_load",
    "atomic_poll",
}
_BUILTINS = {"min", "max", "abs"}  # Triton makes these builtins elementwise ops


@dataclass
class Reduction:
    """A reduction of the kernel body: its call, what it reduces, and the constexprs its
    reduced axes' extents are computed from."""

    call: cst.Call
    operand: cst.CSTNode
    extents: frozenset[str]


def _broadcast(*shapes: Shape) -> Shape:
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes if s is not None), default=0)
    out: list[Dim] = [None] * rank
    for s in shapes:
        assert s is not None
        for i, d in enumerate((None,) * (rank - len(s)) + s):
            if d is not None:
                have = out[i]
                out[i] = d if have is None else have | d
    return tuple(out)


def _union(dims: Iterable[Dim]) -> frozenset[str]:
    return frozenset().union(*(d for d in dims if d is not None))


def _dotted(e: cst.CSTNode) -> bool:
    return isinstance(e, cst.Name) or isinstance(e, cst.Attribute) and _dotted(e.value)


class _BodyFlow:
    """Names of the kernel body: what each is bound to, what an expression reads
    (transitively), the constexprs it is computed from; calls of the language."""

    def __init__(self, ks: KernelSource) -> None:
        self.ks = ks
        self.body = ks.kdef.body
        # libcst computes a node's children on every access: the body's, once
        self._kids: dict[int, list[cst.CSTNode]] = {}
        stack: list[cst.CSTNode] = [self.body]
        while stack:
            n = stack.pop()
            self._kids[id(n)] = kids = list(n.children)
            stack.extend(kids)
        self._reads: dict[int, set[str]] = {}
        self.values: dict[str, list[cst.BaseExpression]] = {}  # name -> every value bound to it in the body
        for n in self.walk(self.body):
            value = self.bound_value(n)
            if value is not None:
                for name in self.assigned_by(n):
                    self.values.setdefault(name, []).append(value)
        self.owner: dict[int, cst.CSTNode] = {}  # id(node) -> the small statement holding it
        for n in self.walk(self.body):
            if isinstance(n, cst.SimpleStatementLine):
                for small in n.body:
                    self.owner.update((id(m), small) for m in self.walk(small))

    @staticmethod
    def target_names(t: cst.CSTNode) -> list[str]:
        if isinstance(t, cst.Name):
            return [t.value]
        if isinstance(t, (cst.Tuple, cst.List)):
            return [n for e in t.elements for n in _BodyFlow.target_names(e.value)]
        return []

    @staticmethod
    def bound_value(n: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """What a binding statement binds its names to (a ``for``: its iterable)."""
        if isinstance(n, cst.For):
            return n.iter
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            return n.value
        return None

    def assigned_by(self, n: cst.CSTNode) -> list[str]:
        if isinstance(n, cst.Assign):
            return [x for t in n.targets for x in self.target_names(t.target)]
        if isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)):
            return self.target_names(n.target)
        return []

    def walk(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """``edits.walk``, through the children cached for the kernel body."""
        out, stack = [], [node]
        while stack:
            n = stack.pop()
            out.append(n)
            kids = self._kids.get(id(n))
            stack.extend(reversed(kids if kids is not None else list(n.children)))
        return out

    def reads(self, node: cst.CSTNode) -> set[str]:
        """Names an expression reads (keywords and attribute names left out)."""
        got = self._reads.get(id(node))
        if got is None:
            nodes = self.walk(node)
            skip = {id(n.keyword) for n in nodes if isinstance(n, cst.Arg) and n.keyword is not None}
            skip |= {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
            got = self._reads[id(node)] = {n.value for n in nodes if isinstance(n, cst.Name) and id(n) not in skip}
        return got

    def reach(self, node: cst.CSTNode, single: bool = False) -> set[str]:
        """The names an expression reads, and those their values read, transitively;
        with ``single``, only through names bound once (what it surely reads)."""
        return self.reach_names(self.reads(node), single)

    def reach_names(self, names: Iterable[str], single: bool = False) -> set[str]:
        out: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in out:
                out.add(name)
                if not single or len(self.values.get(name, [])) == 1:
                    todo += [r for v in self.values.get(name, []) for r in self.reads(v)]
        return out

    def deps(self, node: Optional[cst.CSTNode]) -> frozenset[str]:
        """The constexprs an expression is computed from."""
        return frozenset(self.reach(node) & self.ks.constexprs) if node is not None else frozenset()

    def flows(self, scope: cst.CSTNode, start: set[str]) -> set[str]:
        """``start`` and every name bound (in ``scope``) to a value read from one of them."""
        edges: dict[str, set[str]] = {}
        for n in self.walk(scope):
            value = getattr(n, "value", None)
            if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and value is not None:
                for r in self.reads(value):
                    edges.setdefault(r, set()).update(self.assigned_by(n))
        out, todo = set(start), list(start)
        while todo:
            for m in edges.get(todo.pop(), ()):
                if m not in out:
                    out.add(m)
                    todo.append(m)
        return out

    def inside(self, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
        return any(n is node for n in self.walk(scope))

    @staticmethod
    def arg(call: cst.Call, pos: int, kw: str) -> Optional[cst.BaseExpression]:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == kw:
                return a.value
        positional = [a for a in call.args if a.keyword is None and not a.star]
        return positional[pos].value if pos < len(positional) else None

    def lang_name(self, call: cst.Call) -> Optional[str]:
        """The function of a call of triton.language (or of its math / libdevice modules)."""
        f = call.func
        if not isinstance(f, cst.Attribute) or not _dotted(f.value):
            return None
        base = self.ks.code(f.value)
        if base in self.ks.lang or any(base.startswith(p + ".") for p in self.ks.lang) or self.libm(f.value):
            return f.attr.value
        return None

    def libm(self, base: cst.CSTNode) -> bool:
        """``libdevice`` / ``math`` modules: elementwise functions only."""
        return _dotted(base) and self.ks.code(base).split(".")[-1] in ("libdevice", "math")


class _Shapes(_BodyFlow):
    """The shape inference (see the module docstring): walks the body in order, each
    loop twice (what one iteration carries into the next), and records every reduction
    with the constexprs of the axes it reduces."""

    def __init__(self, ks: KernelSource) -> None:
        super().__init__(ks)
        self.helpers = {s.name.value: s for s in ks.module.body if isinstance(s, cst.FunctionDef)}
        self.reductions: dict[int, Reduction] = {}
        self.env: dict[str, Shape] = {}
        self._seen: set[int] = set()  # the calls the walk reached
        self._block(self.body.body)
        for n in self.walk(self.body):  # a reduction the walk did not reach: over all it is computed from
            if isinstance(n, cst.Call) and id(n) not in self._seen and self.mixes(n):
                self.record(n, n, self.deps(n))

    def mixes(self, call: cst.Call) -> bool:
        f = call.func
        return (
            isinstance(f, cst.Attribute)
            and (f.attr.value in _AXIS_OPS or f.attr.value in _MIX_ALL)
            and not self.libm(f.value)
        )

    def record(self, call: cst.Call, operand: cst.CSTNode, extents: Iterable[str]) -> None:
        self.reductions[id(call)] = Reduction(call, operand, frozenset(extents) & self.ks.constexprs)

    def _block(self, stmts: Iterable[cst.CSTNode]) -> None:
        for s in stmts:
            if isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    self._small(small)
            elif isinstance(s, (cst.For, cst.While)):
                self.expr(s.iter if isinstance(s, cst.For) else s.test)
                self.env.update((n, ()) for n in self.assigned_by(s))
                for _ in range(2):
                    self._block(s.body.body)
                if s.orelse is not None:
                    self._block(s.orelse.body.body)
            elif isinstance(s, cst.If):
                self.expr(s.test)
                before = dict(self.env)
                self._block(s.body.body)
                then, self.env = self.env, dict(before)
                if s.orelse is not None:
                    self._block([s.orelse] if isinstance(s.orelse, cst.If) else s.orelse.body.body)
                for name in set(then) | set(self.env):
                    a, b = then.get(name, before.get(name)), self.env.get(name, before.get(name))
                    self.env[name] = a if a == b else None
            elif isinstance(s, cst.With):
                self._block(s.body.body)
            # anything else: its reductions are left to the sweep after the walk

    def _small(self, small: cst.CSTNode) -> None:
        value = getattr(small, "value", None)
        if value is None:
            return
        shape = self.expr(value)
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            self.env[small.target.value] = _broadcast(self.env.get(small.target.value), shape)
        elif isinstance(small, (cst.Assign, cst.AnnAssign)):
            for t in small.targets if isinstance(small, cst.Assign) else [small]:
                self._bind(t.target, value, shape)

    def _bind(self, target: cst.CSTNode, value: cst.CSTNode, shape: Shape) -> None:
        if isinstance(target, cst.Name):
            self.env[target.value] = shape
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
            # ``a, b = x, y``: each name its own part; otherwise each the whole value's shape
            parts = elements if elements is not None and len(elements) == len(target.elements) else None
            for i, e in enumerate(target.elements):
                self._bind(e.value, value, self.expr(parts[i].value) if parts is not None else shape)

    def _dims(self, node: Optional[cst.CSTNode]) -> Shape:
        """The shape a literal shape argument (``[BLOCK_M, BLOCK_N]``, ``(B,)``) gives."""
        if isinstance(node, (cst.List, cst.Tuple)):
            return tuple(None if int_value(e.value) == 1 else self.deps(e.value) for e in node.elements)
        return None

    def expr(self, e: cst.CSTNode) -> Shape:
        """The shape of an expression; its reductions are recorded on the way."""
        if isinstance(e, (cst.Integer, cst.Float, cst.Imaginary, cst.BaseString)):
            return ()
        if isinstance(e, cst.Name):
            return self.env[e.value] if e.value in self.env else None if e.value in self.values else ()
        if isinstance(e, cst.Attribute):
            s = self.expr(e.value)
            return (None if s is None else tuple(reversed(s))) if e.attr.value == "T" else ()  # else a dtype...
        if isinstance(e, (cst.BinaryOperation, cst.BooleanOperation)):
            return _broadcast(self.expr(e.left), self.expr(e.right))
        if isinstance(e, cst.UnaryOperation):
            return self.expr(e.expression)
        if isinstance(e, cst.Comparison):
            return _broadcast(self.expr(e.left), *(self.expr(c.comparator) for c in e.comparisons))
        if isinstance(e, cst.IfExp):
            self.expr(e.test)
            a, b = self.expr(e.body), self.expr(e.orelse)
            return a if a == b else None
        if isinstance(e, cst.Subscript):
            return self._subscript(e)
        if isinstance(e, cst.Call):
            return self._call(e)
        for child in self._kids.get(id(e), []):  # anything else (a tuple...): its parts are still walked
            if isinstance(child, (cst.BaseExpression, cst.Element)):
                self.expr(child.value if isinstance(child, cst.Element) else child)
        return None

    def _subscript(self, e: cst.Subscript) -> Shape:
        """``x[:, None]``-style indexing: a new axis of 1 for each None."""
        s = self.expr(e.value)
        if s is None:
            return None
        out: list[Dim] = []
        i = 0
        for el in e.slice:
            sl = el.slice
            if isinstance(sl, cst.Index) and isinstance(sl.value, cst.Name) and sl.value.value == "None":
                out.append(None)
            elif isinstance(sl, cst.Slice) and sl.lower is None and sl.upper is None and sl.step is None and i < len(s):
                out.append(s[i])
                i += 1
            else:
                return None
        return tuple(out) + s[i:]

    def _call(self, call: cst.Call) -> Shape:
        self._seen.add(id(call))
        f = call.func
        lib = self.lang_name(call)
        obj = f.value if isinstance(f, cst.Attribute) and lib is None else None  # a tensor method's tensor
        name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""
        pos = ([obj] if obj is not None else []) + [a.value for a in call.args if a.keyword is None and not a.star]
        kws = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        shapes = {id(e): self.expr(e) for e in (*pos, *kws.values())}

        def arg(i: int, kw: str) -> Optional[cst.BaseExpression]:
            return kws.get(kw, pos[i] if i < len(pos) else None)

        def shape(e: Optional[cst.CSTNode]) -> Shape:
            return shapes.get(id(e)) if e is not None else None

        if any(a.star for a in call.args):
            pass  # not followed: recorded below
        elif lib is None and obj is None:  # a plain name: a builtin or a function of the module
            if name in _BUILTINS:
                return _broadcast(*shapes.values())
            if name in _SCALAR:
                return ()
            kind = self._helper(name) if name in self.helpers else "mixes"
            if kind == "elementwise":
                return _broadcast(*shapes.values())
            if kind == "other":
                return None  # a helper that reduces nothing; its shape is not followed
        elif (lib is not None and isinstance(f, cst.Attribute) and self.libm(f.value)) or name in _ELEMENTWISE:
            # (lang_name names only calls of an attribute: the isinstance narrows, it does not filter)
            return _broadcast(*shapes.values())
        elif name in _AXIS_OPS and pos:
            at, kw, _ = _AXIS_OPS[name]
            return self._axis_op(
                call, name, pos[0], shape(pos[0]), arg(at, kw), kws.get("keep_dims"), shape(arg(1, "index"))
            )
        elif name == "dot" and len(pos) >= 2 and (got := self._dot(call, shape(pos[0]), shape(pos[1]))) is not None:
            return got
        elif name in _SCALAR:
            return ()
        elif name == "arange":
            return (self.deps(arg(0, "start")) | self.deps(arg(1, "end")),)
        elif name in ("zeros", "full", "empty"):
            return self._dims(arg(0, "shape"))
        elif name in _SAME_SHAPE:
            return shape(pos[0]) if pos else None
        elif name == "make_block_ptr":
            return self._dims(arg(4, "block_shape"))
        elif name in ("reshape", "view", "broadcast_to") and pos:
            rest = pos[1:]
            if len(rest) == 1 and isinstance(rest[0], (cst.List, cst.Tuple)):
                return self._dims(rest[0])
            return tuple(None if int_value(e) == 1 else self.deps(e) for e in rest) if rest else None
        elif name in ("expand_dims", "unsqueeze") and pos:
            ax, s = arg(1, "axis" if name == "expand_dims" else "dim"), shape(pos[0])
            i = int_value(ax) if ax is not None else None
            return None if s is None or i is None or not 0 <= i <= len(s) else s[:i] + (None,) + s[i:]
        elif name in ("trans", "permute") and pos:
            return self._permuted(shape(pos[0]), pos[1:])
        elif name == "ravel" and pos:
            s = shape(pos[0])
            return None if s is None else (_union(s),)
        elif name in _UNFOLLOWED:
            return None
        self.record(call, call, self.deps(call))  # unknown, or a reduction we cannot follow
        return None

    def _dot(self, call: cst.Call, a: Shape, b: Shape) -> Shape:
        """``tl.dot(a, b)``: reduces a's last axis against b's first; None if not followed."""
        if a is None or b is None or len(a) < 2 or len(b) < 2:
            return None
        self.record(call, call, _union((a[-1], b[-2])))
        batch = _broadcast(a[:-2], b[:-2])
        return None if batch is None else batch + (a[-2], b[-1])

    @staticmethod
    def _permuted(s: Shape, dims: list[cst.BaseExpression]) -> Shape:
        if s is None:
            return None
        if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
            dims = [e.value for e in dims[0].elements]
        if not dims:
            return tuple(reversed(s)) if len(s) == 2 else None
        order = [int_value(d) for d in dims]
        axes = [o for o in order if o is not None]
        if sorted(axes) != list(range(len(s))) or len(order) != len(s):
            return None
        return tuple(s[o] for o in axes)  # every dim a literal: the same list as order

    def _axis_op(
        self,
        call: cst.Call,
        name: str,
        operand: cst.CSTNode,
        s: Shape,
        axis_node: Optional[cst.CSTNode],
        keep: Optional[cst.CSTNode],
        index_shape: Shape,
    ) -> Shape:
        """A reduction or scan along one axis (every axis without one): recorded; the
        shape of its result."""
        if isinstance(operand, (cst.Tuple, cst.List)) and operand.elements:  # tl.reduce((a, b), ...)
            operand = operand.elements[0].value
            s = self.expr(operand)
        axis: Optional[int] = 0 if axis_node is None and name in _AXIS_ZERO else None
        if axis_node is not None and not (isinstance(axis_node, cst.Name) and axis_node.value == "None"):
            magnitude: cst.CSTNode = axis_node
            negative = False
            if isinstance(axis_node, cst.UnaryOperation) and isinstance(axis_node.operator, cst.Minus):
                magnitude, negative = axis_node.expression, True
            axis = int_value(magnitude)
            if axis is None:
                s = None  # an axis computed somehow: not followed
            elif negative:
                axis = -axis
        if s is None or (axis is not None and not -len(s) <= axis < len(s)):
            self.record(call, operand, self.deps(operand))
            return None
        drops = _AXIS_OPS[name][2]
        keep_dims = isinstance(keep, cst.Name) and keep.value == "True"
        if axis is None:
            self.record(call, operand, _union(s))
            return s if not drops else tuple(None for _ in s) if keep_dims else ()
        axis %= len(s)
        self.record(call, operand, s[axis] or frozenset())
        if name in ("gather", "topk"):
            return index_shape if name == "gather" else None
        return s if not drops else s[:axis] + ((None,) if keep_dims else ()) + s[axis + 1 :]

    def _helper(self, name: str, seen: frozenset[str] = frozenset()) -> str:
        """What a function of the module (a @triton.jit helper) is: ``"mixes"`` (it
        reduces, or calls a function that might), ``"elementwise"`` (language calls that
        keep shapes and such helpers only, no indexing: its result's shape is its
        arguments' broadcast) or ``"other"``."""
        kind = "elementwise"
        for n in self.walk(self.helpers[name].body):
            if isinstance(n, cst.Subscript) or isinstance(n, cst.Attribute) and n.attr.value == "T":
                kind = "other"
            if not isinstance(n, cst.Call):
                continue
            if self.mixes(n):
                return "mixes"
            f, lib = n.func, self.lang_name(n)
            callee = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""
            if isinstance(f, cst.Name) and callee not in _BUILTINS | _SCALAR:
                if callee not in self.helpers:
                    return "mixes"  # a function we do not know
                inner = "other" if callee in seen else self._helper(callee, seen | {name})
                if inner == "mixes":
                    return "mixes"
                kind = kind if inner == "elementwise" else "other"
            elif (
                isinstance(f, cst.Attribute)
                and not (lib is not None and self.libm(f.value))
                and callee not in _ELEMENTWISE | _SCALAR
            ):
                kind = "other"
        return kind


class ReductionFacts(_Shapes):
    """The reductions of one kernel and ``fixed``: the constexprs that bound one of them
    with nothing combining its tiles."""

    def __init__(self, ks: KernelSource) -> None:
        super().__init__(ks)
        self.loops = [n for n in self.walk(self.body) if isinstance(n, cst.For)]
        self._loop_facts: dict[int, tuple[set[str], set[str]]] = {}
        self.fixed: frozenset[str] = frozenset(
            b for r in self.reductions.values() for b in r.extents if not self.combined(r, b)
        )

    def loop_facts(self, loop: cst.For) -> tuple[set[str], set[str]]:
        """(what the loop tiles, what it carries), once per loop."""
        if id(loop) not in self._loop_facts:
            self._loop_facts[id(loop)] = (self.tiled_by(loop), self.carried(loop))
        return self._loop_facts[id(loop)]

    def combined(self, r: Reduction, b: str) -> bool:
        """Whether the kernel combines the reductions of every tile of ``b`` (a loop, or
        atomics across the programs; see the module docstring)."""
        for loop in self.loops:
            tiled, carried = self.loop_facts(loop)
            if b not in tiled:
                continue
            if self.inside(r.call, loop.body):
                results = self.flows(loop.body, self._results(r))
                stored = any(
                    self.reads(n) & results
                    for n in self.walk(loop.body)
                    if isinstance(n, cst.Call) and (self.lang_name(n) or "").startswith(("store", "atomic_"))
                )
                if results & carried and not stored:
                    return True
            elif self.ks.line(r.call) > self.ks.line(loop) and self.reach(r.operand, single=True) & carried:
                return True
        return self._atomic_across_programs(r, b)

    def _results(self, r: Reduction) -> set[str]:
        owner = self.owner.get(id(r.call))
        return set(self.assigned_by(owner)) if owner is not None else set()

    def tiled_by(self, loop: cst.For) -> set[str]:
        """The constexpr B a loop steps over a dimension by: ``range(a, n, B)``, or
        ``range(a, cdiv(n, B))`` (n through a variable too), neither a nor n reading B."""
        it = loop.iter
        if not isinstance(it, cst.Call) or callee_name(it) not in ("range", "static_range"):
            return set()
        pos = [a.value for a in it.args if a.keyword is None and not a.star]
        if not 1 <= len(pos) <= 3:
            return set()
        start, end = (pos[0], pos[1]) if len(pos) >= 2 else (None, pos[0])
        step = pos[2] if len(pos) == 3 else self.arg(it, 99, "step")
        if step is not None and int_value(step) != 1:
            b = step.value if isinstance(step, cst.Name) else None
            return {b} if b in self.ks.constexprs and b not in self.deps(start) | self.deps(end) else set()
        if isinstance(end, cst.Name) and len(self.values.get(end.value, [])) == 1:
            end = self.values[end.value][0]
        if isinstance(end, cst.Call) and callee_name(end) == "cdiv" and len(end.args) == 2:
            n, div = end.args[0].value, end.args[1].value
            b = div.value if isinstance(div, cst.Name) else None
            return {b} if b in self.ks.constexprs and b not in self.deps(start) | self.deps(n) else set()
        return set()

    def carried(self, loop: cst.For) -> set[str]:
        """Names a loop carries from one iteration into the next: bound in its body and
        read there before a binding that surely comes first."""
        bound = {x for n in self.walk(loop.body) for x in self.assigned_by(n)}
        out: set[str] = set()

        def run(stmts: Iterable[cst.CSTNode], written: set[str]) -> set[str]:
            for s in stmts:
                if isinstance(s, cst.SimpleStatementLine):
                    for small in s.body:
                        value = getattr(small, "value", None)
                        read = self.reads(value) if value is not None else set()
                        if isinstance(small, cst.AugAssign):
                            read |= self.reads(small.target)
                        out.update((read - written) & bound)
                        written = written | set(self.assigned_by(small))
                elif isinstance(s, cst.If):
                    out.update((self.reads(s.test) - written) & bound)
                    a = run(s.body.body, set(written))
                    orelse = [s.orelse] if isinstance(s.orelse, cst.If) else s.orelse.body.body if s.orelse else []
                    written = a & run(orelse, set(written))
                elif isinstance(s, (cst.For, cst.While)):
                    out.update((self.reads(s.iter if isinstance(s, cst.For) else s.test) - written) & bound)
                    run(s.body.body, set(written))
                else:
                    out.update((self.reads(s) - written) & bound)
            return written

        run(loop.body.body, set())
        return out

    def _program_ids(self, node: cst.CSTNode) -> set[str]:
        """The program ids an expression is computed from (``program_id:<axis>``,
        ``program_id:?`` for an axis that is not a literal)."""
        out = set()
        for scope in (node, *(v for name in self.reach(node) for v in self.values.get(name, []))):
            for m in self.walk(scope):
                if isinstance(m, cst.Call) and self.lang_name(m) == "program_id":
                    axis = self.arg(m, 0, "axis")
                    v = int_value(axis) if axis is not None else 0
                    out.add(f"program_id:{'?' if v is None else v}")
        return out

    def _atomic_across_programs(self, r: Reduction, b: str) -> bool:
        """The programs tile ``b`` (``X * b + tl.arange(0, b)``, X from a program id) and
        the reduction's result goes only into atomics at addresses those ids do not move,
        with nothing else of ``b`` beside it."""
        pids: set[str] = set()
        for n in self.walk(self.body):
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Add):
                for ar, other in ((n.left, n.right), (n.right, n.left)):
                    if (
                        self._arange_of(ar) == b
                        and isinstance(other, cst.BinaryOperation)
                        and isinstance(other.operator, cst.Multiply)
                    ):
                        for side, rest in ((other.left, other.right), (other.right, other.left)):
                            if isinstance(side, cst.Name) and side.value == b:
                                pids |= self._program_ids(rest)
        if not pids:
            return False
        owner = self.owner.get(id(r.call))
        if owner is None:
            return False
        uses = self._results(r)
        if not uses:  # the reduction is read where it is: it must be in such an atomic
            return self._in_atomic(r.call, r, b, pids, set())
        # bound to names: nothing else of b in that statement, and every read of them in such an atomic
        value = getattr(owner, "value", None)
        if value is None or self._beside(value, r) & self._of(b):
            return False
        reads = [
            n
            for n in self.walk(self.body)
            if isinstance(n, cst.Name) and n.value in uses and self.owner.get(id(n)) is not owner
        ]
        return bool(reads) and all(self._in_atomic(n, r, b, pids, uses) for n in reads)

    def _of(self, b: str) -> set[str]:
        """Names computed from ``b`` (``b`` included)."""
        return {n for n in self.values if b in self.reach_names([n])} | {b}

    def _beside(self, node: cst.CSTNode, r: Reduction) -> set[str]:
        """Names ``node`` reads outside the reduction ``r``."""
        inner = {id(n) for n in self.walk(r.call)}
        return {n.value for n in self.walk(node) if isinstance(n, cst.Name) and id(n) not in inner} & self.reads(node)

    def _in_atomic(self, node: cst.CSTNode, r: Reduction, b: str, pids: set[str], uses: set[str]) -> bool:
        """``node`` is in the value of an atomic whose address none of ``pids`` moves, and
        that value reads nothing else computed from ``b``."""
        for a in self.walk(self.body):
            if not isinstance(a, cst.Call) or not (self.lang_name(a) or "").startswith("atomic_"):
                continue
            ptr = self.arg(a, 0, "pointer")
            for v in (x.value for x in a.args if x.value is not ptr):
                if not self.inside(node, v):
                    continue
                got = self._program_ids(ptr) if ptr is not None else {"program_id:?"}
                if got & pids or "program_id:?" in got | pids:
                    return False
                return not (self._beside(v, r) - uses) & self._of(b)
        return False

    def _arange_of(self, e: cst.CSTNode) -> Optional[str]:
        if (
            isinstance(e, cst.Call)
            and self.lang_name(e) == "arange"
            and len(e.args) == 2
            and int_value(e.args[0].value) == 0
            and isinstance(e.args[1].value, cst.Name)
        ):
            return e.args[1].value.value
        return None
