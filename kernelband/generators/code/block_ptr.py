"""``block_ptr`` (access_layout): in a ``tl.dot`` kernel, pointer blocks built as
``base + offs_r[:, None] * s_r + offs_c[None, :] * s_c``, loaded with masks (other 0)
and stepped with ``ptrs += BLOCK * s``, become ``tl.make_block_ptr`` /
``tl.load(..., boundary_check=(0, 1), padding_option="zero")`` / ``tl.advance`` (or the
``.advance`` method where Triton no longer exports ``tl.advance``); the bounds come from
the masks or ``% M``. Only where the installed Triton's block pointers work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from ..edits import Edits, names_in, tight_equal, walk
from ..rewrites import Rewrites
from ..triton_features import block_pointers_supported

Offsets = dict[str, tuple[str, str]]  # offs name -> (start expression, BLOCK)


@dataclass(frozen=True)
class _PtrUses:
    """Every use of a pointer block: the loads of it, and its steps ``ptrs += ...`` (the
    statement, and the augmented assignment it holds)."""

    loads: list[cst.Call]
    steps: list[tuple[cst.SimpleStatementLine, cst.AugAssign]]


def _advance_style() -> Optional[bool]:
    """True: ``tl.advance(p, offsets)`` (Triton <= 3.x); False: only the method
    ``p.advance(offsets)``; None: no working block pointers."""
    try:
        import triton.language as tl

        if not block_pointers_supported():
            return None
        functional = hasattr(tl, "advance")
        if not functional and not hasattr(getattr(tl, "tensor", object), "advance"):
            return None
        return functional
    except Exception:
        return None


def rewrites(an: Rewrites) -> list[tuple[str, str, Edits]]:
    functional = _advance_style()
    if functional is None or not any(an.is_lang_call(n, "dot") for n in walk(an.kdef.body)):
        return []
    offsets = _offset_defs(an)
    edits: Edits = {}
    done: list[str] = []
    for stmt in walk(an.kdef.body):
        target, value = an.simple_assign(stmt)
        # (simple_assign matches statement lines only: the isinstance narrows, it does not filter)
        if not target or value is None or not isinstance(stmt, cst.SimpleStatementLine):
            continue
        got = _block_edits(an, stmt, target, value, offsets, functional)
        if got is not None:
            edits.update(got)
            done.append(target)
    if not done:
        return []
    return [
        ("block_ptr", f"block pointers (tl.make_block_ptr / tl.advance) for {', '.join(done)} in {an.kernel}", edits)
    ]


def _block_edits(
    an: Rewrites,
    stmt: cst.SimpleStatementLine,
    target: str,
    value: cst.BaseExpression,
    offsets: Offsets,
    functional: bool,
) -> Optional[Edits]:
    """The edits that turn one pointer block (``target = value``) into a block pointer:
    its definition, its loads and its steps; None when it is not that pattern."""
    parsed = _ptr_block(an, value)
    if parsed is None:
        return None
    base, (r_offs, r_stride), (c_offs, c_stride) = parsed
    if r_offs not in offsets or c_offs not in offsets:
        return None
    r_bound, c_bound = _bound(an, r_offs), _bound(an, c_offs)
    uses = _ptr_uses(an, target, stmt)
    if r_bound is None or c_bound is None or uses is None:
        return None
    lang = an.lang_prefix()
    edits: Edits = {}
    for st, aug in uses.steps:
        d = _step(aug.value, r_stride, c_stride)
        if d is None:
            return None
        call = f"{lang}.advance({target}, ({d[0]}, {d[1]}))" if functional else f"{target}.advance(({d[0]}, {d[1]}))"
        new = cst.parse_statement(f"{target} = {call}\n")
        edits[id(st)] = [
            lambda n, new=new: new.with_changes(
                leading_lines=n.leading_lines, trailing_whitespace=n.trailing_whitespace
            )
        ]
    make = cst.parse_expression(
        f"{lang}.make_block_ptr(base={base}, shape=({r_bound}, {c_bound}), strides=({r_stride}, {c_stride}), "
        f"offsets=({offsets[r_offs][0]}, {offsets[c_offs][0]}), "
        f"block_shape=({offsets[r_offs][1]}, {offsets[c_offs][1]}), order=(1, 0))"
    )
    edits[id(value)] = [lambda _n, make=make: make]
    for ld in uses.loads:
        edits[id(ld)] = [_bounded_load]
    return edits


def _bounded_load(n: cst.Call) -> cst.Call:
    """``tl.load(p, ...)`` -> ``tl.load(p, boundary_check=(0, 1), padding_option="zero")``."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return n.with_changes(
        args=[
            n.args[0].with_changes(comma=comma),
            cst.Arg(
                cst.parse_expression("(0, 1)"), keyword=cst.Name("boundary_check"), equal=tight_equal(), comma=comma
            ),
            cst.Arg(cst.SimpleString('"zero"'), keyword=cst.Name("padding_option"), equal=tight_equal()),
        ]
    )


def _offset_defs(an: Rewrites) -> Offsets:
    """offs name -> (start expression, BLOCK) for ``start + tl.arange(0, BLOCK)``
    (optionally ``(...) % M``) and ``tl.arange(0, BLOCK)`` (start 0)."""
    out = {}
    for stmt in an.kdef.body.body:
        target, value = an.simple_assign(stmt)
        if not target or value is None:
            continue
        v = value
        if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Modulo):
            v = v.left
        v = v.with_changes(lpar=[], rpar=[]) if hasattr(v, "lpar") else v
        b = an.arange_block(v)
        if b:
            out[target] = ("0", b)
        elif isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
            b = an.arange_block(v.right)
            if b and names_in(v.left) and not any(an.is_lang_call(n, "arange") for n in walk(v.left)):
                out[target] = (an.code(v.left), b)
    return out


def _bound(an: Rewrites, offs: str) -> Optional[str]:
    """The parameter an offsets vector is bounded by: ``offs... < P`` or ``< P - ...``
    in a mask, or ``% P`` in its definition."""
    for n in walk(an.kdef.body):
        if not isinstance(n, cst.Comparison) or len(n.comparisons) != 1:
            continue
        left = n.left.value if isinstance(n.left, cst.Subscript) else n.left
        if not (isinstance(left, cst.Name) and left.value == offs):
            continue
        if not isinstance(n.comparisons[0].operator, cst.LessThan):
            continue
        right = n.comparisons[0].comparator
        if isinstance(right, cst.BinaryOperation) and isinstance(right.operator, cst.Subtract):
            right = right.left
        if isinstance(right, cst.Name) and right.value in an.params:
            return right.value
    for stmt in an.kdef.body.body:
        target, value = an.simple_assign(stmt)
        if (
            target == offs
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Modulo)
            and isinstance(value.right, cst.Name)
            and value.right.value in an.params
        ):
            return value.right.value
    return None


def _ptr_block(an: Rewrites, e: cst.BaseExpression) -> Optional[tuple[str, tuple[str, str], tuple[str, str]]]:
    """``base + r[:, None] * s_r + c[None, :] * s_c`` -> (base, (r, s_r), (c, s_c))."""
    terms: list[cst.BaseExpression] = []
    while isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
        terms.insert(0, e.right)
        e = e.left
    terms.insert(0, e)
    if len(terms) != 3 or not isinstance(terms[0], cst.Name) or terms[0].value not in an.params:
        return None
    dims: dict[str, tuple[str, str]] = {}
    for t in terms[1:]:
        if not (
            isinstance(t, cst.BinaryOperation)
            and isinstance(t.operator, cst.Multiply)
            and isinstance(t.left, cst.Subscript)
            and isinstance(t.left.value, cst.Name)
            and isinstance(t.right, cst.Name)
        ):
            return None
        idx = an.code(t.left).split("[", 1)[1].replace(" ", "")
        kind = "r" if idx == ":,None]" else "c" if idx == "None,:]" else None
        if kind is None or kind in dims:
            return None
        dims[kind] = (t.left.value.value, t.right.value)
    if set(dims) != {"r", "c"}:
        return None
    return terms[0].value, dims["r"], dims["c"]


def _ptr_uses(an: Rewrites, name: str, definition: cst.SimpleStatementLine) -> Optional[_PtrUses]:
    """Every use of the pointer block: loads (first argument, other 0 or absent) and
    ``name += ...`` steps as whole statements; None if it is used any other way."""
    loads: list[cst.Call] = []
    steps: list[tuple[cst.SimpleStatementLine, cst.AugAssign]] = []
    seen: set[int] = set()
    for n in walk(an.kdef.body):
        if (
            an.is_lang_call(n, "load")
            and n.args
            and isinstance(n.args[0].value, cst.Name)
            and n.args[0].value.value == name
        ):
            other = next((a for a in n.args if a.keyword is not None and a.keyword.value == "other"), None)
            if other is not None and an.code(other.value).strip() not in ("0", "0.0", "0."):
                return None
            if (
                any(a.keyword is not None and a.keyword.value not in ("mask", "other") for a in n.args)
                or sum(1 for a in n.args if a.keyword is None) > 1
            ):
                return None
            loads.append(n)
            seen.add(id(n.args[0].value))
        elif (
            isinstance(n, cst.SimpleStatementLine)
            and len(n.body) == 1
            and isinstance(n.body[0], cst.AugAssign)
            and isinstance(n.body[0].target, cst.Name)
            and n.body[0].target.value == name
        ):
            if not isinstance(n.body[0].operator, cst.AddAssign):
                return None
            steps.append((n, n.body[0]))
            seen.add(id(n.body[0].target))
    assign = definition.body[0]
    assert isinstance(assign, cst.Assign)  # the definition is a simple assignment (simple_assign)
    target_ids = {id(t.target) for t in assign.targets}
    for n in walk(an.kdef.body):
        if isinstance(n, cst.Name) and n.value == name and id(n) not in seen and id(n) not in target_ids:
            return None
    return _PtrUses(loads, steps) if loads else None


def _step(e: cst.BaseExpression, r_stride: str, c_stride: str) -> Optional[tuple[str, str]]:
    """``BLOCK * s`` (or ``s * BLOCK``) -> the advance along the dimension of s."""
    if not (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply)):
        return None
    for amount, stride in ((e.left, e.right), (e.right, e.left)):
        if isinstance(stride, cst.Name) and isinstance(amount, cst.Name):
            if stride.value == r_stride:
                return amount.value, "0"
            if stride.value == c_stride:
                return "0", amount.value
    return None
