"""When a lint's quick fix keeps the kernel's meaning, and the edits that do it.

A quick fix of ours never changes what a kernel computes, so each one is offered only for
a kernel whose shape this module can reason about, and refused (the diagnostic stays, with
no fix) for anything else:

- an *elementwise* kernel: every call is a load, a store, an atomic, elementwise math, a
  cast, a compiler hint, ``program_id`` or the kernel's one ``tl.arange``; no subscripts,
  no branch or loop over block values, no helper calls, no reductions (a helper or a
  reduction could see the lanes a fix adds or drops);
- KB101 (``tl.arange(0, 100)``): the extent is rounded up *and* the extra lanes are masked:
  every load, store and atomic on a block address must already take ``mask=M`` with ``M``
  one top-level assignment of a block value, and each such ``M`` becomes
  ``(old) & (tl.arange(lo, lo + P) < hi)``. Lanes below ``hi`` keep their values (the
  offsets are the same expressions of the same ``tl.arange`` values), lanes above never
  reach memory: strides, grids and helpers stay as they are;
- KB104 (``grid = (n // BLOCK,)``): ``triton.cdiv`` adds one program, which must touch
  only the tail the floor division dropped: program ``pid`` covers
  ``pid * BLOCK + tl.arange(0, BLOCK)``, every access is ``ptr + offs`` masked by
  ``offs < N``, and the launch passes the grid's numerator as ``N``; no atomics and no
  ``num_programs`` (a new program would change what they compute);
- KB105 (a ``tl.load`` without the kernel's mask): only a block load, given the kernel's
  one mask ``offs < N``, in a kernel whose every store and atomic is masked by that same
  mask: each lane computes on its own, so the lanes the mask turns off never reach memory
  (whatever the load's offsets). A store is never given a mask: whether its extra lanes
  are out of bounds depends on the array's size, which the source does not say.

Everything is decided on the kernel's own AST (no import, no run).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

MEMORY = {
    "load",
    "store",
    "atomic_add",
    "atomic_max",
    "atomic_min",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "atomic_xchg",
    "atomic_cas",
}
ELEMENTWISE = {
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "sqrt_rn",
    "rsqrt",
    "abs",
    "sin",
    "cos",
    "sigmoid",
    "maximum",
    "minimum",
    "where",
    "fma",
    "floor",
    "ceil",
    "erf",
    "fdiv",
    "div_rn",
    "clamp",
    "cast",
    "umulhi",
}
HINTS = {"multiple_of", "max_contiguous", "max_constancy"}
SCALAR = {"program_id", "num_programs"}
LOOPS = {"range", "static_range"}


@dataclass(frozen=True)
class Edit:
    """Replace [line:col, end_line:end_col) of the kernel's text (1-based lines, ast columns)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Fix:
    title: str
    edits: tuple[Edit, ...]


def node_span(node: ast.expr) -> tuple[int, int, int, int]:
    """(start line, start column, end line, end column) of an expression: an edit's range."""
    return node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0


def call_attr(node: ast.AST) -> Optional[str]:
    """'load' for tl.load(...) (any module alias); None for anything else."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return node.func.attr
    return None


def int_value(node: Optional[ast.AST]) -> Optional[int]:
    """The value of an integer literal (not a bool); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


@dataclass
class _Access:
    call: ast.Call
    kind: str  # a MEMORY name
    pointer: Optional[ast.AST]
    mask: Optional[ast.AST]


class KernelShape:
    """What the fixes need to know of one kernel: whether it is elementwise (and why not),
    its aranges, its block ("lane") names, its memory accesses and its assignments."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.fn = fn
        self.params = [a.arg for a in fn.args.args]
        self.why_not: Optional[str] = None
        self.aranges: list[ast.Call] = []
        self.accesses: list[_Access] = []
        self.uses_num_programs = False
        # name -> its assignments; top-level ones (not in a loop or a branch) are marked
        self.assigns: dict[str, list[tuple[ast.AST, bool]]] = {}
        self._scan(fn.body, top=True)
        self.lanes = self._lane_names()
        if self.why_not is None:
            self._check_lane_uses()

    # ------------------------------------------------------------------ scanning
    def _refuse(self, why: str) -> None:
        if self.why_not is None:
            self.why_not = why

    def _scan(self, body: list[ast.stmt], top: bool) -> None:
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                self._refuse("a nested function")
            if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        self.assigns.setdefault(t.id, []).append((st, top))
                    else:
                        self._refuse("an assignment to something other than a name")
            if isinstance(st, (ast.For, ast.While, ast.If, ast.With, ast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    self._scan(getattr(st, field, []) or [], top=False)
                for h in getattr(st, "handlers", []) or []:
                    self._scan(h.body, top=False)
            if isinstance(st, ast.Return) and st.value is not None:
                self._refuse("a return value")
            for node in (
                ast.walk(st)
                if not isinstance(st, (ast.For, ast.While, ast.If, ast.With, ast.Try))
                else self._headers(st)
            ):
                self._note(node)

    @staticmethod
    def _headers(st: ast.stmt) -> list[ast.AST]:
        """The nodes of a compound statement outside its bodies (its test, its iterator)."""
        parts = [getattr(st, f) for f in ("test", "iter", "target") if getattr(st, f, None) is not None]
        parts += [i.context_expr for i in getattr(st, "items", [])]
        return [n for p in parts for n in ast.walk(p)]

    def _note(self, node: ast.AST) -> None:
        if isinstance(node, ast.Subscript):
            self._refuse("a subscript")
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            self._refuse("a lambda or comprehension")
        elif isinstance(node, ast.Call):
            name = call_attr(node)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
                return  # x.to(dtype): a cast
            if isinstance(node.func, ast.Name) and node.func.id in LOOPS:
                return
            if name == "arange":
                self.aranges.append(node)
            elif name in MEMORY:
                self.accesses.append(self._access(node, name))
            elif name in SCALAR:
                self.uses_num_programs |= name == "num_programs"
            elif name in ELEMENTWISE or name in HINTS or name in LOOPS:
                pass
            else:
                what = name or (node.func.id if isinstance(node.func, ast.Name) else "a call")
                self._refuse(f"a call to {what} (a helper or a reduction could see the lanes a fix changes)")

    @staticmethod
    def _access(call: ast.Call, kind: str) -> _Access:
        kw = {k.arg: k.value for k in call.keywords}
        pointer = call.args[0] if call.args else kw.get("pointer")
        mask_pos = 1 if kind == "load" else 2
        mask = kw.get("mask", call.args[mask_pos] if len(call.args) > mask_pos else None)
        if "boundary_check" in kw:
            mask = None
        return _Access(call, kind, pointer, mask)

    # ------------------------------------------------------------------ lanes
    def _lane_names(self) -> set[str]:
        """Names whose value is a block (derived from a tl.arange or a load), to a fixpoint."""
        lanes: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, sites in self.assigns.items():
                if name in lanes:
                    continue
                if any(self.is_lane(getattr(st, "value", None), lanes) for st, _ in sites):
                    lanes.add(name)
                    changed = True
        return lanes

    def is_lane(self, node: Optional[ast.AST], lanes: Optional[set[str]] = None) -> bool:
        lanes = self.lanes if lanes is None else lanes
        if node is None:
            return False
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in lanes:
                return True
            if isinstance(n, ast.Call) and call_attr(n) in ("arange", "load"):
                return True
        return False

    def _check_lane_uses(self) -> None:
        for node in ast.walk(self.fn):
            if isinstance(node, (ast.If, ast.While, ast.IfExp)) and self.is_lane(node.test):
                self._refuse("a branch on block values")
            if isinstance(node, ast.For) and self.is_lane(node.iter):
                self._refuse("a loop over block values")
        for acc in self.accesses:
            if not self.is_lane(acc.pointer) and self.is_lane(acc.call):
                self._refuse("a block value stored through a scalar address")

    # ------------------------------------------------------------------ helpers for the fixes
    def single_top_assign(self, name: str) -> Optional[ast.Assign]:
        sites = self.assigns.get(name, [])
        if len(sites) == 1 and sites[0][1] and isinstance(sites[0][0], ast.Assign):
            return sites[0][0]
        return None

    def mask_name(self, acc: _Access) -> Optional[str]:
        return acc.mask.id if isinstance(acc.mask, ast.Name) else None

    def bound_of(self, mask: str) -> Optional[tuple[str, str]]:
        """(offs, N) when ``mask = offs < N`` is mask's one top-level assignment, offs a block
        name and N a kernel parameter."""
        st = self.single_top_assign(mask)
        v = st.value if st is not None else None
        if (
            isinstance(v, ast.Compare)
            and len(v.ops) == 1
            and isinstance(v.ops[0], ast.Lt)
            and isinstance(v.left, ast.Name)
            and v.left.id in self.lanes
            and isinstance(v.comparators[0], ast.Name)
            and v.comparators[0].id in self.params
        ):
            return v.left.id, v.comparators[0].id
        return None

    def indexes_by(self, pointer: Optional[ast.AST], offs: str) -> bool:
        """pointer is ``param + offs`` (either order)."""
        if not (isinstance(pointer, ast.BinOp) and isinstance(pointer.op, ast.Add)):
            return False
        names = [x.id if isinstance(x, ast.Name) else None for x in (pointer.left, pointer.right)]
        return offs in names and any(n in self.params for n in names if n != offs)


# ---------------------------------------------------------------------------- KB101
def arange_fix(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, lo: int, hi: int, want_end: int, source: str
) -> tuple[Optional[Fix], str]:
    """Round ``tl.arange(lo, hi)`` up to ``tl.arange(lo, want_end)`` and mask the extra lanes.
    (fix, "") or (None, why it is refused)."""
    shape = KernelShape(fn)
    if shape.why_not:
        return None, shape.why_not
    if len(shape.aranges) != 1:
        return None, "the kernel has more than one tl.arange (their shapes would no longer match)"
    block = [a for a in shape.accesses if shape.is_lane(a.pointer)]
    if not block:
        return None, "no load or store uses the block"
    masks: set[str] = set()
    for acc in block:
        m = shape.mask_name(acc)
        if m is None:
            return None, f"a tl.{acc.kind} on the block has no mask= naming a mask (the extra lanes would reach memory)"
        masks.add(m)
    edits = [Edit(*node_span(call.args[1]), str(want_end))]
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):  # (never: lints pass tl.arange)
        return None, "the call is not tl.arange(...)"
    tl = func.value.id
    for m in sorted(masks):
        st = shape.single_top_assign(m)
        if st is None or m not in shape.lanes:
            return None, f"the mask {m} is not one assignment of a block value"
        old = ast.get_source_segment(source, st.value) or ""
        edits.append(Edit(*node_span(st.value), f"({old}) & ({tl}.arange({lo}, {want_end}) < {hi})"))
    return Fix(f"Round the tl.arange end up to {want_end} and mask the extra lanes", tuple(edits)), ""


# ---------------------------------------------------------------------------- KB104
def _is_pid(shape: KernelShape, node: ast.AST) -> bool:
    if not isinstance(node, ast.Name):
        return False
    st = shape.single_top_assign(node.id)
    v = st.value if st is not None else None
    if not isinstance(v, ast.Call) or call_attr(v) != "program_id":
        return False
    axis = v.args[0] if v.args else next((k.value for k in v.keywords if k.arg == "axis"), None)
    return int_value(axis) == 0


def _covers_block(shape: KernelShape, offs: str, block: str) -> bool:
    """offs = pid * BLOCK + tl.arange(0, BLOCK) (any order of the terms and factors)."""
    st = shape.single_top_assign(offs)
    v = st.value if st is not None else None
    if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add)):
        return False
    for prod, rng in ((v.left, v.right), (v.right, v.left)):
        if not (
            isinstance(rng, ast.Call)
            and call_attr(rng) == "arange"
            and len(rng.args) == 2
            and int_value(rng.args[0]) == 0
            and isinstance(rng.args[1], ast.Name)
            and rng.args[1].id == block
        ):
            continue
        if isinstance(prod, ast.BinOp) and isinstance(prod.op, ast.Mult):
            a, b = prod.left, prod.right
            if (_is_pid(shape, a) and isinstance(b, ast.Name) and b.id == block) or (
                _is_pid(shape, b) and isinstance(a, ast.Name) and a.id == block
            ):
                return True
    return False


def grid_fix_allowed(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, block: str, size_arg_of: dict[str, str], numerator: str
) -> tuple[bool, str]:
    """May ``numerator // block`` become ``triton.cdiv(numerator, block)``? ``size_arg_of``:
    kernel parameter -> the source text the launch passes for it."""
    shape = KernelShape(fn)
    if shape.why_not:
        return False, shape.why_not
    if shape.uses_num_programs:
        return False, "the kernel reads tl.num_programs (another program changes it)"
    if any(a.kind != "load" and a.kind != "store" for a in shape.accesses):
        return False, "the kernel uses atomics (another program adds to them)"
    if len(shape.aranges) != 1 or not shape.accesses:
        return False, "the kernel is not one block per program"
    bounds = set()
    for acc in shape.accesses:
        m = shape.mask_name(acc)
        b = shape.bound_of(m) if m else None
        if b is None:
            return False, f"a tl.{acc.kind} is not masked by `offs < N` (the new program would reach past the end)"
        offs, n = b
        if not shape.indexes_by(acc.pointer, offs) or not _covers_block(shape, offs, block):
            return (
                False,
                f"a tl.{acc.kind} does not address `ptr + offs` with offs = pid * {block} + tl.arange(0, {block})",
            )
        bounds.add(n)
    if len(bounds) != 1:
        return False, "the accesses are bounded by different sizes"
    (n,) = bounds
    if _norm(size_arg_of.get(n, "")) != _norm(numerator):
        return False, f"the launch does not pass the grid's numerator ({numerator}) as {n}"
    return True, ""


def _norm(text: str) -> str:
    return "".join(text.split())


# ---------------------------------------------------------------------------- KB105
def load_mask_allowed(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, call_line: int, call_col: int, mask: str
) -> tuple[bool, str]:
    """May the tl.load at (line, col) of the kernel's text get ``mask=mask``?"""
    shape = KernelShape(fn)
    if shape.why_not:
        return False, shape.why_not
    acc = next((a for a in shape.accesses if (a.call.lineno, a.call.col_offset) == (call_line, call_col)), None)
    if acc is None or acc.kind != "load":
        return False, "only a load is given a mask (a store's extra lanes may be in bounds of a larger array)"
    if shape.bound_of(mask) is None:
        return False, f"{mask} is not one `offs < N` bound (it must not depend on what is loaded)"
    if not shape.is_lane(acc.pointer):
        return False, "the load reads one address, not a block"
    # elementwise, and every lane the mask turns off is never stored: what it loads there is never seen
    for other in shape.accesses:
        if other.kind != "load" and shape.mask_name(other) != mask:
            return False, f"a tl.{other.kind} is not masked by {mask} (the lanes it turns off would reach memory)"
    return True, ""
