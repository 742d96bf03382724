"""The small language that code a variant changes must be written in (the screen's
allow-list grammar, DESIGN section 6).

A variant is the user's module with some top-level definitions or statements changed.
What is unchanged is the user's trusted code; what differs is read here as a language of
its own: the statements and expressions a Triton kernel, its helper kernels, its
wrapper and its launch need, and nothing else.

- Statements (host code: wrappers, helpers, grids): assignments, expressions, if / for /
  while, return, pass / break / continue, assert, raise, with, local functions, del of
  locals. Triton kernels: the same without raise, with, del or local functions. Never:
  match, class bodies, try, global / nonlocal, imports inside functions, async, yield.
- Every name is explained: a local or parameter of an enclosing function, lambda or
  comprehension, a module-level name the variant binds, an import, or an allowed builtin.
  A name that is none of these (one a string-named API put into the globals) is refused.
- Attributes: a chain from an import (``torch.empty``, ``tl.load``) must be on the
  allow-list of ``screen_policy`` and never a module used as a value; an attribute of any
  other value must be one the values a kernel or a wrapper works with have (tensors,
  dtypes, devices, shapes, numbers, strings, containers, Triton configs; in a kernel,
  Triton values): frames, globals, code objects, storages, hooks and file methods are none
  of those. Nothing is assigned to an attribute (except ``self.x`` in a changed method of
  a class the original defines). Nothing dunder, nothing private.
- Decorators: only Triton's (jit, autotune, heuristics), with their documented keywords
  and no hooks (a hook keyword passes only as the original's exact one, ``pre_hook=f``);
  a changed function may keep the decorators its original had.
- Strings: no dunder text; ``str.format`` only on a literal template with plain fields.

A use outside the grammar is still allowed when the original contains exactly the same
call, attribute or statement (its ``ast.dump``) and it reads no local of the variant: the
licence is per exact call target (``os.environ.get("KB_DEBUG")`` licenses that call, not
``os`` or ``os.environ``).
"""

from __future__ import annotations

import ast
import builtins
import re
import string
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .detect import TritonNames, import_bindings, resolve_chain
from .screen_policy import (
    DANGEROUS_BUILTINS,
    DEVICE_INDEX_MEMBERS,
    HOST_VALUE_ATTRIBUTES,
    KERNEL_VALUE_ATTRIBUTES,
    PROVENANCE_MEMBERS,
    SAFE_BUILTINS,
    TRITON_CALLS,
    chain_verdict,
    import_keys,
    is_dunder,
    safe_import,
)

_BUILTIN_NAMES = frozenset(dir(builtins))
# a try statement: ast.TryStar (3.11+, except*) has the fields of ast.Try
_TRY_STATEMENTS: tuple[type[ast.Try], ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_NOT_IN_KERNELS = {
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.Lambda: "a lambda",
    ast.JoinedStr: "an f-string",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.NamedExpr: "an assignment expression",
}
_DUNDER_TEXT = re.compile(r"__\w+__")
_IMPORT_RULE = "a variant may import only what the original imports (plus math, itertools, typing and triton.language)"


@dataclass(frozen=True)
class Finding:
    """One use of the variant's changed code outside the grammar."""

    scope: str  # the top-level definition it is in; "<module>" outside them
    line: int
    what: str  # "uses getattr", "has a match statement", "imports os"
    why: str
    node: Optional[ast.AST] = field(default=None, compare=False, repr=False)
    local_names: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # which of several findings on one line is told first: names (0), attributes (1),
    # other constructs (2)
    rank: int = field(default=2, compare=False)

    def reason(self) -> str:
        where = "" if self.scope == "<module>" else f" in {self.scope}"
        return f"variant {self.what}{where} (line {self.line}): {self.why}"


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _all_args(args: ast.arguments) -> list[ast.arg]:
    out = args.posonlyargs + args.args + args.kwonlyargs
    return out + [a for a in (args.vararg, args.kwarg) if a is not None]


def bound_directly(body: Iterable[ast.AST]) -> set[str]:
    """Names a function (or the module) binds in its own scope: assignment and loop
    targets, local functions, assignment expressions (also inside its comprehensions);
    not what nested functions, lambdas or comprehension targets bind."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, _COMPREHENSIONS):
            names.update(
                n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)
            )
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in body:
        visit(stmt)
    return names


@dataclass
class ModuleContext:
    """What the grammar knows of the whole variant module."""

    tree: ast.Module
    aliases: dict[str, str] = field(init=False)  # import bindings: local name -> qualified name
    plain_modules: set[str] = field(init=False)
    triton: TritonNames = field(init=False)
    names: set[str] = field(init=False)  # every name bound at module level
    imported: set[str] = field(init=False)  # names bound by import statements

    def __post_init__(self) -> None:
        self.aliases, self.plain_modules, _ = import_bindings(self.tree)
        self.imported = {
            (a.asname or a.name).split(".")[0]
            for n in ast.walk(self.tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        }
        self.triton = TritonNames.of(self.tree)
        self.names = bound_directly(self.tree.body)

    def qualified(self, node: ast.expr) -> Optional[str]:
        """``a.b.c`` with ``a`` an import binding -> its qualified name."""
        return resolve_chain(node, self.aliases)

    def is_triton_decorator(self, dec: ast.expr) -> bool:
        return self.triton.is_jit(dec) or self.triton.is_autotune(dec) or self.triton.is_heuristics(dec)

    def is_kernel(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        return any(self.triton.is_jit(d) for d in fn.decorator_list)


DEVICE_INDEX_WHY = (
    "every call of the judge runs on one device, index 0, so code that depends on which device is never tested "
    "for a user's other GPUs: allowed only where the original does the same"
)
TRITON_CONFIG_WHY = (
    "only the documented configuration of a Triton decorator is allowed: hooks and custom benchmark "
    "functions run Python code around the launches"
)
FORMAT_FIELD_WHY = "format fields with attribute or item access are not allowed"


def chain_finding(chain: str, plain_modules: set[str]) -> Optional[tuple[str, str]]:
    """What a dotted chain off the allow-list does, and why that refuses it (None: allowed)."""
    status, what = chain_verdict(chain, plain_modules)
    if status == "ok":
        return None
    if status == "module":
        return f"uses module {what} as a value", "aliases that hide a module are not allowed (use module.attr directly)"
    if status == "denied":
        return f"uses {chain}", (
            f"{what} is file, process, network, native-code or runtime-hook access, "
            "not allowed unless the original makes this exact call"
        )
    return f"uses {what}", "not on the allow-list of torch/Triton operations (nor a call the original makes exactly)"


def triton_config_findings(e: ast.Call, target: Optional[str]) -> list[tuple[ast.AST, str]]:
    """Where a call of a Triton decorator or config (``TRITON_CALLS``) goes beyond its
    documented arguments. An extra keyword is reported at the keyword itself: the
    original's exact ``pre_hook=_zero_out`` licenses that keyword in a retuned config."""
    rule = TRITON_CALLS.get(target or "")
    if rule is None:
        return []
    positional, keywords = rule
    found: list[tuple[ast.AST, str]] = [
        (k, f"uses {target}({k.arg or '**'}...)") for k in e.keywords if k.arg not in keywords
    ]
    if len(e.args) > positional or any(isinstance(a, ast.Starred) for a in e.args):
        found.append((e, f"uses {target}({len(e.args)} positional arguments...)"))
    return found


class GrammarChecks:
    """The grammar's expressions, binding targets and signatures: a Finding for every use
    outside it (Walker adds the statements and definitions)."""

    def __init__(self, ctx: ModuleContext, scope: str, findings: list[Finding]) -> None:
        self.ctx = ctx
        self.scope = scope
        self.findings = findings
        self.scopes: list[set[str]] = []  # enclosing function / lambda / comprehension bindings
        self.kernel = False
        self.self_name: Optional[str] = None  # a changed method's first parameter: self.x = ... allowed
        self.called_index: set[int] = set()  # ``.index`` attributes that are called (a list's method)

    # ------------------------------------------------------------------ records
    def add(self, node: ast.AST, what: str, why: str, rank: int = 2) -> None:
        local = frozenset().union(*self.scopes) if self.scopes else frozenset()
        self.findings.append(Finding(self.scope, getattr(node, "lineno", 1), what, why, node, local, rank))

    def local(self, name: str) -> bool:
        return any(name in s for s in self.scopes)

    # ------------------------------------------------------------------ signatures
    def signature(self, args: ast.arguments) -> None:
        for a in _all_args(args):
            if is_dunder(a.arg):
                self.add(a, f"has dunder parameter {a.arg}", "dunder access is not allowed")
            self.rebinds_import(a, a.arg)
            if a.annotation is not None:
                self.annotation(a.annotation)
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.host_expr(d)

    def annotation(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return  # never evaluated (typing.get_type_hints is not on the allow-list)
        self.host_expr(node)

    def host_expr(self, node: ast.expr) -> None:
        """Decorator arguments, defaults and annotations are evaluated in the host."""
        outer, self.kernel = self.kernel, False
        self.expr(node)
        self.kernel = outer

    # ------------------------------------------------------------------ targets
    def rebinds_import(self, node: ast.AST, name: str) -> None:
        """A local named like an import would be checked as the import; at module level a
        new ``DT = torch.float16`` is an alias (resolved as such), not a rebinding."""
        if name in (self.ctx.aliases if self.scopes else self.ctx.imported):
            self.add(node, f"has a rebinding of imported name {name}", "imported names may not be shadowed", rank=0)

    def target(self, t: ast.expr) -> None:
        if isinstance(t, ast.Name):
            if is_dunder(t.id):
                self.add(t, f"uses dunder name {t.id}", "dunder access is not allowed", rank=0)
            self.rebinds_import(t, t.id)
            if self.self_name is not None and t.id == self.self_name:
                self.add(
                    t,
                    f"has a rebinding of {t.id}",
                    f"{t.id}.<attr> stores are allowed because {t.id} is the instance; it may not be rebound",
                )
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.target(e)
        elif isinstance(t, ast.Starred):
            self.target(t.value)
        elif isinstance(t, ast.Subscript):
            root = t.value
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.ctx.aliases:
                self.add(t, f"has an item assignment into {_text(t.value)}", "imported objects may not be modified")
            else:
                self.expr(t.value)
                self.expr(t.slice)
        elif isinstance(t, ast.Attribute):
            base = t.value
            if (
                self.self_name is not None
                and isinstance(base, ast.Name)
                and base.id == self.self_name
                and not t.attr.startswith("_")
            ):
                return
            self.add(
                t,
                f"has an assignment to attribute {_text(t)}",
                "attributes may not be assigned or deleted in "
                "changed code (self.<attr> only, in a changed __init__ of the original's class)",
            )
        else:
            self.add(t, f"has an assignment to {type(t).__name__}", "not an assignable target")

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ast.expr) -> None:  # noqa: C901 - one branch per expression of the grammar
        if self.kernel and type(e) in _NOT_IN_KERNELS:
            self.add(e, f"uses {_NOT_IN_KERNELS[type(e)]} in a Triton kernel", "not part of the Triton kernel language")
            return
        if isinstance(e, ast.Name):
            self.name(e)
        elif isinstance(e, ast.Constant):
            self.constant(e)
        elif isinstance(e, ast.Attribute):
            self.attribute(e)
        elif isinstance(e, ast.Call):
            self.call(e)
        elif isinstance(e, ast.Subscript):
            self.expr(e.value)
            self.expr(e.slice)
        elif isinstance(e, ast.Slice):
            for part in (e.lower, e.upper, e.step):
                if part is not None:
                    self.expr(part)
        elif isinstance(e, ast.BinOp):
            self.expr(e.left)
            self.expr(e.right)
        elif isinstance(e, ast.UnaryOp):
            self.expr(e.operand)
        elif isinstance(e, (ast.BoolOp,)):
            for v in e.values:
                self.expr(v)
        elif isinstance(e, ast.Compare):
            self.expr(e.left)
            for c in e.comparators:
                self.expr(c)
        elif isinstance(e, ast.IfExp):
            self.expr(e.test)
            self.expr(e.body)
            self.expr(e.orelse)
        elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            for x in e.elts:
                self.expr(x)
        elif isinstance(e, ast.Starred):
            self.expr(e.value)
        elif isinstance(e, ast.Dict):
            for k in e.keys:
                if k is not None:
                    self.expr(k)
            for v in e.values:
                self.expr(v)
        elif isinstance(e, ast.JoinedStr):
            for v in e.values:
                self.expr(v)
        elif isinstance(e, ast.FormattedValue):
            self.expr(e.value)
            if e.format_spec is not None:
                self.expr(e.format_spec)
        elif isinstance(e, ast.NamedExpr):
            self.target(e.target)
            self.expr(e.value)
        elif isinstance(e, ast.Lambda):
            self.signature(e.args)
            self.scopes.append({a.arg for a in _all_args(e.args)} | bound_directly([e.body]))
            self.expr(e.body)
            self.scopes.pop()
        elif isinstance(e, _COMPREHENSIONS):
            self.comprehension(e)
        elif isinstance(e, (ast.Yield, ast.YieldFrom, ast.Await)):
            self.add(
                e,
                f"uses {type(e).__name__.lower()}",
                "generators and coroutines are not part of the kernel language (their frames expose globals)",
            )
        else:
            self.add(e, f"uses a {type(e).__name__} expression", "not part of the kernel language")

    def comprehension(self, e: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        first, *rest = e.generators
        self.expr(first.iter)  # evaluated in the enclosing scope
        bound: set[str] = set()
        for g in e.generators:
            bound |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.scopes.append(bound)
        for i, g in enumerate(e.generators):
            if g.is_async:
                self.add(e, "has async code", "async code is not part of the kernel language")
            self.target(g.target)
            if i:
                self.expr(g.iter)
            for cond in g.ifs:
                self.expr(cond)
        if isinstance(e, ast.DictComp):
            self.expr(e.key)
            self.expr(e.value)
        else:
            self.expr(e.elt)
        self.scopes.pop()

    def constant(self, e: ast.Constant) -> None:
        value = e.value.decode("latin-1") if isinstance(e.value, bytes) else e.value
        if isinstance(value, str) and _NUMBERED_DEVICE.fullmatch(value) and not self.kernel:
            self.device_index(e, repr(value))
        if isinstance(value, str):
            found = _dunder_text(value)
            if found:
                self.add(e, f"has dunder text {found!r} in a string", "dunder access is not allowed")

    def name(self, e: ast.Name) -> None:
        n = e.id
        if is_dunder(n):
            self.add(e, f"uses dunder name {n}", "dunder access is not allowed", rank=0)
        elif self.local(n):
            return
        elif n in self.ctx.aliases:
            self.chain(e, self.ctx.aliases[n])
        elif n in self.ctx.names:
            return
        elif n in DANGEROUS_BUILTINS:
            self.add(e, f"uses {n}", DANGEROUS_BUILTINS[n], rank=0)
        elif n in SAFE_BUILTINS:
            return
        elif n in _BUILTIN_NAMES:
            self.add(e, f"uses builtin {n}", "not on the allow-list of builtins", rank=0)
        else:
            self.add(
                e,
                f"uses name {n}",
                "it is not defined in the module: every name must be a local, a parameter, "
                "a module-level name, an import or an allowed builtin",
                rank=0,
            )

    def attribute(self, e: ast.Attribute) -> None:
        parts: list[ast.Attribute] = []
        base: ast.expr = e
        while isinstance(base, ast.Attribute):
            parts.append(base)
            base = base.value
        parts.reverse()  # innermost first
        for a in parts:
            if is_dunder(a.attr):
                self.add(a, f"uses dunder attribute {a.attr}", "dunder access is not allowed", rank=0)
            elif a.attr.startswith("_"):
                self.add(a, f"uses private attribute {a.attr}", "private attributes are not allowed", rank=0)
        if isinstance(base, ast.Name) and base.id in self.ctx.aliases and not self.local(base.id):
            if not any(a.attr.startswith("_") for a in parts):
                self.chain(e, self.ctx.aliases[base.id] + "." + ".".join(a.attr for a in parts))
            return
        allowed = KERNEL_VALUE_ATTRIBUTES if self.kernel else HOST_VALUE_ATTRIBUTES
        for a in reversed(parts):  # outermost first: the attribute read is the finding, before its receiver
            if a.attr.startswith("_"):
                continue
            if a.attr in ("format", "format_map") and not self.kernel:
                self.format_call(a)
            elif a.attr in DEVICE_INDEX_MEMBERS and not self.kernel and id(a) not in self.called_index:
                self.device_index(a, a.attr)
            elif a.attr in PROVENANCE_MEMBERS and not self.kernel:
                self.add(
                    a,
                    f"reads {a.attr}",
                    "autograd state and memory residency are facts the judge's calls never "
                    "vary, so a branch on them is never tested: allowed only where the original reads the same "
                    "member",
                    rank=1,
                )
            elif a.attr not in allowed:
                self.add(
                    a,
                    f"uses attribute {a.attr}",
                    "not an attribute of the values a kernel or its wrapper works "
                    "with (tensors, dtypes, devices, shapes, numbers, strings, containers, Triton configs)",
                    rank=1,
                )
        self.expr(base)

    def device_index(self, node: ast.AST, what: str) -> None:
        self.add(node, f"reads or chooses the device by number ({what})", DEVICE_INDEX_WHY, rank=1)

    def chain(self, node: ast.expr, chain: str) -> None:
        if chain.rsplit(".", 1)[-1] in DEVICE_INDEX_MEMBERS:
            self.device_index(node, chain)
            return
        found = chain_finding(chain, self.ctx.plain_modules)
        if found is not None:
            self.add(node, *found, rank=1)

    def call(self, e: ast.Call) -> None:
        if isinstance(e.func, ast.Attribute) and e.func.attr == "index":
            self.called_index.add(id(e.func))  # a list's index(...), not a device's index
        numbered = device_by_number(e, self.ctx.qualified(e.func))
        if numbered is not None and not self.kernel:
            self.device_index(e, numbered)
        self.expr(e.func)
        for a in e.args:
            self.expr(a)
        for k in e.keywords:
            if k.arg is not None and is_dunder(k.arg):
                self.add(k.value, f"uses dunder keyword {k.arg}", "dunder access is not allowed")
            self.expr(k.value)
        for node, what in triton_config_findings(e, self.ctx.qualified(e.func)):
            self.add(node, what, TRITON_CONFIG_WHY)

    def format_call(self, attr: ast.Attribute) -> None:
        """``'...'.format(...)`` reads attributes through its fields: only a literal
        template with plain fields ('{}', '{0}', '{name:>8}')."""
        recv = attr.value
        if not (isinstance(recv, ast.Constant) and isinstance(recv.value, str)):
            self.add(attr, f"uses .{attr.attr} on a computed string", "format fields could read attributes")
        elif (bad := _format_field_access(recv.value)) is not None:
            self.add(attr, f"uses format field {{{bad}}}", FORMAT_FIELD_WHY)


class Walker(GrammarChecks):
    """Checks one top-level definition or statement of changed code against the grammar,
    appending a Finding for every use outside it."""

    # ------------------------------------------------------------------ definitions
    def function(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        kept_decorators: frozenset[str] = frozenset(),
        method_of: Optional[str] = None,
    ) -> None:
        """A changed (or new) function: its decorators, signature and body."""
        if isinstance(fn, ast.AsyncFunctionDef):
            self.add(fn, f"has async function {fn.name}", "async code is not part of the kernel language")
            return
        if is_dunder(fn.name) and not (method_of and fn.name == "__init__"):
            where = f" in class {method_of}" if method_of else ""
            self.add(fn, f"has dunder definition {fn.name}{where}", "dunder access is not allowed")
        for dec in fn.decorator_list:
            if ast.dump(dec) in kept_decorators:
                continue  # the same decorator the original's function has
            if self.ctx.is_triton_decorator(dec):
                self.expr(dec)
            else:
                self.add(
                    dec,
                    f"has decorator @{_text(dec)}",
                    "only Triton's decorators (jit, autotune, heuristics) may be added to changed code",
                )
        kernel = self.ctx.is_kernel(fn)
        self.signature(fn.args)
        outer = (self.kernel, self.self_name)
        self.kernel = kernel
        self.self_name = None
        if method_of and fn.name == "__init__" and (fn.args.posonlyargs + fn.args.args):
            # the new instance (__init__ cannot be called on another object without a dunder)
            self.self_name = (fn.args.posonlyargs + fn.args.args)[0].arg
        self.scopes.append({a.arg for a in _all_args(fn.args)} | bound_directly(fn.body))
        for stmt in fn.body:
            self.stmt(stmt)
        self.scopes.pop()
        self.kernel, self.self_name = outer

    # ------------------------------------------------------------------ statements
    def stmts(self, body: list[ast.stmt]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:  # noqa: C901 - one branch per statement of the grammar
        if isinstance(s, ast.Assign):
            for t in s.targets:
                self.target(t)
            self.expr(s.value)
        elif isinstance(s, ast.AugAssign):
            self.target(s.target)
            self.expr(s.value)
        elif isinstance(s, ast.AnnAssign):
            self.target(s.target)
            self.annotation(s.annotation)
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, (ast.If, ast.While)):
            self.expr(s.test)
            self.stmts(s.body)
            self.stmts(s.orelse)
        elif isinstance(s, ast.For):
            self.target(s.target)
            self.expr(s.iter)
            self.stmts(s.body)
            self.stmts(s.orelse)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            pass
        elif isinstance(s, ast.Assert):
            self.expr(s.test)
            if s.msg is not None:
                self.expr(s.msg)
        elif isinstance(s, ast.Match):
            self.add(
                s,
                "has a match statement",
                "match patterns read attributes by name (class patterns) and are not part of the kernel language",
            )
        elif isinstance(s, ast.ClassDef):
            bases = ", ".join(_text(b) for b in s.bases + [k.value for k in s.keywords])
            self.add(
                s,
                f"has class {s.name}" + (f"({bases})" if bases else ""),
                "class bodies are not allowed in changed code",
            )
        elif isinstance(s, (ast.Global, ast.Nonlocal)):
            kind = "global" if isinstance(s, ast.Global) else "nonlocal"
            self.add(s, f"has {kind} {', '.join(s.names)}", "global/nonlocal are not allowed")
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for key, _, _ in import_keys(s):
                self.add(s, _import_what(key), "imports belong at module level, as the original has them")
        elif isinstance(s, _TRY_STATEMENTS):
            self.add(s, "has a try statement", "exception handling is not part of the kernel language")
            for h in s.handlers:
                if h.name:
                    self.rebinds_import(h, h.name)
            for body in (s.body, *[h.body for h in s.handlers], s.orelse, s.finalbody):
                self.stmts(body)  # so that every finding inside is reported too
        elif isinstance(s, (ast.AsyncFor, ast.AsyncWith, ast.AsyncFunctionDef)):
            self.add(s, "has async code", "async code is not part of the kernel language")
        elif self.kernel:
            self.add(
                s,
                f"has a {type(s).__name__.lower()} statement in a Triton kernel",
                "not part of the Triton kernel language",
            )
        elif isinstance(s, ast.FunctionDef):
            for dec in s.decorator_list:
                self.add(dec, f"has decorator @{_text(dec)}", "local functions take no decorators")
            if is_dunder(s.name):
                self.add(s, f"has dunder definition {s.name}", "dunder access is not allowed")
            self.signature(s.args)
            self.scopes.append({a.arg for a in _all_args(s.args)} | bound_directly(s.body))
            self.stmts(s.body)
            self.scopes.pop()
        elif isinstance(s, ast.Raise):
            for part in (s.exc, s.cause):
                if part is not None:
                    self.expr(part)
        elif isinstance(s, ast.With):
            for item in s.items:
                self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.target(item.optional_vars)
            self.stmts(s.body)
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                if isinstance(t, ast.Attribute):
                    self.add(
                        t,
                        f"has an assignment to attribute {_text(t)}",
                        "attributes may not be assigned or deleted in changed code",
                    )
                else:
                    self.target(t)
        else:
            self.add(s, f"has a {type(s).__name__.lower()} statement", "not part of the kernel language")


_NUMBERED_DEVICE = re.compile(r"\s*cuda\s*:\s*\d+\s*")
_DEVICE_QUERIES = frozenset(
    f"torch.cuda.{n}"
    for n in (
        "device",
        "get_device_properties",
        "get_device_name",
        "get_device_capability",
        "synchronize",
        "mem_get_info",
        "memory_allocated",
        "current_stream",
        "default_stream",
    )
)


def device_by_number(e: ast.Call, target: Optional[str]) -> Optional[str]:
    """What a call names a device by number with, or None: ``torch.device("cuda", 1)``, a
    device query with a number (``torch.cuda.get_device_properties(0)``), a ``device=1``
    keyword, ``x.cuda(1)``, ``x.to(1)``."""

    def number(a: ast.expr) -> bool:
        return isinstance(a, ast.Constant) and isinstance(a.value, int) and not isinstance(a.value, bool)

    if target == "torch.device" and (len(e.args) >= 2 or any(k.arg == "index" for k in e.keywords)):
        return "torch.device(type, index)"
    if target in _DEVICE_QUERIES and e.args and number(e.args[0]):
        return f"{target}(<number>)"
    if any(k.arg == "device" and number(k.value) for k in e.keywords):
        return "device=<number>"
    if isinstance(e.func, ast.Attribute) and e.func.attr in ("cuda", "to") and e.args and number(e.args[0]):
        return f"{e.func.attr}(<number>)"
    return None


def _import_what(key: str) -> str:
    """ "import os as o" -> "imports os as o"; "from M import N" -> "imports N from M"."""
    if key.startswith("import "):
        return "imports " + key[len("import ") :]
    module, _, name = key[len("from ") :].partition(" import ")
    return f"imports {name} from {module}"


def import_findings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(what, why) for each name a module-level import binds that the grammar refuses."""
    out = []
    for (key, module, name), alias in zip(import_keys(node), node.names):
        what = _import_what(key)
        bound = alias.asname or alias.name.split(".")[0]
        if (is_dunder(module.split(".")[-1]) and module != "__future__") or is_dunder(name) or is_dunder(bound):
            out.append((what, "dunder access is not allowed"))
        elif not safe_import(module, name):
            out.append((what, _IMPORT_RULE))
    return out


def _dunder_text(text: str) -> Optional[str]:
    m = _DUNDER_TEXT.search(text)
    return m.group(0) if m else None


def _format_field_access(template: str) -> Optional[str]:
    """The first field of a format template that reads an attribute or item, or a
    placeholder when the template does not parse."""
    try:
        for _, field_name, spec, _ in string.Formatter().parse(template):
            if field_name and ("." in field_name or "[" in field_name):
                return field_name
            if spec and "{" in spec:
                inner = _format_field_access(spec)
                if inner is not None:
                    return inner
    except ValueError:
        return "unparsable template"
    return None
