"""LSP handlers: thin wrappers over KernelBandService (service.py).

Features: code lens, hover, document symbols, code actions, diagnostics; commands
kernelband.optimize / profile / cancel / createHarness / proposedEdit / applyVariant /
reviewVariant / reverify (docs/ARCHITECTURE.md, "Language server commands") plus kernelband.status.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import sys
import threading
from typing import Any, BinaryIO, Optional

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from . import __version__, framing
from .cancellation import RequestRegistry
from .service import KernelBandService

log = logging.getLogger("kernelband_lsp")

# the workDoneToken of the workspace/executeCommand request being handled
_work_done_token: contextvars.ContextVar[Optional[types.ProgressToken]] = contextvars.ContextVar(
    "kernelband_work_done_token", default=None
)


class KernelBandProtocol(LanguageServerProtocol):
    """Remembers the executeCommand request's workDoneToken for the command handler
    (pygls passes only the arguments), and makes `$/cancelRequest` cancel the command's
    task, not only its reply (cancellation.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests = RequestRegistry()

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams):
        _work_done_token.set(params.work_done_token)
        inner = super().lsp_workspace__execute_command(params)
        step = next(inner)  # pygls resolves the handler and converts the arguments
        if not (isinstance(step, tuple) and len(step) == 3):
            # not the pygls 2.x shape we know: forward every step as pygls would, without tracking
            while True:
                sent = yield step
                try:
                    step = inner.send(sent)
                except StopIteration as stop:
                    return stop.value
        handler, args, kwargs = step
        if asyncio.iscoroutinefunction(handler):
            handler = self.requests.track(getattr(self, "msg_id", None), handler)
        result = yield handler, args, kwargs
        try:
            inner.send(result)
        except StopIteration as stop:
            return stop.value
        return result

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        # pygls cancels the request's future (the client gets -32800 at once) but not the
        # task running the command; cancel that too once the reply can no longer be sent
        futures = getattr(self, "_request_futures", None)  # pygls 2.x internals; absent = no tracking
        fut = futures.get(msg_id) if isinstance(futures, dict) else None
        if isinstance(futures, dict) and fut is None:
            # the request was already answered (clients cancel lens and hover requests that
            # raced their answer): nothing to cancel, and nothing the user needs to read
            log.debug("$/cancelRequest for %r: already answered", msg_id)
            return
        super()._handle_cancel_notification(msg_id)
        if fut is not None and fut.cancelled():
            self.requests.cancel(msg_id)


class KernelBandLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "kernelband-lsp",
            __version__,
            protocol_cls=KernelBandProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.service = KernelBandService(self)

    def start_io(self, stdin: Optional[BinaryIO] = None, stdout: Optional[BinaryIO] = None) -> None:
        """pygls' stdio loop, with a reader that survives bad frames (framing.py)."""
        self._stop_event = threading.Event()
        fd = (stdin or sys.stdin.buffer).fileno()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        proto = self.protocol

        def handle(body: bytes) -> None:
            try:
                proto.handle_message(json.loads(body, object_hook=proto.structure_message))
            except Exception as exc:  # one bad message must not stop the loop
                log.warning("cannot handle a message: %r", exc)

        try:
            asyncio.run(framing.serve(fd, handle, self._stop_event.is_set, self.thread_pool))
        except BrokenPipeError:
            log.error("the connection to the client is lost; shutting down")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()


def _arg(args: tuple) -> dict:
    """Command arguments: one JSON object (the contract), or positional (uri, kernel)."""
    if len(args) == 1 and isinstance(args[0], dict):
        return args[0]
    if len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):
        return {"uri": args[0], "kernel": args[1]}
    if len(args) == 1 and isinstance(args[0], str):
        return {"jobId": args[0]}
    return {}


def create_server() -> KernelBandLanguageServer:
    server = KernelBandLanguageServer()
    svc = server.service

    @server.feature(types.INITIALIZE)
    def initialize(ls: KernelBandLanguageServer, params: types.InitializeParams) -> None:
        svc.initialize(params)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: KernelBandLanguageServer, params: types.InitializedParams) -> None:
        await svc.refresh_settings()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: KernelBandLanguageServer, params: Any) -> None:
        await svc.shutdown()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: KernelBandLanguageServer, params: types.DidChangeConfigurationParams) -> None:
        svc.did_change_configuration(params)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: KernelBandLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        svc.did_open(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: KernelBandLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        svc.did_change(params.text_document.uri, list(params.content_changes))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: KernelBandLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        svc.did_save(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: KernelBandLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        svc.did_close(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def code_lens(ls: KernelBandLanguageServer, params: types.CodeLensParams):
        return await svc.code_lens(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: KernelBandLanguageServer, params: types.HoverParams) -> Optional[types.Hover]:
        return await svc.hover(params.text_document.uri, params.position)

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hint(ls: KernelBandLanguageServer, params: types.InlayHintParams):
        return await svc.inlay_hints(params.text_document.uri, params.range)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls: KernelBandLanguageServer, params: types.DocumentSymbolParams):
        return await svc.document_symbols(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.Refactor,
                types.CodeActionKind.RefactorRewrite,
            ]
        ),
    )
    async def code_action(ls: KernelBandLanguageServer, params: types.CodeActionParams):
        return await svc.code_actions(params)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: KernelBandLanguageServer, params: types.WorkDoneProgressCancelParams) -> None:
        svc.progress_cancelled(params.token)

    # ------------------------------------------------------------------ commands
    @server.command("kernelband.optimize")
    async def optimize(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.run_job("optimize", _arg(args), _work_done_token.get())

    @server.command("kernelband.profile")
    async def profile(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.run_job("profile", _arg(args), _work_done_token.get())

    @server.command("kernelband.cancel")
    def cancel(ls: KernelBandLanguageServer, *args: Any) -> dict:
        if args and not (len(args) == 1 and isinstance(args[0], dict)) and not _arg(args):
            return {"cancelled": [], "error": "expected {jobId}, {uri, kernel[, kind]} or no argument"}
        return svc.cancel(_arg(args) if args else {})

    @server.command("kernelband.createHarness")
    async def create_harness(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.create_harness(_arg(args))

    @server.command("kernelband.proposedEdit")
    async def proposed_edit(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.proposed_edit(_arg(args))

    @server.command("kernelband.applyVariant")
    async def apply_variant(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.apply_variant(_arg(args))

    @server.command("kernelband.reviewVariant")
    async def review_variant(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.review_variant(_arg(args))

    @server.command("kernelband.reverify")
    async def reverify(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return await svc.reverify(_arg(args), _work_done_token.get())

    @server.command("kernelband.status")
    def status(ls: KernelBandLanguageServer, *args: Any) -> dict:
        return svc.status()

    return server


class LspLogHandler(logging.Handler):
    """Forwards the server's own log records to window/logMessage (stderr gets them too)."""

    _LEVELS = {
        logging.ERROR: types.MessageType.Error,
        logging.WARNING: types.MessageType.Warning,
        logging.INFO: types.MessageType.Info,
        logging.DEBUG: types.MessageType.Log,
    }

    def __init__(self, server: KernelBandLanguageServer, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.server = server
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._busy = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._busy or self.server.protocol.writer is None:
            return
        try:
            msg = self.format(record)
            level = record.levelno
            mtype = next(
                (t for lv, t in sorted(self._LEVELS.items(), reverse=True) if level >= lv), types.MessageType.Log
            )
            params = types.LogMessageParams(type=mtype, message=msg)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                self._send(params)
            elif self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._send, params)
            else:
                return
            # the client shows window/logMessage in the same place as stderr (VS Code's
            # output channel, Neovim's lsp.log): one copy is enough
            record.kb_delivered = True
        except Exception:  # pragma: no cover - logging must never raise
            pass

    def _send(self, params: types.LogMessageParams) -> None:
        self._busy = True
        try:
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self.server.window_log_message(params)
        except Exception:
            pass
        finally:
            self._busy = False
