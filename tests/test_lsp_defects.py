"""Server defects found in review, each over real LSP on stdio (pytest-lsp; raw bytes for framing).

1. a found variant stays reachable after Apply -> Undo and on a fresh server (store);
   an interpreted result is never offered as a speedup.
6. profile progress text, the no-harness hover, which times are which in the hover.
8. framing: a wrong, non-numeric or huge Content-Length; cancel with a dict jobId.
"""
from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from lsprotocol import types

from kernelband.profile.schema import Profile
from kernelband.store import ProfileKey, Store

from helpers.lsp import copy_examples, job_data, start_session, wait_until, write_fake_engine

REPO = Path(__file__).resolve().parents[1]


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def lens_titles(client, uri) -> list[str]:
    res = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(uri)))
    return [lens.command.title for lens in res or []]


async def hover_text(client, uri, text: str, name: str) -> str:
    i = text.index(f"def {name}") + 5
    line = text.count("\n", 0, i)
    col = i - (text.rfind("\n", 0, i) + 1)
    h = await client.text_document_hover_async(types.HoverParams(text_document=doc(uri),
                                                                 position=types.Position(line=line, character=col)))
    return h.contents.value if h else ""


async def quick_fixes(client, uri, text: str, name: str) -> list[types.CodeAction]:
    line = text[: text.index(f"def {name}")].count("\n")
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=doc(uri), range=types.Range(start=types.Position(line=line, character=0),
                                                   end=types.Position(line=line, character=0)),
        context=types.CodeActionContext(diagnostics=[])))
    return [a for a in acts or [] if isinstance(a, types.CodeAction) and a.kind == types.CodeActionKind.QuickFix]


async def all_actions(client, uri, text: str, name: str) -> list:
    line = text[: text.index(f"def {name}")].count("\n")
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=doc(uri), range=types.Range(start=types.Position(line=line, character=0),
                                                   end=types.Position(line=line, character=0)),
        context=types.CodeActionContext(diagnostics=[])))
    return list(acts or [])


async def run_command(client, command, *args):
    res = await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=list(args)))
    return job_data(res)


def fake_env(tmp_path, interpreted: bool = False) -> dict[str, str]:
    return {"KERNELBAND_LSP_JOB_COMMAND": json.dumps(write_fake_engine(tmp_path)), "FAKE_STEP_S": "0.02",
            "FAKE_INTERPRETED": "1" if interpreted else "0"}


# ---------------------------------------------------------------------------- defect 1
async def test_variant_comes_back_after_apply_then_undo(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=fake_env(tmp_path)) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        original = editor.text(uri)
        res = await run_command(client, "kernelband.optimize", {"uri": uri, "kernel": "axpy_kernel"})
        assert res["status"] == "improved" and res["edit"] is not None
        assert "Apply found variant (1.43x)" in await lens_titles(client, uri)
        out = await run_command(client, "kernelband.applyVariant", {"uri": uri, "kernel": "axpy_kernel"})
        assert out["applied"] is True
        assert not [t for t in await lens_titles(client, uri) if t.startswith("Apply")]
        editor.set_text(uri, original)  # Undo
        assert "Apply found variant (1.43x)" in await lens_titles(client, uri)
        fixes = await quick_fixes(client, uri, original, "axpy_kernel")
        assert [f for f in fixes if f.title.startswith("Apply found variant") and f.edit is not None]
        assert "**Found:**" in await hover_text(client, uri, original, "axpy_kernel")


def store_result(ws: Path, path: Path, kernel: str, result: dict) -> None:
    with Store.for_workspace(ws) as st:
        st.start_session("s1", str(path), kernel, result["original_hash"], "FAKE GPU", "3.0", {})
        st.finish_session("s1", result["status"], result)


def improved_result(text: str, interpreted: bool = False) -> dict:
    return {"status": "improved", "kernel": "axpy_kernel", "session_id": "s1",
            "original_hash": hashlib.sha256(text.encode()).hexdigest(), "baseline_ms": 0.642, "best_ms": 0.155,
            "speedup": 4.14, "speedup_ci": [3.9, 4.3], "evaluations": 8, "interpreted": interpreted,
            "clock": "cpu-interpreter" if interpreted else "cuda-events", "gpu": None if interpreted else "NVIDIA H100",
            "paired_rounds": 7, "strategy_path": ["tiling"], "best_source": text.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024"),
            "warnings": [], "message": ""}


async def test_a_stored_variant_is_offered_by_a_fresh_server(tmp_path):
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    text = path.read_text()
    store_result(ws, path, "axpy_kernel", improved_result(text))
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(path)
        assert "Apply found variant (4.14x)" in await lens_titles(client, uri)
        assert [f for f in await quick_fixes(client, uri, text, "axpy_kernel") if f.title.startswith("Apply found variant")]
        card = await hover_text(client, uri, text, "axpy_kernel")
        assert "**Found:**" in card and "Evidence" in card and "NVIDIA H100" in card
        prop = await run_command(client, "kernelband.proposedEdit", {"uri": uri, "kernel": "axpy_kernel"})
        assert prop["speedup"] == 4.14 and prop["interpreted"] is False
        assert any(r["label"] == "GPU" and r["value"] == "NVIDIA H100" for r in prop["evidence"])


async def test_the_editor_offers_only_what_the_engine_found_applicable(tmp_path):
    """The offer rule is the engine's (Result.applicable, verdict.is_improvement): a stored
    "improved" Result the engine did not mark applicable, or whose CI's lower bound is under
    the editor's floor (1.03 by default) while its point speedup is above it, gets no Apply."""
    for i, change in enumerate(({"applicable": False},
                                {"applicable": True, "speedup": 1.06, "speedup_ci": [1.01, 1.11]})):
        (tmp_path / str(i)).mkdir()
        ws = copy_examples(tmp_path / str(i))
        path = ws / "add_scale.py"
        text = path.read_text()
        result = {**improved_result(text), **change}
        store_result(ws, path, "axpy_kernel", result)
        async with start_session(ws) as (client, editor, rec):
            uri = editor.open(path)
            titles = await lens_titles(client, uri)
            assert not [t for t in titles if t.startswith("Apply")], (result["speedup_ci"], titles)


async def test_an_interpreted_result_is_never_offered_as_a_speedup(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=fake_env(tmp_path, interpreted=True)) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        text = editor.text(uri)
        res = await run_command(client, "kernelband.optimize", {"uri": uri, "kernel": "axpy_kernel"})
        assert res["status"] == "improved" and res["interpreted"] is True
        assert res["edit"] is None and res["editMessage"] == "correct; speed needs a GPU"
        titles = await lens_titles(client, uri)
        assert "Variant found: correct; speed needs a GPU · Review" in titles
        assert not [t for t in titles if t.startswith("Apply")]
        # no edit offered as a speedup, but reachable for review (a command action)
        assert not [f for f in await quick_fixes(client, uri, text, "axpy_kernel") if "variant" in f.title]
        acts = await all_actions(client, uri, text, "axpy_kernel")
        review = [a for a in acts if "variant" in a.title]
        assert [a.title for a in review] == ["Review found variant of axpy_kernel (correct; speed needs a GPU): "
                                             "diff, then Apply or Discard (KernelBand)"]
        # (pygls's client structures a CodeAction carrying a command as a Command; the JSON is right)
        assert "kernelband.reviewVariant" in str(review[0].command) and not getattr(review[0], "edit", None)
        card = await hover_text(client, uri, text, "axpy_kernel")
        assert "correct; speed needs a GPU" in card and "1.43x" not in card
        prop = await run_command(client, "kernelband.proposedEdit", {"uri": uri, "kernel": "axpy_kernel"})
        assert prop["interpreted"] is True and prop["note"] == "correct; speed needs a GPU"


# ---------------------------------------------------------------------------- defect 6
async def test_profile_progress_and_hover_texts(tmp_path):
    ws = copy_examples(tmp_path)
    src = (ws / "add_scale.py").read_text()
    nh = ws / "noharness.py"
    nh.write_text(src[: src.index("def harness_axpy")])
    async with start_session(ws, env=fake_env(tmp_path)) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        res = await run_command(client, "kernelband.profile", {"uri": uri, "kernel": "axpy_kernel"})
        assert res["profile"] is not None
        messages = [getattr(r, "message", "") or "" for rs in client.progress_reports.values() for r in rs]
        assert messages and not [m for m in messages if "None" in m or "budget ?" in m], messages
        # no harness: no lens called Profile exists, so the card must not point at one
        nuri = editor.open(nh)
        card = await hover_text(client, nuri, editor.text(nuri), "axpy_kernel")
        assert "use **Profile**" not in card and "create a harness" in card.lower()


async def test_hover_says_which_time_is_the_profile_and_which_the_re_measurement(tmp_path):
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    text = path.read_text()
    res = improved_result(text)
    store_result(ws, path, "axpy_kernel", res)
    profile = {"kernel": "axpy_kernel", "tiers": {"static": None, "timing": {"time_per_launch_ms": 1240.0}, "counters": None},
               "diagnosis": {"bottleneck": "memory-bound", "evidence": "x", "strategies": []}, "interpreted": False}
    with Store.for_workspace(ws) as st:
        st.put_profile(ProfileKey(res["original_hash"], "h", "FAKE GPU", "3.0", "axpy_kernel"),
                       Profile.from_dict(profile), file=str(path))
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(path)
        card = await hover_text(client, uri, text, "axpy_kernel")
        assert "original 642 ms → variant 155 ms, paired re-measurement" in card or \
               "original 0.64 ms → variant 0.15 ms, paired re-measurement" in card, card


# ---------------------------------------------------------------------------- defect 8
def frame(obj: dict, length: Optional[bytes] = None) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: " + (length if length is not None else str(len(body)).encode()) + b"\r\n\r\n" + body


class RawServer:
    """The server on stdio with raw bytes: framing faults a client library cannot send."""

    def __init__(self, ws: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "server"), env.get("PYTHONPATH", "")])
        self.stderr_path = ws / "server.stderr"
        with open(self.stderr_path, "wb") as err:
            # its own process group: killing the server must not leave its children (the
            # analysis pool's spawned worker) running after the test
            self.p = subprocess.Popen([sys.executable, "-m", "kernelband_lsp"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True)
        self.buf = b""
        self.notes: list[dict] = []
        self.send(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"processId": None, "rootUri": ws.as_uri(), "capabilities": {}}}))
        assert self.reply(0, 30) is not None
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def send(self, data: bytes) -> None:
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def reply(self, msg_id, timeout: float) -> Optional[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\r\n\r\n" in self.buf:
                head, rest = self.buf.split(b"\r\n\r\n", 1)
                n = int(head.split(b"\r\n")[0].split(b":")[1])
                if len(rest) < n:
                    break
                msg, self.buf = json.loads(rest[:n]), rest[n:]
                if "method" in msg and "id" not in msg:
                    self.notes.append(msg)
                if msg.get("id") == msg_id and "method" not in msg:
                    return msg
            r, _, _ = select.select([self.p.stdout], [], [], 0.2)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buf += chunk
        return None

    def status(self, msg_id: int) -> Optional[dict]:
        self.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand",
                         "params": {"command": "kernelband.status", "arguments": []}}))
        return self.reply(msg_id, 10)

    def close(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()


def test_bad_content_lengths_leave_the_server_listening(tmp_path):
    s = RawServer(tmp_path)
    try:
        ok = {"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand",
              "params": {"command": "kernelband.status", "arguments": []}}
        body = json.dumps(ok).encode()
        s.send(frame(ok, str(len(body) - 7).encode()))  # too small
        assert s.status(2) is not None, "deaf after a too-small Content-Length"
        s.send(frame({"jsonrpc": "2.0", "method": "x"}, b"twelve"))  # non-numeric
        assert s.status(3) is not None, "deaf after a non-numeric Content-Length"
        s.send(frame(dict(ok, id=4), str(len(body) + 40).encode()))  # too large, then a good one
        assert s.status(5) is not None, "deaf after a too-large Content-Length"
        s.send(frame(dict(ok, id=6), str(len(body) + 40).encode()))  # too large, the last one sent
        assert s.reply(6, 10) is not None, "a too-large length on the last message is never answered"
        s.send(frame({"jsonrpc": "2.0", "method": "x"}, str(2 ** 40).encode()))  # huge
        assert s.status(7) is not None and s.p.poll() is None, "a 2^40 Content-Length killed the server"
    finally:
        s.close()


async def test_cancel_with_a_dict_job_id_is_an_error_not_an_exception(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws) as (client, editor, rec):
        for bad in ({"jobId": {"id": 1}}, {"jobId": 7}, {"jobId": ""}, 5):
            res = await run_command(client, "kernelband.cancel", bad)
            assert res["cancelled"] == [] and "error" in res, (bad, res)
        assert (await run_command(client, "kernelband.status"))["pid"]


# ---------------------------------------------------------------------------- defect 3
def test_a_log_line_reaches_the_client_once(tmp_path):
    s = RawServer(tmp_path)
    try:
        assert s.status(1) is not None
        logged = [n for n in s.notes if n["method"] == "window/logMessage" and "initialised" in n["params"]["message"]]
        assert len(logged) == 1
    finally:
        s.close()
    # VS Code's output channel shows stderr too: the same line must not be there again
    assert "initialised" not in s.stderr_path.read_text()


async def test_job_log_events_are_not_repeated_as_server_log_lines(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=fake_env(tmp_path)) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        await run_command(client, "kernelband.optimize", {"uri": uri, "kernel": "axpy_kernel"})
        assert [e for e in rec.events(etype="log") if "worker pid" in e["event"]["message"]]
        assert not [m for m in client.log_messages if "worker pid" in m.message]


# ---------------------------------------------------------------------------- inlay hints
async def inlay(client, uri, text):
    end = text.count("\n") + 1
    return await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=doc(uri), range=types.Range(start=types.Position(line=0, character=0),
                                                  end=types.Position(line=end, character=0))))


async def test_inlay_hints_show_the_profile_and_the_best_launch_config(tmp_path):
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    text = path.read_text()
    res = improved_result(text)
    store_result(ws, path, "axpy_kernel", res)
    profile = {"kernel": "axpy_kernel", "interpreted": False,
               "tiers": {"static": {"n_regs": 32, "n_spills": 0, "shared_bytes": 0, "occupancy": {"theoretical": 1.0}},
                         "timing": {"time_per_launch_ms": 0.42, "bandwidth_frac": 0.71}, "counters": None},
               "saturation": {"DRAM": 0.71, "SM": 0.05, "L2": 0.2},
               "diagnosis": {"bottleneck": "memory-bound", "evidence": "x", "strategies": []}}
    with Store.for_workspace(ws) as st:
        st.put_profile(ProfileKey(res["original_hash"], "h", "FAKE GPU", "3.0", "axpy_kernel"), Profile.from_dict(profile),
                       file=str(path))
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(path)
        hints = await inlay(client, uri, text)
        labels = [h.label for h in hints]
        assert "32 regs · 0 spills · 0 KB smem · occ 100% · 0.42 ms · 71% of HBM peak" in labels, labels
        sig = next(h for h in hints if "regs" in h.label)
        assert text.splitlines()[sig.position.line].startswith("def axpy_kernel")
        launch = [h for h in hints if h.label.startswith("KernelBand:")]
        assert launch and "BLOCK_SIZE=1024" in launch[0].label and "4.14x" in launch[0].label
        assert "axpy_kernel[grid]" in text.splitlines()[launch[0].position.line]


async def test_no_launch_hint_for_an_interpreted_result(tmp_path):
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    text = path.read_text()
    store_result(ws, path, "axpy_kernel", improved_result(text, interpreted=True))
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(path)
        assert not [h for h in await inlay(client, uri, text) if str(h.label).startswith("KernelBand:")]


# ---------------------------------------------------------------------------- live lenses
async def test_lenses_refresh_live_while_a_job_runs(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_env(tmp_path)
    env["FAKE_STEP_S"] = "0.3"
    async with start_session(ws, env=env, settings={"budget": {"evaluations": 4}}) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        import asyncio

        task = asyncio.ensure_future(run_command(client, "kernelband.optimize", {"uri": uri, "kernel": "axpy_kernel"}))
        await wait_until(lambda: rec.events(etype="progress"), 20, what="progress")
        before = rec.lens_refreshes
        await wait_until(lambda: rec.lens_refreshes > 0, 5, what="workspace/codeLens/refresh")
        titles = await lens_titles(client, uri)
        assert any(t.startswith("optimizing ") and "/4" in t for t in titles), titles
        await asyncio.wait_for(task, 30)
        await wait_until(lambda: rec.lens_refreshes > before, 5, what="a refresh when the job ends")
        assert "Apply found variant (1.43x)" in await lens_titles(client, uri)


# ---------------------------------------------------------------------------- defect 7 (hover)
async def test_hover_on_a_huge_file_does_not_wait_for_the_whole_analysis(tmp_path):
    import asyncio
    import time as _time

    import lsp_latency as B

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    text = B.big_module(600)
    f = ws / "huge.py"
    f.write_text(text)
    lines = text.split("\n")
    line = next(i for i, ln in enumerate(lines) if ln.startswith("def kernel_599"))
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(f)
        t0 = _time.perf_counter()
        done: dict[str, float] = {}

        async def timed(name, coro):
            res = await coro
            done[name] = _time.perf_counter() - t0
            return res

        lens = asyncio.ensure_future(timed("lens", client.text_document_code_lens_async(
            types.CodeLensParams(text_document=doc(uri)))))
        hov = await timed("hover", client.text_document_hover_async(types.HoverParams(
            text_document=doc(uri), position=types.Position(line=line, character=6))))
        await lens
        assert hov is not None and "kernel_599" in hov.contents.value
        assert done["hover"] < done["lens"] / 3, done


# ---------------------------------------------------------------------------- defect 4 (review outside VS Code)
async def test_a_client_without_a_diff_view_reviews_before_applying(tmp_path):
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    text = path.read_text()
    store_result(ws, path, "axpy_kernel", improved_result(text))
    async with start_session(ws) as (client, editor, rec):
        asked: list[str] = []
        answer = {"title": "Discard"}

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def ask(ls, params: types.ShowMessageRequestParams):
            asked.append(params.message)
            return types.MessageActionItem(title=answer["title"])

        uri = editor.open(path)
        line = text[: text.index("def axpy_kernel")].count("\n")
        acts = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=doc(uri), range=types.Range(start=types.Position(line=line, character=0),
                                                       end=types.Position(line=line, character=0)),
            context=types.CodeActionContext(diagnostics=[])))
        titles = [a.title for a in acts]
        review = next((a for a in acts if a.title.startswith("Review found variant")), None)
        assert review is not None, titles
        # (pygls's client structures a CodeAction carrying a command as a Command; the JSON is right)
        assert "kernelband.reviewVariant" in str(review.command), review
        args = [{"uri": uri, "kernel": "axpy_kernel"}]
        out = await run_command(client, "kernelband.reviewVariant", *args)
        assert out["applied"] is False and out["message"] == "discarded" and editor.text(uri) == text
        diff = Path(out["diffFile"]).read_text()
        assert "+    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=1024)" in diff and "# GPU: NVIDIA H100" in diff
        assert client.shown_documents and asked and "4.14x" in asked[0]
        answer["title"] = "Apply"
        out = await run_command(client, "kernelband.reviewVariant", *args)
        assert out["applied"] is True and "BLOCK_SIZE=1024" in editor.text(uri)
