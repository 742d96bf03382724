"""The evaluation worker: a long-lived process that owns the GPU (or the interpreter)
and runs untrusted variants. ``python -m kernelband.worker``.

Protocol: one JSON request per line on stdin (``{"id", "op", ...}``: the rest is the body
of ``op``'s request, ``requests.py``), one JSON reply per line on the protocol stream (the
original stdout; the process's fd 1 is pointed at stderr so nothing user code prints can
corrupt the protocol): ``{"id", "ok": true, "result": ...}`` or ``{"id", "ok": false,
"error": str}``. Requests are served
concurrently (each in a thread), so replies may come in another order. The judge runs
no module code: a variant can crash or hang its own process, never the judge.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import IO, Any

from ..trace import mark
from .requests import ENVELOPE


def _protocol_stream() -> IO[str]:
    fd = os.dup(1)
    os.dup2(2, 1)  # user prints (and C-level writes to fd 1) go to stderr
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def _choose_backend() -> bool:
    """Decide GPU vs interpreter before triton is imported. Returns interpreted."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    wanted = os.environ.get("KERNELBAND_DEVICE", "auto")
    if wanted.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"kernelband worker: device {wanted!r} was asked for but no CUDA GPU is visible "
                         "(torch.cuda.is_available() is False); use --device cpu for the Triton interpreter")
    if wanted == "cpu" or not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        return True
    return False


def _exit_with_parent() -> None:
    """The worker lives in its own process group (so a terminal's Ctrl-C reaches only the
    session); it must still never outlive the session, even mid-request."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    _exit_with_parent()
    proto = _protocol_stream()
    from . import sandbox
    from .zygote_handle import EarlyZygote, guess_interpreted

    sandbox.become_subreaper()  # a variant's double-forked children come back to us to be killed
    early = EarlyZygote(guess_interpreted())  # its imports run while this process imports torch
    interpreted = _choose_backend()
    from .judge import JudgeService  # imports torch: after the backend choice

    service = JudgeService(interpreted=interpreted)
    service.early_zygote = early
    try:
        return _serve(service, proto)
    finally:
        service.close()


def _serve(service: Any, proto: IO[str]) -> int:
    """Each request runs in a thread of its own (several candidates are evaluated at once);
    replies carry the request's id and are written whole, one line each."""
    write_lock = threading.Lock()

    def reply(req_id: Any, body: dict[str, Any]) -> None:
        body["id"] = req_id
        line = json.dumps(body, default=str) + "\n"
        with write_lock:
            proto.write(line)
            proto.flush()

    def handle(req: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        mark("judge.op", op=req.get("op"), id=req.get("id"))
        try:
            request = {k: v for k, v in req.items() if k not in ENVELOPE}
            body: dict[str, Any] = {"ok": True, "result": service.handle(req.get("op"), request)}
        except Exception as e:  # noqa: BLE001 - every failure becomes a reply
            from .judge_derivation import OriginalUnusable  # imports torch: loaded by now (the judge)

            body = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=8),
                    "kind": "setup" if isinstance(e, OriginalUnusable) else "error"}
        body["wall_s"] = time.perf_counter() - t0
        mark("judge.op_done", op=req.get("op"), id=req.get("id"), ok=body["ok"])
        reply(req.get("id"), body)

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if not isinstance(req, dict):
            continue
        if req.get("op") == "shutdown":
            reply(req.get("id"), {"ok": True, "result": None})
            return 0
        threading.Thread(target=handle, args=(req,), daemon=True, name=f"kb-op-{req.get('op')}").start()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
