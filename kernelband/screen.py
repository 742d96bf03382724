"""Static screen of a variant before it runs (DESIGN section 6, first bullet).

``screen_variant(original, variant, kernel, harness)`` returns a one-line reason to
reject the variant, or None when it may be handed to the worker. It never raises on
bad input: a rejection is a result. ``canonical_source(text)`` (``screen_source.py``) is
the text to screen and to execute: the worker writes exactly that.

What a variant must satisfy, in this order:
- its bytes are the text that is screened (UTF-8, no other coding cookie) and it parses;
- the kernel is still defined under the same name as a Triton kernel, and is still
  launched somewhere when the original launched it;
- every wrapper (module function that launches the kernel in the original) still
  exists with an unchanged signature;
- the harness function, when it is in the module, is unchanged (``ast.dump``) and
  defined exactly once: a variant must not be able to change how it is judged;
- the original's module-level statements other than imports, definitions and
  docstrings are all still there unchanged; nothing new rebinds a module-level name, an
  import or a builtin;
- deny by default: every top-level definition or statement that differs from the
  original is read as a small language (``screen_grammar.py``), the one a Triton kernel,
  its helpers, wrapper and launch are written in, over the allow-lists of
  ``screen_policy.py``. What is unchanged from the user's original is trusted as it is;
  inside changed code, a use outside the grammar passes only when the original has the
  exact same call, attribute or statement (a licence per call target, not per prefix).

The worker process and its sandbox are the isolation; this screen keeps an LLM reply
from smuggling I/O, a monkeypatch or a forged observation into it.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional

from .detect import DetectionResult, detect, import_bindings, wrappers_of
from .screen_device_calls import ModuleCode, module_code
from .screen_device_text import WHY as DEVICE_WHY, device_uses, module_device_names, module_device_uses
from .screen_grammar import Finding, ModuleContext, Walker, import_findings
from .screen_policy import ALLOWED_IMPORTS, ORIGINAL_ONLY_MEMBERS
from .screen_source import SourceRefused, canonical_source

__all__ = ["ALLOWED_IMPORTS", "SourceRefused", "canonical_source", "policy_violations", "screen_variant"]


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
    except (ValueError, RecursionError, MemoryError) as e:
        return _Facts(None, str(e) or type(e).__name__)
    return _Facts(tree, "", detect(source))


def _licensable(node: ast.AST, parent: Optional[ast.AST]) -> bool:
    """A unit a licence names: a statement, a call, a call's keyword, or a whole attribute
    chain that is read (not its prefix ``os.environ`` inside ``os.environ.get``, not a
    callee without its arguments, not an assignment target without its value)."""
    if isinstance(node, (ast.stmt, ast.Call)):
        return True
    if isinstance(node, ast.keyword):
        return isinstance(parent, ast.Call)
    if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
        return False
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return False
    return not (isinstance(parent, ast.Call) and parent.func is node)


@functools.lru_cache(maxsize=32)
def _licences(source: str) -> frozenset[str]:
    """Every statement, call and whole attribute chain of the original, as ``ast.dump``:
    a use the grammar refuses passes when the original has exactly that expression."""
    tree = _facts(source).tree
    if tree is None:
        return frozenset()
    parents = _parents(tree)
    return frozenset(ast.dump(n) for n in ast.walk(tree) if _licensable(n, parents.get(id(n))))


def screen_variant(original_source: str, variant_source: str, kernel: str, harness: Optional[str]) -> Optional[str]:
    """A one-line reason to reject ``variant_source``, or None when it passes."""
    try:
        return _one_line(_screen(original_source, variant_source, kernel, harness) or "") or None
    except Exception as e:  # pragma: no cover - a screen bug must still be a result
        return _one_line(f"screen failed on this variant: {type(e).__name__}: {e}")


def _screen(original_source: str, variant_source: str, kernel: str, harness: Optional[str]) -> Optional[str]:
    text = canonical_source(variant_source)
    if isinstance(text, SourceRefused):
        return f"variant refused: {text.reason}"
    vfacts, ofacts = _facts(text), _facts(original_source)
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
    found = _findings(original_source, text)
    return found[0].reason() if found else None


def policy_violations(original_source: str, variant_source: str) -> list[str]:
    """Every reason the allow-list grammar has against a variant's changed code (the
    screen reports only the first); [] when either module does not parse or the source
    is refused before parsing. For tests and diagnostics."""
    text = canonical_source(variant_source)
    if isinstance(text, SourceRefused) or _facts(original_source).tree is None or _facts(text).tree is None:
        return []
    return [f.reason() for f in _findings(original_source, text)]


# --------------------------------------------------------------------------- changed code
def _findings(original_source: str, variant_source: str) -> list[Finding]:
    """The grammar's findings on what the variant changed, less those the original
    licenses, in source order."""
    otree, vtree = _facts(original_source).tree, _facts(variant_source).tree
    assert otree is not None and vtree is not None
    ctx = ModuleContext(vtree)
    findings: list[Finding] = []
    for name in sorted(_conflicting_imports(vtree)):
        findings.append(
            Finding(
                "<module>", 1, f"has a rebinding of imported name {name}", "imported names may not be shadowed", rank=0
            )
        )
    changed = _changed(otree, vtree)
    for node in changed:
        _check_top_level(ctx, otree, node, findings)
    licences = _licences(original_source)
    parents = _parents(vtree)
    members = _members_read(original_source)
    kept = [f for f in findings if not _licensed(f, licences, parents) and not _member_of_original(f, members)]
    return sorted(kept + _device_findings(original_source, vtree, ctx, changed), key=lambda f: (f.line, f.rank))


def _device_findings(
    original_source: str, vtree: ast.Module, ctx: ModuleContext, changed: list[ast.stmt]
) -> list[Finding]:
    """Uses of a device the original makes no use of the kind of (text, a key, a helper's
    argument...), in the changed statements and in those that call into changed code (a
    changed helper or method receives the device there). No licence by the original's same
    call: ``str(d)`` or ``_sm(d)`` is another use where ``d`` or ``_sm`` is another value."""
    licensed = _device_uses(original_source)
    outer, module = module_device_names(vtree, ctx.qualified), module_code(vtree)
    return [
        Finding(
            str(getattr(node, "name", "<module>")), getattr(u.node, "lineno", 1), u.what, DEVICE_WHY, u.node, rank=1
        )
        for node in _device_scope(vtree, changed, module)
        for u in device_uses(node, ctx.qualified, outer, module)
        if u.label not in licensed
    ]


def _device_scope(vtree: ast.Module, changed: list[ast.stmt], module: ModuleCode) -> list[ast.stmt]:
    """The statements whose devices may go somewhere other than in the original: the
    changed ones and, where a changed one is a helper or a class, every one that calls a
    helper or a method of the module (what it reaches may be changed code)."""
    ids = {id(n) for n in changed}
    if not any(isinstance(n, ast.ClassDef) or getattr(n, "name", None) in module.functions for n in changed):
        return changed
    methods = {name for name, found in module.methods.items() if found != ()}
    return [
        n
        for n in vtree.body
        if id(n) in ids
        or any(
            isinstance(c, ast.Call)
            and (
                isinstance(c.func, ast.Name)
                and c.func.id in module.functions
                or isinstance(c.func, ast.Attribute)
                and c.func.attr in methods
            )
            for c in ast.walk(n)
        )
    ]


@functools.lru_cache(maxsize=32)
def _device_uses(source: str) -> frozenset[str]:
    """The kinds of use of a device the original makes anywhere (``screen_device_text``)."""
    tree = _facts(source).tree
    if tree is None:
        return frozenset()
    return frozenset(u.label for u in module_device_uses(tree, ModuleContext(tree).qualified))


@functools.lru_cache(maxsize=32)
def _members_read(source: str) -> frozenset[str]:
    """The ``ORIGINAL_ONLY_MEMBERS`` the original reads anywhere (``x.data_ptr()``)."""
    tree = _facts(source).tree
    if tree is None:
        return frozenset()
    return frozenset(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in ORIGINAL_ONLY_MEMBERS)


def _member_of_original(f: Finding, members: frozenset[str]) -> bool:
    """A finding on an address member the original itself reads (by name, on any value)."""
    return isinstance(f.node, ast.Attribute) and f.node.attr in members


def _conflicting_imports(tree: ast.Module) -> set[str]:
    return import_bindings(tree)[2]


def _changed(otree: ast.Module, vtree: ast.Module) -> list[ast.stmt]:
    """The variant's top-level statements that are not the original's: a definition is
    unchanged when the original has a definition of that name with the same ``ast.dump``,
    any other statement when the original has one with the same dump."""
    odefs: dict[str, set[str]] = {}
    others: Counter[str] = Counter()
    for s in otree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            odefs.setdefault(s.name, set()).add(ast.dump(s))
        else:
            others[ast.dump(s)] += 1
    out: list[ast.stmt] = []
    for s in vtree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if ast.dump(s) not in odefs.get(s.name, set()):
                out.append(s)
        elif others[ast.dump(s)] > 0:
            others[ast.dump(s)] -= 1
        elif not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)):
            out.append(s)
    return out


def _check_top_level(ctx: ModuleContext, otree: ast.Module, node: ast.stmt, findings: list[Finding]) -> None:
    originals = [
        s
        for s in otree.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and s.name == getattr(node, "name", None)
    ]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for what, why in import_findings(node):
            findings.append(Finding("<module>", node.lineno, what, why, node))
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        kept = frozenset(ast.dump(d) for o in originals if isinstance(o, ast.FunctionDef) for d in o.decorator_list)
        Walker(ctx, node.name, findings).function(node, kept)
    elif isinstance(node, ast.ClassDef):
        original = next((o for o in reversed(originals) if isinstance(o, ast.ClassDef)), None)
        _check_class(ctx, original, node, findings)
    else:
        Walker(ctx, "<module>", findings).stmt(node)


def _check_class(
    ctx: ModuleContext, original: Optional[ast.ClassDef], node: ast.ClassDef, findings: list[Finding]
) -> None:
    """A class may only be one the original defines, with the same bases, decorators and
    non-method statements; its changed methods are read as host functions (``self.x``
    may be assigned there), and it gains no dunder method."""
    if original is None:
        bases = ", ".join(ast.unparse(b) for b in node.bases + [k.value for k in node.keywords])
        findings.append(
            Finding(
                node.name,
                node.lineno,
                f"has a new class {node.name}" + (f"({bases})" if bases else ""),
                "class bodies are not allowed in changed code",
                node,
            )
        )
        return

    def shell(c: ast.ClassDef) -> str:
        body = [s for s in c.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return ast.dump(ast.Module(body=body, type_ignores=[])) + str(
            [ast.dump(x) for x in c.bases + c.keywords + c.decorator_list]
        )

    if shell(node) != shell(original):
        findings.append(
            Finding(
                node.name,
                node.lineno,
                f"has a changed class {node.name}",
                "only the methods of a class the original defines may change",
                node,
            )
        )
        return
    old = {m.name: m for m in original.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    decorators = frozenset(ast.dump(d) for m in old.values() for d in m.decorator_list)
    for m in node.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if m.name in old and ast.dump(old[m.name]) == ast.dump(m):
            continue
        Walker(ctx, node.name, findings).function(m, decorators, method_of=node.name)


def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _licensed(f: Finding, licences: frozenset[str], parents: dict[int, ast.AST]) -> bool:
    """The original has the same call, attribute or statement around ``f`` (the nearest
    enclosing ones, up to the statement), reading no local name of the variant: then the
    use is the user's own, at the same call target."""
    node: Optional[ast.AST] = f.node
    while node is not None:
        parent = parents.get(id(node))
        if _licensable(node, parent) and ast.dump(node) in licences:
            loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            return not (loaded & f.local_names)
        if isinstance(node, ast.stmt):
            return False
        node = parent
    return False


def _skipped_statement(s: ast.stmt) -> bool:
    """Definitions and imports are checked elsewhere; a docstring (a bare string) does
    nothing, so a variant may reword it."""
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return True
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


def _module_statements(otree: ast.Module, vtree: ast.Module) -> Optional[str]:
    """Module-level state the harness may depend on must stay as the original has it,
    and nothing new may rebind a module-level name, an import or a builtin (the
    unchanged harness shares these names)."""
    import builtins

    ostmts = [s for s in otree.body if not _skipped_statement(s)]
    vstmts = [s for s in vtree.body if not _skipped_statement(s)]
    missing = Counter(ast.dump(s) for s in ostmts) - Counter(ast.dump(s) for s in vstmts)
    if missing:
        first = next(s for s in ostmts if ast.dump(s) in missing)
        return f"module-level statement at line {first.lineno} was changed or removed: {ast.unparse(first)[:80]}"
    left = iter(ast.dump(s) for s in vstmts)
    for s in ostmts:  # the original's statements, in the original's order (a name bound twice keeps its last value)
        if not any(d == ast.dump(s) for d in left):
            return f"module-level statement at line {s.lineno} was moved: the original's statements keep their order"
    bound = _bound_names(otree.body) | set(_top_defs(otree))
    extra = Counter(ast.dump(s) for s in vstmts) - Counter(ast.dump(s) for s in ostmts)
    for s in vstmts:
        if ast.dump(s) not in extra:
            continue
        if not isinstance(s, (ast.Assign, ast.AnnAssign)) and not (
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
        ):
            return f"new module-level statement at line {s.lineno} is not an assignment: {ast.unparse(s)[:80]}"
        names = _bound_names([s])
        clash = names & bound
        if clash:
            return f"module-level statement at line {s.lineno} rebinds {sorted(clash)[0]}"
        shadowed = sorted(n for n in names if n in dir(builtins))
        if shadowed:
            return (
                f"variant has a module-level rebinding of builtin {shadowed[0]} (line {s.lineno}): "
                "the harness shares these names"
            )
    new_defs = set(_top_defs(vtree)) - set(_top_defs(otree))
    clash = new_defs & _bound_names(otree.body)
    if clash:
        return f"new function {sorted(clash)[0]} shadows a module-level name"
    for name in sorted(new_defs & set(dir(builtins))):
        line = _top_defs(vtree)[name][0].lineno  # type: ignore[attr-defined]
        return f"variant has a module-level rebinding of builtin {name} (line {line}): the harness shares these names"
    return None
