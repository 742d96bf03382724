"""Background optimization: on save, and for files changed on disk (watchdog).

A save queues a low-priority session for each kernel whose text changed since it was
last queued (first save: each kernel with a harness and no stored result for exactly
this text). The job manager runs one GPU job at a time and lets a newer request for
the same kernel supersede a queued one. Files changed outside the editor are noticed
through a watchdog observer on the workspace folders (started only while the setting
is on); open documents are left to the editor's own save notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from .documents import Analysis, text_hash

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

log = logging.getLogger(__name__)

IGNORED_DIRS = {
    ".kernelband",
    ".git",
    "__pycache__",
    "node_modules",
    ".venv",
    "venv",
    "site-packages",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "build",
    "dist",
    ".tox",
}

# submit(path, uri, text, version, kernel) -> queued?
Submit = Callable[[Analysis, str], bool]


class Background:
    def __init__(
        self,
        submit: Submit,
        already_done: Callable[[Analysis, str], bool],
        has_harness: Callable[[Analysis, str], bool],
        debounce_s: float = 0.5,
    ) -> None:
        self._submit = submit
        self._already_done = already_done
        self._has_harness = has_harness
        self.debounce_s = debounce_s
        self._last: dict[tuple[str, str], str] = {}  # (path, kernel) -> hash of the kernel text queued
        self._observer: Optional[BaseObserver] = None
        self._watched: list[str] = []
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.on_disk_change: Optional[Callable[[str], None]] = None

    # ------------------------------------------------------------------ saves
    def changed_kernels(self, a: Analysis) -> list[str]:
        if not a.parsed:
            return []
        out = []
        for k in a.detection.kernels:
            text = a.kernel_text(k.name)
            if text is None:
                continue
            h = text_hash(text)
            key = (a.path, k.name)
            if self._last.get(key) == h:
                continue
            first_time = key not in self._last
            self._last[key] = h
            if first_time and self._already_done(a, k.name):
                continue
            out.append(k.name)
        return out

    def on_save(self, a: Analysis) -> list[str]:
        """Queue background jobs for the kernels this save changed; returns their names."""
        queued = []
        for name in self.changed_kernels(a):
            if not self._has_harness(a, name):
                log.info("background: %s has no harness; not queued", name)
                continue
            if self._submit(a, name):
                queued.append(name)
        if queued:
            log.info("background: queued %s from %s", ", ".join(queued), os.path.basename(a.path))
        return queued

    # ------------------------------------------------------------------ watchdog
    @property
    def watching(self) -> bool:
        return self._observer is not None

    def watch(self, folders: Iterable[str], on_change: Callable[[str], None]) -> None:
        """Watch folders (recursively) for .py files written outside the editor."""
        folders = [f for f in folders if f and os.path.isdir(f)]
        if self._observer is not None and sorted(folders) == sorted(self._watched):
            return
        self.unwatch()
        if not folders:
            return
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError as e:
            log.warning("watchdog is not installed (%s): files changed on disk are not noticed", e)
            return
        self._loop = asyncio.get_running_loop()
        self.on_disk_change = on_change
        loop = self._loop
        bg = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # runs on the observer's thread
                if event.is_directory or event.event_type not in ("modified", "created", "moved", "closed"):
                    return
                path = getattr(event, "dest_path", None) if event.event_type == "moved" else event.src_path
                if isinstance(path, bytes):
                    path = os.fsdecode(path)
                if not path or not path.endswith(".py"):
                    return
                if any(part in IGNORED_DIRS for part in Path(path).parts):
                    return
                with contextlib.suppress(RuntimeError):  # loop closed during shutdown
                    loop.call_soon_threadsafe(bg._disk_event, os.path.abspath(path))

        obs = Observer()
        obs.daemon = True
        for f in folders:
            try:
                obs.schedule(Handler(), f, recursive=True)
            except OSError as e:
                log.warning("cannot watch %s: %s", f, e)
        obs.start()
        self._observer = obs
        self._watched = folders
        log.info("watching %s for files changed on disk", ", ".join(folders))

    def unwatch(self) -> None:
        obs, self._observer = self._observer, None
        self._watched = []
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        if obs is not None:
            with contextlib.suppress(Exception):  # pragma: no cover
                obs.stop()
                if threading.current_thread() is not obs:
                    obs.join(timeout=2)

    def _disk_event(self, path: str) -> None:
        if self._loop is None:
            return
        old = self._timers.pop(path, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._timers.pop(path, None)
            if self.on_disk_change is not None:
                try:
                    self.on_disk_change(path)
                except Exception:
                    log.exception("handling the change of %s failed", path)

        self._timers[path] = self._loop.call_later(self.debounce_s, fire)
