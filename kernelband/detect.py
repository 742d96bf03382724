"""Find Triton kernels, their launch sites and plain functions from source text alone.

No import of the module, torch or triton: this runs in the language server on every
keystroke (debounced) and must never execute user code.
"""

from __future__ import annotations

import ast
import gc
import importlib
import marshal
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Callable, Iterator, Optional, Union, cast

from .model import FunctionInfo, KernelInfo, LaunchSite, Param, ParseError, SourceRange

_JIT_NAMES = {"jit"}
_AUTOTUNE_NAMES = {"autotune"}
_HEURISTICS_NAMES = {"heuristics"}


@dataclass
class DetectionResult:
    kernels: list[KernelInfo] = field(default_factory=list)
    functions: list[FunctionInfo] = field(default_factory=list)
    error: Optional[ParseError] = None
    # names defined at module level (defs, classes, aliases): what a function's ``calls``
    # are kept from (``redetect_function`` needs them)
    module_defs: frozenset[str] = field(default_factory=frozenset, repr=False, compare=False)

    def kernel(self, name: str) -> Optional[KernelInfo]:
        return self._index("_kernel_index", self.kernels).get(name)

    def function(self, name: str) -> Optional[FunctionInfo]:
        return self._index("_function_index", self.functions).get(name)

    def _index(self, attr: str, items: list) -> dict:
        """name -> first item of that name (what a linear scan returns), rebuilt when the
        list changes: a per-kernel harness look-up on a 1,000-kernel file was quadratic."""
        cached = self.__dict__.get(attr)
        if cached is None or cached[0] is not items or cached[1] != len(items):
            index: dict = {}
            for it in items:
                index.setdefault(it.name, it)
            cached = (items, len(items), index)
            self.__dict__[attr] = cached
        return cached[2]

    def scoped_to(self, kernel: str) -> "DetectionResult":
        """The result as the harness search for one kernel needs it: ``functions`` lists
        only those that may reach the kernel (launch it, or call, through module
        functions, one that does; a superset of what ``harness._reaches`` accepts, which
        still checks each), while ``kernel()``/``function()`` find every one. Makes a
        harness look-up per kernel proportional to that kernel's callers, not the file."""
        callers = self.__dict__.get("_callers")
        if callers is None or callers[0] != len(self.functions):
            by_callee: dict[str, list[FunctionInfo]] = {}
            for f in self.functions:
                for c in set(f.calls):
                    by_callee.setdefault(c, []).append(f)
            launchers: dict[str, list[FunctionInfo]] = {}
            for f in self.functions:
                for k in set(f.launches):
                    launchers.setdefault(k, []).append(f)
            order = {id(f): i for i, f in enumerate(self.functions)}
            callers = (len(self.functions), by_callee, launchers, order)
            self.__dict__["_callers"] = callers
        _, by_callee, launchers, order = callers
        seen: dict[int, FunctionInfo] = {}
        stack = list(launchers.get(kernel, []))
        while stack:
            f = stack.pop()
            if id(f) in seen:
                continue
            seen[id(f)] = f
            if self.function(f.name) is f:  # calls by name resolve to the first definition
                stack.extend(by_callee.get(f.name, []))
        view = DetectionResult(
            kernels=self.kernels,
            functions=sorted(seen.values(), key=lambda f: order[id(f)]),
            error=self.error,
            module_defs=self.module_defs,
        )
        self._index("_kernel_index", self.kernels)
        view.__dict__["_kernel_index"] = self.__dict__["_kernel_index"]  # same kernels list
        full = self._index("_function_index", self.functions)
        view.__dict__["_function_index"] = (view.functions, len(view.functions), full)
        return view

    def to_dict(self) -> dict:
        return {
            "kernels": [k.to_dict() for k in self.kernels],
            "functions": [f.to_dict() for f in self.functions],
            "error": self.error.to_dict() if self.error else None,
        }


def import_bindings(tree: ast.Module) -> tuple[dict[str, str], set[str], set[str]]:
    """Local name -> fully qualified module or object name, from every import and from
    module-level ``name = <imported chain>`` (``F = torch.nn.functional``); the qualified
    names bound by plain ``import`` statements (modules for sure); and the names bound to
    two different targets (the screen could not tell which one a use means). The general
    resolver of import aliases (the screen's); ``TritonNames`` is its Triton view."""
    aliases: dict[str, str] = {}
    modules: set[str] = set()
    conflicts: set[str] = set()

    def bind(name: str, target: str) -> None:
        if aliases.get(name, target) != target:
            conflicts.add(name)
        aliases[name] = target

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                target = a.name if a.asname else a.name.split(".")[0]
                bind(a.asname or target, target)
                modules.add(target)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for a in node.names:
                bind(a.asname or a.name, f"{base}.{a.name}" if node.module or node.level else a.name)
    for stmt in tree.body:  # module-level aliases of imported things, in order
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            chain = resolve_chain(stmt.value, aliases)
            if chain is not None:
                bind(stmt.targets[0].id, chain)
    return aliases, modules, conflicts


def resolve_chain(node: ast.expr, aliases: dict[str, str]) -> Optional[str]:
    """``a.b.c`` with ``a`` an alias -> its qualified name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


class TritonNames:
    """How a module names Triton: which local names refer to triton, triton.language,
    triton.jit, triton.autotune, ... The one resolver of Triton import aliases (detect,
    the rules generator, the traffic analysis and the screen's kernel checks use it).

    Defaults: ``triton`` and ``tl`` are taken to mean triton and triton.language even
    without an import (the convention of every Triton file); ``language_spellings()``
    lists only what the module really imports, since new code must use those."""

    def __init__(self) -> None:
        self.modules: set[str] = {"triton"}  # names bound to the triton package
        self.language: set[str] = {"tl"}  # names bound to triton.language
        self.jit: set[str] = set()
        self.autotune: set[str] = set()
        self.heuristics: set[str] = set()
        self.constexpr: set[str] = set()
        self.imported: set[str] = set()  # every local name an import from triton binds
        self._imported_modules: set[str] = set()
        self._imported_language: set[str] = set()

    @classmethod
    def of(cls, tree: ast.AST) -> "TritonNames":
        """The names of every import in the tree (module level or not)."""
        names = cls()
        names.collect(tree)
        return names

    def collect(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.add(node)

    def _module(self, name: str) -> None:
        self.modules.add(name)
        self._imported_modules.add(name)

    def _language(self, name: str) -> None:
        self.language.add(name)
        self._imported_language.add(name)

    def add(self, node: ast.AST) -> None:
        """One Import/ImportFrom node (other nodes are ignored)."""
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "triton" or a.name.startswith("triton."):
                    self.imported.add(a.asname or "triton")
                if a.name == "triton":
                    self._module(a.asname or "triton")
                elif a.name == "triton.language":
                    if a.asname:
                        self._language(a.asname)
                    else:
                        self._module("triton")
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root != "triton":
                return
            for a in node.names:
                local = a.asname or a.name
                self.imported.add(local)
                if node.module == "triton" and a.name == "language":
                    self._language(local)
                elif a.name in _JIT_NAMES:
                    self.jit.add(local)
                elif a.name in _AUTOTUNE_NAMES:
                    self.autotune.add(local)
                elif a.name in _HEURISTICS_NAMES:
                    self.heuristics.add(local)
                elif a.name == "constexpr":
                    self.constexpr.add(local)

    def _matches(self, expr: ast.expr, attr: str, direct: set[str]) -> bool:
        if isinstance(expr, ast.Call):
            expr = expr.func
        if isinstance(expr, ast.Name):
            return expr.id in direct
        if isinstance(expr, ast.Attribute) and expr.attr == attr:
            root = expr.value
            while isinstance(root, ast.Attribute):
                root = root.value
            return isinstance(root, ast.Name) and root.id in self.modules
        return False

    def aliases(self) -> set[str]:
        """Every name that refers to Triton or to something imported from it (the roots
        of ``tl.load``, ``triton.cdiv``, a ``from triton.language import load``)."""
        return self.modules | self.language | self.imported

    def language_spellings(self) -> set[str]:
        """Expressions (as code) that name triton.language in this module, from its
        imports only: "triton.language", "tl", "tr.language" after ``import triton as tr``."""
        return {"triton.language"} | {f"{m}.language" for m in self._imported_modules} | self._imported_language

    def is_jit(self, dec: ast.expr) -> bool:
        return self._matches(dec, "jit", self.jit)

    def is_autotune(self, dec: ast.expr) -> bool:
        return self._matches(dec, "autotune", self.autotune)

    def is_heuristics(self, dec: ast.expr) -> bool:
        return self._matches(dec, "heuristics", self.heuristics)

    def is_constexpr_annotation(self, ann: Optional[ast.expr]) -> bool:
        if ann is None:
            return False
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            return ann.value.split(".")[-1] == "constexpr"
        if isinstance(ann, ast.Name):
            return ann.id in self.constexpr
        return isinstance(ann, ast.Attribute) and ann.attr == "constexpr"


def _range(node: ast.stmt | ast.expr) -> SourceRange:
    return SourceRange(node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)


class _Segments:
    """ast.get_source_segment re-splits the whole source on every call; detection runs on
    every keystroke in the editor, so split once and slice by line offsets."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)

    def __call__(self, node: Optional[ast.expr]) -> Optional[str]:
        if node is None:
            return None
        try:
            l0, c0 = node.lineno - 1, node.col_offset
            end_line, c1 = node.end_lineno, node.end_col_offset
        except (AttributeError, TypeError):  # a node built without positions
            return ast.unparse(node)
        if end_line is None or c1 is None or end_line - 1 >= len(self.lines):
            return ast.unparse(node)
        l1 = end_line - 1
        # columns count UTF-8 bytes; on an ASCII line (almost every one) they are characters
        line = self.lines[l0]
        if l0 == l1:
            return line[c0:c1] if line.isascii() else line.encode()[c0:c1].decode(errors="replace")
        first = line[c0:] if line.isascii() else line.encode()[c0:].decode(errors="replace")
        end = self.lines[l1]
        last = end[:c1] if end.isascii() else end.encode()[:c1].decode(errors="replace")
        return first + "".join(self.lines[l0 + 1 : l1]) + last


def _params(text: _Segments, fn: ast.FunctionDef | ast.AsyncFunctionDef, names: TritonNames) -> list[Param]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [
        Param(p.arg, text(p.annotation), text(d), names.is_constexpr_annotation(p.annotation))
        for p, d in [*zip(positional, defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    ]
    if a.vararg:
        out.append(Param("*" + a.vararg.arg))
    if a.kwarg:
        out.append(Param("**" + a.kwarg.arg))
    return out


def _name_range(source_lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> SourceRange:
    line = source_lines[fn.lineno - 1] if fn.lineno - 1 < len(source_lines) else ""
    col = line.find(fn.name, fn.col_offset)
    if col < 0:
        col = fn.col_offset
    return SourceRange(fn.lineno, col, fn.lineno, col + len(fn.name))


def name_of(expr: ast.expr) -> Optional[str]:
    """``k`` of ``k`` or ``mod.k`` (a callee, ``k`` of a launch ``k[grid](...)``); None for
    any other expression."""
    if isinstance(expr, ast.Name):
        return expr.id
    return expr.attr if isinstance(expr, ast.Attribute) else None


# fields and node types that never hold a call, an import or a def: not walked (the fields
# of identifiers, numbers and flags among them: what is left holds nodes, Nones and lists
# of those; tests/test_skim.py checks it on a module of every construct)
_LEAF_FIELDS = frozenset(
    {
        "ctx",
        "op",
        "ops",
        "id",
        "attr",
        "arg",
        "name",
        "names",
        "module",
        "level",
        "conversion",
        "asname",
        "kind",
        "is_async",
        "simple",
        "type_comment",
        "tag",
        "rest",
        "kwd_attrs",
    }
)
_LEAVES = frozenset({ast.Name, ast.Constant, ast.alias, ast.Pass, ast.Break, ast.Continue})
# a node type's fields that may hold a call, an import or a def, last first (the walk
# pushes them so that they come off its stack in source order)
_FIELDS_REVERSED: dict[type, tuple[str, ...]] = {}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_Definition = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_IMPORTS = (ast.Import, ast.ImportFrom)


def _try_blocks(node: ast.stmt) -> Optional[tuple[list[ast.stmt], ...]]:
    """The statement lists of a ``try`` (or, on Python 3.11+, ``try``/``except*``), in
    source order; None for any other statement."""
    if isinstance(node, ast.Try):
        return (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody)
    if sys.version_info >= (3, 11) and isinstance(node, ast.TryStar):
        return (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody)
    return None


def _module_level(body: list[ast.stmt], kinds: tuple[type, ...]) -> "Iterator[ast.stmt]":
    """The statements of ``kinds`` at module level, also inside `if`/`try`/`with` blocks
    (`if HAS_TRITON:` or `try: import triton` guards): they run as the module loads."""
    for node in body:
        if isinstance(node, kinds):
            yield node
        elif isinstance(node, ast.If):
            yield from _module_level(node.body, kinds)
            yield from _module_level(node.orelse, kinds)
        elif (blocks := _try_blocks(node)) is not None:
            for block in blocks:
                yield from _module_level(block, kinds)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            yield from _module_level(node.body, kinds)


@dataclass(frozen=True)
class _Launch:
    """A ``kernel[grid](...)`` call, with the function it is in (None: module level)."""

    kernel: str
    call: ast.Call
    grid: ast.expr
    outer: Optional[str]


class _Walker:
    """Collects launch sites and by-name calls, by the module-level def or class they are
    in (a class owns what its methods call and launch: autograd.Function.forward)."""

    def __init__(self) -> None:
        self.launches: list[_Launch] = []
        self.calls: dict[Optional[str], set[str]] = {}

    def scan(self, tree: ast.AST, names: "TritonNames") -> None:
        """The launches and calls, and every import into ``names`` (as names.collect()),
        in one pre-order pass without NodeVisitor's per-node dispatch (detection runs on
        every keystroke).

        The bodies of kernels are not walked (most of a Triton file's nodes): a kernel
        launches nothing and imports nothing, and what it calls is kept only for plain
        functions. Which defs are kernels is decided with the module-level imports,
        found first; ``names`` still gets every import walked."""
        header = TritonNames()
        for node in _module_level(getattr(tree, "body", []), _IMPORTS):
            header.add(node)
        self._walk(tree, None, names, header)

    def _walk(self, root: ast.AST, outer: Optional[str], names: "TritonNames", header: "TritonNames") -> None:
        """Pre-order from ``root``, in source order, everything below it belonging to
        ``outer``; a def or class met while ``outer`` is None (module level, also inside
        ``if``/``try``) is walked as its own owner, a kernel not at all."""
        Call, leaves = ast.Call, _LEAVES
        stack: list[ast.AST] = [root]
        pop, push = stack.pop, stack.append
        fields_of = _FIELDS_REVERSED
        while stack:
            node = pop()
            cls = type(node)
            if cls is Call:
                self._call(cast(ast.Call, node), outer)  # cls is type(node)
            elif cls in _IMPORTS:
                names.add(node)
                continue
            elif outer is None and cls in _DEFS:
                definition = cast(_Definition, node)  # cls is type(node), one of _DEFS
                if not (cls in _FUNCTIONS and any(header.is_jit(d) for d in definition.decorator_list)):
                    self._walk(definition, definition.name, names, header)
                continue
            fields = fields_of.get(cls)
            if fields is None:  # (a class without _fields, should one ever come here, has none)
                fields = fields_of[cls] = tuple(
                    reversed([f for f in getattr(cls, "_fields", ()) if f not in _LEAF_FIELDS])
                )
            for name in fields:  # each a node, None, or a list of nodes and Nones
                v = getattr(node, name)
                if type(v) is list:
                    for x in reversed(v):
                        if x is not None and type(x) not in leaves:
                            push(x)
                elif v is not None and type(v) not in leaves:
                    push(v)

    def _call(self, node: ast.Call, outer: Optional[str]) -> None:
        func = node.func
        got = None  # the set of names ``outer`` calls, once one is added
        if type(func) is ast.Subscript:
            launched = name_of(func.value)
            if launched is not None:
                self.launches.append(_Launch(launched, node, func.slice, outer))
        elif type(func) is ast.Name:
            got = self._calls_of(outer)
            got.add(func.id)
        elif type(func) is ast.Attribute and type(func.value) is ast.Name:
            # Cls.apply(x) reaches a module-level class; on anything else it matches nothing
            got = self._calls_of(outer)
            got.add(func.value.id)
        # names passed as arguments (e.g. run(wrapper)) also count as reaching them
        for arg in node.args:
            if type(arg) is ast.Name:
                got = got if got is not None else self._calls_of(outer)
                got.add(arg.id)
        for kw in node.keywords:
            if type(kw.value) is ast.Name:
                got = got if got is not None else self._calls_of(outer)
                got.add(kw.value.id)

    def _calls_of(self, outer: Optional[str]) -> set[str]:
        got = self.calls.get(outer)
        if got is None:
            got = self.calls[outer] = set()
        return got


BOM = "\ufeff"


def strip_bom(text: str) -> str:
    """Text decoded as plain utf-8 keeps a byte-order mark, which ast.parse rejects."""
    return text[1:] if text.startswith(BOM) else text


def read_source(path: "str | os.PathLike[str]") -> str:
    """A user's Python file as text: utf-8 with or without a BOM (as Python reads it)."""
    return Path(path).read_text(encoding="utf-8-sig")


def parse_module(source: str, filename: str = "<source>") -> "tuple[Optional[ast.Module], Optional[ParseError]]":
    """ast.parse that never raises on bad input: (tree, None) or (None, the problem)."""
    try:
        return ast.parse(strip_bom(source), filename=filename), None
    except SyntaxError as e:
        return None, ParseError(e.msg or "syntax error", e.lineno or 1, max((e.offset or 1) - 1, 0))
    except (ValueError, RecursionError) as e:  # null bytes, absurd nesting
        return None, ParseError(str(e) or type(e).__name__, 1, 0)
    except MemoryError:  # the parser's own stack limit (e.g. 10,000 unary minus signs)
        return None, ParseError("too deeply nested for the Python parser (MemoryError)", 1, 0)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: a syntax tree is a million acyclic objects on a
    40,000-line file, and each collection the parser triggers walks all that are alive
    (half the time of detection on a 1,200-kernel file). Nested uses are fine."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# ---------------------------------------------------------------------------- skimming
# Detection never looks inside a kernel's body (it launches nothing, and _Walker.scan does
# not walk it), yet on a Triton file those bodies are most of the syntax tree: on the
# 1,200-kernel benchmark, most of ast.parse's 0.56 s and of the 0.1 s of freeing the tree.
# So the module is parsed with the body of each column-0 ``def`` under a "jit" decorator
# replaced by ``pass`` (every other line and column unchanged), each real body is checked
# to parse on its own (symtable: CPython's parser without tree objects), and the kernel's
# end is read from its text. Whatever is not proven the same falls back to a parse of the
# whole file: a wrong guess costs time, never a different result (tests/test_skim.py).

# (source, filename, mode) -> a symbol table, or SyntaxError; CPython's private module has
# no stub, so its one function used here is typed by this annotation
_syntax_check: Optional[Callable[[str, str, str], object]]
try:
    _syntax_check = importlib.import_module("_symtable").symtable
except ImportError:  # pragma: no cover - not CPython
    _syntax_check = None

# where Python's lines or indentation differ from a split on "\n" plus a look at the first
# character (form feed, vertical tab, a lone CR, the separators str.splitlines honours), a
# null byte, and the one __future__ import that changes the grammar
_ODD_CHARACTERS = ("\x00", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _unskimmable(source: str) -> bool:
    """(substring tests: a regex of the same took 16 ms on a 1.3 MB file)"""
    if any(c in source for c in _ODD_CHARACTERS) or "barry_as_FLUFL" in source:
        return True
    return "\r" in source and source.count("\r") != source.count("\r\n")


_NOT_CODE_AT_COL0 = frozenset(("", " ", "\t", "#", "\r"))  # first characters of a line
_CLOSERS = (")", "]", "}")


def _skimmed_tree(source: str, fork: bool = False) -> Optional[ast.Module]:
    """The module's tree with the bodies of column-0 kernels reduced to ``pass`` and their
    end positions set to the real ones, or None (parse the whole file) unless detection is
    provably the same: the masked module parses; each masked def is there, at top level,
    with its header ending where guessed; each real body parses on its own and ends where
    its text says; each masked def is a kernel by the module-level imports (the ones whose
    bodies _Walker.scan skips). Why that suffices: the tokenizer's state at each masked
    body's first line is the same in both texts (same text before it, induction over the
    earlier bodies), a body that parses alone leaves it clean at its last line, and the
    next column-0 code line then starts a new top-level statement in both texts.

    ``fork``: the bodies are checked in a child process while this one parses the rest
    (``_checked_ends_forked``)."""
    if _syntax_check is None or sys.version_info[:2] not in ((3, 10), (3, 11)) or "def " not in source:
        return None  # 3.12+: ast.parse's recursion limit is not the one _nonblank_limit assumes
    if _unskimmable(source):
        return None
    lines = source.split("\n")
    bodies = _kernel_bodies(lines)
    if not bodies:
        return None
    if fork:
        ends_when_done = _checked_ends_forked(lines, bodies)
        try:
            masked = _masked_kernels(lines, bodies)
        finally:
            ends = ends_when_done()
    else:
        ends = _checked_ends(lines, bodies)
        masked = _masked_kernels(lines, bodies) if ends is not None else None
    if masked is None or ends is None:
        return None
    tree, nodes, kept = masked
    for node, i in zip(nodes, kept):
        node.end_lineno, node.end_col_offset = ends[i]
    return tree


def _masked_kernels(
    lines: list[str], bodies: list[tuple[int, int, int]]
) -> Optional[tuple[ast.Module, list[ast.FunctionDef], list[int]]]:
    """The masked module's tree, the FunctionDef of each masked body, and which of
    ``bodies`` they are; None when one is not where it should be, or not a kernel twice
    (some "jit" decorator is not Triton's, numba.jit: once more without those)."""
    kept = list(range(len(bodies)))
    for attempt in range(2):
        masked = [bodies[i] for i in kept]
        tree = _parse_masked(lines, masked)
        nodes = _masked_defs(tree, masked) if tree is not None else None
        if tree is None or nodes is None:
            return None
        header = TritonNames()  # as _Walker.scan decides what is a kernel
        for node in _module_level(tree.body, _IMPORTS):
            header.add(node)
        jit = [any(header.is_jit(d) for d in node.decorator_list) for node in nodes]
        if all(jit):
            return tree, nodes, kept
        if attempt or not any(jit):
            return None
        kept = [i for i, j in zip(kept, jit) if j]
    return None  # pragma: no cover


def _checked_ends_forked(
    lines: list[str], bodies: list[tuple[int, int, int]]
) -> "Callable[[], Optional[list[tuple[int, int]]]]":
    """Start ``_checked_ends`` in a forked child (the kernel bodies' syntax check, a third
    of the parsing, on the other core); returns the wait for its answer. Computed here
    instead where there is no fork or more than one thread (a fork copies no other thread),
    or when the child fails to answer."""
    threading = sys.modules.get("threading")
    if not hasattr(os, "fork") or (threading is not None and threading.active_count() > 1):
        ends = _checked_ends(lines, bodies)
        return lambda: ends
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        ends = _checked_ends(lines, bodies)
        return lambda: ends
    if pid == 0:  # the child: answer through the pipe, then leave without any clean-up
        code = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as out:
                out.write(marshal.dumps(_checked_ends(lines, bodies)))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)

    def wait() -> Optional[list[tuple[int, int]]]:
        with os.fdopen(read_end, "rb") as answer:
            data = answer.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not data:
            return _checked_ends(lines, bodies)
        return marshal.loads(data)  # a list of (int, int), or None

    return wait


def _kernel_bodies(lines: list[str]) -> list[tuple[int, int, int]]:
    """Candidates, 0-based: (the ``def`` line, the last line of its header, the last line
    of its body) for each column-0 ``def `` with "jit" in the lines just above it. The
    header ends at the first line whose code ends with ":"; the body runs to the line
    before the next column-0 code line. Guesses: _skimmed_tree verifies each."""
    n = len(lines)
    code0 = [i for i, line in enumerate(lines) if line[:1] not in _NOT_CODE_AT_COL0]
    out: list[tuple[int, int, int]] = []
    for j, d in enumerate(code0):
        if not lines[d].startswith("def ") or not _jit_above(lines, d):
            continue
        k = -1
        for i in range(d, min(d + 64, n)):
            line = lines[i]
            if i > d and line[:1] not in _NOT_CODE_AT_COL0 and not line.startswith(_CLOSERS):
                break  # a new statement: the def is on one line (its body after the colon)
            if "#" in line:
                line = line[: line.index("#")]
            if line.rstrip(" \t\r").endswith(":"):
                k = i
                break
        if k < 0:
            continue
        nxt = j + 1
        while nxt < len(code0) and code0[nxt] <= k:
            nxt += 1
        end = code0[nxt] - 1 if nxt < len(code0) else n - 1
        if end > k:
            out.append((d, k, end))
    return out


def _jit_above(lines: list[str], d: int) -> bool:
    """Does "jit" appear in the lines just above line d, up to a blank line (decorators)?"""
    for i in range(d - 1, max(d - 33, -1), -1):
        line = lines[i]
        if "jit" in line:
            return True
        if not line.strip():
            return False
    return False


def _nonblank_limit() -> int:
    """The most non-blank characters a body may have for its syntax check to stand for
    ast.parse's. ast.parse also fails where converting a tree deeper than its recursion
    budget (3 per unused Python frame on 3.10/3.11) would recurse too far, which the check
    does not reproduce; a tree's depth is at most twice its tokens (a node without a token
    of its own, like ``keyword``, always has a child with one) plus a few, and a token is
    at least one non-blank character. Counted from this frame, as deep as ast.parse's in
    the full parse, with 40 frames of margin for C-level calls."""
    frame: Optional[FrameType] = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return (3 * (sys.getrecursionlimit() - depth - 40) - 500) // 2


def _checked_ends(lines: list[str], bodies: list[tuple[int, int, int]]) -> Optional[list[tuple[int, int]]]:
    """Each candidate's (end line 1-based, end column in UTF-8 bytes) once its text, alone,
    is known to parse; None when one does not (the full parse will say how)."""
    limit = _nonblank_limit()
    ends = []
    for d, k, e in bodies:
        seg = "\n".join(lines[d : e + 1]) + ("\n" if e + 1 < len(lines) else "")  # the text as it is
        nonblank = len(seg) - seg.count(" ") - seg.count("\n") - seg.count("\t") - seg.count("\r")
        end = _textual_end(lines, k, e) if nonblank <= limit else None
        if end is not None:
            if _syntax_check is None:  # (never: _skimmed_tree skims only with the check)
                return None
            try:
                _syntax_check(seg, "<kernel>", "exec")
            except Exception:  # SyntaxError, RecursionError, MemoryError...
                return None
        else:
            end = _parsed_end(seg, d)
            if end is None:
                return None
        ends.append(end)
    return ends


def _textual_end(lines: list[str], k: int, e: int) -> Optional[tuple[int, int]]:
    """Where the def's last token ends (ast's end of a FunctionDef), read from the text of
    a body known to parse, or None when the text alone cannot say. From the bottom: blank
    lines and comment lines without quotes are skipped (with no quote character below, no
    string can be open there); the first other line must hold no '#' next to a quote (a
    comment or a string?), and not end with a backslash or ';'."""
    for i in range(e, k, -1):
        s = lines[i].rstrip(" \t\r")
        if not s:
            continue
        if "#" in s:
            if '"' in s or "'" in s:
                return None
            s = s[: s.index("#")].rstrip(" \t")
            if not s:
                continue
        if s.endswith(("\\", ";")):
            return None
        return i + 1, (len(s) if s.isascii() else len(s.encode()))
    return None


def _parsed_end(seg: str, d: int) -> Optional[tuple[int, int]]:
    """The end of a body the text cannot place, from a parse of its def alone (two frames
    deeper than the full parse's ast.parse: where this succeeds, that does)."""
    tree, _ = parse_module(seg)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    node = tree.body[0]
    return (node.end_lineno or node.lineno) + d, node.end_col_offset or 0


def _parse_masked(lines: list[str], bodies: list[tuple[int, int, int]]) -> Optional[ast.Module]:
    """The module with each body's first line ``" pass"`` and its other lines empty."""
    out = list(lines)
    for _, k, e in bodies:
        out[k + 1] = " pass"
        out[k + 2 : e + 1] = [""] * (e - k - 1)
    tree, _ = parse_module("\n".join(out))
    return tree


def _masked_defs(tree: ast.Module, bodies: list[tuple[int, int, int]]) -> Optional[list[ast.FunctionDef]]:
    """Each candidate's FunctionDef: at top level on its line, its body the one ``pass`` on
    the line after the guessed header (so the header ends there in the real text too)."""
    at = {node.lineno: node for node in tree.body if type(node) is ast.FunctionDef}
    nodes = []
    for d, k, _ in bodies:
        node = at.get(d + 1)
        if node is None or node.col_offset != 0 or len(node.body) != 1:
            return None
        stmt = node.body[0]
        if type(stmt) is not ast.Pass or stmt.lineno != k + 2 or stmt.col_offset != 1:
            return None
        nodes.append(node)
    return nodes


def detect(
    source: str, filename: str = "<source>", *, skim: bool = True, fork: bool = False, tree: Optional[ast.Module] = None
) -> DetectionResult:
    """Find kernels, launch sites and module-level functions. Never raises on bad input.

    ``skim``: build no syntax tree for the bodies of column-0 ``@triton.jit`` kernels when
    that provably gives the same result (``_skimmed_tree``); False parses the whole file
    (what the tests compare against). ``fork``: check those bodies in a child process
    meanwhile (a single-threaded caller with a core to spare: ``kernelband list``).
    ``tree``: the caller's own full parse of ``source``, read instead of parsing again."""
    with gc_paused():
        return _detect(source, filename, skim, fork, tree)


def _detect(
    source: str, filename: str, skim: bool = True, fork: bool = False, tree: Optional[ast.Module] = None
) -> DetectionResult:
    source = strip_bom(source)
    if tree is None and skim:
        tree = _skimmed_tree(source, fork)
    if tree is None:
        tree, error = parse_module(source, filename)
        if tree is None:
            return DetectionResult(error=error)

    names = TritonNames()
    text = _Segments(source)
    lines = source.splitlines()
    walker = _Walker()
    walker.scan(tree, names)

    launches_by_kernel: dict[str, list[LaunchSite]] = {}
    for launch in walker.launches:
        launches_by_kernel.setdefault(launch.kernel, []).append(_launch_site(text, launch))

    # kernels launched per enclosing function, once (a scan of every launch per function
    # was quadratic in the file)
    launched_by: dict[Optional[str], set[str]] = {}
    for ss in launches_by_kernel.values():
        for s in ss:
            launched_by.setdefault(s.enclosing_function, set()).add(s.kernel)

    nodes = list(_module_level(tree.body, (*_DEFS, ast.Assign)))  # module attributes
    aliases = _aliases(nodes)
    defs = [n for n in nodes if isinstance(n, _DEFS)]
    module_defs = {n.name for n in defs} | set(aliases)
    result = DetectionResult(module_defs=frozenset(module_defs))
    for node in defs:
        if isinstance(node, ast.ClassDef):
            launched = launched_by.get(node.name, set())
            if launched or walker.calls.get(node.name):
                result.functions.append(
                    FunctionInfo(
                        name=node.name,
                        range=_range(node),
                        params=[],
                        kind="class",
                        calls=sorted(walker.calls.get(node.name, set()) & module_defs),
                        launches=sorted(launched),
                    )
                )
            continue
        decs = node.decorator_list
        if any(names.is_jit(d) for d in decs):
            start = min([d.lineno for d in decs] + [node.lineno])
            start_col = min([d.col_offset - 1 for d in decs] + [node.col_offset])
            whole = SourceRange(start, max(start_col, 0), node.end_lineno or node.lineno, node.end_col_offset or 0)
            result.kernels.append(
                KernelInfo(
                    name=node.name,
                    range=whole,
                    def_range=_range(node),
                    name_range=_name_range(lines, node),
                    params=_params(text, node, names),
                    decorators=[text(d) or "" for d in decs],
                    is_autotuned=any(names.is_autotune(d) for d in decs),
                    has_heuristics=any(names.is_heuristics(d) for d in decs),
                    launch_sites=launches_by_kernel.get(node.name, []),
                )
            )
        else:
            result.functions.append(
                FunctionInfo(
                    name=node.name,
                    range=_range(node),
                    params=_params(text, node, names),
                    calls=sorted(walker.calls.get(node.name, set()) & module_defs),
                    launches=sorted(launched_by.get(node.name, set())),
                )
            )
    for name, (assign, target) in aliases.items():
        if target in module_defs:
            result.functions.append(
                FunctionInfo(name=name, range=_range(assign), params=[], calls=[target], launches=[], kind="alias")
            )
    return result


def _launch_site(text: _Segments, launch: _Launch) -> LaunchSite:
    call = launch.call
    return LaunchSite(
        kernel=launch.kernel,
        range=_range(call),
        grid=text(launch.grid) or "",
        args=[text(a) or "" for a in call.args],
        kwargs={k.arg: text(k.value) or "" for k in call.keywords if k.arg},
        enclosing_function=launch.outer,
    )


def redetect_function(
    result: DetectionResult, block: str, name: str, end_line: int
) -> Optional[tuple[FunctionInfo, list[LaunchSite]]]:
    """A module-level plain function detected again after an edit of its body (the editor
    on a keystroke in a wrapper's launch line): ``block`` is the module's text with every
    line blanked but the function's (so positions are the module's), ``end_line`` the
    1-based line it must end on. Returns its FunctionInfo and launch sites, or None when
    the edit may change more than that function: the block does not parse as exactly one
    undecorated def of that name ending there, it holds an import (imports name Triton for
    the whole module), or the module has no ``module_defs`` (an older result)."""
    if not result.module_defs or name not in result.module_defs:
        return None
    with gc_paused():
        tree, error = parse_module(block)
        if tree is None or len(tree.body) != 1:
            return None
        fn = tree.body[0]
        if not isinstance(fn, _FUNCTIONS) or fn.name != name or fn.decorator_list or fn.end_lineno != end_line:
            return None
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(fn)):
            return None
        walker = _Walker()
        walker.scan(tree, TritonNames())
        text = _Segments(block)
        sites = [_launch_site(text, launch) for launch in walker.launches]
        old = result.function(name)
        if old is None or old.kind != "function":
            return None
        info = FunctionInfo(
            name=name,
            range=_range(fn),
            params=old.params,
            calls=sorted(walker.calls.get(name, set()) & result.module_defs),
            launches=sorted({s.kernel for s in sites}),
        )
    return info, sites


def _aliases(nodes: list[ast.stmt]) -> dict[str, tuple[ast.stmt, str]]:
    """`softmax = _Softmax.apply` / `f = g`: module-level names bound to another module name."""
    out: dict[str, tuple[ast.stmt, str]] = {}
    for node in nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        value = node.value
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            value = value.value  # Cls.apply -> Cls
        if isinstance(value, ast.Name):
            out[node.targets[0].id] = (node, value.id)
    return out


def wrappers_of(result: DetectionResult, kernel: str) -> list[FunctionInfo]:
    """Module-level functions that launch the kernel directly (classes are not wrappers:
    their signature is not one function's)."""
    return [f for f in result.functions if kernel in f.launches and f.kind == "function"]
