"""``pipeline_loop``: a loop of the kernel over ``range(...)`` that loads (a K loop)
becomes ``tl.range(..., num_stages=S)``, so the compiler software-pipelines that loop
with S stages independently of the launch's num_stages, or
``tl.range(..., loop_unroll_factor=U)``. Only where the installed Triton's ``tl.range``
takes that keyword (feature-detected)."""

from __future__ import annotations

import libcst as cst

from ..edits import Edit, Edits, walk
from ..rewrites import Rewrites
from ..triton_features import tl_range_params

PIPELINE_STAGES: tuple[int, ...] = (2, 3, 4)
LOOP_UNROLL: tuple[int, ...] = (2, 4)


def pipeline_loops(an: Rewrites) -> list[cst.For]:
    out = []
    for n in walk(an.kdef.body):
        if not isinstance(n, cst.For) or not isinstance(n.iter, cst.Call):
            continue
        it = n.iter
        builtin = isinstance(it.func, cst.Name) and it.func.value == "range"
        lang = an.is_lang_call(it, "range") and not any(a.keyword is not None for a in it.args)
        loads = any(an.is_lang_call(c, "load") or an.is_lang_call(c, "dot") for c in walk(n.body))
        if (builtin or lang) and loads and not any(a.star for a in it.args):
            out.append(n)
    return out


def _with_keyword(func: cst.BaseExpression, keyword: str, value: int) -> Edit:
    """An edit of a ``for`` over range(...) into ``func(..., keyword=value)``."""

    def edit(n: cst.For) -> cst.For:
        it = n.iter
        assert isinstance(it, cst.Call)  # pipeline_loops keeps loops over a call only
        kw = cst.Arg(
            cst.Integer(str(value)),
            keyword=cst.Name(keyword),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        args = list(it.args)
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return n.with_changes(iter=it.with_changes(func=func, args=[*args, kw]))

    return edit


def rewrites(an: Rewrites) -> list[tuple[str, str, Edits]]:
    params = tl_range_params()
    if "num_stages" not in params:
        return []
    loops = pipeline_loops(an)
    if not loops:
        return []
    lang = an.lang_prefix()
    func = cst.parse_expression(f"{lang}.range")
    lines = ", ".join(str(an.line(f)) for f in loops)
    out = []
    for s in PIPELINE_STAGES:
        out.append(
            (
                f"tl_range:{s}",
                f"loops over range at lines {lines} of {an.kernel} -> {lang}.range(..., num_stages={s})",
                {id(f): [_with_keyword(func, "num_stages", s)] for f in loops},
            )
        )
    if "loop_unroll_factor" in params:  # Triton 3.2+: unrolling, pipelining left to the launch
        for u in LOOP_UNROLL:
            out.append(
                (
                    f"tl_range_unroll:{u}",
                    f"loops over range at lines {lines} of {an.kernel} -> {lang}.range(..., loop_unroll_factor={u})",
                    {id(f): [_with_keyword(func, "loop_unroll_factor", u)] for f in loops},
                )
            )
    return out
