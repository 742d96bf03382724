"""``pid_swizzle``: a 2D-tiled ``tl.dot`` kernel launched on a 1D grid that maps
``pid_m = pid // num_pid_n; pid_n = pid % num_pid_n`` (row-major tile order) gets the
grouped ordering of the Triton matmul tutorial (GROUP_M rows of tiles walked column by
column), so programs running together share A and B tiles in L2. The set of tiles is the
same (a permutation of program ids), so results do not change."""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from ..edits import Edits, names_in, walk
from ..rewrites import Rewrites
from .shapes import pid_names

SWIZZLE_GROUPS: tuple[int, ...] = (4, 8)
_FRESH = ("num_pid_in_group", "group_id", "first_pid_m", "group_size_m")


def _cdiv_vars(an: Rewrites) -> dict[str, cst.Call]:
    out = {}
    for stmt in an.kdef.body.body:
        target, value = an.simple_assign(stmt)
        if target and value is not None and an.is_lang_call(value, "cdiv"):
            out[target] = value
    return out


def _divmod(an: Rewrites, stmt: cst.CSTNode, pids: set[str]) -> Optional[tuple[str, str, str, str]]:
    """``x = pid // n`` or ``x = pid % n`` -> (x, op, pid, n)."""
    target, value = an.simple_assign(stmt)
    if not target or not isinstance(value, cst.BinaryOperation):
        return None
    op = (
        "//" if isinstance(value.operator, cst.FloorDivide) else "%" if isinstance(value.operator, cst.Modulo) else None
    )
    if op and isinstance(value.left, cst.Name) and value.left.value in pids and isinstance(value.right, cst.Name):
        return target, op, value.left.value, value.right.value
    return None


def _row_major(an: Rewrites, body: Sequence[cst.CSTNode]) -> Optional[tuple[int, str, str, str, str]]:
    """(index, pid_m, pid_n, pid, num_pid_n) of two adjacent statements
    ``pid_m = pid // num_pid_n`` and ``pid_n = pid % num_pid_n`` (either order)."""
    pids = pid_names(an)
    for i in range(len(body) - 1):
        a = _divmod(an, body[i], pids)
        b = _divmod(an, body[i + 1], pids)
        if a and b and {a[1], b[1]} == {"//", "%"} and a[2] == b[2] and a[3] == b[3]:
            m, n = (a, b) if a[1] == "//" else (b, a)
            return i, m[0], n[0], m[2], m[3]
    return None


def rewrites(an: Rewrites) -> list[tuple[str, str, Edits]]:
    if not any(an.is_lang_call(n, "dot") for n in walk(an.kdef.body)):
        return []
    body = list(an.kdef.body.body)
    found = _row_major(an, body)
    cdivs = _cdiv_vars(an)
    if found is None or found[4] not in cdivs:
        return []
    i, pid_m, pid_n, pid, npn = found
    others = [v for v in cdivs if v != npn and an.line(body[0]) <= an.line(body[i])]
    npm = next((v for v in others if v.endswith("_m") or v.endswith("m")), others[0] if others else None)
    if npm is None:
        return []
    taken = names_in(an.kdef)
    fresh = {n: n if n not in taken else f"{n}_kb" for n in _FRESH}
    if any(v in taken for v in fresh.values()):
        return []
    out = []
    for g in SWIZZLE_GROUPS:
        code = (
            f"{fresh['num_pid_in_group']} = {g} * {npn}\n"
            f"{fresh['group_id']} = {pid} // {fresh['num_pid_in_group']}\n"
            f"{fresh['first_pid_m']} = {fresh['group_id']} * {g}\n"
            f"{fresh['group_size_m']} = min({npm} - {fresh['first_pid_m']}, {g})\n"
            f"{pid_m} = {fresh['first_pid_m']} + (({pid} % {fresh['num_pid_in_group']}) % {fresh['group_size_m']})\n"
            f"{pid_n} = ({pid} % {fresh['num_pid_in_group']}) // {fresh['group_size_m']}\n"
        )
        new = list(cst.parse_module(code).body)
        first, second = body[i], body[i + 1]
        assert isinstance(first, cst.SimpleStatementLine)  # _row_major matched an assignment there
        new[0] = new[0].with_changes(leading_lines=first.leading_lines)
        edits: Edits = {
            id(first): [lambda _n, new=new: cst.FlattenSentinel(new)],
            id(second): [lambda _n: cst.RemoveFromParent()],
        }
        out.append(
            (
                f"pid_swizzle:{g}",
                f"grouped program-id ordering (GROUP_M={g}) for {pid_m}/{pid_n} "
                f"at line {an.line(first)} of {an.kernel}",
                edits,
            )
        )
    return out
