"""Faults outside the worker, end to end on the CPU: a worker that cannot be restarted,
stale sessions and temp dirs, an LLM endpoint that never answers, Ctrl-C during an LLM
request, and secrets / huge messages from a variant (real worker subprocesses, real
SQLite, a real socket on 127.0.0.1)."""
from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kernelband.events import Event
from kernelband.redact import MAX_MESSAGE_BYTES
from kernelband.session import Budget, Session, SessionConfig, WORKDIR_PREFIX, run_session, sweep_stale_workdirs
from kernelband.store import Store
from helpers.llm_server import LLMServer, Reply, fenced
from helpers.session import GOOD_LLM_KERNEL, LosesItsWorker, cli as _cli, collect, task_of, workspace


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.slow
def test_lost_worker_ends_with_best_so_far_and_leftovers_are_cleaned(tmp_path):
    path = workspace(tmp_path)
    store = Store.for_file(path)
    # a session killed earlier left a `running` row and its temp dir
    dead = _dead_pid()
    store.start_session("stale1", str(path), "axpy_kernel", "h", "cpu", "3.9", {})
    store._conn.execute("UPDATE sessions SET pid=? WHERE id='stale1'", (dead,))
    leftover = Path(tempfile.gettempdir()) / f"{WORKDIR_PREFIX}{dead}-test"
    leftover.mkdir(exist_ok=True)
    (leftover / "refs.pt").write_text("x")

    task = task_of(path)
    emitter, events = collect()
    cfg = SessionConfig(search="greedy", budget=Budget(evaluations=5), strategies=["tiling"], warm_start=False)
    # call 1 is the first candidate (the original is re-timed by retime_original, not evaluate);
    # the worker dies before call 2
    result = Session(task, cfg, emitter, store, evaluator=LosesItsWorker(task, after=1, profile_tier=2)).run()
    assert result.evaluations == 2 and "worker lost" in result.stop_reason
    assert any("cannot be restarted" in w and "best verified so far" in w for w in result.warnings)
    assert result.status == "verified_correct" and result.diff  # the candidate found before is kept
    assert events[-1].type == "result"
    rows = {s["id"]: s["status"] for s in store.sessions()}
    assert rows["stale1"] == "interrupted" and rows[result.session_id] == "verified_correct"
    assert not leftover.exists()
    store.close()


def test_live_sessions_and_their_dirs_are_left_alone(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with Store(tmp_path / "kb.db") as store:
            for sid, pid in (("live", live.pid), ("dead", _dead_pid()), ("old", None)):
                store.start_session(sid, "f.py", "k", "h", "cpu", "3.9", {})
                store._conn.execute("UPDATE sessions SET pid=? WHERE id=?", (pid, sid))
            assert sorted(store.mark_interrupted()) == ["dead", "old"]
            assert {s["id"]: s["status"] for s in store.sessions()}["live"] == "running"
        (tmp_path / f"{WORKDIR_PREFIX}{live.pid}-a").mkdir()
        (tmp_path / f"{WORKDIR_PREFIX}{_dead_pid()}-b").mkdir()
        (tmp_path / f"{WORKDIR_PREFIX}notapid").mkdir()
        removed = sweep_stale_workdirs(str(tmp_path))
        assert len(removed) == 1 and removed[0].endswith("-b")
        assert (tmp_path / f"{WORKDIR_PREFIX}{live.pid}-a").exists()
    finally:
        live.kill()
        live.wait()


class HangingServer:
    """Accepts TCP connections on 127.0.0.1 and never answers (a hung endpoint)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(conn)  # read nothing, answer nothing

    def close(self) -> None:
        self._stop.set()
        for c in self.conns:
            c.close()
        self.sock.close()


def _llm_cli(path: Path, url: str, *extra: str) -> subprocess.Popen:
    return _cli("optimize", str(path), "--generator", "openai", "--base-url", url, "--model", "m", "--budget", "3",
                "--events", "jsonl", "--device", "cpu", "--no-store", *extra,
                env={"OPENAI_API_KEY": "sk-test-hanging-1234567890"})


def _events(text: str) -> list[Event]:
    return [Event.from_json(ln) for ln in text.splitlines() if ln.strip()]


@pytest.mark.slow
def test_a_hanging_endpoint_costs_two_timeouts_not_the_budget(tmp_path):
    path = workspace(tmp_path)
    server = HangingServer()
    try:
        p = _llm_cli(path, server.url, "--llm-timeout", "1")
        out, err = p.communicate(timeout=300)
    finally:
        server.close()
    events = _events(out)
    result = events[-1].data["result"]
    assert p.returncode == 1 and result["status"] == "no_improvement", err
    assert "generator unavailable" in result["stop_reason"] and "--llm-timeout" in result["stop_reason"]
    assert len(server.conns) == 2  # one request, one retry: then the search ends (budget 3 is not spent on it)
    baseline = next(e for e in events if e.type == "baseline")
    assert events[-1].t - baseline.t < 8  # 2 x 1 s timeouts + 1 s backoff, not 3 x 4 x timeout


@pytest.mark.slow
def test_ctrl_c_during_a_hanging_llm_request_stops_within_two_seconds(tmp_path):
    path = workspace(tmp_path)
    server = HangingServer()
    try:
        p = _llm_cli(path, server.url, "--llm-timeout", "120")
        seen: list[Event] = []
        assert p.stdout is not None
        for line in p.stdout:  # wait for the baseline, then for the request to arrive
            seen.append(Event.from_json(line))
            if seen[-1].type == "baseline":
                break
        deadline = time.monotonic() + 60
        while not server.conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.conns, "the LLM request never arrived"
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = ""
        for line in p.stdout:
            if Event.from_json(line).type == "result":
                break
        stopped_in = time.monotonic() - t0
        rest, err = p.communicate(timeout=60)
    finally:
        server.close()
    result = Event.from_json(line).data["result"]
    assert result["stop_reason"] == "stopped by request" and result["status"] == "cancelled", err
    assert stopped_in < 2.0, stopped_in
    assert len(server.conns) == 1


LEAK_KEY = "kb-configured-key-5d1e0c77aa"
ENV_KEY = "kb-env-openai-key-91b2c3d4e5"


@pytest.mark.slow
def test_a_variant_message_with_the_key_or_5mb_never_reaches_store_or_events(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    path = workspace(tmp_path)
    raising = GOOD_LLM_KERNEL.replace(
        "    out = torch.empty_like(x)",
        f'    raise RuntimeError("leaked {LEAK_KEY} {ENV_KEY} " + "E" * 5000000)\n    out = torch.empty_like(x)')
    assert raising != GOOD_LLM_KERNEL
    store = Store.for_file(path)
    emitter, events = collect()
    # the server outlives a slow setup on a loaded CPU (its default lifetime is 30 s)
    with LLMServer([Reply(content=fenced(raising))], lifetime_s=600) as server:
        cfg = SessionConfig(generator="openai", budget=Budget(evaluations=1), warm_start=False,
                            generator_options={"base_url": server.url, "model": "m", "api_key": LEAK_KEY,
                                               "timeout": 10, "retries": 0})
        result = run_session(task_of(path), cfg, emitter, store)
    cands = [e for e in events if e.type == "candidate"]
    assert len(cands) == 1, (result.stop_reason, result.warnings)
    cand = cands[0]
    assert cand.data["status"] in ("runtime_error", "rejected"), cand.data["message"][:300]
    if cand.data["status"] == "runtime_error":  # it ran: the message carried both keys and 5 MB
        assert "[redacted]" in cand.data["message"] and "bytes cut" in cand.data["message"]
    for ev in events:
        text = ev.to_json()
        assert LEAK_KEY not in text and ENV_KEY not in text and len(text) < 200_000
    store.close()
    con = sqlite3.connect(str(path.parent / ".kernelband" / "kernelband.db"))
    dump = "\n".join(con.iterdump())
    con.close()
    assert LEAK_KEY not in dump and ENV_KEY not in dump and len(dump) < 500_000
    assert all(len(m) <= MAX_MESSAGE_BYTES + 100 for m in (cand.data["message"], result.message))
