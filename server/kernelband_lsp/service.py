"""The language service behind the LSP handlers (server.py stays thin): collaborators,
each its own class in its own module, wired here in the one order they depend on:

    Client <- OpenDocuments <- FoundVariants <- JobRunner <- BackgroundOptimizer
           <- Reverifier <- Features <- CodeActions

Each gets the collaborators below it in its constructor and never one above it (a test
reads the modules to check). Where a lower one must tell a higher one something (new
settings, a save, the diagnostics of an analysed text) the higher one subscribes a
callback to it.
"""
from __future__ import annotations

import os
import sys

from pygls.lsp.server import LanguageServer

from .documents import shutdown_detector
from .service_actions import CodeActions
from .service_background import BackgroundOptimizer
from .service_client import Client
from .service_documents import OpenDocuments
from .service_features import Features
from .service_jobs import JobRunner
from .service_variants import FoundVariants
from .service_verify import Reverifier
from .storeview import StoreView


class KernelBandService:
    def __init__(self, ls: LanguageServer) -> None:
        self.store = StoreView()
        self.client = Client(ls)
        self.documents = OpenDocuments(self.client)
        self.variants = FoundVariants(self.client, self.documents, self.store)
        self.jobs = JobRunner(self.client, self.documents, self.variants, self.store)
        self.background = BackgroundOptimizer(self.client, self.documents, self.jobs, self.store)
        self.verifier = Reverifier(self.client, self.documents, self.variants, self.jobs, self.store)
        self.features = Features(self.client, self.documents, self.variants, self.jobs, self.verifier, self.store)
        self.actions = CodeActions(self.client, self.documents, self.variants, self.features)
        # what the handlers call
        self.initialize = self.client.initialize
        self.refresh_settings = self.client.refresh_settings
        self.did_change_configuration = self.client.did_change_configuration
        self.did_open = self.documents.did_open
        self.did_change = self.documents.did_change
        self.did_save = self.documents.did_save
        self.did_close = self.documents.did_close
        self.code_lens = self.features.code_lens
        self.hover = self.features.hover
        self.inlay_hints = self.features.inlay_hints
        self.document_symbols = self.features.document_symbols
        self.code_actions = self.actions.code_actions
        self.create_harness = self.actions.create_harness
        self.proposed_edit = self.variants.proposed_edit
        self.apply_variant = self.variants.apply_variant
        self.review_variant = self.variants.review_variant
        self.run_job = self.jobs.run_job
        self.cancel = self.jobs.cancel
        self.progress_cancelled = self.jobs.progress_cancelled
        self.reverify = self.verifier.reverify

    def status(self) -> dict:
        return {
            "version": self.client.ls.version, "pid": os.getpid(),
            "jobs": [j.summary() for j in self.jobs.manager.jobs(include_finished=True)],
            "settings": _redacted(self.client.settings.to_dict()),
            "torchLoaded": "torch" in sys.modules, "tritonLoaded": "triton" in sys.modules,
            "watching": self.background.watching, "jobCommand": self.jobs.manager.command_prefix,
        }

    async def shutdown(self) -> None:
        shutdown_detector()
        self.background.unwatch()
        await self.jobs.manager.shutdown()
        self.store.close()

    def kill_now(self) -> None:
        """The connection is gone: end every job's process tree and the watcher, without waiting."""
        self.jobs.manager.kill_now()
        self.background.unwatch()
        shutdown_detector()


def _redacted(d: dict) -> dict:
    return {k: ("***" if "key" in k.lower() or "secret" in k.lower() or "token" == k.lower() else v) for k, v in d.items()}
