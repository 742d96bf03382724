"""Static screen of a variant before it runs (DESIGN section 6, first bullet).

``screen_variant(original, variant, kernel, harness)`` returns a one-line reason to
reject the variant, or None when it may be handed to the worker. It never raises on
bad input: a rejection is a result.

What a variant must satisfy:
- it parses;
- the kernel is still defined under the same name as a Triton kernel, and is still
  launched somewhere when the original launched it;
- every wrapper (module function that launches the kernel in the original) still
  exists with an unchanged signature;
- the harness function, when it is in the module, is unchanged (``ast.dump``), and is
  defined exactly once: a variant must not be able to change how it is judged;
- the original's module-level statements other than imports, definitions and
  docstrings (constants such as ``DEVICE``) are all still there unchanged, and nothing
  new rebinds a name the original binds at module level;
- deny by default (``kernelband/screen_policy.py``): beyond what the original module
  itself uses, a variant may use only ``triton.language``, a few Triton APIs, a curated
  set of torch tensor operations and safe builtins, and import only what the original
  imports (plus math, typing names and triton.language). Dunders (names, attributes,
  string text, format fields), dynamic attribute access (``getattr``,
  ``operator.attrgetter``, and any alias of them), code execution, file/process/network
  helpers, modules used as values (aliases), shadowed imports, attribute stores other
  than ``self.x`` in ``__init__``, and ``global``/``nonlocal`` are refused.

The variant derives from the user's own module, which is trusted: what the original
uses is accepted. Names and ``torch.x`` chains the original uses may appear anywhere;
dangerous uses the original has are counted per top-level function, so a variant may
keep them, never add to them. The worker process is the isolation; this screen keeps
an LLM reply from smuggling I/O or a monkeypatch into it.
"""
from __future__ import annotations

import ast
import functools
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional

from .detect import DetectionResult, detect, wrappers_of
from .screen_policy import ALLOWED_IMPORTS, Use, scan

__all__ = ["ALLOWED_IMPORTS", "policy_violations", "screen_variant"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _top_defs(tree: ast.Module) -> dict[str, list[ast.AST]]:
    defs: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(node.name, []).append(node)
    return defs


def _bound_names(stmts: Iterable[ast.stmt]) -> set[str]:
    """Names bound at module level by imports and assignments."""
    names: set[str] = set()
    for node in stmts:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    names.add(sub.id)
    return names


def _signature(fn: ast.AST) -> str:
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    async_ = "async " if isinstance(fn, ast.AsyncFunctionDef) else ""
    return async_ + ast.dump(fn.args) + "->" + (ast.dump(fn.returns) if fn.returns else "")


def _sig_text(fn: ast.AST) -> str:
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
    return f"({ast.unparse(fn.args)}){ret}"


@dataclass(frozen=True)
class _Facts:
    """What the screen needs from one module (cached: the original is screened against
    every variant of a session, and a variant may be screened twice)."""

    tree: Optional[ast.Module]
    error: str = ""
    detection: Optional[DetectionResult] = None


@functools.lru_cache(maxsize=32)
def _facts(source: str) -> _Facts:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return _Facts(None, f"{e.msg} (line {e.lineno})")
    except (ValueError, RecursionError) as e:
        return _Facts(None, str(e))
    return _Facts(tree, "", detect(source))


@functools.lru_cache(maxsize=64)
def _uses(source: str) -> tuple[Use, ...]:
    tree = _facts(source).tree
    return tuple(scan(tree)) if tree is not None else ()


def screen_variant(original_source: str, variant_source: str, kernel: str, harness: Optional[str]) -> Optional[str]:
    """A one-line reason to reject ``variant_source``, or None when it passes."""
    try:
        return _one_line(_screen(original_source, variant_source, kernel, harness) or "") or None
    except Exception as e:  # pragma: no cover - a screen bug must still be a result
        return _one_line(f"screen failed on this variant: {type(e).__name__}: {e}")


def _screen(original_source: str, variant_source: str, kernel: str, harness: Optional[str]) -> Optional[str]:
    vfacts, ofacts = _facts(variant_source), _facts(original_source)
    vtree, otree, vdet, odet = vfacts.tree, ofacts.tree, vfacts.detection, ofacts.detection
    if vtree is None or vdet is None:
        return f"variant does not parse: {vfacts.error}"
    if otree is None or odet is None:
        return f"original module does not parse: {ofacts.error}"
    vdefs, odefs = _top_defs(vtree), _top_defs(otree)
    vkernel = vdet.kernel(kernel)
    if vkernel is None:
        if kernel in vdefs:
            return f"{kernel} is no longer a Triton kernel (its @triton.jit decorator is gone)"
        return f"kernel {kernel} is no longer defined (renamed or removed)"
    if len(vdefs.get(kernel, [])) > 1:
        return f"kernel {kernel} is defined more than once"
    okernel = odet.kernel(kernel)
    if okernel is not None and okernel.launch_sites and not vkernel.launch_sites:
        return f"kernel {kernel} is no longer launched anywhere in the module (renamed or bypassed?)"

    for w in wrappers_of(odet, kernel):
        new = vdefs.get(w.name)
        if not new:
            return f"wrapper {w.name} was removed"
        old = odefs[w.name][-1]
        if _signature(new[-1]) != _signature(old):
            return f"signature of wrapper {w.name} changed: {_sig_text(old)} -> {_sig_text(new[-1])}"

    if harness and harness in odefs:
        new = vdefs.get(harness, [])
        if len(new) != 1:
            return f"harness {harness} was removed" if not new else f"harness {harness} is defined more than once"
        if ast.dump(new[0]) != ast.dump(odefs[harness][-1]):
            return f"harness {harness} was modified (a variant must not change how it is judged)"

    reason = _module_statements(otree, vtree)
    if reason:
        return reason

    found = _unlicensed(original_source, variant_source)
    return found[0].reason() if found else None


def _unlicensed(original_source: str, variant_source: str) -> list[Use]:
    """The uses of the variant that the original does not license, in source order (see
    the module docstring): an unlisted use needs the same key anywhere in the original,
    a counted use at most the original's count in the same top-level function."""
    ouses = _uses(original_source)
    licensed = {u.key for u in ouses if not u.counted}
    allowance = Counter((u.scope, u.key) for u in ouses if u.counted)
    seen: Counter = Counter()
    out: list[Use] = []
    for u in _uses(variant_source):
        if not u.counted:
            if u.key not in licensed:
                out.append(u)
            continue
        seen[(u.scope, u.key)] += 1
        if seen[(u.scope, u.key)] > allowance[(u.scope, u.key)]:
            out.append(u)
    return out


def policy_violations(original_source: str, variant_source: str) -> list[str]:
    """Every reason the allow-list policy has against a variant (the screen reports only
    the first); [] when either module does not parse. For tests and diagnostics."""
    if _facts(original_source).tree is None or _facts(variant_source).tree is None:
        return []
    return [u.reason() for u in _unlicensed(original_source, variant_source)]


def _skipped_statement(s: ast.stmt) -> bool:
    """Definitions and imports are checked elsewhere; a docstring (a bare string) does
    nothing, so a variant may reword it."""
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return True
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


def _module_statements(otree: ast.Module, vtree: ast.Module) -> Optional[str]:
    """Module-level state the harness may depend on must stay as the original has it."""
    ostmts = [s for s in otree.body if not _skipped_statement(s)]
    vstmts = [s for s in vtree.body if not _skipped_statement(s)]
    missing = Counter(ast.dump(s) for s in ostmts) - Counter(ast.dump(s) for s in vstmts)
    if missing:
        first = next(s for s in ostmts if ast.dump(s) in missing)
        return f"module-level statement at line {first.lineno} was changed or removed: {ast.unparse(first)[:80]}"
    bound = _bound_names(otree.body) | set(_top_defs(otree))
    extra = Counter(ast.dump(s) for s in vstmts) - Counter(ast.dump(s) for s in ostmts)
    for s in vstmts:
        if ast.dump(s) not in extra:
            continue
        if not isinstance(s, (ast.Assign, ast.AnnAssign)) and not (
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
        ):
            return f"new module-level statement at line {s.lineno} is not an assignment: {ast.unparse(s)[:80]}"
        clash = _bound_names([s]) & bound
        if clash:
            return f"module-level statement at line {s.lineno} rebinds {sorted(clash)[0]}"
    new_defs = set(_top_defs(vtree)) - set(_top_defs(otree))
    clash = new_defs & _bound_names(otree.body)
    if clash:
        return f"new function {sorted(clash)[0]} shadows a module-level name"
    return None
