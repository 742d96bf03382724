"""Harness discovery and harness-stub generation (DESIGN section 4).

A harness is a zero-argument function that builds inputs, launches the kernel
(directly or through a wrapper) and returns the outputs. Order of discovery:
1. an explicit choice (CLI flag / editor setting),
2. ``[tool.kernelband.harness]`` in the workspace's pyproject.toml
   (``kernel_name = "function"`` or ``kernel_name = "path/to/file.py:function"``),
3. zero-argument functions named ``harness_*``, ``test_*``, ``bench_*`` or
   ``benchmark_*`` (in that order of preference) that reach a launch of the kernel,
   in the module itself or in a companion file ``test_<module>.py`` /
   ``<module>_test.py`` / ``bench_<module>.py`` beside it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .detect import DetectionResult, detect, wrappers_of
from .model import FunctionInfo, KernelInfo

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HARNESS_PREFIXES = ("harness_", "test_", "bench_", "benchmark_")


@dataclass
class HarnessChoice:
    name: Optional[str]  # None when not found
    path: Optional[str] = None  # companion file; None = the kernel's own module
    how: str = ""  # "explicit" | "pyproject" | "convention" | ""
    reason: str = ""  # why none was found
    candidates: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.name is not None

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "how": self.how, "reason": self.reason, "candidates": self.candidates}


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
        if f.name.startswith(HARNESS_PREFIXES) and f.is_zero_arg and _reaches(result, f, kernel)
    ]
    return sorted(names, key=lambda n: (_rank(n), n))


def _companion_reaches(comp: DetectionResult, fn: FunctionInfo, kernel: str, wrappers: set[str]) -> bool:
    """In a companion file the kernel is reached by launching it or calling an imported wrapper."""
    if kernel in fn.launches or kernel in fn.calls or wrappers & set(fn.calls):
        return True
    return any(
        (g := comp.function(c)) is not None and _companion_reaches(comp, g, kernel, wrappers) for c in fn.calls if c != fn.name
    )


def _companion_calls_any(source: str, fn: FunctionInfo, names: set[str]) -> set[str]:
    lines = source.splitlines()[fn.range.start_line - 1 : fn.range.end_line]
    body = "\n".join(lines)
    return {n for n in names if re.search(rf"\b{re.escape(n)}\s*\(", body) or re.search(rf"\b{re.escape(n)}\s*\[", body)}


def companion_files(module_path: str) -> list[Path]:
    p = Path(module_path)
    stem = p.stem
    names = [f"test_{stem}.py", f"{stem}_test.py", f"bench_{stem}.py", f"benchmark_{stem}.py"]
    out = [p.parent / n for n in names]
    out += [p.parent / "tests" / n for n in names[:2]]
    return [c for c in out if c.is_file()]


def pyproject_harness(module_path: str, kernel: str) -> Optional[tuple[str, Optional[str]]]:
    """Look up ``[tool.kernelband.harness]`` in the nearest pyproject.toml."""
    start = Path(module_path).resolve().parent
    for d in [start, *start.parents]:
        pp = d / "pyproject.toml"
        if pp.is_file():
            try:
                data = tomllib.loads(pp.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError):
                return None
            table = data.get("tool", {}).get("kernelband", {}).get("harness", {})
            spec = table.get(kernel) if isinstance(table, dict) else None
            if not isinstance(spec, str):
                return None
            if ":" in spec:
                path, fn = spec.rsplit(":", 1)
                return fn, str((d / path).resolve())
            return spec, None
    return None


def find_harness(
    module_path: str,
    source: str,
    kernel: str,
    explicit: Optional[str] = None,
    result: Optional[DetectionResult] = None,
) -> HarnessChoice:
    """Pick the harness for a kernel, or say precisely why there is none."""
    result = result or detect(source, module_path)
    if result.error:
        return HarnessChoice(None, reason=f"the file does not parse (line {result.error.line}: {result.error.message})")
    k = result.kernel(kernel)
    if k is None:
        return HarnessChoice(None, reason=f"no Triton kernel named {kernel!r} in {os.path.basename(module_path)}")

    if explicit:
        path: Optional[str] = None
        name = explicit
        if ":" in explicit:
            path, name = explicit.rsplit(":", 1)
            path = str(Path(path).resolve())
        target = detect(Path(path).read_text(encoding="utf-8"), path) if path else result
        fn = target.function(name)
        if fn is None:
            return HarnessChoice(None, reason=f"harness {name!r} is not a module-level function of {path or module_path}")
        if not fn.is_zero_arg:
            return HarnessChoice(None, reason=f"harness {name!r} takes arguments; a harness must be callable with none")
        return HarnessChoice(name, path, "explicit")

    configured = pyproject_harness(module_path, kernel)
    if configured:
        return find_harness(module_path, source, kernel, f"{configured[1]}:{configured[0]}" if configured[1] else configured[0], result)

    own = candidates_in(result, kernel)
    if own:
        return HarnessChoice(own[0], None, "convention", candidates=own)

    wrapper_names = {w.name for w in wrappers_of(result, kernel)} | {kernel}
    for comp_path in companion_files(module_path):
        try:
            comp_src = comp_path.read_text(encoding="utf-8")
        except OSError:
            continue
        comp = detect(comp_src, str(comp_path))
        names = [
            f.name
            for f in comp.functions
            if f.name.startswith(HARNESS_PREFIXES) and f.is_zero_arg and _companion_calls_any(comp_src, f, wrapper_names)
        ]
        if names:
            names.sort(key=lambda n: (_rank(n), n))
            return HarnessChoice(names[0], str(comp_path.resolve()), "convention", candidates=names)

    zero_arg = [f.name for f in result.functions if f.is_zero_arg and _reaches(result, f, kernel)]
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


def _stub_value(name: str, annotation: Optional[str]) -> str:
    ann = (annotation or "").lower()
    if "tensor" in ann:
        return "torch.randn(4096, device=DEVICE)"
    if ann in ("int",) or _INT_HINTS.match(name):
        return "4096"
    if ann in ("float",) or _FLOAT_HINTS.match(name):
        return "1.0"
    return "torch.randn(4096, device=DEVICE)"


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
        args = []
        for p in w.params:
            if p.name.startswith("*") or p.default is not None:
                continue
            lines.append(f"    {p.name} = {_stub_value(p.name, p.annotation)}  # TODO: real shape/dtype")
            args.append(p.name)
        lines.append(f"    return {w.name}({', '.join(args)})")
    else:
        runtime = [p for p in kernel.params if not p.is_constexpr and not p.name.startswith("*")]
        pointers = [p.name for p in runtime if p.name.endswith(("_ptr", "ptr")) or p.name in ("x", "y", "out", "a", "b", "c")]
        lines.append("    n = 4096  # TODO: real problem size")
        for p in runtime:
            if p.name in pointers:
                lines.append(f"    {p.name} = torch.randn(n, device=DEVICE)  # TODO: real shape/dtype")
        call_args = []
        for p in runtime:
            call_args.append(p.name if p.name in pointers else ("n" if _INT_HINTS.match(p.name) else "1.0"))
        consts = [f"{p.name}={p.default or 1024}" for p in kernel.params if p.is_constexpr]
        lines.append("    grid = (triton.cdiv(n, 1024),)  # TODO: match your wrapper's grid")
        lines.append(f"    {kernel.name}[grid]({', '.join(call_args + consts)})")
        outs = [p for p in pointers if "out" in p or p in ("y", "c")] or pointers[-1:]
        lines.append(f"    return {', '.join(outs) if outs else 'None'}")
    return "\n".join(lines) + "\n"
