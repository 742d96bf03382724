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
- the original's module-level statements other than imports and function definitions
  (constants such as ``DEVICE``) are all still there unchanged, and nothing new rebinds
  a name the original binds at module level;
- it imports nothing beyond ``ALLOWED_IMPORTS``;
- no file, process or network use: the builtins in ``BANNED_BUILTINS``, the modules in
  ``BANNED_MODULES`` reached as attributes, dunder attributes (``__globals__``,
  ``__subclasses__``, ...), ``getattr``/``setattr``/``delattr`` with a non-literal or
  dunder name, and the file/IO entry points of torch and numpy.

The variant derives from the user's own module, which is trusted. Imports and risky
uses that the original already has are therefore accepted (counted as a multiset): a
variant may keep them, never add to them. This screen is a guard against an LLM
reply smuggling in I/O, not a sandbox; the worker process is the isolation.
"""
from __future__ import annotations

import ast
import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .detect import DetectionResult, detect, wrappers_of

# Modules (exact names) and package prefixes ("torch.nn" allows "torch.nn.functional")
# a variant may import.
ALLOWED_IMPORTS: frozenset[str] = frozenset(
    {
        "__future__",
        "abc",
        "cmath",
        "collections",
        "collections.abc",
        "dataclasses",
        "enum",
        "functools",
        "itertools",
        "math",
        "numbers",
        "numpy",
        "operator",
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "triton",
        "triton.language",
        "triton.runtime",
        "triton.runtime.driver",
        "triton.testing",
        "typing",
        "typing_extensions",
        "warnings",
    }
)
ALLOWED_IMPORT_PREFIXES: tuple[str, ...] = ("triton.language.", "torch.nn.functional.")

BANNED_BUILTINS: frozenset[str] = frozenset(
    {
        "open",
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "input",
        "exit",
        "quit",
        "help",
        "memoryview",
        "__builtins__",
        "__loader__",
        "__spec__",
    }
)
BANNED_MODULES: frozenset[str] = frozenset(
    {
        "os",
        "sys",
        "subprocess",
        "socket",
        "shutil",
        "pathlib",
        "ctypes",
        "importlib",
        "builtins",
        "io",
        "pickle",
        "marshal",
        "shelve",
        "multiprocessing",
        "threading",
        "signal",
        "tempfile",
        "glob",
        "urllib",
        "http",
        "requests",
        "ftplib",
        "smtplib",
        "asyncio",
        "inspect",
        "gc",
        "code",
        "pty",
        "runpy",
    }
)
# Fully qualified names (after resolving import aliases) that read or write files,
# load native code or reach the network.
BANNED_QUALIFIED: tuple[str, ...] = (
    "torch.load",
    "torch.save",
    "torch.hub",
    "torch.utils.cpp_extension",
    "torch.ops.load_library",
    "torch.classes.load_library",
    "torch.jit.load",
    "torch.jit.save",
    "torch.from_file",
    "torch.package",
    "torch.utils.data",
    "numpy.load",
    "numpy.save",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.fromfile",
    "numpy.loadtxt",
    "numpy.savetxt",
    "numpy.genfromtxt",
    "numpy.memmap",
    "numpy.ctypeslib",
    "numpy.lib",
    "numpy.f2py",
    "numpy.distutils",
    "triton.tools",
    "triton.runtime.cache",
    "triton.runtime.build",
    "triton.backends",
    "operator.attrgetter",
    "operator.methodcaller",
    "typing.get_type_hints",
)
# Attribute names that reach a banned module (``torch.os``...) or do file I/O whatever
# object they are taken from.
BANNED_ATTRIBUTES: frozenset[str] = frozenset(
    {"os", "sys", "subprocess", "socket", "shutil", "pathlib", "ctypes", "importlib", "builtins", "pickle",
     "marshal", "multiprocessing", "tempfile", "urllib", "requests", "tofile", "from_file", "load_library"}
)
_ALLOWED_DUNDERS: frozenset[str] = frozenset({"__name__", "__doc__", "__init__", "__call__", "__len__"})


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _import_allowed(module: str) -> bool:
    return module in ALLOWED_IMPORTS or module.startswith(ALLOWED_IMPORT_PREFIXES)


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> fully qualified module or object name, from every import."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    out[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _qualified(node: ast.expr, aliases: dict[str, str]) -> Optional[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _banned_qualified(q: Optional[str]) -> bool:
    return bool(q) and any(q == b or q.startswith(b + ".") for b in BANNED_QUALIFIED)  # type: ignore[union-attr]


def _findings(tree: ast.Module) -> list[str]:
    """Every disallowed import and risky use in a module, as short readable strings."""
    aliases = _aliases(tree)
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _import_allowed(a.name) or _banned_qualified(a.name):
                    out.append(f"imports {a.name}")
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or not _import_allowed(module):
                out.append(f"imports from {module}")
                continue
            for a in node.names:
                full = f"{module}.{a.name}"
                if a.name == "*" or a.name in BANNED_MODULES or _banned_qualified(full):
                    out.append(f"imports {full}")
        elif isinstance(node, ast.Name):
            q = aliases.get(node.id, node.id)
            if node.id in BANNED_BUILTINS:
                out.append(f"uses {node.id}")
            elif node.id in aliases and q.split(".")[0] in BANNED_MODULES:  # unimported: a NameError
                out.append(f"uses {q.split('.')[0]}")
            elif _banned_qualified(q):
                out.append(f"uses {q}")
        elif isinstance(node, ast.Attribute):
            a = node.attr
            if a.startswith("__") and a.endswith("__") and a not in _ALLOWED_DUNDERS:
                out.append(f"uses attribute {a}")
            elif a in BANNED_ATTRIBUTES:
                out.append(f"uses attribute {a}")
            else:
                q = _qualified(node, aliases)
                if _banned_qualified(q):
                    out.append(f"uses {q}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "delattr", "hasattr"):
                name = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    out.append(f"uses {node.func.id} with a computed name")
                elif name.value.startswith("__") or name.value in BANNED_ATTRIBUTES or name.value in BANNED_BUILTINS:
                    out.append(f"uses {node.func.id}(..., {name.value!r})")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for n in node.names:
                out.append(f"rebinds global {n}")
    return out


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
    findings: Counter = field(default_factory=Counter)


@functools.lru_cache(maxsize=32)
def _facts(source: str) -> _Facts:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return _Facts(None, f"{e.msg} (line {e.lineno})")
    except (ValueError, RecursionError) as e:
        return _Facts(None, str(e))
    return _Facts(tree, "", detect(source), Counter(_findings(tree)))


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

    added = vfacts.findings - ofacts.findings
    if added:
        what = sorted(added)[0]
        if what.startswith("imports"):
            return f"variant {what}, which is not on the import allow-list (torch, triton, math, numpy, functools, ...)"
        return f"variant {what}: no file, process or network use is allowed"
    return None


def _module_statements(otree: ast.Module, vtree: ast.Module) -> Optional[str]:
    """Module-level state the harness may depend on must stay as the original has it."""
    skip = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    ostmts = [s for s in otree.body if not isinstance(s, skip)]
    vstmts = [s for s in vtree.body if not isinstance(s, skip)]
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
