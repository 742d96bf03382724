"""Source-preserving edits with libcst, and the parsed module they apply to.

An edit is a function from a libcst node to its replacement, keyed by the id() of the
node in the original tree; ``KernelSource.render`` applies a set of them and returns the
module's text with formatting and comments kept.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional, TypeGuard, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..detect import TritonNames, detect
from ..model import KernelInfo

# An edit takes the node it is keyed on (by id) and returns its replacement. That node's
# type is the one of the node the edit was made for (a Call, a FunctionDef...), which
# the key cannot carry: the argument is untyped, and edits bind their data as defaults.
Edit = Callable[..., Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]]
Edits = dict[int, list[Edit]]


class Apply(cst.CSTTransformer):
    """Apply edits keyed by the id() of nodes of the tree being transformed."""

    def __init__(self, edits: Edits) -> None:
        super().__init__()
        self.edits = edits

    def on_leave(self, original_node, updated_node):
        out = updated_node
        for fn in self.edits.get(id(original_node), ()):
            out = fn(out)
        return out


def merge(*parts: Edits) -> Edits:
    """Union of edits; an edit function given twice (shared by several knobs) runs once."""
    out: Edits = {}
    for p in parts:
        for k, fns in p.items():
            have = out.setdefault(k, [])
            have.extend(fn for fn in fns if not any(fn is h for h in have))
    return out


def tight_equal() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Append ``name=value`` keeping the call's comma and line-break style."""
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=tight_equal())
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        new = new.with_changes(comma=last.comma)
    new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args[-1] = last.with_changes(
        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), whitespace_after_arg=cst.SimpleWhitespace("")
    )
    return call.with_changes(args=[*args, new])


def remove_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    args = list(call.args)
    keep = [a for a in args if not (a.keyword is not None and a.keyword.value in names)]
    if keep and keep[-1] is not args[-1]:
        keep[-1] = keep[-1].with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
    return call.with_changes(args=keep)


def set_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Add ``name=value``, or give the existing ``name`` argument a new value."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == name:
            args = list(call.args)
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    return add_kwarg(call, name, value)


def has_kwarg(call: cst.Call, name: str) -> bool:
    return any(a.keyword is not None and a.keyword.value == name for a in call.args)


def int_value(node: cst.CSTNode) -> Optional[int]:
    if isinstance(node, cst.Integer):
        try:
            return int(node.evaluated_value)
        except (TypeError, ValueError):
            return None
    return None


def str_value(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    return None


def walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """Pre-order (statement order) walk."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def pow2_range(lo: int, hi: int) -> list[int]:
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


class KernelSource:
    """One module parsed for one kernel: positions, the kernel's definition and
    parameters, how the module spells triton.language, and rendering of edits."""

    def __init__(self, source: str, kernel: str) -> None:
        self.source = source
        self.kernel = kernel
        self.tree = ast.parse(source)
        info = detect(source).kernel(kernel)
        if info is None:
            raise LookupError(f"no Triton kernel {kernel!r}")
        self.info: KernelInfo = info
        self.module = cst.parse_module(source)
        self.pos = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        kdef = next((s for s in self.module.body if isinstance(s, cst.FunctionDef) and s.name.value == kernel), None)
        if kdef is None:
            raise LookupError(f"no top-level definition of {kernel!r}")
        self.kdef: cst.FunctionDef = kdef
        self._nodes: Optional[dict[int, cst.CSTNode]] = None
        self._line_starts: list[int] = []
        self.params = [p.name for p in info.params]
        self.constexprs = set(info.constexpr_params)
        self.lang = self._language_names()
        self.has_loop = any(isinstance(n, (cst.For, cst.While)) for n in walk(self.kdef.body))
        self.loop_names: set[str] = set()
        for n in walk(self.kdef.body):
            if isinstance(n, cst.For):
                self.loop_names |= names_in(n.iter)
            elif isinstance(n, cst.While):
                self.loop_names |= names_in(n.test)

    # ---- rendering
    def render(self, edits: Edits) -> str:
        """The module with the edits applied. Edits that only touch integer literals and
        calls are spliced into the text (a whole-module visit costs ~10 ms, and
        enumerate_space renders hundreds of points); anything else visits the module."""
        fast = self._splice_text(edits)
        return fast if fast is not None else self.module.visit(Apply(edits)).code

    def _splice_text(self, edits: Edits) -> Optional[str]:
        if self._nodes is None:
            self._nodes = {id(n): n for n in walk(self.module) if isinstance(n, (cst.Integer, cst.Call))}
            starts = [0]
            for ln in self.source.splitlines(keepends=True):
                starts.append(starts[-1] + len(ln))
            self._line_starts = starts
        spans = []
        for key in edits:
            node = self._nodes.get(key)
            if node is None or node not in self.pos:
                return None
            r = self.pos[node]
            spans.append(
                (
                    self._line_starts[r.start.line - 1] + r.start.column,
                    self._line_starts[r.end.line - 1] + r.end.column,
                    node,
                )
            )
        spans.sort(key=lambda t: (t[0], -t[1]))
        top: list[tuple[int, int, cst.CSTNode]] = []
        for span in spans:
            if top and span[0] < top[-1][1]:
                if span[1] > top[-1][1]:
                    return None  # overlapping, not nested: let libcst sort it out
                continue  # nested: rendered with its enclosing node
            top.append(span)
        out = self.source
        for start, end, node in reversed(top):
            # code_for_node leaves out the indentation of the enclosing block on
            # continuation lines: put it back, and check it reproduces the original
            line = self.source[self._line_starts[self.pos[node].start.line - 1] :]
            indent = line[: len(line) - len(line.lstrip(" \t"))]

            def text(n: cst.CSTNode) -> str:
                return self.module.code_for_node(n).replace("\n", "\n" + indent)

            if text(node) != self.source[start:end]:
                return None
            new = node.visit(Apply(edits))
            if not isinstance(new, cst.CSTNode):
                return None
            out = out[:start] + text(new) + out[end:]
        return out

    # ---- helpers
    def _language_names(self) -> set[str]:
        """Expressions (as code) that name triton.language: "tl", "triton.language"
        (detect.TritonNames resolves the module's imports)."""
        return TritonNames.of(self.tree).language_spellings()

    def lang_prefix(self) -> str:
        """A spelling of triton.language usable in new kernel code."""
        for p in ("tl", "triton.language"):
            if p in self.lang:
                return p
        return sorted(self.lang, key=len)[0]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line(self, node: cst.CSTNode) -> int:
        return self.pos[node].start.line

    def is_lang_call(self, node: cst.CSTNode, attr: str) -> TypeGuard[cst.Call]:
        """``node`` is a call of ``triton.language.<attr>`` (as the module spells it); a
        type guard, so callers read the call's arguments without a check of their own."""
        return (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == attr
            and self.code(node.func.value) in self.lang
        )

    def triton_names(self) -> Optional[tuple[str, str]]:
        """How to spell triton.autotune and triton.Config in this module."""
        direct: dict[str, str] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "triton":
                        m = a.asname or "triton"
                        return f"{m}.autotune", f"{m}.Config"
            elif isinstance(node, ast.ImportFrom) and node.module == "triton":
                for a in node.names:
                    direct[a.name] = a.asname or a.name
        if "autotune" in direct and "Config" in direct:
            return direct["autotune"], direct["Config"]
        return None

    def accesses(self, attr: str) -> list[cst.Call]:
        return [n for n in walk(self.kdef.body) if self.is_lang_call(n, attr)]
