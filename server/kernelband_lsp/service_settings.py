"""The language service's client capabilities and settings (workspace/configuration,
initializationOptions, didChangeConfiguration)."""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path


from .documents import warm_detector
from .settings import SECTION, Settings, describe_changes, parse_settings, secret_from
from .service_state import ServiceState

log = logging.getLogger("kernelband_lsp")


class SettingsMixin(ServiceState):
    """A part of KernelBandService (service_state.py declares the state it uses)."""

    # ================================================================== capabilities
    @property
    def caps(self) -> types.ClientCapabilities:
        try:
            return self.ls.client_capabilities or types.ClientCapabilities()
        except Exception:
            return types.ClientCapabilities()

    def _cap(self, *path: str) -> Any:
        obj: Any = self.caps
        for p in path:
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj

    @property
    def supports_progress(self) -> bool:
        return bool(self._cap("window", "work_done_progress"))

    @property
    def supports_document_changes(self) -> bool:
        return bool(self._cap("workspace", "workspace_edit", "document_changes"))

    @property
    def supports_configuration(self) -> bool:
        return bool(self._cap("workspace", "configuration"))

    @property
    def supports_lens_refresh(self) -> bool:
        return bool(self._cap("workspace", "code_lens", "refresh_support"))

    @property
    def supports_inlay_refresh(self) -> bool:
        return bool(self._cap("workspace", "inlay_hint", "refresh_support"))

    @property
    def hierarchical_symbols(self) -> bool:
        return bool(self._cap("text_document", "document_symbol", "hierarchical_document_symbol_support"))

    # ================================================================== settings
    def initialize(self, params: types.InitializeParams) -> None:
        enc = getattr(self.ls.workspace, "position_encoding", None)
        self.encoding = str(getattr(enc, "value", enc) or "utf-16")
        self.docs.encoding = self.encoding
        opts = params.initialization_options
        # the VS Code extension reviews variants in its own diff view; other clients get a
        # server-driven review (window/showDocument + window/showMessageRequest)
        self.client_name = str(getattr(params.client_info, "name", "") or "")
        self.init_settings, problems = parse_settings(opts)
        self.secret = secret_from(opts)
        self.settings = self.init_settings
        self._apply_settings()
        for p in problems:
            log.warning(p)
        log.info("kernelband-lsp initialised (pid %d, position encoding %s)", os.getpid(), self.encoding)
        warm_detector()

    async def refresh_settings(self) -> Settings:
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
                old = self.settings
                if new != old:
                    log.info("settings changed: %s", describe_changes(old, new))
                self.settings = new
                if new.harness != old.harness or new.min_speedup != old.min_speedup:
                    self._republish_all()
            except asyncio.TimeoutError:
                log.warning("workspace/configuration: no answer in 5 s; keeping the current settings")
            except Exception as e:
                log.warning("workspace/configuration failed: %s", e)
        self._apply_settings()
        return self.settings

    def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if raw and isinstance(raw, dict) and not self.supports_configuration:
            self.settings, problems = parse_settings(raw, self.init_settings)
            for p in problems:
                log.warning(p)
            self._apply_settings()
        else:
            asyncio.get_running_loop().create_task(self.refresh_settings())

    def _apply_settings(self) -> None:
        self.docs.debounce_s = max(self.settings.debounce_ms, 0) / 1000.0
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving yet (unit use): no watcher
        if self.settings.background_on_save:
            self.background.watch(self.workspace_folders(), self._on_disk_change)
        elif self.background.watching:
            self.background.unwatch()

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


def _redacted(d: dict) -> dict:
    return {k: ("***" if "key" in k.lower() or "secret" in k.lower() or "token" == k.lower() else v) for k, v in d.items()}
