"""Harness discovery and harness-stub generation (DESIGN section 4).

A harness is a zero-argument function that builds inputs, launches the kernel
(directly or through a wrapper) and returns the outputs. Order of discovery:
1. an explicit choice (CLI flag / editor setting),
2. ``[tool.kernelband.harness]`` in the workspace's pyproject.toml
   (``kernel_name = "function"`` or ``kernel_name = "path/to/file.py:function"``),
3. zero-argument functions named ``bench_*``, ``benchmark_*``, ``harness_*`` or
   ``test_*`` that reach a launch of the kernel, in the module itself or in a companion
   file ``test_<module>.py`` / ``<module>_test.py`` / ``bench_<module>.py`` beside it. A
   companion function counts when (by its AST) it calls a function of the module that
   reaches the kernel, by a name imported from the module or as ``module.name``,
   directly or through helpers.

Roles (DESIGN section 4): every harness found in the chosen file checks correctness;
the timing workload is the production-size one: ``bench_*``/``benchmark_*`` first by
convention (then ``harness_*``, then ``test_*``), or the one named by
``--timing-harness`` / ``timing`` in pyproject. An explicit ``--harness`` alone means
that one harness for both roles.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .detect import DetectionResult, detect, parse_module, read_source, wrappers_of
from .model import FunctionInfo, KernelInfo, Task, sha256_text

# in order of preference for the timing role: production-size workloads first
HARNESS_PREFIXES = ("bench_", "benchmark_", "harness_", "test_")


@dataclass
class HarnessChoice:
    name: Optional[str]  # None when not found
    path: Optional[str] = None  # companion file; None = the kernel's own module
    how: str = ""  # "explicit" | "pyproject" | "convention" | ""
    reason: str = ""  # why none was found
    candidates: list[str] = field(default_factory=list)
    # correctness-only harnesses (``name`` is the timing workload and is checked too)
    checks: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.name is not None

    def roles(self) -> str:
        """For people: which harness times and which check."""
        if not self.name:
            return ""
        if not self.checks:
            return f"{self.name} (timing and correctness)"
        return f"{self.name} (timing and correctness); {', '.join(self.checks)} (correctness)"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "path": self.path,
            "how": self.how,
            "reason": self.reason,
            "candidates": self.candidates,
            "timing": self.name,
            "checks": self.checks,
        }


def _with_roles(choice: HarnessChoice, timing: Optional[str]) -> HarnessChoice:
    """Every candidate in the chosen file checks; ``timing`` (or the first by rank) times."""
    if timing:
        if timing not in choice.candidates:
            return HarnessChoice(
                None,
                reason=f"timing harness {timing!r} is not a zero-argument function that reaches "
                f"the kernel (candidates: {', '.join(choice.candidates) or 'none'})",
            )
        choice.name = timing
    choice.checks = [c for c in choice.candidates if c != choice.name]
    return choice


def _reaches(result: DetectionResult, fn: FunctionInfo, kernel: str, seen: Optional[set[str]] = None) -> bool:
    """Does fn launch the kernel, directly or through module functions it calls?"""
    seen = seen if seen is not None else set()
    if fn.name in seen:
        return False
    seen.add(fn.name)
    if kernel in fn.launches:
        return True
    for callee in fn.calls:
        g = result.function(callee)
        if g is not None and _reaches(result, g, kernel, seen):
            return True
    return False


def _rank(name: str) -> int:
    for i, p in enumerate(HARNESS_PREFIXES):
        if name.startswith(p):
            return i
    return len(HARNESS_PREFIXES)


def candidates_in(result: DetectionResult, kernel: str) -> list[str]:
    """Conventional zero-argument harnesses in one module that reach the kernel."""
    names = [
        f.name
        for f in result.functions
        if f.kind == "function"
        and f.name.startswith(HARNESS_PREFIXES)
        and f.is_zero_arg
        and _reaches(result, f, kernel)
    ]
    return sorted(names, key=lambda n: (_rank(n), n))


def _module_refs(tree: ast.Module, stem: str) -> tuple[set[str], dict[str, str], bool]:
    """How a companion file refers to the kernel's module ``stem``: dotted names bound to
    the module, local names imported from it (local -> original), and a star import."""
    modules: set[str] = set()
    imported: dict[str, str] = {}
    star = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name.split(".")[-1] == stem}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == stem:
            star = star or any(a.name == "*" for a in node.names)
            imported.update({a.asname or a.name: a.name for a in node.names if a.name != "*"})
        elif isinstance(node, ast.ImportFrom):  # from pkg import kern / from . import kern
            modules |= {a.asname or a.name for a in node.names if a.name == stem}
    return modules, imported, star


def _dotted(expr: ast.expr) -> Optional[str]:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


class _CompanionRefs:
    """Per module-level function of a companion file: the kernel module's names it calls
    (or launches, or passes as a callable) and the file's own functions it calls."""

    def __init__(self, tree: ast.Module, stem: str) -> None:
        self.modules, self.imported, self.star = _module_refs(tree, stem)
        self.local = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.targets: dict[str, set[str]] = {}
        self.helpers: dict[str, set[str]] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._scan(node)

    def _scan(self, fn: "ast.FunctionDef | ast.AsyncFunctionDef") -> None:
        targets = self.targets.setdefault(fn.name, set())
        helpers = self.helpers.setdefault(fn.name, set())
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.value if isinstance(node.func, ast.Subscript) else node.func  # k[grid](...)
            for ref in [func, *node.args, *(k.value for k in node.keywords)]:
                self._resolve(ref, targets, helpers)

    def _resolve(self, ref: ast.expr, targets: set[str], helpers: set[str]) -> None:
        if isinstance(ref, ast.Name):
            if ref.id in self.local:
                helpers.add(ref.id)
            elif ref.id in self.imported:
                targets.add(self.imported[ref.id])
            elif self.star:
                targets.add(ref.id)
        elif isinstance(ref, ast.Attribute) and _dotted(ref.value) in self.modules:
            targets.add(ref.attr)  # kern.wrapper(...), not torch.wrapper(...)

    def reaches(self, name: str, wanted: set[str], seen: Optional[set[str]] = None) -> bool:
        seen = seen if seen is not None else set()
        if name in seen:
            return False
        seen.add(name)
        if self.targets.get(name, set()) & wanted:
            return True
        return any(self.reaches(h, wanted, seen) for h in self.helpers.get(name, set()))


def _companion_reaches(
    result: DetectionResult, kernel: str, comp_src: str, comp: DetectionResult, stem: str
) -> list[str]:
    """Conventional zero-argument harnesses of a companion file that reach the kernel:
    by calling (AST, not text) a function of the module that reaches it, directly or
    through helpers of the companion file."""
    tree, _ = parse_module(comp_src)
    if tree is None:
        return []
    wanted = {f.name for f in result.functions if _reaches(result, f, kernel)} | {kernel}
    refs = _CompanionRefs(tree, stem)
    names = [
        f.name
        for f in comp.functions
        if f.name.startswith(HARNESS_PREFIXES) and f.is_zero_arg and refs.reaches(f.name, wanted)
    ]
    return sorted(names, key=lambda n: (_rank(n), n))


def companion_files(module_path: str) -> list[Path]:
    p = Path(module_path)
    stem = p.stem
    names = [f"test_{stem}.py", f"{stem}_test.py", f"bench_{stem}.py", f"benchmark_{stem}.py"]
    out = [p.parent / n for n in names]
    out += [p.parent / "tests" / n for n in names[:2]]
    return [c for c in out if c.is_file()]


def _file_key(path: Path) -> Optional[tuple[str, int, int]]:
    try:
        st = path.stat()
    except OSError:
        return None
    return str(path), st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=16)
def _parse_pyproject(key: tuple[str, int, int]) -> tuple[Optional[dict], str]:
    # imported here: most files `kernelband list` reads have no pyproject.toml above them
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10
        import tomli as tomllib
    pp = Path(key[0])
    try:
        return tomllib.loads(pp.read_text(encoding="utf-8-sig")), ""
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read {pp} ({e})"
    except tomllib.TOMLDecodeError as e:
        return None, f"{pp} is not valid TOML ({e}); fix it (it may configure the harness)"


def _read_pyproject(pp: Path) -> tuple[Optional[dict], str]:
    """The parsed file, or None and why; parsed once per version of the file (``list``
    looks it up for every kernel of a file)."""
    key = _file_key(pp)
    if key is None:
        return None, f"cannot read {pp} (it vanished)"
    return _parse_pyproject(key)  # shared between calls: read it, never change it


@dataclass(frozen=True)
class PyprojectHarnesses:
    """``[tool.kernelband.harness]`` of the pyproject.toml nearest a module (found and read
    once: ``list`` asks for every kernel of a file, and each look-up stats every parent)."""

    pyproject: Optional[Path] = None
    table: Any = None
    problem: str = ""  # that pyproject.toml cannot be read

    @classmethod
    def of(cls, module_path: str) -> "PyprojectHarnesses":
        start = Path(module_path).resolve().parent
        for d in [start, *start.parents]:
            pp = d / "pyproject.toml"
            if not pp.is_file():
                continue
            data, why = _read_pyproject(pp)
            if data is None:
                return cls(pp, None, why)
            return cls(pp, data.get("tool", {}).get("kernelband", {}).get("harness", {}))
        return cls()

    def harness(self, kernel: str) -> tuple[Optional[str], str]:
        """(a spec "function" or "/abs/path.py:function", or None; the reason when the
        pyproject.toml or its entry for the kernel is unusable)."""
        if self.problem:
            return None, self.problem
        spec = self.table.get(kernel) if isinstance(self.table, dict) else None
        if spec is None:
            return None, ""
        pp = self.pyproject
        if not isinstance(spec, str) or not spec:
            return None, f'{pp}: [tool.kernelband.harness] {kernel} must be "function" or "path/to/file.py:function"'
        if ":" in spec and pp is not None:
            path, fn = spec.rsplit(":", 1)
            return f"{(pp.parent / path).resolve()}:{fn}", ""
        return spec, ""


@functools.lru_cache(maxsize=32)
def _detect_file_version(key: tuple[str, int, int]) -> tuple[str, DetectionResult]:
    src = read_source(key[0])
    return src, detect(src, key[0])


def _detect_file(path: "str | Path") -> tuple[str, DetectionResult]:
    """A companion or harness file's text and detection, once per version of the file
    (``list`` asks for every kernel of a module). Raises what reading it raises."""
    key = _file_key(Path(path))
    if key is None:
        src = read_source(path)  # raises the reason (missing, unreadable)
        return src, detect(src, str(path))
    return _detect_file_version(key)


def _harness_file(path: str) -> tuple[Optional[DetectionResult], str]:
    """Detect a harness file, or say why it cannot be used."""
    try:
        _, found = _detect_file(path)
    except FileNotFoundError:
        return None, f"harness file {path} does not exist"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read harness file {path} ({e})"
    if found.error:
        return None, f"harness file {path} does not parse (line {found.error.line}: {found.error.message})"
    return found, ""


def _chosen(module_path: str, result: DetectionResult, spec: str, how: str) -> HarnessChoice:
    """Validate a harness named by the user ("function" or "path/to/file.py:function")."""
    path: Optional[str] = None
    name = spec
    target = result
    if ":" in spec:
        path, name = spec.rsplit(":", 1)
        path = str(Path(path).resolve())
        found, why = _harness_file(path)
        if found is None:
            return HarnessChoice(None, reason=why)
        target = found
    fn = target.function(name)
    if fn is None:
        return HarnessChoice(None, reason=f"harness {name!r} is not a module-level function of {path or module_path}")
    if not fn.is_zero_arg:
        return HarnessChoice(None, reason=f"harness {name!r} takes arguments; a harness must be callable with none")
    return HarnessChoice(name, path, how)


def _from_companions(module_path: str, result: DetectionResult, kernel: str) -> Optional[HarnessChoice]:
    stem = Path(module_path).stem
    for comp_path in companion_files(module_path):
        try:
            comp_src, comp = _detect_file(comp_path)
        except (OSError, UnicodeDecodeError):
            continue
        names = _companion_reaches(result, kernel, comp_src, comp, stem)
        if names:
            return HarnessChoice(names[0], str(comp_path.resolve()), "convention", candidates=names)
    return None


def find_harness(
    module_path: str,
    source: str,
    kernel: str,
    explicit: Optional[str] = None,
    result: Optional[DetectionResult] = None,
    timing: Optional[str] = None,
    pyproject: Optional[PyprojectHarnesses] = None,
) -> HarnessChoice:
    """Pick the harnesses for a kernel (timing + correctness roles), or say precisely why
    there is none. ``explicit`` pins one harness for both roles; ``timing`` picks the
    timing one among the discovered candidates; ``pyproject`` is the module's
    ``PyprojectHarnesses`` when the caller looks up many kernels of one file."""
    result = result or detect(source, module_path)
    if result.error:
        return HarnessChoice(None, reason=f"the file does not parse (line {result.error.line}: {result.error.message})")
    k = result.kernel(kernel)
    if k is None:
        return HarnessChoice(None, reason=f"no Triton kernel named {kernel!r} in {os.path.basename(module_path)}")

    if explicit:
        return _chosen(module_path, result, explicit, "explicit")

    configured, problem = (pyproject or PyprojectHarnesses.of(module_path)).harness(kernel)
    if problem:
        return HarnessChoice(None, reason=problem)
    if configured:
        return _chosen(module_path, result, configured, "pyproject")

    own = candidates_in(result, kernel)
    if own:
        return _with_roles(HarnessChoice(own[0], None, "convention", candidates=own), timing)
    companion = _from_companions(module_path, result, kernel)
    if companion is not None:
        return _with_roles(companion, timing)

    zero_arg = [
        f.name for f in result.functions if f.kind == "function" and f.is_zero_arg and _reaches(result, f, kernel)
    ]
    if zero_arg:
        reason = (
            f"no function named harness_*/test_*/bench_*/benchmark_* reaches a launch of {kernel}; "
            f"zero-argument functions that do: {', '.join(zero_arg)} (rename one, or set it explicitly)"
        )
    elif not k.launch_sites:
        reason = f"{kernel} is never launched in this file ({kernel}[grid](...)); add a wrapper and a harness"
    else:
        reason = f"no zero-argument function named harness_*/test_*/bench_*/benchmark_* reaches a launch of {kernel}"
    return HarnessChoice(None, reason=reason)


# --------------------------------------------------------------------------- stubs

_INT_HINTS = re.compile(r"^(n|m|k|size|numel|n_.*|.*_size|.*_elements|num_.*|rows|cols|stride.*|dim.*|[MNK])$", re.I)
_FLOAT_HINTS = re.compile(r"^(alpha|beta|eps|scale|gamma|p|temperature|.*_scale)$", re.I)


def _stub_value(name: str, annotation: Optional[str], role: Optional[str] = None) -> str:
    """A value for a wrapper parameter: by its annotation, else by what the kernel does with
    it (``role``: "pointer", "int" or "float", see _kernel_roles), else by its name."""
    ann = (annotation or "").lower()
    if "tensor" in ann:
        return "torch.randn(4096, device=DEVICE)"
    if ann == "int":
        return "4096"
    if ann == "float":
        return "0.5"
    if role == "pointer":
        return "torch.randn(4096, device=DEVICE)"
    if role == "stride":
        return "1"
    if role == "int" or (role is None and _INT_HINTS.match(name)):
        return "4096"
    if role == "float" or _FLOAT_HINTS.match(name):
        return "0.5"
    return "torch.randn(4096, device=DEVICE)"


def _kernel_roles(source: str, kernel: KernelInfo) -> dict[str, str]:
    """What the kernel does with each parameter: "pointer" (the base of a load or store
    address), "stride" (an int scaling or shifting an address), "int" (a constexpr, a
    bound compared with offsets, a loop range), else "float" (a scalar it computes with)."""
    from .access import analyze_kernel

    acc = analyze_kernel(source, kernel.name)
    tree, _ = parse_module(source)
    fn = (
        next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel.name), None)
        if tree
        else None
    )
    compared: set[str] = set()
    for node in ast.walk(fn) if fn is not None else []:
        if isinstance(node, ast.Compare):
            compared |= {
                n.id for part in (node.left, *node.comparators) for n in ast.walk(part) if isinstance(n, ast.Name)
            }
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "range",
            "static_range",
        ):
            compared |= {n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)}
    roles: dict[str, str] = {}
    for p in kernel.params:
        use = acc.use(p.name) if acc.found else None
        if use is not None and (use.base_loads or use.base_stores):
            roles[p.name] = "pointer"
        elif p.is_constexpr or p.name in compared:
            roles[p.name] = "int"
        elif use is not None and (use.loads or use.stores):
            roles[p.name] = "stride"
        elif use is not None and use.unknown:
            continue  # passed to a call the analysis cannot follow: the name decides
        else:
            roles[p.name] = "float"
    return roles


def _names_passed(text: str, role: str) -> dict[str, str]:
    """The wrapper's names in a launch argument and their roles: `x` passed to a pointer is
    a tensor; every name of an expression passed to a scalar is a scalar, a float or an int
    as its own conversion says (`s * float(f)`)."""
    try:
        expr = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    if isinstance(expr, ast.Name):
        return {expr.id: role}
    if role == "pointer":
        return {}
    out: dict[str, str] = {}

    def visit(node: ast.AST, as_: str) -> None:
        if isinstance(node, ast.Call):
            conv = node.func.id if isinstance(node.func, ast.Name) and node.func.id in ("float", "int") else None
            for a in node.args:
                visit(a, conv or as_)
            return
        if isinstance(node, ast.Attribute):
            return  # x.shape[0] and the like: not a scalar name
        if isinstance(node, ast.Name):
            out.setdefault(node.id, as_)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, as_)

    visit(expr, role)
    return out


def _wrapper_roles(source: str, kernel: KernelInfo, wrapper: FunctionInfo) -> dict[str, str]:
    """Wrapper parameter -> the role of the kernel parameter its launch passes it to, as is;
    a parameter the wrapper itself treats as a tensor (x.numel(), x.shape, empty_like(x)...) is one."""
    roles = _kernel_roles(source, kernel)
    out: dict[str, str] = {}
    for site in kernel.launch_sites:
        if site.enclosing_function != wrapper.name:
            continue
        passed = list(zip((p.name for p in kernel.params), site.args)) + list(site.kwargs.items())
        for kparam, text in passed:
            if kparam in roles:
                for name, role in _names_passed(text, roles[kparam]).items():
                    out.setdefault(name, role)
    tree, _ = parse_module(source)
    fn = (
        next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == wrapper.name), None)
        if tree
        else None
    )
    for node in ast.walk(fn) if fn is not None else []:
        # x.shape, x.numel(), x.device...: only a tensor has attributes a wrapper reads
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            out[node.value.id] = "pointer"
    return out


def harness_stub(source: str, kernel: KernelInfo, result: Optional[DetectionResult] = None) -> str:
    """Text of a harness function for the kernel, built from its wrapper when there is
    one, else from the kernel's own signature. Inserted by the editor's quick fix."""
    result = result or detect(source)
    wrappers = wrappers_of(result, kernel.name)
    lines = [
        "",
        "",
        f"def harness_{kernel.name}():",
        '    """KernelBand harness: build inputs, launch the kernel, return the outputs.',
        "",
        "    Edit the sizes and dtypes to match real use; KernelBand calls this with fixed",
        '    seeds and compares the outputs of the original and each variant."""',
        "    import torch",
        "",
        '    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"',
    ]
    if wrappers:
        w = wrappers[0]
        roles = _wrapper_roles(source, kernel, w)
        args = []
        for p in w.params:
            if p.name.startswith("*") or p.default is not None:
                continue
            value = _stub_value(p.name, p.annotation, roles.get(p.name))
            todo = "real shape/dtype" if value.startswith("torch.") else "a real value"
            lines.append(f"    {p.name} = {value}  # TODO: {todo}")
            args.append(p.name)
        lines.append(f"    return {w.name}({', '.join(args)})")
    else:
        runtime = [p for p in kernel.params if not p.is_constexpr and not p.name.startswith("*")]
        roles = _kernel_roles(source, kernel)
        pointers = [
            p.name
            for p in runtime
            if roles.get(p.name) == "pointer"
            or (
                p.name not in roles and (p.name.endswith(("_ptr", "ptr")) or p.name in ("x", "y", "out", "a", "b", "c"))
            )
        ]
        lines.append("    n = 4096  # TODO: real problem size")
        for p in runtime:
            if p.name in pointers:
                lines.append(f"    {p.name} = torch.randn(n, device=DEVICE)  # TODO: real shape/dtype")
        call_args = []
        for p in runtime:
            role = roles.get(p.name)
            is_int = role == "int" or (role is None and _INT_HINTS.match(p.name))
            call_args.append(p.name if p.name in pointers else ("n" if is_int else "0.5"))
        consts = [f"{p.name}={p.default or 1024}" for p in kernel.params if p.is_constexpr]
        lines.append("    grid = (triton.cdiv(n, 1024),)  # TODO: match your wrapper's grid")
        lines.append(f"    {kernel.name}[grid]({', '.join(call_args + consts)})")
        outs = [p for p in pointers if "out" in p or p in ("y", "c")] or pointers[-1:]
        lines.append(f"    return {', '.join(outs) if outs else 'None'}")
    return "\n".join(lines) + "\n"


def harness_hash(task: Task) -> str:
    """The key of a task's harness in the store (profiles, sessions): its file's text and
    the harness name, so `profile` and `optimize` key profiles alike."""
    if task.harness_path:
        try:
            return sha256_text(Path(task.harness_path).read_text(encoding="utf-8") + task.harness)
        except OSError:
            return sha256_text(task.harness_path + task.harness)
    return sha256_text(task.harness)
