"""GPU-free Triton lints with quick fixes, from source text alone (no torch/triton import).

Each kernel's text (and its launch sites') is parsed on its own, so a lint pass costs
the kernels' size, not the file's. A finding carries the edits that fix it only when
they keep what the kernel computes (lint_fixes.py decides: an arange rounded up with its
extra lanes masked, ``//`` to ``triton.cdiv`` when the new program touches only the
dropped tail, ``mask=`` on a load whose extra lanes never reach memory, a power-of-two
``num_warps``); otherwise the diagnostic says why there is no fix. The installed Triton
version comes from package metadata (``importlib.metadata``), never from importing it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, TypeGuard, cast

from kernelband.model import KernelInfo

from . import lint_fixes as FX
from .documents import Analysis

SOURCE = "kernelband-lint"


@dataclass
class Finding:
    code: str
    message: str
    # 1-based line, 0-based UTF-8 byte columns (ast coordinates), in the document
    line: int
    col: int
    end_line: int
    end_col: int
    kernel: str
    severity: str = "warning"  # "error" | "warning" | "info"
    fix_title: Optional[str] = None
    # the fix: replacements of [line:col, end_line:end_col) in the document (ast coordinates)
    fix_edits: tuple[tuple[int, int, int, int, str], ...] = ()
    extra: dict = field(default_factory=dict)


def _pow2_ceil(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _nearest_pow2(n: int) -> int:
    lo = 1
    while lo * 2 <= n:
        lo *= 2
    hi = lo * 2
    return lo if n - lo <= hi - n else hi


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _attr_call(node: ast.AST, *names: str) -> TypeGuard[ast.Call]:
    """tl.<name>(...) (any module alias)."""
    return FX.call_attr(node) in names


@lru_cache(maxsize=1)
def triton_version() -> Optional[tuple[int, int]]:
    try:
        import importlib.metadata as md

        v = md.version("triton")
    except Exception:
        return None
    m = re.match(r"(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else None


class _KernelLints:
    def __init__(self, a: Analysis, k: KernelInfo) -> None:
        self.a = a
        self.k = k
        self.out: list[Finding] = []
        self.offset = k.range.start_line - 1  # the kernel text starts on this document line (0-based)

    def add(self, code: str, node: ast.expr, message: str, fix: Optional[FX.Fix] = None, **kw) -> None:
        if fix is not None:
            kw["fix_title"] = fix.title
            kw["fix_edits"] = tuple(
                (e.line + self.offset, e.col, e.end_line + self.offset, e.end_col, e.text) for e in fix.edits
            )
        self.out.append(
            Finding(
                code,
                message,
                node.lineno + self.offset,
                node.col_offset,
                (node.end_lineno or node.lineno) + self.offset,
                node.end_col_offset or 0,
                self.k.name,
                **kw,
            )
        )

    def run(self) -> list[Finding]:
        fn = _kernel_fn(self.a, self.k)
        if fn is None:
            return []
        self.text = self.a.kernel_text(self.k.name) or ""
        self._arange(fn)
        self._dot(fn)
        self._masks(fn)
        self._versioned(fn)
        self._autotune_configs(fn)
        return self.out

    def _arange(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for node in ast.walk(fn):
            if _attr_call(node, "arange") and len(node.args) == 2:
                lo, hi = FX.int_value(node.args[0]), FX.int_value(node.args[1])
                if lo is not None and hi is not None and hi > lo and not _is_pow2(hi - lo):
                    want = lo + _pow2_ceil(hi - lo)
                    fix, why = FX.arange_fix(fn, node, lo, hi, want, self.text)
                    self.add(
                        "KB101",
                        node.args[1],
                        f"tl.arange({lo}, {hi}): the extent {hi - lo} is not a power of two"
                        + ("" if fix else f" (no quick fix: {why})"),
                        severity="error",
                        fix=fix,
                    )

    def _dot(self, fn: ast.AST) -> None:
        def cast(e: ast.AST) -> Optional[str]:
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "to" and e.args:
                d = e.args[0]
                return d.attr if isinstance(d, ast.Attribute) else None
            return None

        for node in ast.walk(fn):
            if _attr_call(node, "dot") and len(node.args) >= 2:
                da, db = cast(node.args[0]), cast(node.args[1])
                if da and db and da != db:
                    self.add(
                        "KB102", node, f"tl.dot operands are cast to different dtypes ({da} and {db})", severity="error"
                    )

    def _masks(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        masks = {
            t.id
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name) and "mask" in t.id.lower()
        }
        if len(masks) != 1:
            return  # no mask, or several: which one applies is the author's call
        (mask,) = masks
        for node in ast.walk(fn):
            if not _attr_call(node, "load", "store"):
                continue
            kind = cast(ast.Attribute, node.func).attr  # _attr_call checked that func is an Attribute
            kw = {k.arg for k in node.keywords}
            if "mask" in kw or (kind == "load" and len(node.args) >= 2) or (kind == "store" and len(node.args) >= 3):
                continue
            if "boundary_check" in kw:
                continue  # block pointers check bounds their own way
            ok, why = FX.load_mask_allowed(fn, node.lineno, node.col_offset, mask)
            # insert ", mask=mask" before the closing parenthesis
            end_line, end_col = node.end_lineno, node.end_col_offset
            assert end_line is not None and end_col is not None  # a parsed node carries its end
            fix = (
                FX.Fix(f"Add mask={mask}", (FX.Edit(end_line, end_col - 1, end_line, end_col - 1, f", mask={mask}"),))
                if ok
                else None
            )
            self.add(
                "KB105",
                node,
                f"tl.{kind} without mask= although the kernel computes {mask!r}"
                + ("" if ok else f" (no quick fix: {why})"),
                fix=fix,
            )

    def _versioned(self, fn: ast.AST) -> None:
        v = triton_version()
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and node.attr == "libdevice" and isinstance(node.value, ast.Name):
                if v is None or v >= (3, 0):
                    self.add(
                        "KB106",
                        node,
                        f"{node.value.id}.libdevice was removed in Triton 3.0"
                        + (f" (installed: {v[0]}.{v[1]})" if v else "")
                        + "; use triton.language.extra.libdevice",
                        severity="error",
                    )
            if _attr_call(node, "make_block_ptr") and v is not None and v >= (3, 3):
                self.add(
                    "KB106",
                    node.func,
                    f"block pointers (tl.make_block_ptr) are superseded by tensor descriptors "
                    f"(tl.make_tensor_descriptor) in the installed Triton {v[0]}.{v[1]}",
                    severity="info",
                )

    def _autotune_configs(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in fn.decorator_list:
            for node in ast.walk(dec):
                if isinstance(node, ast.keyword) and node.arg == "num_warps":
                    n = FX.int_value(node.value)
                    if n is not None and not _is_pow2(n):
                        want = _nearest_pow2(max(n, 1))
                        # a launch option, not a computation: the lanes and what they compute stay
                        self.add(
                            "KB107",
                            node.value,
                            f"num_warps={n} is not a power of two",
                            severity="error",
                            fix=FX.Fix(f"Use num_warps={want}", (FX.Edit(*FX.node_span(node.value), str(want)),)),
                        )


def _kernel_fn(a: Analysis, k: KernelInfo) -> Optional[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The kernel's definition, parsed from its own text (None when it does not parse)."""
    try:
        tree = ast.parse(a.kernel_text(k.name) or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)


def _launch_args(k: KernelInfo, call: ast.Call, text: str) -> dict[str, str]:
    """Kernel parameter -> the source text this launch passes for it."""
    out = {p.name: ast.get_source_segment(text, arg) or "" for p, arg in zip(k.params, call.args)}
    out.update({kw.arg: ast.get_source_segment(text, kw.value) or "" for kw in call.keywords if kw.arg})
    return out


def _one_block_grid(grid: Optional[ast.AST], floor: ast.AST) -> bool:
    """The grid is `(X // B,)`, or `lambda meta: (X // meta["B"],)`, with floor that X // B."""
    if isinstance(grid, ast.Lambda):
        grid = grid.body
    return isinstance(grid, ast.Tuple) and len(grid.elts) == 1 and grid.elts[0] is floor


def _launch_lints(a: Analysis, k: KernelInfo, out: list[Finding]) -> None:
    """num_warps and block sizes at launch sites; grids that floor-divide by a block."""
    constexprs = set(k.constexpr_params)
    dot_dims = _dot_dims(a, k)
    fn: Optional[ast.FunctionDef | ast.AsyncFunctionDef] = None
    for site in k.launch_sites:
        text = a.index.segment(site.range.start_line, site.range.start_col, site.range.end_line, site.range.end_col)
        try:
            call = ast.parse(text.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not isinstance(call, ast.Call):
            continue
        lead = len(text) - len(text.lstrip())
        base_line, base_col = site.range.start_line, site.range.start_col + lead

        def finding(
            code: str,
            node: ast.expr,
            message: str,
            fix_title: Optional[str] = None,
            fix_text: Optional[str] = None,
            **kw,
        ) -> Finding:
            l0 = node.lineno - 1
            l1 = (node.end_lineno or node.lineno) - 1
            rng = (
                base_line + l0,
                (base_col if l0 == 0 else 0) + node.col_offset,
                base_line + l1,
                (base_col if l1 == 0 else 0) + (node.end_col_offset or 0),
            )
            edits = ((*rng, fix_text),) if fix_text is not None else ()
            return Finding(code, message, *rng, k.name, fix_title=fix_title, fix_edits=edits, **kw)

        for kw_node in call.keywords:
            n = FX.int_value(kw_node.value)
            if n is None:
                continue
            if kw_node.arg == "num_warps" and not _is_pow2(n):
                want = _nearest_pow2(max(n, 1))
                out.append(
                    finding(
                        "KB107",
                        kw_node.value,
                        f"num_warps={n} is not a power of two",
                        severity="error",
                        fix_title=f"Use num_warps={want}",
                        fix_text=str(want),
                    )
                )
            elif kw_node.arg in dot_dims and n < 16:
                # no fix: the block size is also a stride and a loop step of the kernel
                out.append(
                    finding(
                        "KB103",
                        kw_node.value,
                        f"{kw_node.arg}={n} is a tl.dot block dimension: "
                        "tl.dot needs at least 16 (no quick fix: changing a block size changes what the "
                        "kernel's strides and loops cover)",
                        severity="error",
                    )
                )
        # grid: (n // BLOCK_SIZE,) with BLOCK_SIZE a constexpr given at this launch
        grid = call.func.slice if isinstance(call.func, ast.Subscript) else None
        for node in ast.walk(grid) if grid is not None else []:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
                right = node.right
                name = (
                    right.id
                    if isinstance(right, ast.Name)
                    else (
                        right.slice.value
                        if isinstance(right, ast.Subscript)
                        and isinstance(right.slice, ast.Constant)
                        and isinstance(right.slice.value, str)
                        else None
                    )
                )
                if name in constexprs or (isinstance(name, str) and "BLOCK" in name.upper()):
                    left = ast.get_source_segment(text.strip(), node.left) or ""
                    rtext = ast.get_source_segment(text.strip(), node.right) or ""
                    fn = fn or _kernel_fn(a, k)
                    passed = _launch_args(k, call, text.strip())
                    # the kernel's block-size parameter: meta["BLOCK"], or the one the launch passes the divisor to
                    block = (
                        str(name)
                        if isinstance(right, ast.Subscript)
                        else next(
                            (
                                p
                                for p in k.constexpr_params
                                if "".join(passed.get(p, "").split()) == "".join(rtext.split())
                            ),
                            None,
                        )
                    )
                    if not _one_block_grid(grid, node):
                        ok, why = False, "the grid has more than one dimension"
                    elif fn is None or block is None:
                        ok, why = False, "the launch does not pass the grid's divisor as the kernel's block size"
                    else:
                        ok, why = FX.grid_fix_allowed(fn, block, passed, left)
                    msg = f"the grid floor-divides by {name}: the last partial block is never launched"
                    out.append(
                        finding(
                            "KB104",
                            node,
                            msg + ("" if ok else f" (no quick fix: {why})"),
                            fix_title=f"Use triton.cdiv({left}, {rtext})" if ok else None,
                            fix_text=f"triton.cdiv({left}, {rtext})" if ok else None,
                        )
                    )


def _dot_dims(a: Analysis, k: KernelInfo) -> set[str]:
    """Constexpr names that size a tl.arange feeding the kernel (when it has a tl.dot)."""
    text = a.kernel_text(k.name) or ""
    if ".dot(" not in text:
        return set()
    names = set(k.constexpr_params)
    return {n for n in names if re.search(rf"arange\(\s*0\s*,\s*{re.escape(n)}\s*\)", text)}


def lint(a: Analysis) -> list[Finding]:
    """Findings for every kernel of a parsed analysis (none while the text does not parse)."""
    if not a.parsed:
        return []
    out: list[Finding] = []
    for k in a.detection.kernels:
        out.extend(_KernelLints(a, k).run())
        _launch_lints(a, k, out)
    return out


def cached_lint(a: Analysis) -> list[Finding]:
    """lint(a), once per analysis (code actions ask on every cursor move)."""
    got = a.__dict__.get("_lints")
    if got is None:
        got = a.__dict__["_lints"] = lint(a)
    return got
