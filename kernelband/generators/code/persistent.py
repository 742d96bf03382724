"""``persistent`` (tiling): a 1D kernel over ``offs = pid * BLOCK + tl.arange(0, BLOCK)``
masked by ``offs < n`` becomes a grid-stride loop ``for pid in range(tl.program_id(0),
tl.cdiv(n, BLOCK), tl.num_programs(0))`` and its launch grid ``(E,)`` becomes
``(min(E, P),)`` with P a multiple of the SM count (132 on H100/H200): fewer, longer
programs; every tile is still visited exactly once. Refused where the body mutates a
parameter or carries a value across what would become iterations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import libcst as cst

from ..edits import Edits, names_in, walk
from ..rewrites import Rewrites
from .shapes import grid_elements, grid_stride_body, loop_safe, one_program_id, pid_statement, tile_bound

PERSISTENT_PROGRAMS: tuple[int, ...] = (264, 528, 1056)  # 2, 4, 8 programs per SM of a 132-SM H100/H200


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.target, self.new = target, new

    def on_leave(self, original_node, updated_node):
        return self.new if original_node is self.target else updated_node


@dataclass(frozen=True)
class _LoopVariable:
    """What the grid-stride loop iterates with, and over which statements."""

    index: int  # of the statement that reads the program id: the loop replaces it and what follows
    pid: str  # the loop variable
    rest: list[cst.CSTNode]  # the statements the loop takes
    own: bool  # the program id was a variable of its own (its statement goes, its comment stays)


def _loop_variable(an: Rewrites, body: Sequence[cst.CSTNode]) -> Optional[_LoopVariable]:
    """``pid = tl.program_id(0)``: pid; ``offs = tl.program_id(0) * BLOCK + ...``: the call
    becomes a new loop variable."""
    found = pid_statement(an, body)
    if found is not None:
        return _LoopVariable(found.index, found.name, list(body[found.index + 1 :]), True)
    call = next(n for n in walk(an.kdef.body) if an.is_lang_call(n, "program_id"))
    idx = next((i for i, st in enumerate(body) if any(m is call for m in walk(st))), None)
    pid = "pid" if "pid" not in names_in(an.kdef) else "pid_kb"
    if idx is None or pid in names_in(an.kdef):
        return None
    inline = body[idx].visit(_ReplaceNode(call, cst.Name(pid)))
    assert isinstance(inline, cst.CSTNode)  # only the call is replaced, by a name
    inline = inline.with_changes(leading_lines=[])  # its comments go above the loop
    return _LoopVariable(idx, pid, [inline, *body[idx + 1 :]], False)


def rewrites(an: Rewrites, programs: tuple[int, ...] = PERSISTENT_PROGRAMS) -> list[tuple[str, str, Edits]]:
    # a body on the def line (``def k(...): a; b``) has no statements to wrap in a loop
    if not isinstance(an.kdef.body, cst.IndentedBlock) or not one_program_id(an, (cst.Return,)):
        return []
    body = list(an.kdef.body.body)
    got = _loop_variable(an, body)
    if got is None:
        return []
    bound = tile_bound(an, got.rest, got.pid)
    grids = grid_elements(an) if bound is not None and loop_safe(an, got.rest) else None
    suite = an.kdef.body
    rest = [st for st in got.rest if isinstance(st, cst.BaseStatement)]
    # tile_bound matched a statement line, so the body is an indented block of statements:
    # the last two checks narrow the types, they refuse nothing
    if bound is None or not grids or not isinstance(suite, cst.IndentedBlock) or len(rest) != len(got.rest):
        return []
    lang = an.lang_prefix()
    head = (
        f"for {got.pid} in range({lang}.program_id(0), {lang}.cdiv({bound.size}, {bound.block}), "
        f"{lang}.num_programs(0)):"
    )
    new_body = grid_stride_body(suite.body, got.index, rest, head, keep_comment=got.own)
    out = []
    for p in programs:
        edits: Edits = {id(an.kdef.body): [lambda n, new_body=new_body: n.with_changes(body=new_body)]}
        for e in grids:
            edits[id(e)] = [
                lambda n, p=p: cst.Call(
                    cst.Name("min"),
                    [
                        cst.Arg(n, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                        cst.Arg(cst.Integer(str(p))),
                    ],
                )
            ]
        out.append(
            (
                f"persistent:{p}",
                f"persistent grid-stride loop over tiles of {bound.offsets} in {an.kernel}, "
                f"grid capped at {p} programs",
                edits,
            )
        )
    return out
