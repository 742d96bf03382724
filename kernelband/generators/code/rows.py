"""``rows_per_program`` (vectorization): a row-wise kernel (``row = tl.program_id(0)``,
grid ``(E,)``) handles R rows per program: the kernel gets a trailing ``n_rows_kb``
parameter (the launch passes E), its body loops ``for row in range(tl.program_id(0),
n_rows_kb, tl.num_programs(0))`` and the grid becomes ``((E + R - 1) // R,)``. Refused
where the body mutates a parameter (``X += row * s``) or carries a value across rows."""

from __future__ import annotations

import libcst as cst

from ..edits import Edits, add_kwarg, names_in
from ..rewrites import Rewrites
from .shapes import grid_elements, grid_stride_body, loop_safe, one_program_id, pid_statement, tile_bound

ROWS_PER_PROGRAM: tuple[int, ...] = (2, 4, 8)


def _plain_params(an: Rewrites) -> bool:
    """Positional parameters only, without defaults: one more can be appended."""
    params = an.kdef.params
    return not (
        params.star_arg not in (None, cst.MaybeSentinel.DEFAULT)
        or params.kwonly_params
        or params.star_kwarg
        or any(p.default is not None for p in params.params)
    )


def _fresh_param(an: Rewrites) -> str:
    taken = names_in(an.module)
    new = "n_rows_kb"
    while new in taken:
        new += "_"
    return new


def rewrites(an: Rewrites, rows: tuple[int, ...] = ROWS_PER_PROGRAM) -> list[tuple[str, str, Edits]]:
    suite = an.kdef.body
    if not one_program_id(an, (cst.Return, cst.Yield)) or not _plain_params(an):
        return []
    if not isinstance(suite, cst.IndentedBlock):
        return []  # a one-line body: no statement of its own binds the program id
    body = list(suite.body)
    found = pid_statement(an, body)
    if found is None:
        return []
    idx, row = found.index, found.name
    rest = body[idx + 1 :]
    if tile_bound(an, rest, row) is not None or not loop_safe(an, rest):
        return []  # a 1D tiled kernel: that is ``persistent``
    grids = grid_elements(an)
    launches = an.launches()
    if not grids or len(grids) != len(launches):
        return []
    lambda_params = {
        p.name.value
        for call, fn in launches
        for n in [an.grid_definition(call, fn)[0]]
        if isinstance(n, cst.Lambda)
        for p in n.params.params
    }
    if any(names_in(e) & lambda_params for e in grids):
        return []
    new = _fresh_param(an)
    lang = an.lang_prefix()
    new_body = grid_stride_body(
        body, idx, rest, f"for {row} in range({lang}.program_id(0), {new}, {lang}.num_programs(0)):", keep_comment=True
    )
    params = an.kdef.params
    last = params.params[-1]
    new_params = [
        *params.params[:-1],
        last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
        cst.Param(cst.Name(new)),
    ]
    out = []
    for r in rows:
        edits: Edits = {
            id(an.kdef.body): [lambda n, b=new_body: n.with_changes(body=b)],
            id(an.kdef.params): [lambda n, ps=new_params: n.with_changes(params=ps)],
        }
        for (call, _fn), e in zip(launches, grids):
            code = an.code(e)
            edits[id(e)] = [lambda _n, code=code, r=r: cst.parse_expression(f"({code} + {r - 1}) // {r}")]
            edits.setdefault(id(call), []).append(lambda n, code=code: add_kwarg(n, new, cst.parse_expression(code)))
        out.append((f"rows:{r}", f"{r} rows per program in {an.kernel} (loop over {row}, grid / {r})", edits))
    return out
