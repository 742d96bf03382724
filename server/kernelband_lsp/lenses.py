"""Code lenses, document symbols, diagnostics and code actions for detected kernels.

Pure functions of an ``Analysis`` plus a per-kernel ``KernelStatus`` (store, harness,
jobs, found variant) assembled by the server, so they are unit-testable without LSP I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from lsprotocol import types

from kernelband.harness import HarnessChoice, harness_stub
from kernelband.detect import wrappers_of
from kernelband.model import KernelInfo, Result, SourceRange
from kernelband.profile.schema import Profile

from . import display as D
from . import summary as S
from .documents import Analysis
from .positions import clamp_range

SOURCE = "kernelband"
CODE_NO_HARNESS = "no-harness"
CODE_VARIANT = "variant-found"
CODE_PARSE = "does-not-parse"
# the command behind a found variant's lens: the review (diff and evidence, then Apply or
# Discard); the VS Code client shows its own diff for it, other clients get the server's
REVIEW_COMMAND = "kernelband.reviewVariant"


@dataclass
class KernelStatus:
    kernel: KernelInfo
    harness: HarnessChoice
    profile: Optional[Profile] = None
    profile_exact: bool = False
    result: Optional[Result] = None
    job_id: Optional[str] = None  # an unfinished job for this kernel
    job_text: Optional[str] = None  # "optimizing 5/16 · best 1.21x"
    variant_speedup: Optional[str] = None  # "1.31x" when an applicable variant is known
    variant_note: Optional[str] = (
        None  # "correct; speed needs a GPU": an interpreted result, never offered as a speedup
    )
    module_hash: Optional[str] = None  # sha256 of the text shown (to read the right time from a Result)
    applied_text: Optional[str] = (
        None  # a found variant is in the text: "Applied variant (1.43x faster)" or its re-verification
    )


StatusFn = Callable[[KernelInfo], KernelStatus]


def _args(uri: str, kernel: str, **extra: Any) -> list[dict]:
    return [{"uri": uri, "kernel": kernel, **extra}]


def kernel_range(a: Analysis, k: KernelInfo) -> types.Range:
    return _shown_range(a, k.range)


def name_range(a: Analysis, k: KernelInfo) -> types.Range:
    return _shown_range(a, k.name_range)


def _shown_range(a: Analysis, r: SourceRange) -> types.Range:
    """A range in the kernels shown (the last good text's while this one does not parse), inside this text."""
    src = a.source or a
    rng = src.index.ast_range(r.start_line, r.start_col, r.end_line, r.end_col)
    return clamp_range(rng, a.index) if src is not a else rng


def code_lenses(a: Analysis, status: StatusFn) -> list[types.CodeLens]:
    """Per kernel, in this order: Optimize | Profile (or the running job, or Create
    harness) | the found variant | the applied variant | the last profile. Each lens of a
    line starts one character further right: clients that sort a line's lenses by their
    position (Neovim) then keep this order, whatever their sort's stability."""
    out: list[types.CodeLens] = []
    for k in a.kernels:
        st = status(k)
        line = kernel_range(a, k).start.line
        width = len(a.index.line_text(line))
        slot = 0

        def lens(title: str, command: str, **extra: Any) -> None:
            nonlocal slot
            pos = types.Position(line=line, character=min(slot, width))
            slot += 1
            out.append(
                types.CodeLens(
                    range=types.Range(start=pos, end=pos),
                    command=types.Command(title=title, command=command, arguments=_args(a.uri, k.name, **extra)),
                )
            )

        if st.job_id:
            lens(f"{st.job_text or 'running'} · Cancel", "kernelband.cancel", jobId=st.job_id)
        elif st.harness.found:
            lens("Optimize", "kernelband.optimize")
            lens("Profile", "kernelband.profile")
        else:
            lens("No harness · Create harness", "kernelband.createHarness")
        # a found variant is reviewed before it is applied: the diff, the evidence, then Apply or Discard
        if st.variant_speedup:
            lens(f"Apply found variant ({st.variant_speedup})", REVIEW_COMMAND)
        elif st.variant_note:
            lens(f"Variant found: {st.variant_note} · Review", REVIEW_COMMAND)
        if st.applied_text:
            lens(
                f"{st.applied_text} · Re-verify" if not st.job_id else st.applied_text,
                "kernelband.reverify" if not st.job_id else "",
            )
        text = S.lens_summary(st.profile, st.result, st.module_hash)
        if st.profile is not None and not st.profile_exact and text != "not profiled yet":
            text += " (earlier version)"
        # a label only ("" = no command) unless clicking can refresh it by profiling
        lens(text, "kernelband.profile" if st.harness.found and not st.job_id else "")
    return out


def document_symbols(a: Analysis) -> list[types.DocumentSymbol]:
    def detail(k: KernelInfo) -> str:
        return " ".join(
            ["@triton.jit"] + (["autotuned"] if k.is_autotuned else []) + (["heuristics"] if k.has_heuristics else [])
        )

    return [
        types.DocumentSymbol(
            name=k.name,
            kind=types.SymbolKind.Function,
            detail=detail(k),
            range=kernel_range(a, k),
            selection_range=name_range(a, k),
        )
        for k in a.kernels
    ]


def symbol_information(a: Analysis) -> list[types.SymbolInformation]:
    return [
        types.SymbolInformation(
            name=k.name,
            kind=types.SymbolKind.Function,
            location=types.Location(uri=a.uri, range=kernel_range(a, k)),
            container_name="Triton kernels",
        )
        for k in a.kernels
    ]


def _on_name(
    a: Analysis, k: KernelInfo, message: str, severity: types.DiagnosticSeverity, code: str, **data: str
) -> types.Diagnostic:
    """A diagnostic on the kernel's name; its data names the kernel (code actions read it)."""
    return types.Diagnostic(
        range=name_range(a, k),
        message=message,
        severity=severity,
        source=SOURCE,
        code=code,
        data={"kernel": k.name, **data},
    )


def harness_diagnostic(a: Analysis, k: KernelInfo, h: HarnessChoice) -> types.Diagnostic:
    return _on_name(
        a,
        k,
        f"KernelBand: no harness for {k.name}: {h.reason}",
        types.DiagnosticSeverity.Warning,
        CODE_NO_HARNESS,
        kind="noHarness",
    )


def variant_diagnostic(a: Analysis, k: KernelInfo, result: Result, job_id: str) -> types.Diagnostic:
    sp = D.speedup_phrase(result)
    found = f"a faster variant of {k.name}: {sp}" if sp else f"a variant of {k.name} that is {D.INTERPRETED_NOTE}"
    return _on_name(
        a,
        k,
        f"KernelBand found {found}{D.via(result)}. Use the quick fix to review it.",
        types.DiagnosticSeverity.Information,
        CODE_VARIANT,
        kind="variant",
        jobId=job_id,
    )


_MENTIONS_TRITON = re.compile(r"^\s*(import\s+triton|from\s+triton\b)|@\s*(triton\.)?jit\b", re.M)


def parse_diagnostic(a: Analysis) -> Optional[types.Diagnostic]:
    """Why a Triton file shows no lens, hover or lint: it does not parse (and never did in
    this session). None for a file that does not look like Triton (someone else's syntax error)."""
    err = a.error
    if err is None or not _MENTIONS_TRITON.search(a.text):
        return None
    line0 = max(err.line - 1, 0)
    rng = types.Range(
        start=types.Position(line=line0, character=0),
        end=types.Position(line=line0, character=len(a.index.line_text(line0))),
    )
    return types.Diagnostic(
        range=rng,
        severity=types.DiagnosticSeverity.Warning,
        source=SOURCE,
        code=CODE_PARSE,
        message=f"KernelBand cannot analyse this file: it does not parse (line {err.line}: {err.message}). "
        "Its kernels' lenses, lints, hovers and Optimize come back once it parses.",
    )


def stub_insertion(a: Analysis, k: KernelInfo) -> tuple[int, str]:
    """(character offset, text) inserting a harness stub after the kernel's wrapper,
    else at the end of the file."""
    text = a.text
    stub = harness_stub(text, k, a.detection)
    wrappers = wrappers_of(a.detection, k.name)
    if wrappers:
        end_line = wrappers[0].range.end_line  # 1-based: the 0-based index of the next line
        if end_line < len(a.index.lines):
            return a.index.starts[end_line], stub
    prefix = "" if (not text or text.endswith(("\n", "\r"))) else "\n"
    return len(text), prefix + stub


def overlaps(r: types.Range, line_from: int, line_to: int) -> bool:
    return not (r.end.line < line_from or r.start.line > line_to)


def wants(only: Optional[list[str]], kind: str) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def relevant_kernels(a: Analysis, rng: types.Range, diagnostics: list[types.Diagnostic]) -> list[KernelInfo]:
    names = {
        d.data["kernel"]
        for d in diagnostics or []
        if d.source == SOURCE and isinstance(d.data, dict) and isinstance(d.data.get("kernel"), str)
    }
    return [k for k in a.kernels if k.name in names or overlaps(kernel_range(a, k), rng.start.line, rng.end.line)]
