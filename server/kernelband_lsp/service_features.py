"""The language service's read-only features: per-kernel status, code lenses, inlay
hints, symbols and hovers."""

from __future__ import annotations

import asyncio
from typing import Optional

from lsprotocol import types

from kernelband.harness import HarnessChoice
from kernelband.model import KernelInfo

from . import evidence as EV
from . import hover as H
from . import inlay as IH
from . import lenses as L
from . import summary as S
from .display import INTERPRETED_NOTE
from .documents import BIG_TEXT_LINES, Analysis, partial_analysis
from .service_client import Client
from .service_documents import OpenDocuments
from .service_jobs import JobRunner
from .service_variants import FoundVariants, is_interpreted
from .service_verify import Reverifier
from .storeview import StoreView


class Features:
    """Lenses, inlay hints, symbols and hovers: each kernel's status, read from the parts below."""

    def __init__(
        self,
        client: Client,
        documents: OpenDocuments,
        variants: FoundVariants,
        jobs: JobRunner,
        verifier: Reverifier,
        store: StoreView,
    ) -> None:
        self.client = client
        self.documents = documents
        self.variants = variants
        self.jobs = jobs
        self.verifier = verifier
        self.store = store

    # ================================================================== per-kernel status
    def kernel_status(self, a: Analysis, k: KernelInfo) -> L.KernelStatus:
        src = a.source or a
        h = HarnessChoice(None, reason=H.ANALYSING) if a.partial else self.documents.harness(a, k.name)
        profile, exact = self.store.profile(a.path, k.name, src.hash)
        mem = self.jobs.profiles.get((self.store.abspath(a.path), k.name))
        measured_on = None if exact else self.store.profile_source_hash(a.path, k.name)
        if mem is not None and (profile is None or (not exact and mem.module_hash == src.hash)):
            profile, exact, measured_on = mem.profile, mem.module_hash == src.hash, mem.module_hash
        if profile is not None and not exact and measured_on in self.jobs.code_hashes:
            # the text moved on but not its code (a comment, a trailing space): still this version's profile
            exact = (
                self.jobs.code_hashes[measured_on] is not None and self.jobs.code_hashes[measured_on] == src.code_hash
            )
        result = self.store.result(a.path, k.name)
        st = L.KernelStatus(
            kernel=k, harness=h, profile=profile, profile_exact=exact, result=result, module_hash=src.hash
        )
        active = self.jobs.manager.active_for(a.path, k.name)
        if active:
            j = active[0]
            st.job_id = j.id
            st.job_text = self.jobs.job_line(j)
        fv = self.variants.offer(a, k.name) if not a.partial else None
        if fv is not None:
            st.variant_speedup = f"{fv.result.speedup:.2f}x"
            if st.result is None:
                st.result = fv.result
        elif (applied := self.verifier.applied_variant(a, k.name) if not a.partial else None) is not None:
            st.applied_text = self.verifier.applied_line(a, k.name, applied[0])
        else:
            # an interpreter-verified variant: offered for review (never as a speedup), and
            # only while its changes still apply to this text
            cv = self.variants.reviewable(a, k.name)
            if cv is not None and is_interpreted(cv.result):
                st.variant_note = INTERPRETED_NOTE
                if st.result is None:
                    st.result = cv.result
        return st

    # ================================================================== LSP features
    async def code_lens(self, uri: str) -> list[types.CodeLens]:
        a = await self.documents.analysis(uri, provisional_ok=True)
        if a is None:
            return []
        if any(
            (k.name, self.client.settings.harness.get(k.name) or None) not in (a.source or a)._harness
            for k in a.kernels
        ):
            # harness look-ups read files: off the event loop, so hovers are answered meanwhile
            await asyncio.get_running_loop().run_in_executor(None, self.documents.prepare, a.source or a)
        statuses: dict[str, L.KernelStatus] = {}
        for i, k in enumerate(a.kernels):
            statuses[k.name] = self.kernel_status(a, k)
            if i % 50 == 49:
                await asyncio.sleep(0)  # a 600-kernel file: let other requests in between
        return L.code_lenses(a, lambda k: statuses.get(k.name) or self.kernel_status(a, k))

    async def inlay_hints(self, uri: str, rng: types.Range) -> list[types.InlayHint]:
        a = await self.documents.analysis(uri, provisional_ok=True)
        if a is None or not a.kernels:
            return []
        return IH.hints(a, rng, lambda k: self.kernel_status(a, k), lambda name: self.variants.offer(a, name))

    async def document_symbols(self, uri: str):
        a = await self.documents.analysis(uri, provisional_ok=True)
        if a is None:
            return []
        hierarchical = self.client.cap("text_document", "document_symbol", "hierarchical_document_symbol_support")
        return L.document_symbols(a) if hierarchical else L.symbol_information(a)

    async def hover(self, uri: str, pos: types.Position) -> Optional[types.Hover]:
        # while a large file is still being analysed (just opened), a hover on a kernel's
        # name is answered from the definition under the cursor alone
        if self.client.is_open(uri):
            doc = self.client.ls.workspace.get_text_document(uri)
            text = doc.source
            if (
                text.count("\n") >= BIG_TEXT_LINES
                and self.documents.docs.analysing(uri, text, doc.version)
                and self.documents.docs.provisional(uri, text, doc.version) is None
            ):
                part = await asyncio.get_running_loop().run_in_executor(
                    None, partial_analysis, uri, doc.path, text, doc.version, pos.line, self.client.encoding
                )
                got = self._hover_from(part, pos) if part is not None else None
                if got is not None:
                    return got
        a = await self.documents.analysis(uri, provisional_ok=True)
        return self._hover_from(a, pos)

    def _hover_from(self, a: Optional[Analysis], pos: types.Position) -> Optional[types.Hover]:
        if a is None or not a.kernels or (word := a.index.word_at(pos)) is None:
            return None
        k = a.kernel(word[0])
        if k is None:
            return None
        # on the definition's name, or on a launch `name[grid](...)`
        on_def = L.name_range(a, k).start.line == pos.line
        on_launch = any(s.range.start_line - 1 <= pos.line <= s.range.end_line - 1 for s in k.launch_sites)
        if not (on_def or on_launch):
            return None
        st = self.kernel_status(a, k)
        fv = self.variants.offer(a, k.name) if not a.partial else None
        variant_line = None
        if fv is not None:
            variant_line = (
                f"**Found:** a {S.speedup_phrase(fv.result)} faster variant is ready "
                f"(lens or quick fix *Apply found variant*: the diff first, then Apply or Discard)."
            )
        elif st.variant_note:
            variant_line = (
                f"**Found:** a variant that is {st.variant_note} (checked under the CPU interpreter). "
                f"*Review found variant* (lens or code action) shows its diff."
            )
            fv = self.variants.reviewable(a, k.name)
        applied = self.verifier.applied_variant(a, k.name) if st.applied_text else None
        if applied is not None and st.applied_text:  # applied is looked up only when there is a text
            variant_line = (
                f"**Applied:** {st.applied_text[0].lower() + st.applied_text[1:]}. *Re-verify* (lens or "
                "code action) checks the code as it stands against the original it replaced."
            )
        shown = fv or (applied[0] if applied is not None else None)
        card = H.card(
            H.CardInputs(
                kernel=k,
                profile=st.profile,
                profile_exact=st.profile_exact,
                result=st.result,
                harness=st.harness,
                job_line=st.job_text,
                variant_line=variant_line,
                stale=a.stale,
                evidence=EV.evidence_markdown(shown.result) if shown is not None else None,
            )
        )
        start = a.index.offset_to_position(word[1])
        end = a.index.offset_to_position(word[2])
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=card),
            range=types.Range(start=start, end=end),
        )
