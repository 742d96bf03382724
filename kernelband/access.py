"""Which pointers a Triton kernel loads from and stores to: the one pointer-access
analysis of a kernel's source (AST only; nothing is imported or run). The traffic
accounting (profile/traffic.py), the rules generator (is a kernel in place, so may it be
autotuned) and their tests use it.

A pointer parameter is loaded / stored when an address built from it (through locals,
any term of an expression, subscripts, ``tl.make_block_ptr``/``advance`` and helper
``@triton.jit`` functions it is passed to: a flow-insensitive fixpoint) reaches a
``tl.load`` / ``tl.store`` / ``tl.atomic_*`` (atomics count as both). A parameter that
flows into a call the analysis cannot follow is ``unknown``. Triton names are resolved
by ``detect.TritonNames``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Optional

from .detect import TritonNames, name_of


@dataclass
class ParamUse:
    loads: bool = False
    stores: bool = False
    unknown: bool = False  # flows into a call we cannot follow
    # the parameter is a base of the address (an additive term, not an offset scaled by
    # it): what tells a pointer from a stride or a block size that only offsets it
    base_loads: bool = False
    base_stores: bool = False

    def merge(self, other: "ParamUse") -> None:
        self.loads |= other.loads
        self.stores |= other.stores
        self.unknown |= other.unknown
        self.base_loads |= other.base_loads
        self.base_stores |= other.base_stores


@dataclass
class KernelAccess:
    found: bool
    params: dict[str, ParamUse] = field(default_factory=dict)
    dots: int = 0  # tl.dot calls in the kernel and the helpers it calls
    dot_in_loop: bool = False
    ieee_dot: bool = False  # a dot asks for full fp32 (input_precision="ieee" / allow_tf32=False)
    atomics: int = 0  # tl.atomic_* calls in the kernel and the helpers it calls

    def use(self, name: Optional[str]) -> Optional[ParamUse]:
        return self.params.get(name) if name else None

    def in_place(self) -> bool:
        """Atomics, or a pointer parameter the kernel both loads from and stores to (as
        the base of the addresses: a stride or block size in both is not in place)."""
        return self.atomics > 0 or any(u.base_loads and u.base_stores for u in self.params.values())


# calls whose result is an address based on their pointer argument
_ADDRESS_PASSING = {"make_block_ptr", "advance", "multiple_of", "max_contiguous", "max_constancy"}
_BUILTINS = {
    "range",
    "min",
    "max",
    "len",
    "int",
    "float",
    "bool",
    "abs",
    "print",
    "isinstance",
    "getattr",
    "static_range",
    "static_print",
    "static_assert",
    "device_print",
    "device_assert",
    "cdiv",
    "zip",
    "enumerate",
    "tuple",
    "list",
}


# --------------------------------------------------------------------------- AST


def _call_name(func: ast.expr) -> str:
    return name_of(func) or ""


def _root_name(node: ast.expr) -> Optional[str]:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _kind(name: str) -> Optional[str]:
    if name.startswith("atomic_"):
        return "atomic"
    if name in ("load", "gather") or name.endswith("_load") or name.startswith("load_"):
        return "load"
    if name in ("store", "scatter") or name.endswith("_store") or name.startswith("store_"):
        return "store"
    return None


class _Analyzer:
    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.funcs = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.names = TritonNames.of(self.tree)
        self.aliases = self.names.aliases()
        self.memo: dict[str, KernelAccess] = {}

    def analyze(self, name: str, depth: int = 0) -> KernelAccess:
        if name in self.memo:
            return self.memo[name]
        fn = self.funcs.get(name)
        if fn is None:
            return KernelAccess(found=False)
        self.memo[name] = KernelAccess(found=True)  # recursion guard
        flow = _Flow(fn, self.names)
        acc = KernelAccess(found=True, params={p: ParamUse() for p in flow.params})
        loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))]
        in_loop: set[int] = {id(x) for lp in loops for s in lp.body for x in ast.walk(s)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                self._call(node, name, depth, flow, acc, id(node) in in_loop)
        self.memo[name] = acc
        return acc

    def _call(self, node: ast.Call, name: str, depth: int, flow: "_Flow", acc: KernelAccess, in_loop: bool) -> None:
        """What one call in the function does with its parameters: a tl.dot, a memory
        access, a call of a helper (followed), or a sink the analysis cannot follow."""
        cname = _call_name(node.func)
        kind = _kind(cname)
        if cname in ("dot", "dot_scaled") and _root_name(node.func) in self.aliases | {None}:
            _dot(node, acc, in_loop)
        elif kind is not None:
            self._access(node, kind, flow, acc)
        elif isinstance(node.func, ast.Name) and node.func.id in self.funcs and node.func.id != name and depth < 6:
            self._helper_call(node, node.func.id, depth, flow, acc, in_loop)
        elif _root_name(node.func) in self.aliases or (isinstance(node.func, ast.Name) and node.func.id in _BUILTINS):
            pass  # tl.* helpers pass pointers through (make_block_ptr, advance, multiple_of, where...)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            pass  # a method of a local value (e.g. x.to(...)): data, not a pointer sink
        else:
            for arg in list(node.args) + [kw.value for kw in node.keywords]:
                for p in flow.expr_deps(arg):
                    if p in acc.params:
                        acc.params[p].unknown = True

    def _access(self, node: ast.Call, kind: str, flow: "_Flow", acc: KernelAccess) -> None:
        """A tl.load / tl.store / tl.atomic_*: the parameters its address depends on, and
        those it is based on."""
        acc.atomics += kind == "atomic"
        ptr: Optional[ast.AST] = node.args[0] if node.args else None
        for kw in node.keywords:
            if kw.arg in ("pointer", "ptr", "desc", "base"):
                ptr = kw.value
        taint = flow.expr_deps(ptr)
        based = flow.base_deps(ptr)
        if isinstance(node.func, ast.Attribute) and _root_name(node.func) not in self.aliases:
            taint |= flow.expr_deps(node.func.value)  # desc.load(...)
            based |= flow.base_deps(node.func.value)
        for p in taint:
            if p in acc.params:
                acc.params[p].loads |= kind in ("load", "atomic")
                acc.params[p].stores |= kind in ("store", "atomic")
        for p in based:
            if p in acc.params:
                acc.params[p].base_loads |= kind in ("load", "atomic")
                acc.params[p].base_stores |= kind in ("store", "atomic")

    def _helper_call(
        self, node: ast.Call, callee_name: str, depth: int, flow: "_Flow", acc: KernelAccess, in_loop: bool
    ) -> None:
        """A call of another function of the module: its analysis, mapped onto the
        parameters its arguments come from."""
        callee = self.analyze(callee_name, depth + 1)
        cfn = self.funcs[callee_name]
        cparams = [a.arg for a in cfn.args.posonlyargs + cfn.args.args + cfn.args.kwonlyargs]
        pairs = list(zip(cparams, node.args)) + [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
        for cp, arg in pairs:
            for p in flow.expr_deps(arg):
                if p in acc.params and cp in callee.params:
                    acc.params[p].merge(callee.params[cp])
        acc.dots += callee.dots
        acc.dot_in_loop |= callee.dot_in_loop or (callee.dots > 0 and in_loop)
        acc.ieee_dot |= callee.ieee_dot
        acc.atomics += callee.atomics


def _dot(node: ast.Call, acc: KernelAccess, in_loop: bool) -> None:
    acc.dots += 1
    acc.dot_in_loop |= in_loop
    for kw in node.keywords:
        if kw.arg == "input_precision" and isinstance(kw.value, ast.Constant) and kw.value.value == "ieee":
            acc.ieee_dot = True
        if kw.arg == "allow_tf32" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
            acc.ieee_dot = True


class _Flow:
    """The flow-insensitive fixpoints over one function's assignments: a name depends
    on every value it is ever given (``expr_deps``: the parameters a value derives from;
    ``base_deps``: those it is based on, as an additive term)."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, names: TritonNames) -> None:
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        self.params = [a.arg for a in args]
        self.assigns = _assignments(fn)
        self.deps: dict[str, set[str]] = {p: {p} for p in self.params}
        self._fixpoint(self.expr_deps, self.deps)
        # a constexpr parameter is a number, never a pointer (HALF_DIM in `x_ptr + offs + HALF_DIM`)
        self.bases: dict[str, set[str]] = {
            a.arg: {a.arg} for a in args if not names.is_constexpr_annotation(a.annotation)
        }
        self._fixpoint(self.base_deps, self.bases)

    def _fixpoint(self, of: Callable[[ast.AST], set[str]], table: dict[str, set[str]]) -> None:
        changed = True
        while changed:
            changed = False
            for targets, value in self.assigns:
                d = of(value)
                for t in targets:
                    cur = table.setdefault(t, set())
                    if not d <= cur:
                        cur |= d
                        changed = True

    def expr_deps(self, e: Optional[ast.AST]) -> set[str]:
        out: set[str] = set()
        if e is None:
            return out
        stack = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Call) and _kind(_call_name(n.func)) == "load":
                continue  # a loaded value is data, not an address derived from the pointer
            if isinstance(n, ast.Name) and n.id in self.deps:
                out |= self.deps[n.id]
            stack.extend(ast.iter_child_nodes(n))
        return out

    def base_deps(self, e: Optional[ast.AST]) -> set[str]:
        """Names an address is based on: additive terms, through subscripts and
        make_block_ptr/advance/multiple_of; a product, a call or a constant is an offset."""
        if isinstance(e, ast.Name):
            return self.bases.get(e.id, set())
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            return self.base_deps(e.left) | self.base_deps(e.right)
        if isinstance(e, ast.Subscript):
            return self.base_deps(e.value)
        if isinstance(e, ast.IfExp):
            return self.base_deps(e.body) | self.base_deps(e.orelse)
        if isinstance(e, ast.Call) and e.args or isinstance(e, ast.Call) and e.keywords:
            cname = _call_name(e.func)
            if cname in _ADDRESS_PASSING:
                base = next(
                    (kw.value for kw in e.keywords if kw.arg in ("base", "pointer", "ptr", "input")),
                    e.args[0] if e.args else None,
                )
                return self.base_deps(base)
        return set()


def _assignments(fn: ast.AST) -> list[tuple[list[str], ast.AST]]:
    """(names bound, the value they get) of every binding in the function."""

    def target_names(t: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]

    assigns: list[tuple[list[str], ast.AST]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            assigns.append(([n for t in node.targets for n in target_names(t)], node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            assigns.append((target_names(node.target), node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            assigns.append((target_names(node.target), node.iter))
        elif isinstance(node, ast.NamedExpr):
            assigns.append((target_names(node.target), node.value))
    return assigns


def analyze_kernel(source: str, kernel: str) -> KernelAccess:
    """Which parameters of ``kernel`` are loaded from / stored to, and its tl.dot calls."""
    try:
        return _Analyzer(source).analyze(kernel)
    except SyntaxError:
        return KernelAccess(found=False)
