"""What a variant may use: the allow-lists and the AST scan behind ``kernelband/screen.py``.

Deny by default. ``scan(tree)`` lists every *use* in a module that is not plainly
allowed, as ``Use`` records. Two kinds:

- *unlisted* uses (``counted=False``): a name, a ``torch.x.y`` chain or an import that is
  not on the allow-lists below. The variant may have it when the original module (the
  user's trusted code) uses the same thing anywhere.
- *counted* uses (``counted=True``): what is dangerous even when the original has it:
  dunders, dynamic attribute access (``getattr``...), code execution, file/process/network
  helpers, modules used as values (aliases), attribute stores, shadowed imports or
  builtins, class bases, ``global``. The variant may have at most as many as the original
  has in the same top-level function (or class).

The screen compares the two scans; this file holds no structural checks.
"""
from __future__ import annotations

import ast
import builtins
import re
import string
import sys
from dataclasses import dataclass
from typing import Iterable, Optional

from .detect import import_bindings as _import_bindings

# ----------------------------------------------------------------------------- builtins
_BUILTIN_NAMES: frozenset[str] = frozenset(dir(builtins))
SAFE_BUILTINS: frozenset[str] = frozenset(
    """len range min max abs int float bool complex str tuple list dict set frozenset isinstance
    issubclass enumerate zip sum any all print round divmod sorted reversed map filter slice pow
    iter next repr hash chr ord hex bin oct callable super object property staticmethod
    classmethod NotImplemented Ellipsis Exception ValueError AssertionError RuntimeError TypeError
    KeyError IndexError LookupError NotImplementedError ZeroDivisionError ArithmeticError
    OverflowError StopIteration AttributeError""".split()
)
_DYNAMIC = "dynamic attribute access is not allowed"
_CODE = "code execution is not allowed"
_IO = "file, process, network or native-code access is not allowed"
# Builtins that are rejected wherever they appear (called, aliased or passed as a value).
DANGEROUS_BUILTINS: dict[str, str] = {
    **{n: _DYNAMIC for n in ("getattr", "setattr", "delattr", "hasattr", "vars", "dir", "globals", "locals", "type")},
    **{n: _CODE for n in ("eval", "exec", "compile", "breakpoint")},
    **{n: _IO for n in ("open", "input", "exit", "quit", "help", "memoryview", "copyright", "credits", "license")},
}

# ----------------------------------------------------------------------------- modules
MODULE = "module"  # only the members listed in ALLOWED
NAMESPACE = "namespace"  # any public member that is not itself a module (one segment more)
LEAF = "leaf"  # an object: its public attributes may be read (torch.float16.itemsize)
MEMBER = "member"  # exactly this name, nothing under it

_TORCH_LEAVES = """
Tensor Size dtype device Generator finfo iinfo no_grad inference_mode enable_grad
float16 float32 float64 bfloat16 half float double int8 int16 int32 int64 uint8 bool long int short
complex64 complex128 float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz uint16 uint32 uint64
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange linspace logspace
eye tensor as_tensor as_strided from_numpy rand rand_like randn randn_like randint randint_like randperm
normal cat concat concatenate stack hstack vstack split chunk narrow unbind where clamp clip
minimum maximum fmax fmin abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan tanh sinh
cosh asin acos atan atan2 sigmoid relu erf erfc erfinv softmax log_softmax logsumexp matmul mm bmm addmm
baddbmm addmv mv dot vdot outer einsum tensordot sum nansum mean nanmean max min amax amin argmax argmin
prod cumsum cumprod var std var_mean std_mean norm allclose isclose equal isnan isinf isfinite nan_to_num
pow floor ceil round trunc frac sign signbit reciprocal square mul multiply add sub subtract div divide
true_divide floor_divide fmod remainder lerp addcmul addcdiv transpose permute reshape flatten squeeze
unsqueeze broadcast_to broadcast_tensors broadcast_shapes gather scatter scatter_add scatter_reduce
index_select index_add index_copy masked_fill masked_select take topk sort argsort kthvalue median
flip roll tril triu tril_indices triu_indices diag diagonal bucketize searchsorted unique cdist
bitwise_and bitwise_or bitwise_xor bitwise_not logical_and logical_or logical_not logical_xor eq ne lt
le gt ge numel is_tensor is_floating_point is_complex promote_types result_type can_cast count_nonzero
nonzero any all repeat_interleave tile t conj real imag clone zeros_like full_like contiguous_format
channels_last preserve_format strided sparse_coo gelu silu layer_norm group_norm dropout embedding
""".split()
_CUDA_LEAVES = """is_available current_device get_device_name get_device_properties get_device_capability
device_count synchronize device is_bf16_supported""".split()
_TRITON_LEAVES = "jit autotune Config heuristics cdiv next_power_of_2".split()
_TYPING_MEMBERS = "Optional Union Tuple List Dict Any Callable Sequence Iterable Mapping".split()
_FUNCTOOLS_MEMBERS = "partial lru_cache cache wraps cached_property".split()
# Device queries from Triton's tutorials (persistent kernels size their grid by SM count);
# the rest of triton.runtime (binary loading, caches, hooks) stays denied.
_TRITON_RUNTIME_MEMBERS = """triton.runtime.driver.active.get_active_torch_device
triton.runtime.driver.active.get_current_device triton.runtime.driver.active.get_current_target
triton.runtime.driver.active.utils.get_device_properties""".split()

ALLOWED: dict[str, str] = {
    "torch": MODULE,
    "torch.nn": MODULE,
    "torch.nn.functional": NAMESPACE,
    "torch.cuda": MODULE,
    "torch.linalg": NAMESPACE,
    "torch.special": NAMESPACE,
    "triton": MODULE,
    "triton.language": NAMESPACE,
    "triton.language.math": NAMESPACE,
    "triton.language.extra": MODULE,
    "triton.language.extra.cuda": MODULE,
    "triton.language.extra.libdevice": NAMESPACE,
    "triton.language.extra.cuda.libdevice": NAMESPACE,
    "math": NAMESPACE,
    "itertools": NAMESPACE,
    "functools": MODULE,
    "typing": MODULE,
    "triton.runtime": MODULE,
    "triton.runtime.driver": MODULE,
    "triton.runtime.driver.active": MODULE,
    "triton.runtime.driver.active.utils": MODULE,
    **{n: MEMBER for n in _TRITON_RUNTIME_MEMBERS},
    # TMA descriptors (Hopper matmuls) and the allocator they need; the rest of
    # triton.tools (disassembler, AOT compiler) stays denied
    "triton.tools.tensor_descriptor.TensorDescriptor": LEAF,
    "triton.set_allocator": MEMBER,
    **{f"functools.{n}": MEMBER for n in _FUNCTOOLS_MEMBERS},
    **{f"torch.{n}": LEAF for n in _TORCH_LEAVES},
    **{f"torch.cuda.{n}": LEAF for n in _CUDA_LEAVES},
    **{f"triton.{n}": LEAF for n in _TRITON_LEAVES},
    **{f"typing.{n}": MEMBER for n in _TYPING_MEMBERS},
}
# Members of the wildcard namespaces that are modules (found by introspection; the test
# suite re-checks them against the installed torch/triton). Any stdlib module name or
# well-known alias is refused as a member too, whatever the version.
NAMESPACE_MODULE_MEMBERS: dict[str, frozenset[str]] = {
    "triton.language": frozenset({"core", "random", "standard", "target_info", "semantic"}),
    "triton.language.math": frozenset({"core"}),
    "triton.language.extra.cuda.libdevice": frozenset({"core"}),
    "triton.language.extra.libdevice": frozenset({"core"}),
    "torch.nn.functional": frozenset({"dataclasses", "grad", "importlib", "math", "np", "torch", "warnings"}),
    "torch.special": frozenset({"torch"}),
}
_MODULE_LIKE_NAMES: frozenset[str] = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "np", "numpy", "torch", "triton", "tl", "F", "os", "sys", "builtins", "importlib", "pkgutil", "core",
}

# Imports a variant may add although the original lacks them: nothing in them touches
# files, processes or the network.
SAFE_IMPORT_MODULES: frozenset[str] = frozenset(
    {"math", "itertools", "functools", "torch", "torch.nn", "torch.nn.functional", "triton", "triton.language"}
)
SAFE_IMPORT_FROM: frozenset[str] = frozenset(
    {"math", "itertools", "functools", "torch", "triton", "triton.language", "triton.language.extra", "triton.language.extra.cuda",
     "triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice", "typing", "torch.nn",
     "torch.nn.functional", "triton.tools.tensor_descriptor"}
)
# What a prompt may tell an LLM it can import (the original's own imports come on top).
ALLOWED_IMPORTS: frozenset[str] = frozenset({"__future__"}) | SAFE_IMPORT_MODULES | SAFE_IMPORT_FROM

# Modules (and their submodules) that are never allowed, and qualified names inside
# allowed packages that read/write files, run code, load native code or change global
# hooks. Counted: the original may keep its own uses.
BANNED_MODULES: frozenset[str] = frozenset(
    """os sys subprocess socket shutil pathlib ctypes importlib builtins io pickle marshal shelve
    multiprocessing threading _thread signal tempfile glob urllib http requests ftplib smtplib asyncio
    inspect gc code codeop pty runpy pkgutil zipimport codecs fileinput mmap select selectors ssl
    concurrent atexit sysconfig platform webbrowser logging linecache dbm sqlite3 zipfile tarfile
    gzip bz2 lzma csv json copyreg types weakref site sched ast dis""".split()
)
DENIED_QUALIFIED: tuple[str, ...] = (
    "torch.load", "torch.save", "torch.serialization", "torch.hub", "torch.utils", "torch.ops",
    "torch.classes", "torch.library", "torch.jit", "torch.package", "torch.distributed",
    "torch.multiprocessing", "torch.compile", "torch.from_file", "torch.overrides", "torch.backends",
    "torch.cuda.memory", "torch.cuda.nvtx", "torch.profiler", "torch.export", "torch.onnx", "torch.fx",
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "numpy.loadtxt",
    "numpy.genfromtxt", "numpy.fromfile", "numpy.fromregex", "numpy.memmap", "numpy.ctypeslib", "numpy.lib",
    "numpy.rec", "numpy.f2py", "numpy.distutils", "numpy.testing", "numpy.DataSource", "numpy.core",
    "triton.knobs", "triton.runtime", "triton.tools", "triton.backends", "triton.compiler", "triton.compile",
    "operator.attrgetter", "operator.methodcaller", "functools.reduce",
    "typing.get_type_hints", "typing.ForwardRef",
    "dataclasses.make_dataclass", "warnings.formatwarning", "warnings.showwarning", "warnings.warn_explicit",
)
# Attribute names refused on any object (a tensor, a local, a call result): they do file
# I/O, reach a module, or expose frames and globals.
DENIED_ATTRIBUTES: frozenset[str] = frozenset(
    """tofile dump dumps load loads save savez fromfile from_file memmap load_library ctypes ctypeslib
    system popen environ getenv putenv spawn fork forkpty execv execve open read_text write_text read_bytes
    write_bytes unlink rmtree os sys subprocess socket shutil pathlib importlib builtins pickle
    marshal gi_frame gi_code gi_yieldfrom cr_frame cr_code cr_await ag_frame ag_code f_globals f_locals
    f_builtins f_back f_code tb_frame tb_next func_globals formatwarning showwarning knobs""".split()
)
_DUNDER_TEXT = re.compile(r"__\w+__")


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _private(name: str) -> bool:
    return name.startswith("_")


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Use:
    """One thing a module uses that is not plainly allowed."""

    scope: str  # top-level function or class, "<module>" outside them
    key: str  # what is used: "getattr", "torch.load", "dunder attribute __class__"
    line: int
    why: str  # the rule, shown in the rejection
    counted: bool  # see the module docstring

    def reason(self) -> str:
        where = "" if self.scope == "<module>" else f" in {self.scope}"
        return f"variant {self._what()}{where} (line {self.line}): {self.why}"

    def _what(self) -> str:
        if self.key.startswith("import "):  # "imports os"
            return "imports " + self.key[len("import "):]
        if self.key.startswith("from "):  # "from M import N" -> "imports N from M"
            module, _, name = self.key[len("from "):].partition(" import ")
            return f"imports {name} from {module}"
        if self.key.startswith(("an ", "a ", "class ", "dunder definition", "global ", "nonlocal ")):
            return "has " + self.key
        return "uses " + self.key


def import_keys(node: ast.Import | ast.ImportFrom) -> Iterable[tuple[str, str, str]]:
    """(key, module, name) for each name an import binds; key is its canonical text."""
    if isinstance(node, ast.Import):
        for a in node.names:
            yield f"import {a.name}" + (f" as {a.asname}" if a.asname else ""), a.name, ""
    else:
        module = "." * node.level + (node.module or "")
        for a in node.names:
            yield f"from {module} import {a.name}" + (f" as {a.asname}" if a.asname else ""), module, a.name


def _safe_import(module: str, name: str) -> bool:
    if not name:
        return module in SAFE_IMPORT_MODULES
    if module == "__future__":
        return name == "annotations"
    if module not in SAFE_IMPORT_FROM or name == "*":
        return False
    status, _ = chain_verdict(f"{module}.{name}", frozenset())
    return status in ("ok", "module")


# ----------------------------------------------------------------------------- chains
def _public_member(namespace: str, member: str) -> bool:
    return not _private(member) and member not in NAMESPACE_MODULE_MEMBERS.get(namespace, ()) and (
        member not in _MODULE_LIKE_NAMES
    )


def _listed_object(segs: list[str]) -> Optional[tuple[str, str]]:
    """The verdict for a chain that is a curated MEMBER, or a curated LEAF followed by
    attribute reads (``TensorDescriptor.from_tensor``); None for anything else."""
    for i in range(len(segs), 0, -1):
        prefix = ".".join(segs[:i])
        kind = ALLOWED.get(prefix)
        if kind == MEMBER and i == len(segs):
            return "ok", prefix
        if kind == LEAF:
            bad = next((s for s in segs[i:] if s in DENIED_ATTRIBUTES or s in BANNED_MODULES), None)
            return ("denied", f"{prefix}.{bad}") if bad else ("ok", ".".join(segs))
    return None


def chain_verdict(chain: str, plain_modules: frozenset[str] | set[str]) -> tuple[str, str]:
    """How a maximal dotted chain (aliases resolved, ``torch.nn.functional.gelu``) may be
    used: ("ok" | "module" | "denied" | "unlisted", the part that decided)."""
    segs = chain.split(".")
    listed = _listed_object(segs)
    if listed is not None:  # a curated object wins over a denied package prefix
        return listed
    for i in range(1, len(segs) + 1):
        prefix = ".".join(segs[:i])
        # a banned module as the root or reached as an attribute (torch.os, F.importlib...)
        if segs[i - 1] in BANNED_MODULES or prefix in DENIED_QUALIFIED:
            return "denied", prefix
    if chain in plain_modules:
        return "module", chain
    cur = segs[0]
    kind = ALLOWED.get(cur)
    if kind is None:
        return "unlisted", chain
    for seg in segs[1:]:  # LEAF prefixes were handled by _listed_object
        nxt = f"{cur}.{seg}"
        if nxt in ALLOWED:
            cur, kind = nxt, ALLOWED[nxt]
        elif kind == NAMESPACE and _public_member(cur, seg):
            cur, kind = nxt, MEMBER
        else:
            return "unlisted", chain
    return ("module", chain) if kind in (MODULE, NAMESPACE) else ("ok", chain)


# ----------------------------------------------------------------------------- the scan
class _Scanner(ast.NodeVisitor):
    """Walks a module once and records every Use (see the module docstring)."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases, self.plain_modules, self.conflicts = _import_bindings(tree)
        # names bound anywhere in the module (parameters, assignments, defs...): such a
        # name is the module's own, not a builtin
        self.bound = _bound_anywhere(tree)
        self.uses: list[Use] = []
        self.scope = "<module>"
        self.class_name: Optional[str] = None  # the class whose body we are directly in
        # directly inside a class's __init__: ``self`` is then a fresh instance (``__init__``
        # cannot be called on another object without a dunder), so ``self.x = ...`` is safe
        self.self_ok = False

    # -- recording
    def _add(self, node: ast.AST, key: str, why: str, counted: bool = True) -> None:
        self.uses.append(Use(self.scope, key, getattr(node, "lineno", 1), why, counted))

    # -- scopes
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if not isinstance(node, ast.Lambda):
            self._rebinds_alias(node, node.name)
            self._shadows_builtin(node, node.name)
            for d in node.decorator_list:
                self.visit(d)
            if node.returns:
                self.visit(node.returns)
            if is_dunder(node.name) and node.name != "__init__":  # __eq__, __getattr__, __del__...
                where = f" in class {self.class_name}" if self.class_name else ""
                self._add(node, f"dunder definition {node.name}{where}", "dunder access is not allowed")
        self.visit(node.args)
        outer = (self.scope, self.class_name, self.self_ok)
        if self.scope == "<module>" and not isinstance(node, ast.Lambda):
            self.scope = node.name
        if not isinstance(node, ast.Lambda):
            self.self_ok = self.class_name is not None and _is_init(node)
        self.class_name = None
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self.visit(stmt)
        self.scope, self.class_name, self.self_ok = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_function  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._rebinds_alias(node, node.name)
        self._shadows_builtin(node, node.name)
        for d in node.decorator_list:
            self.visit(d)
        for b in node.bases:
            self.visit(b)
        for k in node.keywords:
            self.visit(k.value)
        plain = all(isinstance(b, ast.Name) and b.id == "object" for b in node.bases) and not node.keywords
        if not plain:  # counted: the original's own classes keep their bases
            spec = ", ".join([ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords])
            self._add(node, f"class {node.name}({_short(spec)})", "a new class may not have a base class or metaclass")
        outer = (self.scope, self.class_name, self.self_ok)
        if self.scope == "<module>":
            self.scope = node.name
        self.class_name, self.self_ok = node.name, False
        for stmt in node.body:
            self.visit(stmt)
        self.scope, self.class_name, self.self_ok = outer

    # -- imports, global
    def visit_Import(self, node: ast.Import) -> None:
        self._imports(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._imports(node)

    def _imports(self, node: ast.Import | ast.ImportFrom) -> None:
        for key, module, name in import_keys(node):
            if is_dunder(module.split(".")[-1]) and module != "__future__" or is_dunder(name):
                self._add(node, key, "dunder access is not allowed")
            elif not _safe_import(module, name):
                self._add(node, key, "a variant may import only what the original imports "
                          "(plus math, itertools, functools, typing and triton.language)", counted=False)

    def visit_Global(self, node: ast.Global) -> None:
        self._add(node, "global " + ", ".join(node.names), "global/nonlocal are not allowed")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._add(node, "nonlocal " + ", ".join(node.names), "global/nonlocal are not allowed")

    # -- names, chains, attributes
    def _shadows_builtin(self, node: ast.AST, name: str) -> None:
        """A module-level ``len = ...`` or ``def range`` would change what the unchanged
        harness does (it runs in the same module)."""
        if self.scope == "<module>" and name in _BUILTIN_NAMES:
            self._add(node, f"a module-level rebinding of builtin {name}", "the harness shares these names")

    def _rebinds_alias(self, node: ast.AST, name: str) -> None:
        """An imported name (or module-level alias of one) is resolved by its import
        everywhere; a local of the same name would be checked as the import, not as
        what it holds, so no binding may shadow it."""
        if name in self.aliases and not (self.scope == "<module>" and isinstance(node, ast.Name)):
            self._add(node, f"a rebinding of imported name {name}", "imported names may not be shadowed")

    def visit_arg(self, node: ast.arg) -> None:
        self._rebinds_alias(node, node.arg)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._rebinds_alias(node, node.name)
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg and is_dunder(node.arg):  # f(__builtins__=...), dict(__class__=...)
            self._add(node, f"dunder keyword {node.arg}", "dunder access is not allowed")
        self.generic_visit(node)

    def visit_Module(self, node: ast.Module) -> None:
        for name in sorted(self.conflicts):
            self._add(node, f"a rebinding of imported name {name}", "imported names may not be shadowed")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._rebinds_alias(node, node.id)
            self._shadows_builtin(node, node.id)
        if node.id == "self" and self.self_ok and not isinstance(node.ctx, ast.Load):
            self._add(node, "a rebinding of self in __init__", "self.<attr> stores are allowed because self is "
                      "the new instance; it may not be rebound")
        if self._special_name(node) or not isinstance(node.ctx, ast.Load):
            return  # a binding: checked above (shadowed imports, builtins, self)
        if node.id in self.aliases:
            self._chain(self.aliases[node.id], node)
        elif node.id not in SAFE_BUILTINS and node.id in _BUILTIN_NAMES and node.id not in self.bound:
            self._add(node, f"builtin {node.id}", "not on the allow-list of builtins", counted=False)

    def _special_name(self, node: ast.Name) -> bool:
        """Dunder names and dangerous builtins, however they are used (called, aliased,
        passed as a value, shadowed by a parameter)."""
        if is_dunder(node.id):
            self._add(node, f"dunder name {node.id}", "dunder access is not allowed")
            return True
        if node.id in DANGEROUS_BUILTINS:
            self._add(node, node.id, DANGEROUS_BUILTINS[node.id])
            return True
        return False

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            base = node.value
            if not (self.self_ok and isinstance(base, ast.Name) and base.id == "self"):
                self._add(node, f"an assignment to attribute {_text(node)}",
                          "attributes may be assigned only on self, inside __init__")
        parts: list[ast.Attribute] = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            parts.append(base)
            base = base.value
        parts.reverse()  # innermost first: parts[0].value is the base
        flagged = False
        for a in parts:
            if is_dunder(a.attr):
                self._add(a, f"dunder attribute {a.attr}", "dunder access is not allowed")
                flagged = True
            elif _private(a.attr):
                self._add(a, f"private attribute {a.attr}", "private attributes are not allowed")
                flagged = True
        if isinstance(base, ast.Name) and base.id in self.aliases and not is_dunder(base.id):
            if not flagged:
                self._chain(self.aliases[base.id] + "." + ".".join(a.attr for a in parts), node)
            return
        self.visit(base)  # a local, a call result, a literal...: attributes of an object
        for a in parts:
            if a.attr in DENIED_ATTRIBUTES:
                self._add(a, f"attribute {a.attr}", _IO)
            elif a.attr in ("format", "format_map"):
                self._format_call(a)

    def _chain(self, chain: str, node: ast.AST) -> None:
        status, what = chain_verdict(chain, self.plain_modules)
        if status == "denied":
            self._add(node, what, _IO)
        elif status == "module":
            self._add(node, f"module {what} as a value", "aliases that hide a module are not allowed "
                      "(use module.attr directly)")
        elif status == "unlisted":
            self._add(node, what, "not on the allow-list of torch/triton operations and not used by the original",
                      counted=False)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _root_name(node.value)
            if root is not None and root in self.aliases:
                self._add(node, f"an item assignment into {_text(node.value)}",
                          "imported objects may not be modified")
        self.generic_visit(node)

    # -- strings
    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(value, str):
            m = _DUNDER_TEXT.search(value)
            if m:
                self._add(node, f"dunder text {m.group(0)!r} in a string", "dunder access is not allowed")

    def _format_call(self, attr: ast.Attribute) -> None:
        """``'...'.format(...)`` may read attributes through its fields: only literal
        templates with plain fields ('{}', '{0}', '{name:>8}') are allowed."""
        recv = attr.value
        if not (isinstance(recv, ast.Constant) and isinstance(recv.value, str)):
            self._add(attr, f".{attr.attr} on a computed string", "format fields could read attributes")
            return
        bad = _format_field_access(recv.value)
        if bad is not None:
            self._add(attr, f"format field {{{bad}}}", "format fields with attribute or item access are not allowed")


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


def _is_init(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = node.args.posonlyargs + node.args.args
    return node.name == "__init__" and bool(args) and args[0].arg == "self"


def _root_name(node: ast.expr) -> Optional[str]:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _text(node: ast.AST) -> str:
    return _short(ast.unparse(node))


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _bound_anywhere(tree: ast.Module) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return frozenset(names)


def scan(tree: ast.Module) -> list[Use]:
    """Every Use in ``tree``, in source order."""
    scanner = _Scanner(tree)
    scanner.visit(tree)
    return sorted(scanner.uses, key=lambda u: u.line)
