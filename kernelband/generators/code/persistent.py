"""``persistent`` (tiling): a 1D kernel over ``offs = pid * BLOCK + tl.arange(0, BLOCK)``
masked by ``offs < n`` becomes a grid-stride loop ``for pid in range(tl.program_id(0),
tl.cdiv(n, BLOCK), tl.num_programs(0))`` and its launch grid ``(E,)`` becomes
``(min(E, P),)`` with P a multiple of the SM count (132 on H100/H200): fewer, longer
programs; every tile is still visited exactly once. Refused where the body mutates a
parameter or carries a value across what would become iterations."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from ..edits import Edits, names_in, walk
from ..rewrites import Rewrites
from .shapes import grid_elements, grid_stride_body, loop_safe, one_program_id, pid_names, tile_bound

PERSISTENT_PROGRAMS: tuple[int, ...] = (264, 528, 1056)  # 2, 4, 8 programs per SM of a 132-SM H100/H200


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.target, self.new = target, new

    def on_leave(self, original_node, updated_node):
        return self.new if original_node is self.target else updated_node


def _loop_variable(an: Rewrites, body: list[cst.BaseStatement]) -> Optional[tuple[int, str, list[cst.BaseStatement], bool]]:
    """(index of the pid statement, the loop variable, the statements the loop takes,
    whether the pid is a variable of its own). ``offs = tl.program_id(0) * BLOCK + ...``:
    the call becomes the loop variable."""
    idx = next((i for i, st in enumerate(body) if an.simple_assign(st)[0] in pid_names(an)), None)
    if idx is not None:
        return idx, an.simple_assign(body[idx])[0], body[idx + 1:], True  # type: ignore[return-value]
    call = next(n for n in walk(an.kdef.body) if an.is_lang_call(n, "program_id"))
    idx = next((i for i, st in enumerate(body) if any(m is call for m in walk(st))), None)
    pid = "pid" if "pid" not in names_in(an.kdef) else "pid_kb"
    if idx is None or pid in names_in(an.kdef):
        return None
    inline = body[idx].visit(_ReplaceNode(call, cst.Name(pid)))
    inline = inline.with_changes(leading_lines=[])  # its comments go above the loop
    return idx, pid, [inline, *body[idx + 1:]], False


def rewrites(an: Rewrites, programs: tuple[int, ...] = PERSISTENT_PROGRAMS) -> list[tuple[str, str, Edits]]:
    if not one_program_id(an, (cst.Return,)):
        return []
    body = list(an.kdef.body.body)
    got = _loop_variable(an, body)
    if got is None:
        return []
    idx, pid, rest, own = got
    bound = tile_bound(an, rest, pid)
    grids = grid_elements(an) if bound is not None and loop_safe(an, rest) else None
    if not grids:
        return []
    offs, block, n = bound  # type: ignore[misc]
    lang = an.lang_prefix()
    new_body = grid_stride_body(
        body, idx, rest, f"for {pid} in range({lang}.program_id(0), {lang}.cdiv({n}, {block}), {lang}.num_programs(0)):",
        keep_comment=own)
    out = []
    for p in programs:
        edits: Edits = {id(an.kdef.body): [lambda n, new_body=new_body: n.with_changes(body=new_body)]}
        for e in grids:
            edits[id(e)] = [lambda n, p=p: cst.Call(cst.Name("min"), [
                cst.Arg(n, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(cst.Integer(str(p)))])]
        out.append((f"persistent:{p}", f"persistent grid-stride loop over tiles of {offs} in {an.kernel}, "
                    f"grid capped at {p} programs", edits))
    return out
