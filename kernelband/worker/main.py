"""The evaluation worker: a long-lived process that owns the GPU (or the interpreter)
and runs untrusted variants. ``python -m kernelband.worker``.

Protocol: one JSON request per line on stdin (``{"id", "op", ...}``: the rest is the body
of ``op``'s request, ``requests.py``), one JSON reply per line on the protocol stream (the
original stdout; the process's fd 1 is pointed at stderr so nothing user code prints can
corrupt the protocol): ``{"id", "ok": true, ...}`` and a ``requests.Reply``, or ``{"id",
"ok": false, ...}`` and a ``requests.ErrorReply``, built here only (``_answer``). Requests
are served concurrently (each in a thread), so replies may come in another order. The
judge runs no module code: a variant can crash or hang its own process, never the judge.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from dataclasses import replace
from typing import IO, Callable

from ..trace import mark
from .requests import ENVELOPE, Answer, ErrorKind, ErrorReply, Reply, Request, Shutdown, decode, encode_reply


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
        raise SystemExit(
            f"kernelband worker: device {wanted!r} was asked for but no CUDA GPU is visible "
            "(torch.cuda.is_available() is False); use --device cpu for the Triton interpreter"
        )
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


def _warm_triton_in_background() -> None:
    """Triton's cache key (a hash of its own files) and its JIT's lazy imports, computed
    while the judge waits for the original's first frames: the judge's first fused check
    paid them on the setup's path (0.3 s of add_scale's prepare on an H200,
    benchmarks/results/eval_speed/SESSION12.md)."""
    from .zygote import warm_triton_jit

    threading.Thread(target=warm_triton_jit, daemon=True, name="kb-triton-warm").start()


def main() -> int:
    _exit_with_parent()
    proto = _protocol_stream()
    from . import sandbox
    from .zygote_handle import EarlyZygote, guess_interpreted

    sandbox.become_subreaper()  # a variant's double-forked children come back to us to be killed
    early = EarlyZygote(guess_interpreted())  # its imports run while this process imports torch
    interpreted = _choose_backend()
    from .judge import JudgeService  # imports torch: after the backend choice

    if not interpreted:
        _warm_triton_in_background()
    service = JudgeService(interpreted=interpreted)
    service.early_zygote = early
    try:
        return _serve(service.serve, proto)
    finally:
        service.close()
        from .fused_checks import remove_private_cache

        remove_private_cache()


def _answer(serve: Callable[[Request], object], op: object, body: dict[str, object]) -> Answer:
    """The reply to one request: its op's result, or why there is none. The request is
    decoded here, once; a malformed one is refused before anything runs."""
    try:
        return Reply(result=serve(decode(op if isinstance(op, str) else None, body)))
    except Exception as e:  # noqa: BLE001 - every failure becomes a reply
        from .judge_derivation import OriginalUnusable  # imports torch: loaded by now (the judge)

        trace = traceback.format_exc(limit=8)
        if isinstance(e, OriginalUnusable):  # the kind says what the class would
            return ErrorReply(ErrorKind.SETUP, str(e), trace)
        return ErrorReply(ErrorKind.ERROR, f"{type(e).__name__}: {e}", trace)


def _serve(serve: Callable[[Request], object], proto: IO[str]) -> int:
    """Each request runs in a thread of its own (several candidates are evaluated at once);
    replies carry the request's id and are written whole, one line each."""
    write_lock = threading.Lock()

    def reply(req_id: object, answer: Answer) -> None:
        line = json.dumps(encode_reply(req_id, answer), default=str) + "\n"
        with write_lock:
            proto.write(line)
            proto.flush()

    def handle(req_id: object, op: object, body: dict[str, object]) -> None:
        t0 = time.perf_counter()
        mark("judge.op", op=op, id=req_id)
        answer = replace(_answer(serve, op, body), wall_s=time.perf_counter() - t0)
        mark("judge.op_done", op=op, id=req_id, ok=isinstance(answer, Reply))
        reply(req_id, answer)

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if not isinstance(req, dict):
            continue
        req_id, op = req.get("id"), req.get("op")
        if op == Shutdown.OP:
            reply(req_id, Reply())
            return 0
        body = {k: v for k, v in req.items() if k not in ENVELOPE}
        threading.Thread(target=handle, args=(req_id, op, body), daemon=True, name=f"kb-op-{op}").start()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
