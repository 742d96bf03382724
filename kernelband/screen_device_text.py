"""Devices turned into text or a hash: ``str(x.device)`` is "cuda:0" on every call the
judge makes, so code that parses it, compares it or branches on its hash reads the
device's number without naming it (the grammar's ``device_by_number`` sees numbers and
"cuda:N" literals, not a number taken out of a device's text). A variant may do it only
where the original does too (it is then the original's own behaviour).

A device value is an attribute named ``device`` (``x.device``), a ``torch.device(...)``,
or a name the same top-level definition binds to one of these (``d = x.device``); it
becomes text through ``str``, ``repr``, ``ascii``, ``format``, ``hash``, an f-string, a
``%`` template or a ``.format`` call. Conservative on names (a ``d`` bound to a device
anywhere in the definition counts everywhere in it).
"""
from __future__ import annotations

import ast
from typing import Callable, Optional

TEXT_BUILTINS = frozenset({"str", "repr", "ascii", "format", "hash"})
WHAT = "turns a device into text"
WHY = ("every call of the judge runs on one device, so text made from a device (\"cuda:0\") is never tested for a "
       "user's other GPUs: allowed only where the original does the same")


Qualify = Callable[[ast.expr], Optional[str]]


def device_text_uses(node: ast.AST, qualified: Qualify) -> list[ast.AST]:
    """The places under ``node`` (a top-level statement or definition) that turn a device
    value into text or a hash, in source order; ``qualified`` resolves the module's import
    aliases (``ModuleContext.qualified``: ``th.device`` is ``torch.device``)."""
    names = _device_names(node, qualified)
    found: list[ast.AST] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            args = [*n.args, *(k.value for k in n.keywords)]
            texty = (isinstance(n.func, ast.Name) and n.func.id in TEXT_BUILTINS) or \
                (isinstance(n.func, ast.Attribute) and n.func.attr in ("format", "format_map"))
            if texty and any(_is_device(a, names, qualified) for a in args):
                found.append(n)
        elif isinstance(n, ast.FormattedValue) and _is_device(n.value, names, qualified):
            found.append(n)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and _is_device(n.right, names, qualified):
            found.append(n)
    return sorted(found, key=lambda x: (getattr(x, "lineno", 0), getattr(x, "col_offset", 0)))


def _is_device(e: ast.expr, names: set[str], qualified: Qualify) -> bool:
    """A device value: ``x.device``, ``torch.device(...)`` (under any import alias, or a
    plain ``device(...)``), a name in ``names``, or a tuple or list holding one."""
    if isinstance(e, ast.Attribute):
        return e.attr == "device"
    if isinstance(e, ast.Call):
        return qualified(e.func) == "torch.device" or (isinstance(e.func, ast.Name) and e.func.id == "device")
    if isinstance(e, ast.Name):
        return e.id in names
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_is_device(x, names, qualified) for x in e.elts)
    return False


def _device_names(node: ast.AST, qualified: Qualify) -> set[str]:
    """Names bound (by ``=``, ``:=`` or an annotated ``=``) to a device value, through
    chains of such names."""
    names: set[str] = set()
    bindings: list[tuple[list[ast.expr], ast.expr]] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Assign):
            bindings.append((n.targets, n.value))
        elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            bindings.append(([n.target], n.value))
    changed = True
    while changed:
        changed = False
        for targets, value in bindings:
            if isinstance(value, (ast.Tuple, ast.List)) or not _is_device(value, names, qualified):
                continue
            for t in targets:
                if isinstance(t, ast.Name) and t.id not in names:
                    names.add(t.id)
                    changed = True
    return names
