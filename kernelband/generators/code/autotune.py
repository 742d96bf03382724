"""``autotune``: wrap the kernel in ``@triton.autotune`` with a few configs around the
current one, keyed on its size arguments, and drop the tuned keywords from the launch
(``wrap``); for a kernel that already has the decorator, extend its config list or pin
one config (``list_rewrites``). The conditions of a wrap are in rules.py's docstring."""

from __future__ import annotations

import re
from typing import Callable, Optional

import libcst as cst

from ..edits import Edits, add_kwarg, int_value, merge, remove_kwargs, str_value
from ..rewrites import Rewrites
from ..space import DEFAULTS, STAGES, WARPS, Knob

AUTOTUNE_MAX_CONFIGS = 8
_SIZE_RE = re.compile(r"^[nmkNMKBHDLSTC]$|^(n|num)_|numel|size|len|elements|rows|cols|^seq|^dim", re.IGNORECASE)
_NOT_SIZE_RE = re.compile(r"ptr|stride|^alpha$|^beta$|^eps|scale|^p$|seed", re.IGNORECASE)


def size_args(an: Rewrites) -> list[str]:
    cands = [p for p in an.params if p not in an.constexprs and not p.startswith("*")]
    return [p for p in cands if _SIZE_RE.search(p) and not _NOT_SIZE_RE.search(p)]


def wrap(an: Rewrites, knobs: list[Knob]) -> Optional[tuple[str, Edits, list[list[tuple[str, int]]]]]:
    """(description, edits, the configs as typed (kind, value) lists) of the wrap."""
    if an.info.is_autotuned or an.in_place_or_atomic():
        return None
    names = an.triton_names()
    key = size_args(an)
    launches = an.launches()
    if names is None or not key or not launches:
        return None
    tuned: dict[str, Knob] = {}
    extra: dict[str, Knob] = {}
    for call, fn in launches:
        _grid_def, callable_meta = an.grid_definition(call, fn)
        if not callable_meta:
            return None
        for k in (k for k in knobs if k.call is call):
            if k.kind in ("block", "group"):
                if not k.keyword_literal or k.ties:
                    return None
                other = tuned.get(k.name)
                if other is not None and other.current != k.current:
                    return None
                tuned[k.name] = k
            elif k.sites and not k.keyword_literal:
                return None
            else:
                extra[k.kind] = k
        for a in call.args:
            if a.star:
                return None
            if a.keyword is not None and a.keyword.value in DEFAULTS and int_value(a.value) is None:
                return None
    if not any(k.kind == "block" for k in tuned.values()):
        return None
    configs = _configs(tuned, extra)
    atune, config = names
    lines = [f"@{atune}(", "    configs=["]
    for params, w, s in configs:
        kv = ", ".join(f'"{p}": {v}' for p, v in params.items())
        stages = f", num_stages={s}" if s is not None else ""
        lines.append(f"        {config}({{{kv}}}, num_warps={w}{stages}),")
    keys = ", ".join(f'"{k}"' for k in key)
    lines += ["    ],", f"    key=[{keys}],", ")"]
    holder = cst.parse_module("\n".join(lines) + "\ndef _f():\n    pass\n").body[0]
    assert isinstance(holder, cst.FunctionDef)  # the decorator parsed over a def of its own
    deco = holder.decorators[0]
    edits: Edits = {id(an.kdef): [lambda n: n.with_changes(decorators=[deco, *n.decorators])]}
    drop = set(tuned) | {k.name for k in extra.values() if k.sites}
    for call, _fn in launches:
        edits.setdefault(id(call), []).append(lambda n, drop=drop: remove_kwargs(n, drop))
    desc = (
        f"@autotune over {len(configs)} configs of {', '.join(sorted(tuned))}, num_warps"
        + (", num_stages" if "num_stages" in extra else "")
        + f" keyed on {', '.join(key)} for {an.kernel}"
    )
    typed = []
    for params, w, st in configs:
        cfg = [(tuned[n].kind, v) for n, v in params.items()] + [("num_warps", w)]
        typed.append(cfg + ([("num_stages", st)] if st is not None else []))
    return desc, edits, typed


def _configs(tuned: dict[str, Knob], extra: dict[str, Knob]) -> list[tuple[dict[str, int], int, Optional[int]]]:
    w0 = extra["num_warps"].current if "num_warps" in extra else DEFAULTS["num_warps"]
    s0 = extra["num_stages"].current if "num_stages" in extra else None
    base = {n: k.current for n, k in tuned.items()}
    blocks = [n for n, k in tuned.items() if k.kind == "block"]

    def scaled(names: list[str], f: float) -> Optional[dict[str, int]]:
        out = dict(base)
        for n in names:
            v = int(base[n] * f)
            if v not in tuned[n].domain:
                return None
            out[n] = v
        return out

    def grouped(params: Optional[dict[str, int]]) -> Optional[dict[str, int]]:
        groups = [n for n, k in tuned.items() if k.kind == "group" and 8 in k.domain]
        if params is None or not groups or all(params[n] == 8 for n in groups):
            return None
        return {**params, **{n: 8 for n in groups}}

    w_up = min(w0 * 2, WARPS[-1])
    s_up = None if s0 is None else min(s0 + 1, STAGES[-1])
    cands: list[tuple[Optional[dict[str, int]], int, Optional[int]]] = [
        (base, w0, s0),
        (scaled(blocks, 2), w0, s0),
        (scaled(blocks, 2), w_up, s0),
        (grouped(scaled(blocks, 2)), w0, s0),
        (base, w_up, s0),
        (scaled(blocks, 0.5), w0, s0),
        (base, w0, s_up),
        (scaled(blocks, 2), w0, s_up),
    ]
    for n in blocks:
        cands += [(scaled([n], 2), w0, s0), (scaled([n], 0.5), w0, s0)]
    out: list[tuple[dict[str, int], int, Optional[int]]] = []
    seen: set[str] = set()
    for params, w, s in cands:
        if params is None:
            continue
        sig = repr((sorted(params.items()), w, s))
        if sig not in seen:
            seen.add(sig)
            out.append((params, w, s))
    return out[:AUTOTUNE_MAX_CONFIGS]


def list_rewrites(an: Rewrites) -> list[tuple[str, str, Edits]]:
    got = an.autotune_configs()
    if got is None:
        return []
    lst, calls = got.node, got.calls
    shadow = an.shadow_edits([lst])  # the list may be a module-level constant
    if shadow is None:
        return []
    out: list[tuple[str, str, Edits]] = []
    if len(calls) > 1:
        for i, c in enumerate(calls):
            keep = lst.elements[i].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            new_list = lst.with_changes(elements=[keep])
            out.append(
                (
                    f"autotune_pin:{i}",
                    f"@autotune pinned to config {i} ({an.code(c)}) of {an.kernel}",
                    merge({id(lst): [lambda _n, new_list=new_list: new_list]}, shadow),
                )
            )
    extra = _extended(an, calls)
    if extra:

        def extend(n: cst.List | cst.Tuple, extra: list[cst.Call] = extra) -> cst.List | cst.Tuple:
            els = list(n.elements)
            if not isinstance(els[-1].comma, cst.Comma):
                els[-1] = els[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            new = [cst.Element(c, comma=sep) for c in extra[:-1]] + [cst.Element(extra[-1])]
            return n.with_changes(elements=els + new)

        out.append(
            (
                "autotune_extend",
                f"@autotune extended by {len(extra)} configs (blocks x2, warps x2, "
                f"stages +1 around the first) for {an.kernel}",
                merge({id(lst): [extend]}, shadow),
            )
        )
    return out


def _extended(an: Rewrites, calls: list[cst.Call]) -> list[cst.Call]:
    """New configs around the first: every block x2 (not the extent of a reduction),
    num_warps x2, num_stages + 1; those already in the list are left out."""

    def sig(c: cst.Call) -> str:
        return an.code(c.with_changes(whitespace_before_args=cst.SimpleWhitespace(""))).replace(" ", "")

    have = {sig(c) for c in calls}
    first = calls[0]
    out = []

    def bump_blocks(c: cst.Call) -> Optional[cst.Call]:
        if not c.args or not isinstance(c.args[0].value, cst.Dict):
            return None
        d = c.args[0].value
        els = []
        changed = False
        for e in d.elements:
            if isinstance(e, cst.DictElement):  # not ``**other``
                v, key = int_value(e.value), an.code(e.key)
                # the extent of a reduction one block covers stays (space.SpaceFinder.reduction_blocks)
                if v is not None and "BLOCK" in key.upper() and str_value(e.key) not in an.reduction_blocks:
                    e = e.with_changes(value=cst.Integer(str(v * 2)))
                    changed = True
            els.append(e)
        return (
            c.with_changes(args=[c.args[0].with_changes(value=d.with_changes(elements=els)), *c.args[1:]])
            if changed
            else None
        )

    def bump_kw(c: cst.Call, name: str, f: Callable[[int], int]) -> Optional[cst.Call]:
        for i, a in enumerate(c.args):
            if a.keyword is not None and a.keyword.value == name and (v := int_value(a.value)) is not None:
                args = list(c.args)
                args[i] = a.with_changes(value=cst.Integer(str(f(v))))
                return c.with_changes(args=args)
        return add_kwarg(c, name, cst.Integer(str(f(DEFAULTS[name]))))

    for cand in (
        bump_blocks(first),
        bump_kw(first, "num_warps", lambda w: min(16, w * 2)),
        bump_kw(first, "num_stages", lambda s: s + 1),
    ):
        if cand is not None and sig(cand) not in have:
            have.add(sig(cand))
            out.append(cand)
    return out
