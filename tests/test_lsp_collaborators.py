"""Collaborators of the language service tested alone: each built with fakes of only
what it depends on (its constructor says what that is), real objects where cheap."""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from typing import Optional

from lsprotocol import types
from pygls.workspace import Workspace

from helpers.paths import example_source
from kernelband.model import Result
from kernelband_lsp import lenses as L
from kernelband_lsp.documents import analyse
from kernelband_lsp.jobmodel import DONE, OPTIMIZE, Job, JobSpec
from kernelband_lsp.service_client import Client
from kernelband_lsp.service_documents import OpenDocuments
from kernelband_lsp.service_variants import FoundVariants

KERNEL = "axpy_kernel"
URI = "file:///ws/add_scale.py"
TEXT = example_source("add_scale.py")
VARIANT = TEXT.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")


class FakeLs:
    """The pygls server as far as a Client uses it, with a real workspace: the editor holds
    TEXT at version 3 (``open_text=True``) or nothing."""

    def __init__(self, open_text: bool = False) -> None:
        self.client_capabilities = None
        self.workspace = Workspace(None)
        if open_text:
            self.workspace.put_text_document(types.TextDocumentItem(uri=URI, language_id="python", version=3, text=TEXT))
        self.published: list[types.PublishDiagnosticsParams] = []

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None:
        self.published.append(params)


class FakeVariants:
    """What OpenDocuments uses of FoundVariants: the diagnostics of one pending find."""

    def __init__(self, found: list[types.Diagnostic]) -> None:
        self.found = found

    def diagnostics(self, a) -> list[types.Diagnostic]:
        return self.found


class FakeStore:
    """What FoundVariants uses of StoreView: one stored Result (or none)."""

    def __init__(self, result: Optional[Result]) -> None:
        self.stored = result

    def abspath(self, path: str) -> str:
        return path

    def result(self, path: str, kernel: str) -> Optional[Result]:
        return self.stored


def stored(**change) -> Result:
    return dataclasses.replace(Result(
        status="improved", kernel=KERNEL, session_id="s1", original_hash=hashlib.sha256(TEXT.encode()).hexdigest(),
        speedup=4.14, speedup_ci=[3.9, 4.3], speed_claim=True, applicable=True, clock="cuda-events",
        best_source=VARIANT), **change)


def variants(result: Optional[Result], min_speedup: Optional[float] = None) -> FoundVariants:
    client = Client(FakeLs(open_text=True))  # real: settings, capabilities and the editor's text are read
    if min_speedup is not None:
        client.settings = dataclasses.replace(client.settings, min_speedup=min_speedup)
    return FoundVariants(client, FakeStore(result))


def analysis(text: str = TEXT, path: str = "/ws/add_scale.py"):
    return analyse(URI, path, text, 3)


def test_found_variants_offer_what_the_engine_found_applicable():
    fv = variants(stored())
    a = analysis()
    offered = fv.offer(a, KERNEL)
    assert offered is not None and offered.job_id == "s1" and offered.source == VARIANT
    assert fv.diagnostics(a) == []  # not a background find
    assert fv.lookup(URI, KERNEL) == offered  # a command finds it from the editor's text
    assert fv.offer(analysis(VARIANT), KERNEL) is None  # applied: the text already is the variant
    assert fv.offer(a, KERNEL) is not None  # and offered again after an undo


def test_found_variants_refuse_what_the_rule_refuses_but_keep_it_for_review():
    a = analysis()
    for result, floor in ((stored(applicable=False), None),  # the engine's verdict
                          (stored(), 4.0),  # the CI's lower bound (3.9) under this editor's floor
                          (stored(interpreted=True, clock="cpu-interpreter", speed_claim=False), None)):  # --cpu-tuning
        fv = variants(result, floor)
        assert fv.offer(a, KERNEL) is None, (result, floor)
        assert fv.reviewable(a, KERNEL) is not None


def test_a_background_find_becomes_a_diagnostic_and_an_edit_on_the_current_text():
    fv = variants(None)
    a = analysis()
    assert fv.offer(a, KERNEL) is None and fv.diagnostics(a) == []
    job = Job(id="j1", spec=JobSpec(kind=OPTIMIZE, path=a.path, kernel=KERNEL, source=TEXT, uri=a.uri, version=3,
                                    background=True), state=DONE, result=stored(session_id="j1"))
    fv.remember(job)
    diags = fv.diagnostics(a)
    assert [d.code for d in diags] == [L.CODE_VARIANT]
    reply = fv.edit_for_result(job)
    assert reply["editVersion"] == 3 and reply["edit"] is not None


def test_open_documents_publish_their_diagnostics_then_each_source_once(tmp_path):
    ls = FakeLs()
    found = types.Diagnostic(range=types.Range(start=types.Position(line=0, character=0),
                                               end=types.Position(line=0, character=1)), message="found")
    docs = OpenDocuments(Client(ls), FakeVariants([found]))
    path = tmp_path / "add_scale.py"
    text = TEXT[: TEXT.index("def harness_axpy")]  # no harness: one diagnostic of the documents' own
    a = analyse(path.as_uri(), str(path), text, 1)
    docs.publish_analysed(a)
    docs.publish_analysed(a)  # nothing changed: nothing sent
    assert len(ls.published) == 1
    sent = ls.published[0].diagnostics
    assert sent[0].code == L.CODE_NO_HARNESS and sent[-1] is found
    docs.did_close(a.uri)  # a source's diagnostics stay after the file closes (a pending variant)
    assert len(ls.published) == 2 and ls.published[1].diagnostics == [found]


def test_open_documents_take_the_encoding_and_debounce_from_the_clients_settings():
    client = Client(FakeLs())
    docs = OpenDocuments(client, FakeVariants([]))
    client.encoding = "utf-8"
    client.settings = dataclasses.replace(client.settings, debounce_ms=40)
    change = asyncio.run(client.refresh_settings())  # no workspace/configuration support: what it holds
    docs.settings_applied(change)
    assert docs.docs.encoding == "utf-8" and docs.docs.debounce_s == 0.04
