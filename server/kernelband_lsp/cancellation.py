"""`$/cancelRequest` for async workspace/executeCommand handlers.

pygls 2 runs a command in two steps: the executeCommand request is a generator whose
future is what `$/cancelRequest` cancels (the client gets -32800 at once), and the
command handler runs as a separate asyncio task under a made-up id that nothing
cancels. So a cancelled kernelband.optimize kept its job (and the GPU slot) running.
This registry maps the request id to the task running the command, so a cancel
notification can cancel that task: the command's own `except CancelledError` then
cancels its job (service.run_job).
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Union

MsgId = Union[int, str]


@dataclass
class _Entry:
    task: Optional[asyncio.Task] = None
    cancelled: bool = False  # cancelled before its task ran its first step


class RequestRegistry:
    def __init__(self) -> None:
        self._entries: dict[MsgId, _Entry] = {}

    def track(self, msg_id: Optional[MsgId], handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """Wraps an async command handler for request msg_id. Called while the request is
        being dispatched, so a cancel that arrives before the task first runs is not lost."""
        if msg_id is None:
            return handler
        self._entries[msg_id] = _Entry()

        @functools.wraps(handler)
        async def run(*args: Any, **kwargs: Any) -> Any:
            entry = self._entries.get(msg_id)
            if entry is None or entry.cancelled:
                self._entries.pop(msg_id, None)
                raise asyncio.CancelledError(f"request {msg_id} was cancelled")
            entry.task = asyncio.current_task()
            try:
                return await handler(*args, **kwargs)
            finally:
                self._entries.pop(msg_id, None)

        return run

    def cancel(self, msg_id: MsgId) -> bool:
        """Cancels the command task of request msg_id; False if none is in flight."""
        entry = self._entries.get(msg_id)
        if entry is None:
            return False
        if entry.task is None:
            entry.cancelled = True  # its task has not started: it raises on its first step
            return True
        self._entries.pop(msg_id, None)
        entry.task.cancel(f"request {msg_id} was cancelled")
        return True

    def in_flight(self) -> list[MsgId]:
        return list(self._entries)
