"""Background optimization: jobs queued on save and for files changed on disk while the
setting is on (background.py decides which kernels of a text to queue). Saves come here
first: the documents analyse the saved text, then its kernels may be queued."""

from __future__ import annotations

import asyncio
import logging

from pygls.uris import from_fs_path

from kernelband.model import FOUND_STATUSES, ResultStatus

from .background import Background
from .documents import Analysis
from .jobs import OPTIMIZE
from .service_client import Client, SettingsChange
from .service_documents import OpenDocuments
from .service_jobs import JobRunner
from .storeview import StoreView

log = logging.getLogger("kernelband_lsp")
# a stored Result of the current text whose search finished: the background pass skips the kernel
SEARCHED = FOUND_STATUSES | {ResultStatus.NO_IMPROVEMENT}


class BackgroundOptimizer:
    """Told of saves and of settings changes by the service; hands nothing of its own to
    the collaborators below it."""

    def __init__(self, client: Client, documents: OpenDocuments, jobs: JobRunner, store: StoreView) -> None:
        self.client = client
        self.documents = documents
        self.jobs = jobs
        self.store = store
        self.background = Background(
            self._submit, self._already_done, lambda a, kernel: documents.harness(a, kernel).found
        )

    @property
    def watching(self) -> bool:
        return self.background.watching

    def unwatch(self) -> None:
        self.background.unwatch()

    def _already_done(self, a: Analysis, kernel: str) -> bool:
        res = self.store.result(a.path, kernel)
        return res is not None and res.original_hash == a.hash and res.status in SEARCHED

    def _submit(self, a: Analysis, kernel: str) -> bool:
        if not a.path:
            return False
        self.jobs.start(self.jobs.spec(OPTIMIZE, a, kernel, self.client.settings, background=True))
        return True

    def did_save(self, uri: str) -> "asyncio.Task[None]":
        """didSave: the documents analyse the saved text; then, with the setting on, the
        kernels it changed are queued."""
        analysed = self.documents.did_save(uri)

        async def queue() -> None:
            a = await analysed
            if self.client.settings.background_on_save:
                self.background.on_save(a)

        return self.documents.spawn(queue())

    def settings_applied(self, change: SettingsChange) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving yet (unit use): no watcher
        if change.new.background_on_save:
            self.background.watch(self.client.workspace_folders(), self._on_disk_change)
        elif self.background.watching:
            self.background.unwatch()

    def _on_disk_change(self, path: str) -> None:
        self.documents.spawn(self._disk_changed(path))

    async def _disk_changed(self, path: str) -> None:
        uri = from_fs_path(path)
        if not uri or not self.client.settings.background_on_save:
            return
        try:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return
        docs = self.documents.docs
        if self.client.is_open(uri):
            doc = self.client.ls.workspace.get_text_document(uri)
            if doc.source != text:
                return  # the editor holds other (unsaved) text: its save will tell us
            a = await docs.aget(uri, doc.path, doc.source, doc.version)
        else:
            a = await docs.aget(uri, path, text, None)
            if a.parsed and a.kernels:
                self.documents.publish_analysed(a)
        if a.parsed and a.kernels:
            log.info("%s changed on disk", path)
            self.background.on_save(a)
