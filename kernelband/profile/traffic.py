"""Tier 2 accounting: bytes a launch moves and FLOPs where they can be known.

Bytes follow the roofline convention of DESIGN section 7: every tensor argument is
read once, or written once, or both when it is updated in place; caches are ignored.
Which tensors a launch wrote is measured, not guessed from names: the launch is
replayed (1) as is, where a tensor that changes was written (and, when the kernel
also loads from it or the AST cannot tell, updated in place: read and written), then (2) once more after filling each candidate tensor with its own bit
pattern (all ones minus its index: a NaN for floats), where a tensor that no longer
holds its pattern was written. Every tensor is restored after each replay. Integer
tensors the kernel may read (indices) are never poisoned; for them, and whenever a
replay is not possible, the kernel's AST decides (``analyze_kernel``: which pointer
parameters reach a ``tl.load`` / ``tl.store`` / ``tl.atomic_*``). A written tensor
also counts as read when the AST shows the kernel loading from it.

FLOPs: only matrix products are counted. A kernel with exactly one ``tl.dot`` whose
launch has tensors A (..., M, K), B (..., K, N) or (..., N, K) read and C (..., M, N)
written did 2*batch*M*N*K FLOPs; anything else is "unknown" with the reason.

This module is pure (AST and arithmetic); the replays that measure writes run in the
variant process: ``kernelband.worker.traffic_replay`` (``launch_traffic``).
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any, Optional

_BUILTINS = {"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance", "getattr",
             "static_range", "static_print", "static_assert", "device_print", "device_assert", "cdiv", "zip",
             "enumerate", "tuple", "list"}


# --------------------------------------------------------------------------- AST


@dataclass
class ParamUse:
    loads: bool = False
    stores: bool = False
    unknown: bool = False  # flows into a call we cannot follow

    def merge(self, other: "ParamUse") -> None:
        self.loads |= other.loads
        self.stores |= other.stores
        self.unknown |= other.unknown


@dataclass
class KernelAccess:
    found: bool
    params: dict[str, ParamUse] = field(default_factory=dict)
    dots: int = 0  # tl.dot calls in the kernel and the helpers it calls
    dot_in_loop: bool = False
    ieee_dot: bool = False  # a dot asks for full fp32 (input_precision="ieee" / allow_tf32=False)

    def use(self, name: Optional[str]) -> Optional[ParamUse]:
        return self.params.get(name) if name else None


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


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


def _triton_aliases(tree: ast.Module) -> set[str]:
    names = {"tl", "triton"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("triton"):
                    names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("triton"):
            for a in node.names:
                names.add(a.asname or a.name)
    return names


class _Analyzer:
    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.funcs = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.aliases = _triton_aliases(self.tree)
        self.memo: dict[str, KernelAccess] = {}

    def analyze(self, name: str, depth: int = 0) -> KernelAccess:
        if name in self.memo:
            return self.memo[name]
        fn = self.funcs.get(name)
        if fn is None:
            return KernelAccess(found=False)
        self.memo[name] = KernelAccess(found=True)  # recursion guard
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        deps: dict[str, set[str]] = {p: {p} for p in params}

        def expr_deps(e: Optional[ast.AST]) -> set[str]:
            out: set[str] = set()
            if e is None:
                return out
            stack = [e]
            while stack:
                n = stack.pop()
                if isinstance(n, ast.Call) and _kind(_call_name(n.func)) == "load":
                    continue  # a loaded value is data, not an address derived from the pointer
                if isinstance(n, ast.Name) and n.id in deps:
                    out |= deps[n.id]
                stack.extend(ast.iter_child_nodes(n))
            return out

        assigns: list[tuple[list[str], ast.AST]] = []

        def target_names(t: ast.AST) -> list[str]:
            return [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]

        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                assigns.append(([n for t in node.targets for n in target_names(t)], node.value))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                assigns.append((target_names(node.target), node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                assigns.append((target_names(node.target), node.iter))
            elif isinstance(node, ast.NamedExpr):
                assigns.append((target_names(node.target), node.value))
        changed = True
        while changed:  # flow-insensitive fixpoint: a name depends on every value it is ever given
            changed = False
            for targets, value in assigns:
                d = expr_deps(value)
                for t in targets:
                    cur = deps.setdefault(t, set())
                    if not d <= cur:
                        cur |= d
                        changed = True

        acc = KernelAccess(found=True, params={p: ParamUse() for p in params})
        loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))]
        in_loop: set[int] = {id(x) for lp in loops for s in lp.body for x in ast.walk(s)}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            cname = _call_name(node.func)
            kind = _kind(cname)
            if cname in ("dot", "dot_scaled") and _root_name(node.func) in self.aliases | {None}:
                acc.dots += 1
                acc.dot_in_loop |= id(node) in in_loop
                for kw in node.keywords:
                    if kw.arg == "input_precision" and isinstance(kw.value, ast.Constant) and kw.value.value == "ieee":
                        acc.ieee_dot = True
                    if kw.arg == "allow_tf32" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                        acc.ieee_dot = True
                continue
            if kind is not None:
                ptr: Optional[ast.AST] = node.args[0] if node.args else None
                for kw in node.keywords:
                    if kw.arg in ("pointer", "ptr", "desc", "base"):
                        ptr = kw.value
                taint = expr_deps(ptr)
                if isinstance(node.func, ast.Attribute) and _root_name(node.func) not in self.aliases:
                    taint |= expr_deps(node.func.value)  # desc.load(...)
                for p in taint:
                    if p in acc.params:
                        acc.params[p].loads |= kind in ("load", "atomic")
                        acc.params[p].stores |= kind in ("store", "atomic")
                continue
            root = _root_name(node.func)
            if isinstance(node.func, ast.Name) and node.func.id in self.funcs and node.func.id != name and depth < 6:
                callee = self.analyze(node.func.id, depth + 1)
                cfn = self.funcs[node.func.id]
                cparams = [a.arg for a in cfn.args.posonlyargs + cfn.args.args + cfn.args.kwonlyargs]
                pairs = list(zip(cparams, node.args)) + [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
                for cp, arg in pairs:
                    for p in expr_deps(arg):
                        if p in acc.params and cp in callee.params:
                            acc.params[p].merge(callee.params[cp])
                acc.dots += callee.dots
                acc.dot_in_loop |= callee.dot_in_loop or (callee.dots > 0 and id(node) in in_loop)
                acc.ieee_dot |= callee.ieee_dot
                continue
            if root in self.aliases or (isinstance(node.func, ast.Name) and node.func.id in _BUILTINS):
                continue  # tl.* helpers pass pointers through (make_block_ptr, advance, multiple_of, where...)
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                # a method of a local value (e.g. x.to(...)): data, not a pointer sink
                continue
            for arg in list(node.args) + [kw.value for kw in node.keywords]:
                for p in expr_deps(arg):
                    if p in acc.params:
                        acc.params[p].unknown = True
        self.memo[name] = acc
        return acc


def analyze_kernel(source: str, kernel: str) -> KernelAccess:
    """Which parameters of ``kernel`` are loaded from / stored to, and its tl.dot calls."""
    try:
        return _Analyzer(source).analyze(kernel)
    except SyntaxError:
        return KernelAccess(found=False)


# --------------------------------------------------------------------------- tensors


@dataclass
class TensorArg:
    names: list[str]
    tensor: Any
    shape: list[int]
    dtype: str
    nbytes: int  # distinct bytes the view spans (broadcast dims counted once)


def dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def span_bytes(shape: list[int], stride: list[int], itemsize: int) -> int:
    """Bytes of the distinct elements a strided view covers: min(numel, span)."""
    numel = math.prod(shape) if shape else 1
    if numel == 0:
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(shape, stride))
    return min(numel, span) * itemsize


def classify(tensors: list[TensorArg], detected: Optional[list[dict[str, Any]]],
             access: KernelAccess) -> list[dict[str, Any]]:
    """Per tensor: read / written, the bytes counted, and the evidence."""
    rows: list[dict[str, Any]] = []
    for i, ta in enumerate(tensors):
        uses = [u for u in (access.use(n) for n in ta.names) if u is not None]
        ast_loads = any(u.loads for u in uses)
        ast_stores = any(u.stores for u in uses)
        ast_sure = bool(uses) and not any(u.unknown for u in uses)
        d = detected[i] if detected is not None else None
        if d is not None and d["written"] is not None:
            written = bool(d["written"])
            if d["changed"]:  # changed on replay: updated in place, or computed from something that was
                read = ast_loads or not ast_sure
                how = "updated in place (changed on replay)" if read else "written (changed on replay; never loaded)"
            elif written:
                read = ast_loads
                how = "written (poison overwritten)" + ("; also loaded by the kernel" if read else "")
            else:
                read, how = True, "read (poison kept)"
            if not written and ast_sure and not ast_loads and not ast_stores:
                read, how = False, "unused by the kernel"
        else:
            written = ast_stores
            read = ast_loads or not ast_stores or not ast_sure
            how = "from the kernel's loads/stores (no replay evidence)"
            if ast_sure and not ast_loads and not ast_stores:
                read, how = False, "unused by the kernel"
        rows.append({
            "name": "/".join(ta.names),
            "shape": ta.shape,
            "dtype": ta.dtype,
            "bytes": ta.nbytes,
            "read": read,
            "written": written,
            "bytes_moved": ta.nbytes * (int(read) + int(written)),
            "how": how,
        })
    return rows


def matmul_flops(rows: list[dict[str, Any]], access: KernelAccess) -> tuple[Optional[int], str, Optional[str]]:
    """(FLOPs or None, how/why, operand dtype) for one launch from its tensors' shapes."""
    if not access.found:
        return None, "FLOPs unknown: the kernel's source was not found", None
    if access.dots == 0:
        return None, "FLOPs unknown: no tl.dot in the kernel (elementwise work is not counted)", None
    if access.dots > 1:
        return None, f"FLOPs unknown: {access.dots} tl.dot calls; one matrix product cannot account for them", None
    outs = [r for r in rows if r["written"] and len(r["shape"]) >= 2]
    ins = [r for r in rows if r["read"] and len(r["shape"]) >= 2]
    found: list[tuple[int, str]] = []
    for c in outs:
        m, n = c["shape"][-2:]
        batch = math.prod(c["shape"][:-2]) if len(c["shape"]) > 2 else 1
        for i, a in enumerate(ins):
            for b in ins[i + 1:]:
                if a is c or b is c:
                    continue
                (am, ak), (b0, b1) = a["shape"][-2:], b["shape"][-2:]
                if am == m and b1 == n and ak == b0:
                    found.append((2 * batch * m * n * ak, a["dtype"]))
                elif am == m and b0 == n and ak == b1:
                    found.append((2 * batch * m * n * ak, a["dtype"]))
    if not found:
        return None, "FLOPs unknown: no (M,K) x (K,N) -> (M,N) tensors among the launch's arguments", None
    flops, dtype = found[0]
    note = "2*M*N*K from the tl.dot operand tensors"
    if len({f for f, _ in found}) > 1:
        note += " (several shape matches; the first argument order was used)"
    return flops, note, dtype


def peak_key(dtype: Optional[str], ieee: bool) -> Optional[str]:
    """Which measured matrix rate a tl.dot on these operands is judged against."""
    if dtype is None:
        return None
    if dtype in ("float16", "bfloat16") or dtype.startswith("float8"):
        return "bf16"
    if dtype == "float32":
        return "fp32" if ieee else "tf32"
    return None
