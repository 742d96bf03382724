"""The server's state and behaviour behind the LSP handlers (server.py stays thin).

Holds the document analyses, the store view, the job manager, found variants and the
diagnostics published per document; turns jobs into progress, notifications,
diagnostics and versioned edits.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from kernelband.events import Event
from kernelband.harness import HarnessChoice
from kernelband.model import KernelInfo

from . import edits as E
from . import evidence as EV
from . import hover as H
from . import inlay as IH
from . import lenses as L
from . import lints as LN
from . import summary as S
from .background import Background
from .documents import BIG_TEXT_LINES, Analysis, Documents, partial_analysis, shutdown_detector, warm_detector
from .incremental import Change
from .jobs import CANCELLED, DONE, FAILED, OPTIMIZE, PROFILE, RUNNING, SUPERSEDED, Job, JobManager, JobSpec
from .settings import SECTION, Settings, parse_settings, secret_from
from .storeview import StoreView

log = logging.getLogger("kernelband_lsp")

JOB_EVENT = "kernelband/jobEvent"
# what an interpreted result may claim: it passed the checks; its timing says nothing about a GPU
INTERPRETED_NOTE = "correct; speed needs a GPU"


def is_interpreted(result: Optional[dict]) -> bool:
    return isinstance(result, dict) and result.get("interpreted") is True


@dataclass
class FoundVariant:
    """A verified faster module found by a job, tied to the text the job started from."""

    uri: str
    path: str
    kernel: str
    job_id: str
    base_text: str
    base_version: Optional[int]
    base_kernel_text: Optional[str]
    result: dict
    background: bool

    @property
    def source(self) -> str:
        return str(self.result.get("best_source") or "")


class KernelBandService:
    def __init__(self, ls: LanguageServer) -> None:
        # typed as pygls's server, not server.py's subclass: server.py builds this service,
        # so naming its class here would be an import circle
        self.ls = ls
        self.init_settings = Settings()
        self.settings = Settings()
        self.secret: Optional[str] = None
        self.encoding = "utf-16"
        # harness look-ups run in the lens computation (a thread), not in every analysis:
        # a hover must not wait for all of a file's harnesses
        self.docs = Documents(on_analysed=self._on_analysed)
        self.docs.on_provisional_mismatch = lambda uri: self._schedule_lens_refresh()
        self._tasks: set[asyncio.Task] = set()
        self._plans: dict[tuple, E.EditPlan] = {}
        self.store = StoreView()
        self.jobs = JobManager(on_event=self._on_job_event, on_state=self._on_job_state)
        self.found: dict[tuple[str, str], FoundVariant] = {}
        # profiles from this session's profile jobs: (path, kernel) -> (module hash, profile);
        # shown when the store has none (e.g. a job run with --no-store)
        self.profiles: dict[tuple[str, str], tuple[str, dict]] = {}
        self.harness_diags: dict[str, list[types.Diagnostic]] = {}
        self.lint_diags: dict[str, list[types.Diagnostic]] = {}
        self.variant_diags: dict[str, list[types.Diagnostic]] = {}
        self._published: dict[str, list] = {}
        self._token_job: dict[Any, str] = {}
        self._job_token: dict[str, Any] = {}
        self._job_pct: dict[str, int] = {}
        self.background = Background(self._submit_background, self._already_done, self._has_harness)
        self._lens_refresh_pending = False
        self.client_name = ""

    # ================================================================== capabilities
    @property
    def caps(self) -> types.ClientCapabilities:
        try:
            return self.ls.client_capabilities or types.ClientCapabilities()
        except Exception:
            return types.ClientCapabilities()

    def _cap(self, *path: str) -> Any:
        obj: Any = self.caps
        for p in path:
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj

    @property
    def supports_progress(self) -> bool:
        return bool(self._cap("window", "work_done_progress"))

    @property
    def supports_document_changes(self) -> bool:
        return bool(self._cap("workspace", "workspace_edit", "document_changes"))

    @property
    def supports_configuration(self) -> bool:
        return bool(self._cap("workspace", "configuration"))

    @property
    def supports_lens_refresh(self) -> bool:
        return bool(self._cap("workspace", "code_lens", "refresh_support"))

    @property
    def hierarchical_symbols(self) -> bool:
        return bool(self._cap("text_document", "document_symbol", "hierarchical_document_symbol_support"))

    # ================================================================== settings
    def initialize(self, params: types.InitializeParams) -> None:
        enc = getattr(self.ls.workspace, "position_encoding", None)
        self.encoding = str(getattr(enc, "value", enc) or "utf-16")
        self.docs.encoding = self.encoding
        opts = params.initialization_options
        # the VS Code extension reviews variants in its own diff view; other clients get a
        # server-driven review (window/showDocument + window/showMessageRequest)
        self.client_name = str(getattr(params.client_info, "name", "") or "")
        self.init_settings, problems = parse_settings(opts)
        self.secret = secret_from(opts)
        self.settings = self.init_settings
        self._apply_settings()
        for p in problems:
            log.warning(p)
        log.info("kernelband-lsp initialised (pid %d, position encoding %s)", os.getpid(), self.encoding)
        warm_detector()

    async def refresh_settings(self) -> Settings:
        if self.supports_configuration:
            try:
                res = await asyncio.wait_for(
                    self.ls.workspace_configuration_async(
                        types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])),
                    timeout=5.0)
                raw = res[0] if isinstance(res, (list, tuple)) and res else None
                new, problems = parse_settings(raw, self.init_settings)
                for p in problems:
                    log.warning(p)
                old = self.settings
                if new != old:
                    log.info("settings: %s", _redacted(new.to_dict()))
                self.settings = new
                if new.harness != old.harness or new.min_speedup != old.min_speedup:
                    self._republish_all()
            except asyncio.TimeoutError:
                log.warning("workspace/configuration: no answer in 5 s; keeping the current settings")
            except Exception as e:
                log.warning("workspace/configuration failed: %s", e)
        self._apply_settings()
        return self.settings

    def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if raw and isinstance(raw, dict) and not self.supports_configuration:
            self.settings, problems = parse_settings(raw, self.init_settings)
            for p in problems:
                log.warning(p)
            self._apply_settings()
        else:
            asyncio.get_running_loop().create_task(self.refresh_settings())

    def _apply_settings(self) -> None:
        self.docs.debounce_s = max(self.settings.debounce_ms, 0) / 1000.0
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving yet (unit use): no watcher
        if self.settings.background_on_save:
            self.background.watch(self.workspace_folders(), self._on_disk_change)
        elif self.background.watching:
            self.background.unwatch()

    def workspace_folders(self) -> list[str]:
        out = []
        try:
            ws = self.ls.workspace
        except RuntimeError:
            return out
        for f in (ws.folders or {}).values():
            p = to_fs_path(f.uri)
            if p:
                out.append(p)
        if not out and ws.root_path:
            out.append(ws.root_path)
        return out

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
        self._spawn(self.docs.now(uri, doc.path, doc.source, doc.version))

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
        self._publish(uri)

    def _on_analysed(self, a: Analysis) -> None:
        if not a.parsed:
            return  # keep what was published for the last good text
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
        diags = (list(self.harness_diags.get(uri, [])) + list(self.lint_diags.get(uri, []))
                 + list(self.variant_diags.get(uri, [])))
        key = [(d.range.start.line, d.range.start.character, d.message, d.code) for d in diags]
        if self._published.get(uri) == key:
            return
        self._published[uri] = key
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags))

    # ================================================================== lints
    _SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
                 "info": types.DiagnosticSeverity.Information}

    def _lint_diagnostic(self, a: Analysis, f: "LN.Finding") -> types.Diagnostic:
        return types.Diagnostic(range=a.index.ast_range(f.line, f.col, f.end_line, f.end_col), message=f.message,
                                severity=self._SEVERITY.get(f.severity, types.DiagnosticSeverity.Warning),
                                source=LN.SOURCE, code=f.code, data={"kernel": f.kernel, "kind": "lint"})

    def _lint_actions(self, a: Analysis, params: types.CodeActionParams) -> list[types.CodeAction]:
        if not L.wants(list(params.context.only or []), types.CodeActionKind.QuickFix):
            return []
        out = []
        rng = params.range
        sent = [d for d in params.context.diagnostics or [] if d.source == LN.SOURCE]
        for f in LN.cached_lint(a):
            if f.fix_title is None:
                continue
            drange = a.index.ast_range(f.line, f.col, f.end_line, f.end_col)
            if not L.overlaps(drange, rng.start.line, rng.end.line):
                continue
            start = a.index.ast_to_offset(f.line, f.col)
            end = a.index.ast_to_offset(f.end_line, f.end_col)
            if f.fix_text is not None:
                hunk = E.Hunk(start, end, f.fix_text)
            else:  # insert before the call's closing parenthesis
                close = a.text.rfind(")", start, end)
                if close < 0:
                    continue
                hunk = E.Hunk(close, close, f.extra.get("insert_before_end", ""))
            edit = E.workspace_edit(a.uri, a.version, a.text, [hunk], self.encoding, self.supports_document_changes)
            match = [d for d in sent if d.code == f.code and d.range == drange] or None
            out.append(types.CodeAction(title=f"{f.fix_title} (KernelBand {f.code})", kind=types.CodeActionKind.QuickFix,
                                        diagnostics=match, edit=edit, is_preferred=True))
        return out

    # ================================================================== per-kernel status
    def kernel_status(self, a: Analysis, k: KernelInfo) -> L.KernelStatus:
        src = a.source or a
        h = (HarnessChoice(None, reason=H.ANALYSING) if a.partial
             else a.harness(k.name, self.settings.harness.get(k.name)))
        profile, exact = self.store.profile(a.path, k.name, src.hash)
        mem = self.profiles.get((self.store.abspath(a.path), k.name))
        if mem is not None and (profile is None or (not exact and mem[0] == src.hash)):
            profile, exact = mem[1], mem[0] == src.hash
        result = self.store.result(a.path, k.name)
        st = L.KernelStatus(kernel=k, harness=h, profile=profile, profile_exact=exact, result=result,
                            module_hash=src.hash)
        active = self.jobs.active_for(a.path, k.name)
        if active:
            j = active[0]
            st.job_id, st.job_kind = j.id, j.spec.kind
            st.job_text = self._job_line(j)
        fv = self.offer(a, k.name) if not a.partial else None
        if fv is not None:
            st.variant_speedup = f"{S.num(fv.result.get('speedup')):.2f}x"
            if st.result is None:
                st.result = fv.result
        else:
            cv = self.variant_of(a, k.name)
            if cv is not None and is_interpreted(cv.result) and cv.result.get("status") in S.FOUND_STATUSES:
                st.variant_note = INTERPRETED_NOTE
                if st.result is None:
                    st.result = cv.result
        return st

    def _job_line(self, j: Job) -> str:
        verb = "optimizing" if j.spec.kind == OPTIMIZE else "profiling"
        if j.spec.background:
            verb = "background " + verb
        if j.state != RUNNING:
            pos = self.jobs.queue_position(j)
            return f"{verb}: queued" + (f" ({pos} ahead)" if pos else "")
        p = j.last_progress
        if p and p.get("total"):
            best = S.num(p.get("best_speedup"))
            return f"{verb} {p.get('done', 0)}/{p.get('total')}" + (f" · best {best:.2f}x" if best else "")
        return f"{verb}…"

    def _reportable(self, fv: FoundVariant) -> bool:
        """A speedup worth offering: measured on a GPU (never an interpreter's timing)."""
        sp = S.num(fv.result.get("speedup"))
        return (fv.result.get("status") == "improved" and bool(fv.source) and sp is not None
                and sp >= self.settings.min_speedup and not is_interpreted(fv.result))

    def variant_of(self, a: Analysis, kernel: str) -> Optional[FoundVariant]:
        """The found variant of a kernel: this session's, else a stored Result that started
        from exactly this text (a CLI run, an earlier server); remembered once seen so that
        Apply -> Undo finds it again."""
        if not a.path:
            return None
        key = (self.store.abspath(a.path), kernel)
        fv = self.found.get(key)
        if fv is not None:
            return fv
        res = self.store.result(a.path, kernel)
        if S.has_variant(res) and res.get("original_hash") == a.hash:
            fv = FoundVariant(uri=a.uri, path=key[0], kernel=kernel, job_id=str(res.get("session_id") or "store"),
                              base_text=a.text, base_version=a.version, base_kernel_text=a.kernel_text(kernel),
                              result=dict(res), background=False)
            self.found[key] = fv
            return fv
        return None

    def offer(self, a: Analysis, kernel: str) -> Optional[FoundVariant]:
        """The variant to offer on this text: reportable and still applicable with a change
        (None once applied: the text already is the variant)."""
        if not a.parsed:
            return None
        fv = self.variant_of(a, kernel)
        if fv is None or not self._reportable(fv):
            return None
        plan = self._cached_plan(fv, a)
        return fv if plan.ok and plan.hunks else None

    # ================================================================== LSP features
    async def code_lens(self, uri: str) -> list[types.CodeLens]:
        a = await self.analysis(uri, provisional_ok=True)
        if a is None:
            return []
        if any((k.name, self.settings.harness.get(k.name) or None) not in (a.source or a)._harness for k in a.kernels):
            # harness look-ups read files: off the event loop, so hovers are answered meanwhile
            await asyncio.get_running_loop().run_in_executor(None, self._prepare, a.source or a)
        statuses: dict[str, L.KernelStatus] = {}
        for i, k in enumerate(a.kernels):
            statuses[k.name] = self.kernel_status(a, k)
            if i % 50 == 49:
                await asyncio.sleep(0)  # a 600-kernel file: let other requests in between
        return L.code_lenses(a, lambda k: statuses.get(k.name) or self.kernel_status(a, k))

    async def inlay_hints(self, uri: str, rng: types.Range) -> list[types.InlayHint]:
        a = await self.analysis(uri, provisional_ok=True)
        if a is None or not a.kernels:
            return []
        return IH.hints(a, rng, lambda k: self.kernel_status(a, k), lambda name: self.offer(a, name))

    async def document_symbols(self, uri: str):
        a = await self.analysis(uri, provisional_ok=True)
        if a is None:
            return []
        return L.document_symbols(a) if self.hierarchical_symbols else L.symbol_information(a)

    async def hover(self, uri: str, pos: types.Position) -> Optional[types.Hover]:
        # while a large file is still being analysed (just opened), a hover on a kernel's
        # name is answered from the definition under the cursor alone
        if self.is_open(uri):
            doc = self.ls.workspace.get_text_document(uri)
            text = doc.source
            if (text.count("\n") >= BIG_TEXT_LINES and self.docs.analysing(uri, text, doc.version)
                    and self.docs.provisional(uri, text, doc.version) is None):
                part = await asyncio.get_running_loop().run_in_executor(
                    None, partial_analysis, uri, doc.path, text, doc.version, pos.line, self.encoding)
                got = self._hover_from(part, pos) if part is not None else None
                if got is not None:
                    return got
        a = await self.analysis(uri, provisional_ok=True)
        return self._hover_from(a, pos)

    def _hover_from(self, a: Optional[Analysis], pos: types.Position) -> Optional[types.Hover]:
        if a is None or not a.kernels:
            return None
        src = a.source
        if src is None:
            return None
        word = a.index.word_at(pos)
        if word is None:
            return None
        name = word[0]
        k = a.kernel(name)
        if k is None:
            return None
        # on the definition's name, or on a launch `name[grid](...)`
        on_def = L.name_range(a, k).start.line == pos.line
        on_launch = any(s.range.start_line - 1 <= pos.line <= s.range.end_line - 1 for s in k.launch_sites)
        if not (on_def or on_launch):
            return None
        st = self.kernel_status(a, k)
        fv = self.offer(a, k.name) if not a.partial else None
        variant_line = None
        if fv is not None:
            variant_line = (f"**Found:** a {S.speedup_phrase(fv.result)} faster variant is ready "
                            f"(quick fix *Apply found variant*).")
        elif st.variant_note:
            variant_line = f"**Found:** a variant that is {st.variant_note} (measured under the CPU interpreter)."
        card = H.card(H.CardInputs(kernel=k, profile=st.profile, profile_exact=st.profile_exact, result=st.result,
                                   harness=st.harness, job_line=st.job_text, variant_line=variant_line,
                                   stale=a.stale, evidence=EV.evidence_markdown(fv.result) if fv is not None else None))
        start = a.index.offset_to_position(word[1])
        end = a.index.offset_to_position(word[2])
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=card),
                           range=types.Range(start=start, end=end))

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        a = await self.analysis(uri)
        if a is None or not a.parsed:
            return []
        only = list(params.context.only or [])
        diags = list(params.context.diagnostics or [])
        out: list[types.CodeAction] = self._lint_actions(a, params)
        for k in L.relevant_kernels(a, params.range, diags):
            st = self.kernel_status(a, k)
            args = [{"uri": uri, "kernel": k.name}]
            kd = [d for d in diags if d.source == L.SOURCE and isinstance(d.data, dict) and d.data.get("kernel") == k.name]
            fv = self.offer(a, k.name)
            if fv is not None and L.wants(only, types.CodeActionKind.QuickFix):
                plan = self._cached_plan(fv, a)
                title = f"Apply found variant of {k.name}: {S.speedup_phrase(fv.result)} faster (KernelBand)"
                act = types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix,
                                       diagnostics=[d for d in kd if d.code == L.CODE_VARIANT] or None,
                                       is_preferred=True, data={"kernel": k.name, "uri": uri})
                if plan.ok:
                    act.edit = E.workspace_edit(uri, a.version, a.text, plan.hunks, self.encoding,
                                                self.supports_document_changes)
                else:
                    act.disabled = types.CodeActionDisabledType(reason=plan.message)
                out.append(act)
                if plan.ok and "visual studio code" not in self.client_name.lower():
                    out.append(types.CodeAction(
                        title=f"Review found variant of {k.name} (diff, then Apply or Discard) (KernelBand)",
                        kind=types.CodeActionKind.QuickFix, data={"kernel": k.name, "uri": uri},
                        command=types.Command(title="Review found variant", command="kernelband.reviewVariant",
                                              arguments=args)))
            if not st.harness.found and L.wants(only, types.CodeActionKind.QuickFix):
                offset, text = L.stub_insertion(a, k)
                out.append(types.CodeAction(
                    title=f"Create harness for {k.name} (KernelBand)", kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d for d in kd if d.code == L.CODE_NO_HARNESS] or None, is_preferred=True,
                    edit=E.workspace_edit(uri, a.version, a.text, [E.Hunk(offset, offset, text)], self.encoding,
                                          self.supports_document_changes)))
            if st.harness.found and not st.job_id:
                if L.wants(only, types.CodeActionKind.RefactorRewrite):
                    out.append(types.CodeAction(
                        title=f"Optimize kernel {k.name} (KernelBand)", kind=types.CodeActionKind.RefactorRewrite,
                        command=types.Command(title="Optimize kernel (KernelBand)", command="kernelband.optimize",
                                              arguments=args)))
                if L.wants(only, types.CodeActionKind.Refactor):
                    out.append(types.CodeAction(
                        title=f"Profile kernel {k.name} (KernelBand)", kind=types.CodeActionKind.Refactor + ".kernelband",
                        command=types.Command(title="Profile kernel (KernelBand)", command="kernelband.profile",
                                              arguments=args)))
            if st.job_id and L.wants(only, types.CodeActionKind.Refactor):
                out.append(types.CodeAction(
                    title=f"Cancel KernelBand job on {k.name}", kind=types.CodeActionKind.Refactor + ".kernelband",
                    command=types.Command(title="Cancel", command="kernelband.cancel", arguments=[{"jobId": st.job_id}])))
        return out

    # ================================================================== commands
    async def run_job(self, kind: str, args: dict, token: Any = None) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")
        fail = (lambda msg: {"jobId": None, "status": "failed", "kernel": kernel, "message": msg}) if kind == OPTIMIZE \
            else (lambda msg: {"jobId": None, "profile": None, "kernel": kernel, "message": msg})
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return fail("expected arguments {uri, kernel}")
        a = await self.analysis(uri)
        if a is None:
            return fail(f"cannot read {uri}")
        if not a.parsed:
            return fail(f"the file does not parse (line {a.error.line}: {a.error.message})" if a.error else "the file does not parse")
        k = a.detection.kernel(kernel)
        if k is None:
            return fail(f"no Triton kernel named {kernel!r} in this file")
        if not uri.startswith("file:") or not a.path:
            return fail("save the file first: KernelBand runs kernels from a file on disk")
        settings = await self.refresh_settings()
        explicit = settings.harness.get(kernel)
        h = a.harness(kernel, explicit)
        if not h.found:
            return fail(f"no harness for {kernel}: {h.reason}")
        job = self.jobs.submit(self._spec(kind, a, kernel, settings, background=False))
        try:
            await self._begin_progress(job, token)
            await self.jobs.wait(job)
        except asyncio.CancelledError:
            # $/cancelRequest (cancellation.py): the job must not outlive its request
            self.jobs.cancel(job.id, reason="the request was cancelled")
            raise
        if kind == PROFILE:
            out = {"jobId": job.id, "profile": job.profile, "kernel": kernel}
            if job.profile is None:
                out["message"] = job.error or job.state
            return out
        result = dict(job.result or {"status": "failed", "message": job.error or job.state})
        out = {"jobId": job.id, **result}
        out.update(self._edit_for_result(job))
        return out

    def _spec(self, kind: str, a: Analysis, kernel: str, settings: Settings, background: bool) -> JobSpec:
        env = {}
        if self.secret:
            env["OPENAI_API_KEY"] = self.secret
        return JobSpec(kind=kind, path=os.path.abspath(a.path), kernel=kernel, source=a.text, uri=a.uri,
                       version=a.version, background=background, settings=settings,
                       harness=settings.harness.get(kernel), cwd=str(self.store.workspace_of(a.path)), env=env)

    def _edit_for_result(self, job: Job) -> dict:
        res = job.result or {}
        if not S.has_variant(res):
            return {"edit": None}
        if is_interpreted(res):
            return {"edit": None, "editMessage": INTERPRETED_NOTE}
        fv = self.found.get((job.spec.path, job.spec.kernel))
        if fv is None or fv.job_id != job.id:
            fv = self._found_from_job(job)
        plan, version, text = self._plan_for(fv)
        if not plan.ok:
            return {"edit": None, "editMessage": plan.message}
        edit = E.workspace_edit(fv.uri, version, text, plan.hunks, self.encoding, self.supports_document_changes)
        return {"edit": edit, "editVersion": version, "editRebuilt": plan.rebuilt}

    def _cached_plan(self, fv: FoundVariant, a: Analysis) -> E.EditPlan:
        """Code actions are asked for on every cursor move: plan once per (variant, text)."""
        key = (fv.job_id, fv.kernel, a.uri, a.version, a.hash)
        hit = self._plans.get(key)
        if hit is None:
            hit = E.plan_edit(fv.base_text, fv.source, a.text, fv.kernel)
            if len(self._plans) > 64:
                self._plans.clear()
            self._plans[key] = hit
        return hit

    def _current(self, fv: FoundVariant) -> tuple[Optional[str], Optional[int]]:
        if self.is_open(fv.uri):
            doc = self.ls.workspace.get_text_document(fv.uri)
            return doc.source, doc.version
        try:
            with open(fv.path, encoding="utf-8", newline="") as f:
                return f.read(), None
        except OSError:
            return None, None

    def _plan_for(self, fv: FoundVariant) -> tuple[E.EditPlan, Optional[int], str]:
        text, version = self._current(fv)
        if text is None:
            return E.EditPlan(False, f"cannot read {fv.path}"), None, ""
        return E.plan_edit(fv.base_text, fv.source, text, fv.kernel), version, text

    def _found_from_job(self, job: Job) -> FoundVariant:
        spec = job.spec
        from .documents import analyse

        base = analyse(spec.uri, spec.path, spec.source, spec.version, self.encoding)
        base_kernel = base.kernel_text(spec.kernel)
        return FoundVariant(uri=spec.uri or from_fs_path(spec.path) or spec.path, path=spec.path, kernel=spec.kernel,
                            job_id=job.id, base_text=spec.source, base_version=spec.version,
                            base_kernel_text=base_kernel, result=dict(job.result or {}), background=spec.background)

    async def lookup_variant(self, uri: str, kernel: str) -> Optional[FoundVariant]:
        a = await self.analysis(uri)
        if a is not None:
            return self.variant_of(a, kernel)
        path = to_fs_path(uri)
        return self.found.get((os.path.abspath(path), kernel)) if path else None

    async def proposed_edit(self, args: dict) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return {"error": "expected arguments {uri, kernel}"}
        fv = await self.lookup_variant(uri, kernel)
        if fv is None:
            return {"error": f"no found variant for {kernel}: run Optimize first"}
        plan, version, text = self._plan_for(fv)
        if not plan.ok:
            return {"error": plan.message, "original": text, "version": version}
        out = {"original": text, "proposed": plan.new_text, "diff": E.unified_diff(text, plan.new_text, os.path.basename(fv.path)),
               "version": version, "speedup": fv.result.get("speedup"), "speedup_ci": fv.result.get("speedup_ci"),
               "jobId": fv.job_id, "rebuilt": plan.rebuilt, "interpreted": is_interpreted(fv.result),
               "evidence": EV.evidence(fv.result)}
        if is_interpreted(fv.result):
            out["note"] = INTERPRETED_NOTE
        return out

    async def apply_variant(self, args: dict) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return {"applied": False, "message": "expected arguments {uri, kernel}"}
        fv = await self.lookup_variant(uri, kernel)
        if fv is None:
            return {"applied": False, "message": f"no found variant for {kernel}: run Optimize first"}
        plan, version, text = self._plan_for(fv)
        if not plan.ok:
            return {"applied": False, "message": plan.message}
        edit = E.workspace_edit(uri, version, text, plan.hunks, self.encoding, self.supports_document_changes)
        what = "verified-correct (speed needs a GPU)" if is_interpreted(fv.result) else (S.speedup_phrase(fv.result) or "faster")
        return await self._apply(edit, f"KernelBand: apply {what} variant of {kernel}")

    async def review_variant(self, args: dict) -> dict:
        """kernelband.reviewVariant: show the found variant's diff and its evidence
        (window/showDocument of a file outside the workspace), ask Apply or Discard
        (window/showMessageRequest), and apply it as a versioned edit on Apply. For
        clients without a diff view of their own (Neovim, Helix, ...)."""
        uri, kernel = args.get("uri"), args.get("kernel")
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return {"applied": False, "message": "expected arguments {uri, kernel}"}
        prop = await self.proposed_edit(args)
        if prop.get("error"):
            return {"applied": False, "message": prop["error"]}
        what = INTERPRETED_NOTE if prop.get("interpreted") else (S.speedup_phrase(prop) or "faster")
        lines = [f"# KernelBand: found variant of {kernel} ({what})"]
        lines += [f"# {r['label']}: {r['value']}" for r in prop.get("evidence") or []]
        path = E.write_review_file(kernel, "\n".join(lines) + "\n" + str(prop.get("diff") or ""))
        if self._cap("window", "show_document", "support"):
            try:
                await asyncio.wait_for(self.ls.window_show_document_async(types.ShowDocumentParams(
                    uri=from_fs_path(path) or path, take_focus=True)), timeout=10)
            except Exception as e:
                log.info("window/showDocument: %s", e)
        try:
            choice = await asyncio.wait_for(self.ls.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Info, message=f"Apply the KernelBand variant of {kernel} ({what})? Diff: {path}",
                actions=[types.MessageActionItem(title="Apply"), types.MessageActionItem(title="Discard")])),
                timeout=600)
        except Exception as e:
            return {"applied": False, "message": f"no answer: {e}", "diffFile": path}
        if getattr(choice, "title", None) != "Apply":
            return {"applied": False, "message": "discarded", "diffFile": path}
        out = await self.apply_variant(args)
        out["diffFile"] = path
        return out

    async def create_harness(self, args: dict) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return {"applied": False, "message": "expected arguments {uri, kernel}"}
        a = await self.analysis(uri)
        if a is None or not a.parsed:
            return {"applied": False, "message": "the file does not parse"}
        k = a.detection.kernel(kernel)
        if k is None:
            return {"applied": False, "message": f"no Triton kernel named {kernel!r}"}
        offset, text = L.stub_insertion(a, k)
        edit = E.workspace_edit(uri, a.version, a.text, [E.Hunk(offset, offset, text)], self.encoding,
                                self.supports_document_changes)
        return await self._apply(edit, f"KernelBand: harness for {kernel}")

    async def _apply(self, edit: types.WorkspaceEdit, label: str) -> dict:
        try:
            res = await asyncio.wait_for(
                self.ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label)), timeout=30)
        except asyncio.TimeoutError:
            return {"applied": False, "message": "the editor did not answer workspace/applyEdit"}
        except Exception as e:
            return {"applied": False, "message": f"workspace/applyEdit failed: {e}"}
        applied = bool(getattr(res, "applied", False))
        reason = getattr(res, "failure_reason", None)
        return {"applied": applied, "message": "applied" if applied else (reason or "the editor refused the edit")}

    def cancel(self, args: Any) -> dict:
        """kernelband.cancel: {jobId}; {uri, kernel[, kind]} (that kernel's running and queued
        jobs: a client that cancelled before it learnt the job id); none: every job."""
        job_id = args.get("jobId") if isinstance(args, dict) else (args if isinstance(args, str) else None)
        if job_id is None and isinstance(args, dict) and isinstance(args.get("uri"), str) and isinstance(args.get("kernel"), str):
            kind = args.get("kind") if args.get("kind") in (OPTIMIZE, PROFILE) else None
            out: list[str] = []
            for job in self.jobs_for(args["uri"], args["kernel"], kind):
                out.extend(self.jobs.cancel(job.id))
            return {"cancelled": out}
        if job_id is not None and (not isinstance(job_id, str) or not job_id):
            return {"cancelled": [], "error": f"jobId must be a string, not {type(job_id).__name__}"}
        return {"cancelled": self.jobs.cancel(job_id)}

    def jobs_for(self, uri: str, kernel: str, kind: Optional[str] = None) -> list[Job]:
        """Unfinished jobs on (uri, kernel), matched by uri or by file path."""
        path = to_fs_path(uri)
        path = os.path.abspath(path) if path else None
        return [j for j in self.jobs.jobs() if j.spec.kernel == kernel and (kind is None or j.spec.kind == kind)
                and (j.spec.uri == uri or (path is not None and j.spec.path == path))]

    def status(self) -> dict:
        import sys

        return {
            "version": self.ls.version, "pid": os.getpid(),
            "jobs": [j.summary() for j in self.jobs.jobs(include_finished=True)],
            "settings": _redacted(self.settings.to_dict()),
            "torchLoaded": "torch" in sys.modules, "tritonLoaded": "triton" in sys.modules,
            "watching": self.background.watching, "jobCommand": self.jobs.command_prefix,
        }

    # ================================================================== background
    def _has_harness(self, a: Analysis, kernel: str) -> bool:
        return a.harness(kernel, self.settings.harness.get(kernel)).found

    def _already_done(self, a: Analysis, kernel: str) -> bool:
        res = self.store.result(a.path, kernel)
        return bool(res and res.get("original_hash") == a.hash and res.get("status") in (*S.FOUND_STATUSES, "no_improvement"))

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

    # ================================================================== job plumbing
    async def _begin_progress(self, job: Job, token: Any) -> None:
        if token is None and self.supports_progress:
            token = f"kernelband-{job.id}-{os.getpid()}"
            try:
                await asyncio.wait_for(self.ls.work_done_progress.create_async(token), timeout=10)
            except Exception as e:
                log.info("could not create a progress token: %s", e)
                token = None
        if token is None:
            return
        if job.finished:
            return
        self._token_job[token] = job.id
        self._job_token[job.id] = token
        verb = "Optimizing" if job.spec.kind == OPTIMIZE else "Profiling"
        title = f"KernelBand: {verb} {job.spec.kernel}" + (" (background)" if job.spec.background else "")
        msg = self._job_line(job)
        self.ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True,
                                                                            message=msg, percentage=0))
        self._job_pct[job.id] = 0

    def progress_cancelled(self, token: Any) -> None:
        job_id = self._token_job.get(token)
        if job_id is not None:
            self.jobs.cancel(job_id)

    def _report(self, job: Job, message: str, pct: Optional[float] = None) -> None:
        token = self._job_token.get(job.id)
        if token is None:
            return
        p = None
        if pct is not None:
            p = max(self._job_pct.get(job.id, 0), min(100, int(pct)))
            self._job_pct[job.id] = p
        self.ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=message, percentage=p,
                                                                               cancellable=True))

    def _notify_event(self, job: Job, ev: Event, synthetic: bool = False) -> None:
        payload = {"jobId": job.id, "uri": job.spec.uri, "kernel": job.spec.kernel, "kind": job.spec.kind,
                   "background": job.spec.background, "pid": job.pid,
                   "event": {"type": ev.type, "t": ev.t, **ev.data}}
        if synthetic:
            payload["synthetic"] = True
        try:
            self.ls.protocol.notify(JOB_EVENT, payload)
        except Exception as e:  # pragma: no cover
            log.debug("jobEvent notification failed: %s", e)

    def _on_job_event(self, job: Job, ev: Event) -> None:
        self._notify_event(job, ev)
        d = ev.data
        if ev.type == "started":
            if job.spec.kind == PROFILE or not d.get("generator"):
                self._report(job, "started", 0)  # a profile job has no generator or budget
            else:
                self._report(job, f"started ({d.get('generator')} generator, budget {_budget_text(d.get('budget'))})", 0)
        elif ev.type == "baseline":
            ms = S.num(d.get("time_ms"))
            self._report(job, f"baseline {S.fmt_ms(ms)} ({d.get('clock', '')})" if ms is not None else "baseline measured")
        elif ev.type == "candidate":
            sp = S.num(d.get("speedup"))
            self._report(job, f"#{d.get('index', '?')} {d.get('strategy') or ''}: {d.get('status', '?')}"
                              + (f" {sp:.2f}x" if sp is not None else ""))
        elif ev.type == "progress":
            self._schedule_lens_refresh()
            done, total = S.num(d.get("done")), S.num(d.get("total"))
            pct = 100.0 * done / total if done is not None and total else None
            best = S.num(d.get("best_speedup"))
            msg = d.get("message") or (f"{int(done or 0)}/{int(total or 0)} evaluated" + (f" · best {best:.2f}x" if best else ""))
            self._report(job, msg, pct)
        elif ev.type == "log":
            # the kernelband/jobEvent above carries it to the client's job log; a server log
            # line too would show it twice (issue 14, defect 3): only warnings are repeated
            lvl = str(d.get("level", "info")).lower()
            (log.warning if lvl in ("warning", "error") else log.debug)("%s: %s", job.id, d.get("message", ""))

    def _on_job_state(self, job: Job) -> None:
        self._schedule_lens_refresh()
        if not job.finished:
            if job.state == RUNNING and job.pid:
                self._report(job, "running")
            return
        if job.state in (CANCELLED, SUPERSEDED, FAILED):
            if job.spec.kind == OPTIMIZE and job.result is not None:
                self._notify_event(job, Event("result", {"result": job.result}), synthetic=True)
            elif job.state != DONE:
                self._notify_event(job, Event("error", {"message": job.error or job.state, "kind": job.state}),
                                   synthetic=True)
        token = self._job_token.pop(job.id, None)
        if token is not None:
            self._token_job.pop(token, None)
            self._job_pct.pop(job.id, None)
            end_msg = self._end_message(job)
            try:
                self.ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=end_msg))
            except Exception:
                pass
            self.ls.work_done_progress.tokens.pop(token, None)
        if job.state == DONE and job.spec.kind == OPTIMIZE:
            res = job.result or {}
            if S.has_variant(res):
                fv = self._found_from_job(job)
                self.found[(job.spec.path, job.spec.kernel)] = fv
                if job.spec.background:
                    sp = S.num(res.get("speedup"))
                    if sp is not None and sp >= self.settings.min_speedup:
                        log.info("background: %s %.2fx faster (%s)", job.spec.kernel, sp, job.id)
                    self._refresh_variant_diags(fv.uri)
            self.store.invalidate()
        elif job.state == DONE:
            if job.spec.kind == PROFILE and job.profile is not None:
                from .documents import text_hash

                self.profiles[(job.spec.path, job.spec.kernel)] = (text_hash(job.spec.source), job.profile)
            self.store.invalidate()

    def _refresh_variant_diags(self, uri: str) -> None:
        async def go() -> None:
            a = await self.analysis(uri)
            if a is not None and a.parsed:
                self._on_analysed(a)

        self._spawn(go())

    def _end_message(self, job: Job) -> str:
        if job.state == CANCELLED:
            return "cancelled"
        if job.state == SUPERSEDED:
            return "superseded by a newer save"
        if job.state == FAILED:
            return f"failed: {job.error}"
        if job.spec.kind == PROFILE:
            return "profile ready"
        res = job.result or {}
        if res.get("status") in S.FOUND_STATUSES and is_interpreted(res):
            return f"found a variant: {INTERPRETED_NOTE}"
        if res.get("status") == "improved":
            return f"{S.speedup_phrase(res)} faster variant found"
        if res.get("status") == "no_improvement":
            return "no faster variant found"
        return str(res.get("message") or res.get("status") or "done")

    def _schedule_lens_refresh(self) -> None:
        if not self.supports_lens_refresh or self._lens_refresh_pending:
            return
        self._lens_refresh_pending = True

        async def go() -> None:
            await asyncio.sleep(0.2)
            self._lens_refresh_pending = False
            try:
                await asyncio.wait_for(self.ls.workspace_code_lens_refresh_async(None), timeout=10)
            except Exception as e:
                log.debug("codeLens/refresh: %s", e)

        asyncio.get_running_loop().create_task(go())

    async def shutdown(self) -> None:
        shutdown_detector()
        self.background.unwatch()
        await self.jobs.shutdown()
        self.store.close()


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


def _budget_text(b: Any) -> str:
    if isinstance(b, dict):
        parts = [f"{k} {v}" for k, v in b.items() if v]
        return ", ".join(parts) or "none"
    return str(b) if b is not None else "?"


def _redacted(d: dict) -> dict:
    return {k: ("***" if "key" in k.lower() or "secret" in k.lower() or "token" == k.lower() else v) for k, v in d.items()}

