"""The server's state and behaviour behind the LSP handlers (server.py stays thin).

Holds the document analyses, the store view, the job manager, found variants and the
diagnostics published per document. Its behaviour is split by concept into mixins, one
module each: settings and capabilities (service_settings), documents and diagnostics
(service_documents), lenses/hovers/inlays (service_features), code actions
(service_actions), found variants and their edits (service_variants), the re-verification
of an applied variant (service_verify), and the progress bridge from jobs to $/progress
and notifications (service_jobs).
"""
from __future__ import annotations

import logging
import os

from pygls.lsp.server import LanguageServer


from .background import Background
from .documents import Documents, shutdown_detector
from .jobs import JobManager
from .settings import Settings
from .storeview import StoreView

from .service_actions import ActionsMixin
from .service_documents import DocumentsMixin
from .service_features import FeaturesMixin
from .service_jobs import JobsMixin
from .service_settings import SettingsMixin, _redacted
from .service_variants import INTERPRETED_NOTE, JOB_EVENT, FoundVariant, VariantsMixin, is_interpreted  # noqa: F401
from .service_verify import VerifyMixin

log = logging.getLogger("kernelband_lsp")


class KernelBandService(SettingsMixin, DocumentsMixin, FeaturesMixin, ActionsMixin, VariantsMixin, VerifyMixin,
                        JobsMixin):
    def __init__(self, ls: LanguageServer) -> None:
        # typed as pygls's server, not server.py's subclass: server.py builds this service,
        # so naming its class here would be an import circle
        self.ls = ls
        self.init_settings = Settings()
        self.settings = Settings()
        self.secret = None
        self.encoding = "utf-16"
        # harness look-ups run in the lens computation (a thread), not in every analysis:
        # a hover must not wait for all of a file's harnesses
        self.docs = Documents(on_analysed=self._on_analysed)
        self.docs.on_provisional_mismatch = lambda uri: self._schedule_lens_refresh()
        self._tasks = set()
        self._plans = {}
        self.store = StoreView()
        self.jobs = JobManager(on_event=self._on_job_event, on_state=self._on_job_state)
        self.found = {}
        # the last re-verification of an applied variant, per (path, kernel); originals rebuilt
        # from stored Results (service_verify.py)
        self.reverified = {}
        self._originals = {}
        # profiles from this session's profile jobs: (path, kernel) -> (module hash, profile);
        # shown when the store has none (e.g. a job run with --no-store)
        self.profiles = {}
        # module hash -> code hash (documents.code_hash) of the texts jobs ran on: a profile of
        # a text that differs from the current one only in comments and layout is this version's
        self.code_hashes = {}
        self.harness_diags = {}
        self.lint_diags = {}
        self.variant_diags = {}
        self.parse_diags = {}
        self._published = {}
        self._token_job = {}
        self._job_token = {}
        self._job_pct = {}
        self._job_reported = {}  # when $/progress last said something of a job
        self._tickers = {}
        self._displays = {}  # the words for each unfinished job (display.py)
        self.background = Background(self._submit_background, self._already_done, self._has_harness)
        self._lens_refresh_pending = False
        self.client_name = ""

    def status(self) -> dict:
        import sys

        return {
            "version": self.ls.version, "pid": os.getpid(),
            "jobs": [j.summary() for j in self.jobs.jobs(include_finished=True)],
            "settings": _redacted(self.settings.to_dict()),
            "torchLoaded": "torch" in sys.modules, "tritonLoaded": "triton" in sys.modules,
            "watching": self.background.watching, "jobCommand": self.jobs.command_prefix,
        }

    async def shutdown(self) -> None:
        shutdown_detector()
        self.background.unwatch()
        await self.jobs.shutdown()
        self.store.close()
