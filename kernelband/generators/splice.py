"""Turn an LLM answer into a module: find its first fenced Python block and splice the
block's top-level functions into the parent module by name.

- A function whose name exists at the parent's top level replaces it, decorators and
  all (the reply's decorators win); the comment and blank lines above it stay.
- A new function (a helper) is inserted before the kernel, as are new module-level
  assignments (e.g. a list of autotune configs) whose names the parent does not bind.
- New import statements are added after the parent's last import (the screen decides
  whether they are allowed).
- Protected names (the harness) are never replaced: a reply that echoes the whole file
  must not change how the variant is judged; the reply's copy is ignored and noted.
- Anything else in the block (reassignments of existing names, ``if __name__ ...``)
  is ignored and noted.
Errors are ``SpliceError`` with a one-line message meant for the user.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import libcst as cst


class SpliceError(ValueError):
    pass


_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([A-Za-z0-9_+.-]*)[^\n]*$", re.MULTILINE)
_PY = {"python", "py", "python3", "py3"}


def extract_code(reply: str) -> str:
    """The first fenced Python block of ``reply`` (the first unlabelled one when none
    is labelled Python). Raises SpliceError when there is none or it is cut off."""
    blocks: list[tuple[str, Optional[str]]] = []  # (language, code or None if unterminated)
    pos = 0
    while True:
        m = _FENCE.search(reply, pos)
        if m is None:
            break
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.MULTILINE)
        c = close.search(reply, m.end())
        if c is None:
            blocks.append((lang, None))
            break
        blocks.append((lang, reply[m.end() + 1 : c.start()]))
        pos = c.end()
    if not blocks:
        raise SpliceError("the reply has no fenced python code block")
    chosen = next((b for b in blocks if b[0] in _PY), None) or next((b for b in blocks if not b[0]), None)
    if chosen is None:
        raise SpliceError(f"the reply has no python code block (only {', '.join(sorted({b[0] for b in blocks}))})")
    if chosen[1] is None:
        raise SpliceError("the reply's python code block is not terminated (reply truncated?)")
    if not chosen[1].strip():
        raise SpliceError("the reply's python code block is empty")
    return chosen[1]


@dataclass
class SpliceResult:
    source: str
    replaced: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)  # every function the reply defines
    jit_functions: list[str] = field(default_factory=list)  # those decorated as Triton kernels

    def summary(self) -> str:
        parts = []
        if self.replaced:
            parts.append("replaced " + ", ".join(self.replaced))
        if self.added:
            parts.append("added " + ", ".join(self.added))
        if self.imports:
            parts.append("imports " + "; ".join(self.imports))
        if self.ignored:
            parts.append("ignored " + ", ".join(self.ignored))
        return "; ".join(parts)


def _is_jit(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in fn.decorator_list:
        node = d.func if isinstance(d, ast.Call) else d
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        if name == "jit":
            return True
    return False


def _top_names(stmts: Iterable[cst.CSTNode]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            names.add(s.name.value)
        elif isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for a in small.names:
                        target = a.asname.name if a.asname else a.name
                        names.add(cst.Module([]).code_for_node(target).split(".")[0])
                for t in getattr(small, "targets", []) or []:
                    if isinstance(t.target, cst.Name):
                        names.add(t.target.value)
                assigned = getattr(small, "target", None)
                if isinstance(assigned, cst.Name):
                    names.add(assigned.value)
    return names


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def _blank(n: int) -> list[cst.EmptyLine]:
    return [cst.EmptyLine() for _ in range(n)]


def _parse(parent_source: str, code: str) -> tuple[list[Any], cst.Module, cst.Module]:
    """(the reply's functions, the reply, the parent) parsed; SpliceError when either does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise SpliceError(f"the reply's code does not parse: {e.msg} (line {e.lineno})") from None
    except (ValueError, RecursionError) as e:
        raise SpliceError(f"the reply's code does not parse: {e}") from None
    fns = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not fns:
        raise SpliceError("the reply's code block defines no function")
    try:
        return fns, cst.parse_module(code), cst.parse_module(parent_source)
    except cst.ParserSyntaxError as e:  # ast accepted it; libcst may lag behind new syntax
        raise SpliceError(f"cannot splice the reply: {str(e).splitlines()[0]}") from None


def _insert_imports(body: list[Any], new_imports: list[cst.CSTNode]) -> None:
    """After the module's last import, else after its docstring, else first."""
    last = max((i for i, s in enumerate(body) if _is_import(s)), default=-1)
    if last < 0:  # after a module docstring, if any
        first = body[0] if body else None
        doc = (
            isinstance(first, cst.SimpleStatementLine)
            and len(first.body) == 1
            and isinstance(first.body[0], cst.Expr)
            and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
        )
        last = 0 if doc else -1
    body[last + 1 : last + 1] = new_imports


def splice_functions(parent_source: str, code: str, kernel: str, protected: Iterable[str] = ()) -> SpliceResult:
    fns, reply, module = _parse(parent_source, code)
    result = SpliceResult(
        source=parent_source, functions=[f.name for f in fns], jit_functions=[f.name for f in fns if _is_jit(f)]
    )
    protected = set(protected)
    body = list(module.body)
    bound = _top_names(body)
    index = {s.name.value: i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef)}
    existing_imports = {module.code_for_node(s).strip() for s in body if _is_import(s)}
    new_imports: list[cst.CSTNode] = []
    before_kernel: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
    helpers: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []

    for stmt in reply.body:
        if isinstance(stmt, cst.FunctionDef):
            name = stmt.name.value
            if name in protected:
                result.ignored.append(f"{name} (kept unchanged)")
            elif name in index:
                old = body[index[name]]
                comments = [ln for ln in stmt.leading_lines if ln.comment is not None]
                body[index[name]] = stmt.with_changes(leading_lines=[*old.leading_lines, *comments])
                result.replaced.append(name)
            elif name in bound:
                result.ignored.append(f"{name} (would shadow a module-level name)")
            else:
                comments = [ln for ln in stmt.leading_lines if ln.comment is not None]
                helpers.append(stmt.with_changes(leading_lines=[*_blank(2), *comments]))
                bound.add(name)
                result.added.append(name)
        elif _is_import(stmt):
            text = reply.code_for_node(stmt).strip()
            if text not in existing_imports:
                existing_imports.add(text)
                new_imports.append(stmt.with_changes(leading_lines=[]))
                result.imports.append(text)
        elif isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Assign, cst.AnnAssign)) for s in stmt.body
        ):
            names = _top_names([stmt])
            text = reply.code_for_node(stmt).strip().splitlines()[0][:40]
            if names and not names & bound:
                before_kernel.append(stmt.with_changes(leading_lines=_blank(0 if before_kernel else 2)))
                bound |= names
                result.added.append(", ".join(sorted(names)))
            else:
                result.ignored.append(f"reassignment `{text}`")
        elif not (isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Expr) for s in stmt.body)):
            text = reply.code_for_node(stmt).strip().splitlines()[0][:40]
            result.ignored.append(f"`{text}`")

    at = index.get(kernel)
    if at is None:  # no kernel in the parent: helpers go at the end
        at = len(body)
    body[at:at] = [*before_kernel, *helpers]
    if new_imports:
        _insert_imports(body, new_imports)
    result.source = module.with_changes(body=body).code
    return result
