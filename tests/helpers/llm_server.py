"""A small scripted OpenAI-compatible server for tests: POST /v1/chat/completions.

    with LLMServer([Reply(status=429), Reply(content=GOOD)]) as server:
        gen = OpenAIGenerator(base_url=server.url, ...)
        ...
        assert server.count == 2

Each request takes the next Reply of the script (the last one repeats). A Reply can
delay its answer (for client timeouts), answer with an HTTP error, or send a chat
completion with given content, usage and finish reason. The server listens on
127.0.0.1 on an ephemeral port, in a daemon thread, and stops on leaving the ``with``
block or after ``lifetime_s`` at the latest, so a failing test never leaves it behind.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: Optional[int] = 100  # None: no usage in the answer
    completion_tokens: int = 50
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)


def fenced(code: str, lang: str = "python") -> str:
    return f"Here is the optimized kernel.\n\n```{lang}\n{code.strip()}\n```\n"


class LLMServer:
    def __init__(self, script: list[Reply], lifetime_s: float = 30.0) -> None:
        assert script, "a script needs at least one reply"
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._timer: Optional[threading.Timer] = None

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            return self.script[min(len(self.requests), len(self.script)) - 1]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode(errors="replace")}
                body["_authorization"] = self.headers.get("Authorization", "")
                reply = server._next(body)
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    return  # shutting down
                if reply.status != 200:
                    payload = {"error": {"message": f"scripted error {reply.status}", "type": "test", "code": None}}
                    self._send(reply.status, payload, reply.headers)
                    return
                usage = None
                if reply.prompt_tokens is not None:
                    usage = {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    }
                payload = {
                    "id": f"chatcmpl-test-{server.count}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "test-model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": reply.finish_reason,
                        }
                    ],
                }
                if usage is not None:
                    payload["usage"] = usage
                self._send(200, payload, reply.headers)

        return Handler

    def start(self) -> "LLMServer":
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
