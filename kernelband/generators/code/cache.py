"""``cache_modifiers``: eviction_policy ``evict_first`` / ``evict_last`` or
``cache_modifier=".cg"`` on every ``tl.load`` that has neither, ``cache_modifier=".cs"``
on stores. All four are hints that never change results."""

from __future__ import annotations

import libcst as cst

from ..edits import Edits, add_kwarg, has_kwarg
from ..rewrites import Rewrites

MODIFIER_KWS = ("eviction_policy", "cache_modifier")


def rewrites(an: Rewrites) -> list[tuple[str, str, Edits]]:
    out = []
    loads = [c for c in an.accesses("load") if sum(1 for a in c.args if a.keyword is None) <= 3]
    stores = [c for c in an.accesses("store") if sum(1 for a in c.args if a.keyword is None) <= 3]
    loads = [c for c in loads if not has_kwarg(c, "volatile")]
    for key, calls, kw, value, what in (
        ("evict_first", loads, "eviction_policy", '"evict_first"', "loads"),
        ("evict_last", loads, "eviction_policy", '"evict_last"', "loads"),
        ("load_cg", loads, "cache_modifier", '".cg"', "loads"),
        ("store_cs", stores, "cache_modifier", '".cs"', "stores"),
    ):
        # one modifier per access: a load given both an eviction policy and a cache
        # modifier (access_layout applied twice) fails to compile on the GPU
        todo = [c for c in calls if not any(has_kwarg(c, k) for k in MODIFIER_KWS)]
        if not todo:
            continue
        v = cst.SimpleString(value)
        edits: Edits = {id(c): [lambda n, v=v, kw=kw: add_kwarg(n, kw, v)] for c in todo}
        lines = ", ".join(str(an.line(c)) for c in todo)
        out.append((key, f"{kw}={value} on {len(todo)} {what} of {an.kernel} (lines {lines})", edits))
    return out
