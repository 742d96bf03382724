"""What every part of KernelBandService may use from the others, declared once.

The service is one object split into mixins (service.py lists them). A mixin uses state
that service.py's constructor sets and methods that another mixin defines; the base
class ServiceState names both so the type checker checks each mixin on its own. Its
attributes are annotations only and its methods exist only for the type checker (each is
defined for real in the module named beside it, which the checker holds to the signature
written here). The two records that state holds, FoundVariant and Reverified, live here
too: the mixins import this module, so it imports none of them.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from kernelband.model import Result

if TYPE_CHECKING:
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    from kernelband.model import KernelInfo
    from kernelband.profile.schema import Profile

    from . import edits as E
    from . import lenses as L
    from . import lints as LN
    from .background import Background
    from .display import JobDisplay
    from .documents import Analysis, Documents
    from .jobs import Job, JobManager, JobSpec
    from .settings import Settings
    from .storeview import StoreView


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
    result: Result
    background: bool

    @property
    def source(self) -> str:
        return self.result.best_source


@dataclass(frozen=True)
class Reverified:
    """The verdict of the last re-verification of a kernel, for the text it ran on."""

    text_hash: str
    passed: bool
    line: str
    job_id: str


class ServiceState:
    """The state and cross-mixin methods of KernelBandService (see the module's doc)."""

    # ---- state (set in KernelBandService.__init__; the comments there say what each holds)
    ls: LanguageServer
    init_settings: Settings
    settings: Settings
    secret: Optional[str]
    encoding: str
    docs: Documents
    _tasks: set[asyncio.Task]
    _plans: dict[tuple, E.EditPlan]
    store: StoreView
    jobs: JobManager
    found: dict[tuple[str, str], FoundVariant]
    reverified: dict[tuple[str, str], Reverified]
    _originals: dict[tuple, Optional[str]]
    profiles: dict[tuple[str, str], tuple[str, Profile]]
    code_hashes: dict[str, Optional[str]]
    harness_diags: dict[str, list[types.Diagnostic]]
    lint_diags: dict[str, list[types.Diagnostic]]
    variant_diags: dict[str, list[types.Diagnostic]]
    parse_diags: dict[str, list[types.Diagnostic]]
    _published: dict[str, list]
    _token_job: dict[Any, str]
    _job_token: dict[str, Any]
    _job_pct: dict[str, int]
    _job_reported: dict[str, float]
    _tickers: dict[str, asyncio.Task]
    _displays: dict[str, JobDisplay]
    background: Background
    _lens_refresh_pending: bool
    client_name: str

    if TYPE_CHECKING:
        # ---- service_settings.py
        @property
        def supports_progress(self) -> bool: ...
        @property
        def supports_document_changes(self) -> bool: ...
        @property
        def supports_lens_refresh(self) -> bool: ...
        @property
        def supports_inlay_refresh(self) -> bool: ...
        @property
        def hierarchical_symbols(self) -> bool: ...
        def _cap(self, *path: str) -> Any: ...
        async def refresh_settings(self) -> Settings: ...

        # ---- service_documents.py
        async def analysis(self, uri: str, provisional_ok: bool = False) -> Optional[Analysis]: ...
        def _prepare(self, a: Analysis) -> None: ...
        def is_open(self, uri: str) -> bool: ...
        def _republish_all(self) -> None: ...
        def _on_disk_change(self, path: str) -> None: ...
        def _refresh_variant_diags(self, uri: str) -> None: ...
        def _schedule_lens_refresh(self) -> None: ...

        # ---- service_features.py
        def kernel_status(self, a: Analysis, k: KernelInfo) -> L.KernelStatus: ...

        # ---- service_actions.py
        def _lint_diagnostic(self, a: Analysis, f: LN.Finding) -> types.Diagnostic: ...

        # ---- service_variants.py
        def offer(self, a: Analysis, kernel: str) -> Optional[FoundVariant]: ...
        def reviewable(self, a: Analysis, kernel: str) -> Optional[FoundVariant]: ...
        def _cached_plan(self, fv: FoundVariant, a: Analysis, undo: bool = False) -> E.EditPlan: ...
        def _found_from_job(self, job: Job) -> FoundVariant: ...
        def _edit_for_result(self, job: Job) -> dict: ...

        # ---- service_verify.py
        def applied_variant(self, a: Analysis, kernel: str) -> Optional[tuple[FoundVariant, str]]: ...
        def applied_line(self, a: Analysis, kernel: str, fv: FoundVariant) -> str: ...

        # ---- service_jobs.py
        def _spec(self, kind: str, a: Analysis, kernel: str, settings: Settings, background: bool) -> JobSpec: ...
        async def _run_to_end(self, job: Job, token: Any) -> Job: ...
        def _job_line(self, j: Job) -> str: ...
        async def _begin_progress(self, job: Job, token: Any) -> None: ...
