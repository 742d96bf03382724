"""Open documents: analyses on open/change/save/close, and the diagnostics published for
each (parse errors, missing harnesses, lints, and the found variants' offers)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine, Optional, TypeVar

from lsprotocol import types

from kernelband.harness import HarnessChoice

from . import lenses as L
from . import lints as LN
from .documents import Analysis, Documents
from .incremental import Change
from .service_client import Client, SettingsChange
from .service_variants import FoundVariants

log = logging.getLogger("kernelband_lsp")

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}
# kinds of diagnostics, in the order published: the documents' own (dropped when the file
# closes), then the found variants' (kept while a variant for the file is pending)
PARSE, HARNESS, LINT, VARIANT = "parse", "harness", "lint", "variant"
KINDS = (PARSE, HARNESS, LINT, VARIANT)

T = TypeVar("T")


class OpenDocuments:
    """Publishes each analysed text's diagnostics, the found variants' among them."""

    def __init__(self, client: Client, variants: FoundVariants) -> None:
        self.client = client
        self.variants = variants
        self.ls = client.ls
        self.docs = Documents(on_analysed=self.publish_analysed)
        self.docs.on_provisional_mismatch = lambda uri: client.refresh_lenses()
        self._diags: dict[str, dict[str, list[types.Diagnostic]]] = {}  # uri -> kind -> diagnostics
        self._published: dict[str, list] = {}
        self._tasks: set[asyncio.Task] = set()

    def settings_applied(self, change: SettingsChange) -> None:
        old, new = change.old, change.new
        self.docs.encoding = self.client.encoding
        self.docs.debounce_s = max(new.debounce_ms, 0) / 1000.0
        if new.harness != old.harness or new.min_speedup != old.min_speedup:
            for uri in list(self.ls.workspace.text_documents):  # what diagnostics say may change
                a = self.docs.cached(uri)
                if a is not None and a.parsed:
                    self.publish_analysed(a)

    # ================================================================== analyses
    async def analysis(self, uri: str, provisional_ok: bool = False) -> Optional[Analysis]:
        """The analysis of the document's current text (computed off the event loop).
        ``provisional_ok``: lenses, symbols and hovers may use the last analysis moved by
        an edit that cannot change what is detected (incremental.py); edits and commands
        never do."""
        try:
            doc = self.ls.workspace.get_text_document(uri)
            text = doc.source
        except (OSError, UnicodeDecodeError) as e:
            log.info("cannot read %s: %s", uri, e)
            return None
        if provisional_ok:
            cur = self.docs.cached(uri)
            if cur is None or cur.version != doc.version:
                p = self.docs.provisional(uri, text, doc.version)
                if p is not None:
                    return p
        return await self.docs.aget(uri, doc.path, text, doc.version)

    def harness(self, a: Analysis, kernel: str) -> HarnessChoice:
        """The kernel's harness: the one the settings name, else found by convention."""
        return a.harness(kernel, self.client.settings.harness.get(kernel))

    def prepare(self, a: Analysis) -> None:
        """On the analysis thread: harness look-ups (file reads) for every kernel."""
        for k in a.detection.kernels:
            self.harness(a, k.name)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> "asyncio.Task[T]":
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task failed: %r", t.exception())

        task.add_done_callback(done)
        return task

    # ================================================================== notifications
    def did_open(self, uri: str) -> None:
        doc = self.ls.workspace.get_text_document(uri)

        async def go() -> None:
            await self.docs.now(uri, doc.path, doc.source, doc.version)
            # clients that asked for lenses before the analysis (or only refresh on cursor
            # moves) get them now
            self.client.refresh_lenses()

        self.spawn(go())

    def did_change(self, uri: str, changes: Optional[list] = None) -> None:
        if self.client.is_open(uri):
            doc = self.ls.workspace.get_text_document(uri)
            self.docs.note_change(uri, doc.path, _changes(changes), doc.source, doc.version)

        def fetch() -> Optional[tuple[str, str, Optional[int]]]:
            if not self.client.is_open(uri):
                return None
            doc = self.ls.workspace.get_text_document(uri)
            return doc.path, doc.source, doc.version

        self.docs.schedule(uri, fetch)

    def did_save(self, uri: str) -> "asyncio.Task[Analysis]":
        """Analyse the saved text now (no debounce); the task gives its analysis."""
        doc = self.ls.workspace.get_text_document(uri)
        return self.spawn(self.docs.now(uri, doc.path, doc.source, doc.version))

    def did_close(self, uri: str) -> None:
        self.docs.close(uri)
        # diagnostics of a closed file stay only while a variant for it is pending
        for kind in (PARSE, HARNESS, LINT):
            self._diags.get(uri, {}).pop(kind, None)
        self._publish(uri)

    # ================================================================== diagnostics
    def publish_analysed(self, a: Analysis) -> None:
        mine = self._diags.setdefault(a.uri, {})
        if not a.parsed:
            # keep what was published for the last good text; a Triton file that never
            # parsed gets one diagnostic that says why nothing else is shown
            diag = L.parse_diagnostic(a) if a.good is None else None
            mine[PARSE] = [diag] if diag is not None else []
            self._publish(a.uri)
            return
        mine.pop(PARSE, None)
        if len(a.detection.kernels) > 50:
            # harness look-ups and lints of a large file: on a thread, so requests keep
            # being answered; then publish from the event loop
            async def go() -> None:
                await asyncio.get_running_loop().run_in_executor(None, self._diag_prep, a)
                if self.docs.cached(a.uri) is a:
                    self._publish_parsed(a)

            self.spawn(go())
            return
        self._publish_parsed(a)

    def _diag_prep(self, a: Analysis) -> None:
        self.prepare(a)
        LN.cached_lint(a)

    def _publish_parsed(self, a: Analysis) -> None:
        mine = self._diags.setdefault(a.uri, {})
        mine[HARNESS] = [
            L.harness_diagnostic(a, k, h) for k in a.detection.kernels if not (h := self.harness(a, k.name)).found
        ]
        mine[LINT] = [lint_diagnostic(a, f) for f in LN.cached_lint(a)]
        mine[VARIANT] = self.variants.diagnostics(a)
        self._publish(a.uri)

    def refresh(self, uri: str) -> None:
        """Publish the document's diagnostics again (a job found a variant for it)."""

        async def go() -> None:
            a = await self.analysis(uri)
            if a is not None and a.parsed:
                self.publish_analysed(a)

        self.spawn(go())

    def _publish(self, uri: str) -> None:
        mine = self._diags.get(uri, {})
        diags = [d for kind in KINDS for d in mine.get(kind, [])]
        key = [(d.range.start.line, d.range.start.character, d.message, d.code) for d in diags]
        if self._published.get(uri) == key:
            return
        self._published[uri] = key
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags))


def lint_diagnostic(a: Analysis, f: LN.Finding) -> types.Diagnostic:
    return types.Diagnostic(
        range=a.index.ast_range(f.line, f.col, f.end_line, f.end_col),
        message=f.message,
        severity=_SEVERITY.get(f.severity, types.DiagnosticSeverity.Warning),
        source=LN.SOURCE,
        code=f.code,
        data={"kernel": f.kernel, "kind": "lint"},
    )


def _changes(raw: Optional[list]) -> Optional[list[Change]]:
    """LSP content changes as incremental.Change; None if any replaces the whole text."""
    if raw is None:
        return None
    out = []
    for c in raw:
        rng = getattr(c, "range", None)
        if rng is None:
            return None
        out.append(Change(rng.start.line, rng.start.character, rng.end.line, rng.end.character, c.text))
    return out
