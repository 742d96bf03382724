"""The prompt for an LLM rewrite under one strategy.

It carries: the GPU facts (``GenContext.device``), the kernel with its decorators, the
Triton helpers it calls and its wrapper(s) (module functions that launch it), the
module's imports, the strategy's text, the parent's profile and bottleneck, and the
rules: keep names and signatures, leave the harness alone, import nothing new beyond
the allow-list, answer with one fenced python block.
"""

from __future__ import annotations

import ast
import json
from typing import Optional

from .. import strategies as _strategies
from ..detect import detect, wrappers_of
from ..profile.schema import DeviceFacts, Profile
from ..screen import ALLOWED_IMPORTS

SYSTEM = (
    "You are an expert GPU kernel engineer who writes fast, correct Triton kernels. "
    "You rewrite one kernel at a time under a given optimization strategy and answer with code only "
    "in a single fenced python block."
)

MAX_PROFILE_CHARS = 2500


def _segment(source: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function's source with its decorators (ast's own segment starts at the def)."""
    lines = source.splitlines()
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return "\n".join(lines[start - 1 : node.end_lineno])


def code_context(source: str, kernel: str) -> tuple[str, list[str]]:
    """The source the model sees (imports, Triton helpers the kernel calls, the kernel,
    its wrappers) and the names of the wrappers."""
    tree = ast.parse(source)
    det = detect(source)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    knode = defs.get(kernel)
    if knode is None:
        raise LookupError(f"kernel {kernel} not found")
    called = {n.func.id for n in ast.walk(knode) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    helpers = [k.name for k in det.kernels if k.name != kernel and k.name in called]
    wrappers = [w.name for w in wrappers_of(det, kernel)]
    imports = [
        ast.get_source_segment(source, n) or "" for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    parts = ["\n".join(imports)] if imports else []
    parts += [_segment(source, defs[h]) for h in helpers]
    parts.append(_segment(source, knode))
    parts += [_segment(source, defs[w]) for w in wrappers if w in defs]
    return "\n\n\n".join(parts), wrappers


def _profile_text(profile: Optional[Profile]) -> str:
    if profile is None:
        return "No profile is available for this kernel yet."
    out = []
    diag = profile.diagnosis
    if diag.bottleneck or diag.evidence:
        out.append(f"Bottleneck: {diag.bottleneck or 'unknown'}. {diag.evidence}".strip())
        if diag.strategies:
            out.append("Strategies the profile suggests: " + ", ".join(diag.strategies))
    tiers = profile.to_dict()["tiers"]  # an object: Tiers is a record
    compact = {k: v for k, v in tiers.items() if v} if isinstance(tiers, dict) else {}
    if compact:
        text = json.dumps(compact, default=str, sort_keys=True)
        if len(text) > MAX_PROFILE_CHARS:
            text = text[:MAX_PROFILE_CHARS] + " ...(truncated)"
        out.append("Profile: " + text)
    if profile.interpreted:
        out.append("(Measured under Triton's CPU interpreter: times are CPU times.)")
    return "\n".join(out) or "No profile is available for this kernel yet."


def _device_text(device: DeviceFacts) -> str:
    if not device.known:
        return "GPU: unknown (assume a recent NVIDIA data-center GPU)."
    text = json.dumps(device.to_dict(), default=str, sort_keys=True)
    return "GPU facts: " + text[:1500]


def build_messages(
    source: str,
    kernel: str,
    strategy: str,
    harness: Optional[str] = None,
    profile: Optional[Profile] = None,
    device: DeviceFacts = DeviceFacts(),
) -> list[dict[str, str]]:
    strat = _strategies.get(strategy)
    code, wrappers = code_context(source, kernel)
    keep = [kernel, *wrappers]
    allowed = ", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))
    rules = [
        f"Keep the kernel's name `{kernel}` and its parameter list exactly as they are"
        + (f", and keep the name and signature of {', '.join(f'`{w}`' for w in wrappers)}." if wrappers else "."),
        "The result must compute the same values as now (within floating-point tolerance) for every input size, "
        "including sizes that are not multiples of the block sizes.",
        "Return the complete new definition of every function you change (decorators included); you may add "
        "new helper functions. Functions you do not return stay as they are.",
        f"Do not import anything beyond: {allowed}. No file, process or network access.",
        "Write plain Triton and Python (the screen refuses anything else): no classes, try/except, match, "
        "global, decorators other than Triton's, getattr-style or dunder access, or hooks.",
        *([f"Do not define or change `{harness}`: it is how the result is judged."] if harness else []),
        "Answer with exactly one fenced ```python code block and nothing else.",
    ]
    user = "\n\n".join(
        [
            _device_text(device),
            f"Optimization strategy: {strat.name} ({strat.summary}; targets {strat.resource}).\n{strat.prompt}",
            _profile_text(profile),
            f"The code (the kernel `{kernel}` and the function(s) that launch it):\n```python\n{code}\n```",
            "Rules:\n" + "\n".join(f"- {r}" for r in rules),
            f"Rewrite {', '.join(f'`{k}`' for k in keep)} following the strategy.",
        ]
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
