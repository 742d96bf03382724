"""The language service's documents: analyses on open/change/save/close, published
diagnostics (harness, lints, found variants), background jobs on save and on disk changes."""
from __future__ import annotations

import asyncio
import logging
from typing import Optional

from lsprotocol import types
from pygls.uris import from_fs_path

from kernelband.model import FOUND_STATUSES

from . import lenses as L
from . import lints as LN
from .documents import Analysis
from .incremental import Change
from .jobs import OPTIMIZE
from .service_state import ServiceState

log = logging.getLogger("kernelband_lsp")


class DocumentsMixin(ServiceState):
    """A part of KernelBandService (service_state.py declares the state it uses)."""

    # ================================================================== documents
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

    def _prepare(self, a: Analysis) -> None:
        """On the analysis thread: harness look-ups (file reads) for every kernel."""
        harness = self.settings.harness
        for k in a.detection.kernels:
            a.harness(k.name, harness.get(k.name))

    def is_open(self, uri: str) -> bool:
        return uri in self.ls.workspace.text_documents

    def did_open(self, uri: str) -> None:
        doc = self.ls.workspace.get_text_document(uri)

        async def go() -> None:
            await self.docs.now(uri, doc.path, doc.source, doc.version)
            # clients that asked for lenses before the analysis (or only refresh on cursor
            # moves) get them now
            self._schedule_lens_refresh()

        self._spawn(go())

    def did_change(self, uri: str, changes: Optional[list] = None) -> None:
        if self.is_open(uri):
            doc = self.ls.workspace.get_text_document(uri)
            self.docs.note_change(uri, doc.path, _changes(changes), doc.source, doc.version)

        def fetch():
            if not self.is_open(uri):
                return None
            doc = self.ls.workspace.get_text_document(uri)
            return doc.path, doc.source, doc.version

        self.docs.schedule(uri, fetch)

    def did_save(self, uri: str) -> None:
        doc = self.ls.workspace.get_text_document(uri)

        async def go() -> None:
            a = await self.docs.now(uri, doc.path, doc.source, doc.version)
            if self.settings.background_on_save:
                self.background.on_save(a)

        self._spawn(go())

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task failed: %r", t.exception())

        task.add_done_callback(done)
        return task

    def did_close(self, uri: str) -> None:
        self.docs.close(uri)
        # diagnostics of a closed file stay only while a variant for it is pending
        self.harness_diags.pop(uri, None)
        self.lint_diags.pop(uri, None)
        self.parse_diags.pop(uri, None)
        self._publish(uri)

    def _on_analysed(self, a: Analysis) -> None:
        if not a.parsed:
            # keep what was published for the last good text; a Triton file that never
            # parsed gets one diagnostic that says why nothing else is shown
            diag = L.parse_diagnostic(a) if a.good is None else None
            self.parse_diags[a.uri] = [diag] if diag is not None else []
            self._publish(a.uri)
            return
        self.parse_diags.pop(a.uri, None)
        if len(a.detection.kernels) > 50:
            # harness look-ups and lints of a large file: on a thread, so requests keep
            # being answered; then publish from the event loop
            async def go() -> None:
                await asyncio.get_running_loop().run_in_executor(None, self._diag_prep, a)
                if self.docs.cached(a.uri) is a:
                    self._publish_analysed(a)

            self._spawn(go())
            return
        self._publish_analysed(a)

    def _diag_prep(self, a: Analysis) -> None:
        self._prepare(a)
        LN.cached_lint(a)

    def _publish_analysed(self, a: Analysis) -> None:
        diags = []
        for k in a.detection.kernels:
            h = a.harness(k.name, self.settings.harness.get(k.name))
            if not h.found:
                diags.append(L.harness_diagnostic(a, k, h))
        self.harness_diags[a.uri] = diags
        self.lint_diags[a.uri] = [self._lint_diagnostic(a, f) for f in LN.cached_lint(a)]
        # Found variants are kept even when applied or no longer applicable: an undo (or
        # reverting the kernel) brings the text back and the offer must come back with it.
        vd = []
        for k in a.detection.kernels:
            fv = self.offer(a, k.name)
            if fv is not None and fv.background:
                vd.append(L.variant_diagnostic(a, k, fv.result, fv.job_id))
        self.variant_diags[a.uri] = vd
        self._publish(a.uri)

    def _republish_all(self) -> None:
        """Settings that change diagnostics (explicit harnesses, minimum speedup) changed."""
        for uri in list(self.ls.workspace.text_documents):
            a = self.docs.cached(uri)
            if a is not None and a.parsed:
                self._on_analysed(a)

    def _publish(self, uri: str) -> None:
        diags = (list(self.parse_diags.get(uri, [])) + list(self.harness_diags.get(uri, []))
                 + list(self.lint_diags.get(uri, [])) + list(self.variant_diags.get(uri, [])))
        key = [(d.range.start.line, d.range.start.character, d.message, d.code) for d in diags]
        if self._published.get(uri) == key:
            return
        self._published[uri] = key
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags))

    # ================================================================== background
    def _has_harness(self, a: Analysis, kernel: str) -> bool:
        return a.harness(kernel, self.settings.harness.get(kernel)).found

    def _already_done(self, a: Analysis, kernel: str) -> bool:
        res = self.store.result(a.path, kernel)
        return res is not None and res.original_hash == a.hash and res.status in (*FOUND_STATUSES, "no_improvement")

    def _submit_background(self, a: Analysis, kernel: str) -> bool:
        if not a.path:
            return False
        job = self.jobs.submit(self._spec(OPTIMIZE, a, kernel, self.settings, background=True))
        asyncio.get_running_loop().create_task(self._begin_progress(job, None))
        return True

    def _on_disk_change(self, path: str) -> None:
        self._spawn(self._disk_changed(path))

    async def _disk_changed(self, path: str) -> None:
        uri = from_fs_path(path)
        if not uri or not self.settings.background_on_save:
            return
        try:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return
        if self.is_open(uri):
            doc = self.ls.workspace.get_text_document(uri)
            if doc.source != text:
                return  # the editor holds other (unsaved) text: its save will tell us
            a = await self.docs.aget(uri, doc.path, doc.source, doc.version)
        else:
            a = await self.docs.aget(uri, path, text, None)
            if a.parsed and a.kernels:
                self._on_analysed(a)
        if a.parsed and a.kernels:
            log.info("%s changed on disk", path)
            self.background.on_save(a)

    def _refresh_variant_diags(self, uri: str) -> None:
        async def go() -> None:
            a = await self.analysis(uri)
            if a is not None and a.parsed:
                self._on_analysed(a)

        self._spawn(go())

    def _schedule_lens_refresh(self) -> None:
        """Ask the client to request lenses and inlay hints again (a job's progress, a new
        profile or result, a document's first analysis): at most one request pair per 0.2 s."""
        lens, inlay = self.supports_lens_refresh, self.supports_inlay_refresh
        if not (lens or inlay) or self._lens_refresh_pending:
            return
        self._lens_refresh_pending = True

        async def go() -> None:
            await asyncio.sleep(0.2)
            self._lens_refresh_pending = False
            for wanted, send, what in ((lens, self.ls.workspace_code_lens_refresh_async, "codeLens"),
                                       (inlay, self.ls.workspace_inlay_hint_refresh_async, "inlayHint")):
                if not wanted:
                    continue
                try:
                    await asyncio.wait_for(send(None), timeout=10)
                except Exception as e:
                    log.debug("%s/refresh: %s", what, e)

        asyncio.get_running_loop().create_task(go())


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
