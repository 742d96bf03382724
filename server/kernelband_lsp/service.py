"""The language service behind the LSP handlers (server.py stays thin): collaborators,
each its own class in its own module, wired here in the one order they depend on:

    Client <- FoundVariants <- OpenDocuments <- JobRunner <- BackgroundOptimizer
           <- Reverifier <- Features <- CodeActions

Each gets the collaborators below it in its constructor, holds and calls only those, and
hands none of them a callback of its own: calls go down, never back up
(tests/test_service_layers.py reads the modules and builds each one alone). What spans
several collaborators is sequenced here, from the top: new settings go to the documents
and the background optimizer, and a command that starts a job first pulls the editor's
settings.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .documents import shutdown_detector
from .service_actions import CodeActions
from .service_background import BackgroundOptimizer
from .service_client import Client, SettingsChange
from .service_documents import OpenDocuments
from .service_features import Features
from .service_jobs import JobRunner
from .service_variants import FoundVariants
from .service_verify import Reverifier
from .settings import Settings
from .storeview import StoreView


class KernelBandService:
    def __init__(self, ls: LanguageServer) -> None:
        self.store = StoreView()
        self.client = Client(ls)
        self.variants = FoundVariants(self.client, self.store)
        self.documents = OpenDocuments(self.client, self.variants)
        self.jobs = JobRunner(self.client, self.documents, self.variants, self.store)
        self.background = BackgroundOptimizer(self.client, self.documents, self.jobs, self.store)
        self.verifier = Reverifier(self.client, self.documents, self.variants, self.jobs, self.store)
        self.features = Features(self.client, self.documents, self.variants, self.jobs, self.verifier, self.store)
        self.actions = CodeActions(self.client, self.documents, self.variants, self.features)
        # what the handlers call
        self.did_open = self.documents.did_open
        self.did_change = self.documents.did_change
        self.did_save = self.background.did_save
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
        self.cancel = self.jobs.cancel
        self.progress_cancelled = self.jobs.progress_cancelled

    # ================================================================== settings
    def initialize(self, params: types.InitializeParams) -> None:
        self._settings_applied(self.client.initialize(params))

    async def refresh_settings(self) -> Settings:
        change = await self.client.refresh_settings()
        self._settings_applied(change)
        return change.new

    def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        pushed = self.client.pushed_settings(params)
        if pushed is not None:
            self._settings_applied(pushed)
        else:
            self.documents.spawn(self.refresh_settings())

    def _settings_applied(self, change: SettingsChange) -> None:
        self.documents.settings_applied(change)
        self.background.settings_applied(change)

    # ================================================================== commands that start a job
    async def run_job(self, kind: str, args: dict, token: Optional[types.ProgressToken] = None) -> dict:
        await self.refresh_settings()  # a job runs with the settings the editor holds now
        return await self.jobs.run_job(kind, args, token)

    async def reverify(self, args: dict, token: Optional[types.ProgressToken] = None) -> dict:
        await self.refresh_settings()
        return await self.verifier.reverify(args, token)

    def status(self) -> dict:
        return {
            "version": self.client.ls.version,
            "pid": os.getpid(),
            "jobs": [j.summary() for j in self.jobs.manager.jobs(include_finished=True)],
            "settings": _redacted(self.client.settings.to_dict()),
            "torchLoaded": "torch" in sys.modules,
            "tritonLoaded": "triton" in sys.modules,
            "watching": self.background.watching,
            "jobCommand": self.jobs.manager.command_prefix,
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
    return {
        k: ("***" if "key" in k.lower() or "secret" in k.lower() or "token" == k.lower() else v) for k, v in d.items()
    }
