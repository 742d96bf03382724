"""A real candidate's profile, followed from the variant process to the hover with one type.

The engine evaluates a candidate under Triton's interpreter (a real worker and variant
process); the judge's reply carries the profile the variant process built, decoded once
into a ``kernelband.profile.schema.Profile``. The session's pool keeps that object, the
store writes it (real SQLite), the language server's store view decodes the row once at
its boundary, the per-kernel status holds that same object, and the hover card is the
engine's renderer's text of it, in the service (in process) and as a real language
server answers a real client."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from helpers.kernels import AXPY, AXPY_LAUNCH, axpy_task
from helpers.lsp import hover, name_pos, start_session
from kernelband.evaluate import Evaluator
from kernelband.harness import harness_hash
from kernelband.model import Status, Variant
from kernelband.profile import render
from kernelband.profile.schema import Profile
from kernelband.session_config import SessionConfig
from kernelband.session_pool import CandidatePool, Platform
from kernelband.store import ProfileKey, Store
from kernelband_lsp import hover as H
from kernelband_lsp.service_client import Client
from kernelband_lsp.service_documents import OpenDocuments
from kernelband_lsp.service_features import Features
from kernelband_lsp.service_jobs import JobRunner
from kernelband_lsp.service_variants import FoundVariants
from kernelband_lsp.service_verify import Reverifier
from kernelband_lsp.storeview import StoreView

KERNEL = "axpy_kernel"
# the candidate: a larger block, so its profile (3 programs, not 24) is told apart from the original's
CANDIDATE = AXPY.replace(AXPY_LAUNCH, AXPY_LAUNCH.replace("128", "1024"))


class EditorSide:
    """The pygls server as far as the service's collaborators use it: a real workspace
    holding the candidate's text, and no client capabilities (no requests back)."""

    def __init__(self, uri: str, text: str) -> None:
        self.client_capabilities = None
        self.workspace = Workspace(None)
        self.workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))


def features_over(store: StoreView, uri: str, text: str) -> Features:
    """The service's collaborators up to Features, as service.py wires them."""
    client = Client(EditorSide(uri, text))
    variants = FoundVariants(client, store)
    documents = OpenDocuments(client, variants)
    jobs = JobRunner(client, documents, variants, store)
    return Features(client, documents, variants, jobs, Reverifier(client, documents, variants, jobs, store), store)


async def test_a_candidates_profile_reaches_the_hover_as_one_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\n", encoding="utf-8")
    task = axpy_task(ws, AXPY)

    # the variant process builds it, the judge replies with it, the evaluator decodes it once
    with Evaluator(task) as evaluator:
        assert evaluator.prepare(time_it=False).ok
        ev = evaluator.evaluate(Variant(CANDIDATE), profile_tier=2)
    assert ev.status == Status.OK, ev.message
    built = ev.profile
    assert isinstance(built, Profile) and built.kernel == KERNEL and built.interpreted
    assert built.launch is not None and built.launch.grid == [3] and built.launch.constexprs["BLOCK_SIZE"] == 1024
    assert built.tiers.timing is not None and built.tiers.timing.bytes_written == 4 * 3001
    assert Profile.from_dict(built.to_dict()) == built  # its wire form loses nothing

    # the session's pool keeps that object for the generator and the bandit
    pool = CandidatePool(task, SessionConfig(), None, Platform("cpu", "3"), lambda note: None)
    candidate = Variant(CANDIDATE)
    assert ev.time_ms is not None
    pool.candidate(candidate, ev.time_ms, built, None)
    assert pool.profiles[candidate.id] is built

    # the candidate is applied: the file now holds its text, and its profile is stored as the
    # session stores one (keyed by the text's hash)
    path = Path(task.module_path)
    path.write_text(CANDIDATE, encoding="utf-8")
    digest = hashlib.sha256(CANDIDATE.encode("utf-8")).hexdigest()
    with Store.for_workspace(ws) as st:
        st.put_profile(ProfileKey(digest, harness_hash(task), "cpu", "3", KERNEL), pool.profiles[candidate.id],
                       file=str(path))

    # the language server: decoded once at its boundary, then the same object at every stop
    shown: list[Profile] = []

    def engine_card(p: Profile) -> str:
        shown.append(p)
        return render.profile_card_markdown(p)

    monkeypatch.setattr(H, "profile_card_markdown", engine_card)  # the renderer the hover imports, watched
    uri = path.as_uri()
    view = StoreView()
    try:
        stored, exact = view.profile(str(path), KERNEL, digest)
        assert isinstance(stored, Profile) and exact and stored == built
        assert view.profile(str(path), KERNEL, digest)[0] is stored  # not decoded again
        features = features_over(view, uri, CANDIDATE)
        a = await features.documents.analysis(uri)
        assert a is not None
        (k,) = a.kernels
        status = features.kernel_status(a, k)
        assert status.profile is stored and status.profile_exact
        line, col = name_pos(CANDIDATE, KERNEL)
        got = await features.hover(uri, types.Position(line=line, character=col))
    finally:
        view.close()
    assert got is not None and isinstance(got.contents, types.MarkupContent)
    in_process = got.contents.value
    assert len(shown) == 1 and shown[0] is stored  # the card is rendered from that object, once
    card = render.profile_card_markdown(stored)
    assert card in in_process and "| grid | [3] = 3 programs; BLOCK_SIZE=1024 |" in card
    assert "CPU time, interpreter" in card  # the engine's words for an interpreted time

    # a real language server shows a real client the same text
    async with start_session(ws) as (client, _editor, _rec):
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=CANDIDATE)))
        served = await hover(client, uri, line, col)  # answered once the text is analysed
    assert served is not None and isinstance(served.contents, types.MarkupContent)
    assert served.contents.value == in_process
