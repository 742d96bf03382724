"""``hints``: after ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` (also through a
``start = pid * BLOCK`` temporary) insert
``offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)``: a hint that never
changes results."""

from __future__ import annotations

import libcst as cst

from ..edits import Edits, walk
from ..rewrites import Rewrites


def rewrites(an: Rewrites) -> list[tuple[str, str, Edits]]:
    edits: Edits = {}
    done: list[str] = []
    for block in (n for n in walk(an.kdef) if isinstance(n, cst.IndentedBlock)):
        body = list(block.body)
        products: dict[str, str] = {}  # temp name -> BLOCK it is a multiple of
        for i, stmt in enumerate(body):
            target, value = an.simple_assign(stmt)
            if target is None or value is None:
                continue
            mult = an.multiple_of_block(value)
            if mult:
                products[target] = mult
                continue
            b = an.offsets_block(value, products)
            if not b or not isinstance(value, cst.BinaryOperation):  # offsets_block matches a sum only
                continue
            nxt = body[i + 1] if i + 1 < len(body) else None
            if nxt is not None and ("multiple_of" in an.code(nxt) or "max_contiguous" in an.code(nxt)):
                continue
            lang = an.arange_lang(value)
            new = cst.parse_statement(f"{target} = {lang}.max_contiguous({lang}.multiple_of({target}, {b}), {b})\n")
            edits[id(stmt)] = [lambda n, new=new: cst.FlattenSentinel([n, new])]
            done.append(f"{target} (line {an.line(stmt)})")
    if not edits:
        return []
    return [("hints", f"tl.multiple_of/tl.max_contiguous hints on {', '.join(done)} in {an.kernel}", edits)]
