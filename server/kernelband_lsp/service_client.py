"""The editor at the other end of the connection: its capabilities, the settings it gives
(workspace/configuration, initializationOptions, didChangeConfiguration), and the requests
every part of the service sends it (lens refresh, workspace/applyEdit)."""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Callable, Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import edits as E
from .documents import warm_detector
from .settings import SECTION, Settings, describe_changes, parse_settings, secret_from

log = logging.getLogger("kernelband_lsp")

# told (old, new) each time settings are applied: at initialize and after every change
SettingsListener = Callable[[Settings, Settings], None]


class Client:
    """The lowest collaborator; parts above it subscribe to ``on_settings``."""

    def __init__(self, ls: LanguageServer) -> None:
        # typed as pygls's server, not server.py's subclass: server.py builds the service,
        # so naming its class here would be an import circle
        self.ls = ls
        self.init_settings = Settings()
        self.settings = Settings()
        self.secret: Optional[str] = None
        self.encoding = "utf-16"
        self.client_name = ""
        self.on_settings: list[SettingsListener] = []
        self._lens_refresh_pending = False

    # ================================================================== capabilities
    def cap(self, *path: str) -> Any:
        try:
            obj: Any = self.ls.client_capabilities or types.ClientCapabilities()
        except Exception:
            return None
        for p in path:
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj

    @property
    def supports_progress(self) -> bool:
        return bool(self.cap("window", "work_done_progress"))

    @property
    def supports_document_changes(self) -> bool:
        return bool(self.cap("workspace", "workspace_edit", "document_changes"))

    @property
    def supports_configuration(self) -> bool:
        return bool(self.cap("workspace", "configuration"))

    @property
    def hierarchical_symbols(self) -> bool:
        return bool(self.cap("text_document", "document_symbol", "hierarchical_document_symbol_support"))

    # ================================================================== settings
    def initialize(self, params: types.InitializeParams) -> None:
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
        self._apply(old)
        for p in problems:
            log.warning(p)
        log.info("kernelband-lsp initialised (pid %d, position encoding %s)", os.getpid(), self.encoding)
        warm_detector()

    async def refresh_settings(self) -> Settings:
        old = self.settings
        if self.supports_configuration:
            try:
                res = await asyncio.wait_for(
                    self.ls.workspace_configuration_async(
                        types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])),
                    timeout=5.0)
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
        self._apply(old)
        return self.settings

    def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if raw and isinstance(raw, dict) and not self.supports_configuration:
            old = self.settings
            self.settings, problems = parse_settings(raw, self.init_settings)
            for p in problems:
                log.warning(p)
            self._apply(old)
        else:
            asyncio.get_running_loop().create_task(self.refresh_settings())

    def _apply(self, old: Settings) -> None:
        for listener in self.on_settings:
            listener(old, self.settings)

    def workspace_folders(self) -> list[str]:
        out: list[str] = []
        try:
            ws = self.ls.workspace
        except RuntimeError:
            return out
        for f in (ws.folders or {}).values():
            p = to_fs_path(f.uri)
            if p:
                out.append(p)
        if not out and ws.root_path:
            out.append(ws.root_path)
        return out

    # ================================================================== requests to the client
    def refresh_lenses(self) -> None:
        """Ask the client to request lenses and inlay hints again (a job's progress, a new
        profile or result, a document's first analysis): at most one request pair per 0.2 s."""
        lens = bool(self.cap("workspace", "code_lens", "refresh_support"))
        inlay = bool(self.cap("workspace", "inlay_hint", "refresh_support"))
        if not (lens or inlay) or self._lens_refresh_pending:
            return
        self._lens_refresh_pending = True

        async def go() -> None:
            await asyncio.sleep(0.2)
            self._lens_refresh_pending = False
            for wanted, send, what in ((lens, self.ls.workspace_code_lens_refresh_async, "codeLens"),
                                       (inlay, self.ls.workspace_inlay_hint_refresh_async, "inlayHint")):
                if not wanted:
                    continue
                try:
                    await asyncio.wait_for(send(None), timeout=10)
                except Exception as e:
                    log.debug("%s/refresh: %s", what, e)

        asyncio.get_running_loop().create_task(go())

    def workspace_edit(self, uri: str, version: Optional[int], text: str, hunks: list[E.Hunk]) -> types.WorkspaceEdit:
        """An edit of this text, versioned where the client takes document changes."""
        return E.workspace_edit(uri, version, text, hunks, self.encoding, self.supports_document_changes)

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> dict:
        try:
            res = await asyncio.wait_for(
                self.ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label)), timeout=30)
        except asyncio.TimeoutError:
            return {"applied": False, "message": "the editor did not answer workspace/applyEdit"}
        except Exception as e:
            return {"applied": False, "message": f"workspace/applyEdit failed: {e}"}
        applied = bool(getattr(res, "applied", False))
        reason = getattr(res, "failure_reason", None)
        return {"applied": applied, "message": "applied" if applied else (reason or "the editor refused the edit")}
