"""The editor at the other end of the connection: its capabilities, the settings it gives
(workspace/configuration, initializationOptions, didChangeConfiguration), the text it
holds, and the requests every part of the service sends it (lens refresh,
workspace/applyEdit)."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import edits as E
from .documents import warm_detector
from .settings import SECTION, Settings, describe_changes, parse_settings, secret_from

log = logging.getLogger("kernelband_lsp")


@dataclass(frozen=True)
class SettingsChange:
    """Settings as they were and as they are now applied (equal when nothing changed): what
    the service hands the collaborators that act on a change (service.py)."""

    old: Settings
    new: Settings


class Client:
    """The lowest collaborator: it calls none of the others and holds none of their callbacks."""

    def __init__(self, ls: LanguageServer) -> None:
        # typed as pygls's server, not server.py's subclass: server.py builds the service,
        # so naming its class here would be an import circle
        self.ls = ls
        self.init_settings = Settings()
        self.settings = Settings()
        self.secret: Optional[str] = None
        self.encoding = "utf-16"
        self.client_name = ""
        self._lens_refresh_pending = False

    # ================================================================== capabilities
    def cap(self, *path: str) -> bool:
        """Whether the client said it has the capability at this path."""
        try:
            obj: object = self.ls.client_capabilities or types.ClientCapabilities()
        except Exception:
            return False
        for p in path:
            obj = getattr(obj, p, None)
        return bool(obj)

    @property
    def supports_configuration(self) -> bool:
        return self.cap("workspace", "configuration")

    # ================================================================== settings
    def initialize(self, params: types.InitializeParams) -> SettingsChange:
        enc = getattr(self.ls.workspace, "position_encoding", None)
        self.encoding = str(getattr(enc, "value", enc) or "utf-16")
        opts = params.initialization_options
        # the VS Code extension reviews variants in its own diff view; other clients get a
        # server-driven review (window/showDocument + window/showMessageRequest)
        self.client_name = str(getattr(params.client_info, "name", "") or "")
        old = self.settings
        self.init_settings, problems = parse_settings(opts)
        self.secret = secret_from(opts)
        self.settings = self.init_settings
        for p in problems:
            log.warning(p)
        log.info("kernelband-lsp initialised (pid %d, position encoding %s)", os.getpid(), self.encoding)
        warm_detector()
        return SettingsChange(old, self.settings)

    async def refresh_settings(self) -> SettingsChange:
        """The settings the editor holds now (workspace/configuration), where it can say."""
        old = self.settings
        if self.supports_configuration:
            try:
                res = await asyncio.wait_for(
                    self.ls.workspace_configuration_async(
                        types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                    ),
                    timeout=5.0,
                )
                raw = res[0] if isinstance(res, (list, tuple)) and res else None
                new, problems = parse_settings(raw, self.init_settings)
                for p in problems:
                    log.warning(p)
                if new != old:
                    log.info("settings changed: %s", describe_changes(old, new))
                self.settings = new
            except asyncio.TimeoutError:
                log.warning("workspace/configuration: no answer in 5 s; keeping the current settings")
            except Exception as e:
                log.warning("workspace/configuration failed: %s", e)
        return SettingsChange(old, self.settings)

    def pushed_settings(self, params: types.DidChangeConfigurationParams) -> Optional[SettingsChange]:
        """didChangeConfiguration: the settings it carries, from a client that cannot be
        asked for them; None when they are to be pulled (``refresh_settings``)."""
        raw = params.settings
        if not (raw and isinstance(raw, dict) and not self.supports_configuration):
            return None
        old = self.settings
        self.settings, problems = parse_settings(raw, self.init_settings)
        for p in problems:
            log.warning(p)
        return SettingsChange(old, self.settings)

    # ================================================================== the editor's text
    def is_open(self, uri: str) -> bool:
        return uri in self.ls.workspace.text_documents

    def text_of(self, uri: str, path: str) -> tuple[Optional[str], Optional[int]]:
        """(text, version) as the editor holds it, else as on disk (version None)."""
        if self.is_open(uri):
            doc = self.ls.workspace.get_text_document(uri)
            return doc.source, doc.version
        try:
            with open(path, encoding="utf-8", newline="") as f:
                return f.read(), None
        except (OSError, UnicodeDecodeError):
            return None, None

    def workspace_folders(self) -> list[str]:
        try:
            ws = self.ls.workspace
        except RuntimeError:
            return []
        out = [p for f in (ws.folders or {}).values() if (p := to_fs_path(f.uri))]
        return out or ([ws.root_path] if ws.root_path else [])

    # ================================================================== requests to the client
    def refresh_lenses(self) -> None:
        """Ask the client to request lenses and inlay hints again (a job's progress, a new
        profile or result, a document's first analysis): at most one request pair per 0.2 s."""
        lens = self.cap("workspace", "code_lens", "refresh_support")
        inlay = self.cap("workspace", "inlay_hint", "refresh_support")
        if not (lens or inlay) or self._lens_refresh_pending:
            return
        self._lens_refresh_pending = True

        async def go() -> None:
            await asyncio.sleep(0.2)
            self._lens_refresh_pending = False
            for wanted, send, what in (
                (lens, self.ls.workspace_code_lens_refresh_async, "codeLens"),
                (inlay, self.ls.workspace_inlay_hint_refresh_async, "inlayHint"),
            ):
                if not wanted:
                    continue
                try:
                    await asyncio.wait_for(send(None), timeout=10)
                except Exception as e:
                    log.debug("%s/refresh: %s", what, e)

        asyncio.get_running_loop().create_task(go())

    def workspace_edit(self, uri: str, version: Optional[int], text: str, hunks: list[E.Hunk]) -> types.WorkspaceEdit:
        """An edit of this text, versioned where the client takes document changes."""
        return E.workspace_edit(
            uri, version, text, hunks, self.encoding, self.cap("workspace", "workspace_edit", "document_changes")
        )

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> dict:
        try:
            res = await asyncio.wait_for(
                self.ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label)), timeout=30
            )
        except asyncio.TimeoutError:
            return {"applied": False, "message": "the editor did not answer workspace/applyEdit"}
        except Exception as e:
            return {"applied": False, "message": f"workspace/applyEdit failed: {e}"}
        applied = bool(getattr(res, "applied", False))
        reason = getattr(res, "failure_reason", None)
        return {"applied": applied, "message": "applied" if applied else (reason or "the editor refused the edit")}
