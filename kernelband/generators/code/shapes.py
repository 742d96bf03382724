"""Shapes of kernel code the loop rewrites (``persistent``, ``rows_per_program``) and the
tile reordering (``pid_swizzle``) recognise: program-id variables, 1D tiles masked by a
size, 1D launch grids, bodies that can run once per loop iteration, and the grid-stride
loop both loop rewrites build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import libcst as cst

from ..edits import int_value, names_in, walk
from ..rewrites import Rewrites


def pid_names(an: Rewrites) -> set[str]:
    """Variables bound to ``tl.program_id(0)`` at the top of the kernel."""
    out = set()
    for stmt in an.kdef.body.body:
        target, value = an.simple_assign(stmt)
        if target and value is not None and an.is_lang_call(value, "program_id"):
            args = value.args
            if args and int_value(args[0].value) == 0:
                out.add(target)
    return out


@dataclass(frozen=True)
class PidStatement:
    """The statement of a kernel body that binds a program-id variable."""

    index: int  # its position in the body
    name: str  # the variable


def pid_statement(an: Rewrites, body: Sequence[cst.CSTNode]) -> Optional[PidStatement]:
    """The first statement of ``body`` that binds one of ``pid_names``."""
    pids = pid_names(an)
    for i, st in enumerate(body):
        target = an.simple_assign(st)[0]
        if target is not None and target in pids:
            return PidStatement(i, target)
    return None


def one_program_id(an: Rewrites, exits: tuple[type, ...]) -> bool:
    """The kernel reads ``tl.program_id`` once, never ``tl.num_programs``, and has no
    statement of ``exits`` (a return would leave the loop a rewrite puts around it)."""
    body = list(walk(an.kdef.body))
    if sum(1 for n in body if an.is_lang_call(n, "program_id")) != 1 or any(isinstance(n, exits) for n in body):
        return False
    return not any(an.is_lang_call(n, "num_programs") for n in body)


@dataclass(frozen=True)
class TileBound:
    """A 1D tile ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` masked by ``offs < n``."""

    offsets: str  # offs
    block: str  # BLOCK
    size: str  # n, a parameter


def tile_bound(an: Rewrites, stmts: Sequence[cst.CSTNode], pid: str) -> Optional[TileBound]:
    """The tile of ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` (directly or through
    ``start = pid * BLOCK``) masked by ``offs < n`` somewhere."""
    products: dict[str, str] = {}
    for st in stmts:
        target, value = an.simple_assign(st)
        if not target or value is None:
            continue
        b = an.multiple_of_block(value)
        if b and pid in names_in(value):
            products[target] = b
            continue
        b = an.offsets_block(value, dict(products))
        if b and (pid in names_in(value) or names_in(value) & set(products)):
            n = _size_mask(an, target)
            return TileBound(target, b, n) if n else None
    return None


def _size_mask(an: Rewrites, offs: str) -> Optional[str]:
    """The size parameter of a mask ``offs < n`` in the kernel (n not a constexpr)."""
    for n in walk(an.kdef.body):
        if (
            isinstance(n, cst.Comparison)
            and isinstance(n.left, cst.Name)
            and n.left.value == offs
            and len(n.comparisons) == 1
            and isinstance(n.comparisons[0].operator, cst.LessThan)
            and isinstance(n.comparisons[0].comparator, cst.Name)
            and n.comparisons[0].comparator.value in an.params
            and n.comparisons[0].comparator.value not in an.constexprs
        ):
            return n.comparisons[0].comparator.value
    return None


def grid_elements(an: Rewrites) -> Optional[list[cst.BaseExpression]]:
    """The single element E of every launch's 1D grid ``(E,)``; None if one is not that."""
    out = []
    for call, fn in an.launches():
        node, _ = an.grid_definition(call, fn)
        if isinstance(node, cst.Assign):
            node = node.value
        if isinstance(node, cst.Lambda):
            node = node.body
        if isinstance(node, cst.FunctionDef):
            return None
        if not isinstance(node, cst.Tuple) or len(node.elements) != 1:
            return None
        out.append(node.elements[0].value)
    return out or None


def loop_safe(an: Rewrites, rest: Iterable[cst.CSTNode]) -> bool:
    """The statements can run once per iteration: no parameter is reassigned and every
    augmented assignment updates a value first bound inside them."""
    bound: set[str] = set()
    for st in rest:
        for n in walk(st):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    bound |= names_in(t.target)
            elif isinstance(n, cst.For):
                bound |= names_in(n.target)
    for st in rest:
        for n in walk(st):
            targets: set[str] = set()
            if isinstance(n, cst.AugAssign):
                targets = names_in(n.target)
                if not targets <= bound:
                    return False
            elif isinstance(n, cst.Assign):
                targets = {x for t in n.targets for x in names_in(t.target)}
            if targets & set(an.params):
                return False
    return True


def grid_stride_body(
    body: Sequence[cst.BaseStatement], idx: int, rest: Sequence[cst.BaseStatement], head_code: str, keep_comment: bool
) -> list[cst.BaseStatement]:
    """The kernel body with ``rest`` moved into the loop ``head_code`` (``for ... :``)
    in place of ``body[idx]`` and what follows; the loop keeps that statement's leading
    lines and, with ``keep_comment``, its trailing comment."""
    head = cst.parse_statement(f"{head_code}\n    pass\n")
    assert isinstance(head, cst.For) and isinstance(head.body, cst.IndentedBlock)  # head_code is a ``for`` line
    first = body[idx]
    assert isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))  # the two kinds of statement
    header = head.body.header
    if keep_comment and isinstance(first, cst.SimpleStatementLine):
        header = first.trailing_whitespace  # keep the pid line's comment on the loop's line
    loop = head.with_changes(body=head.body.with_changes(body=rest, header=header), leading_lines=first.leading_lines)
    return [*body[:idx], loop]
