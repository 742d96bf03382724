"""The evaluation worker: a long-lived process that owns the GPU (or the interpreter)
and runs untrusted variants. ``python -m kernelband.worker``.

Protocol: one JSON request per line on stdin, one JSON reply per line on the protocol
stream (the original stdout; the process's fd 1 is pointed at stderr so nothing user
code prints can corrupt the protocol). Each reply is ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": str, "fatal": bool}``; after a fatal reply (a corrupted CUDA
context) the worker exits and the client starts a fresh one. A reply also carries
``"exiting": true`` whenever the worker exits right after it, including an ok reply
whose result reports the corruption (an Evaluation), so the client never races the exit.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import IO, Any


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
    interpreted = _choose_backend()
    from . import sandbox
    from .judge import JudgeService  # imports torch: after the backend choice

    sandbox.become_subreaper()  # a variant's double-forked children come back to us to be killed
    service = JudgeService(interpreted=interpreted)
    try:
        return _serve(service, proto)
    finally:
        service.close()


def _serve(service: Any, proto: IO[str]) -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        t0 = time.perf_counter()
        fatal = False
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "shutdown":
                proto.write(json.dumps({"ok": True, "result": None}) + "\n")
                return 0
            result = service.handle(op, req)
            reply: dict[str, Any] = {"ok": True, "result": result}
        except Exception as e:  # noqa: BLE001 - every failure becomes a reply
            fatal = service.context_broken(e)
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}", "fatal": fatal,
                     "trace": traceback.format_exc(limit=8)}
        reply["wall_s"] = time.perf_counter() - t0
        exiting = fatal or service.fatal
        if exiting:
            reply["exiting"] = True
        proto.write(json.dumps(reply, default=str) + "\n")
        proto.flush()
        if exiting:
            return 3
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
