"""The editor, round 3: the server side of what a kernel engineer meets, over real LSP on
stdio (pytest-lsp). Jobs replay event streams a real engine wrote under the Triton
interpreter (tests/data/events) through the stand-in engine, so every word checked here
is what the server makes of real events.

1. no ratio and no before -> after time anywhere under the interpreter
4. a found variant on CPU is reachable: its lens and a code action open the review
5. a variant whose kernel was edited: rebased over a comment, hidden after a code change
6. inlay hints after Profile without a keystroke, and not "(earlier version)" for a space
8. a Triton file that never parsed gets a diagnostic
10. the re-check of a stored variant is not "#0 ... 0/4"; progress reaches 4/4
11. no bookkeeping in progress text, no pygls warning, settings in words
12. while no event comes (the engine's start), progress says what runs and for how long
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from lsprotocol import types

from helpers.lsp import REPO, copy_examples, job_data, start_session, wait_until, write_fake_engine

EVENTS = Path(__file__).resolve().parent / "data" / "events"
# a ratio ("48.23x", "48.23×") or a before -> after pair of times
SPEED_CLAIM = re.compile(r"\d(?:\.\d+)?\s*[x×](?![a-z])|(?:ms|µs|\d s)\s*(?:→|->)")


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def replay_env(tmp_path: Path, stream: str, step: float = 0.05, **extra: str) -> dict[str, str]:
    return {"KERNELBAND_LSP_JOB_COMMAND": json.dumps(write_fake_engine(tmp_path)), "FAKE_STEP_S": str(step),
            "FAKE_REPLAY": str(EVENTS / stream) if stream else "", **extra}


async def lens_list(client, uri) -> list[types.CodeLens]:
    return list(await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(uri))) or [])


async def lens_titles(client, uri) -> list[str]:
    return [lens.command.title for lens in await lens_list(client, uri)]


async def actions_at(client, uri, text: str, name: str) -> list:
    line = text[: text.index(f"def {name}")].count("\n")
    return list(await client.text_document_code_action_async(types.CodeActionParams(
        text_document=doc(uri), range=types.Range(start=types.Position(line=line, character=0),
                                                   end=types.Position(line=line, character=0)),
        context=types.CodeActionContext(diagnostics=[]))) or [])


async def hover_text(client, uri, text: str, name: str) -> str:
    i = text.index(f"def {name}") + 5
    line = text.count("\n", 0, i)
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(uri), position=types.Position(line=line, character=i - (text.rfind("\n", 0, i) + 1))))
    return h.contents.value if h else ""


async def command(client, name: str, **args):
    return job_data(await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=[args])))


def progress_messages(client) -> list[str]:
    return [getattr(r, "message", None) or "" for rs in client.progress_reports.values() for r in rs]


# ---------------------------------------------------------------------------- defect 1
async def test_no_speed_claim_anywhere_for_an_interpreter_run(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=replay_env(tmp_path, "interpreter_fresh.jsonl")) as (client, editor, rec):
        answers = []

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def ask(ls, params: types.ShowMessageRequestParams):
            answers.append(params.message)
            return types.MessageActionItem(title="Discard")

        uri = editor.open(ws / "add_scale.py")
        text = editor.text(uri)
        seen_lenses: list[str] = []
        running = asyncio.ensure_future(command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel"))
        while not running.done():  # the lens line while the job runs
            seen_lenses += await lens_titles(client, uri)
            await asyncio.sleep(0.05)
        res = running.result()
        assert res["status"] == "verified_correct" and res["speedClaim"] is False
        assert any(t.startswith("optimizing") for t in seen_lenses), seen_lenses
        shown = [res["summary"], *seen_lenses, *progress_messages(client)]
        for e in rec.job_events:
            shown += [e.get("text") or "", e.get("line") or ""]
            assert e["speedClaim"] is False or e["event"]["type"] in ("started", "log")
        shown += await lens_titles(client, uri)
        shown.append(await hover_text(client, uri, text, "axpy_kernel"))
        shown += [a.title for a in await actions_at(client, uri, text, "axpy_kernel")]
        prop = await command(client, "kernelband.proposedEdit", uri=uri, kernel="axpy_kernel")
        assert prop["speedup"] is None and prop["speedClaim"] is False and prop["what"] == "correct; speed needs a GPU"
        shown += [prop["summary"], prop["what"], *(f"{r['label']}: {r['value']}" for r in prop["evidence"])]
        out = await command(client, "kernelband.reviewVariant", uri=uri, kernel="axpy_kernel")
        assert out["message"] == "discarded"
        shown += answers + [Path(out["diffFile"]).read_text().split("\n---", 1)[0]]
        shown += [m.message for m in client.log_messages]
        bad = [t for t in shown if SPEED_CLAIM.search(t)]
        assert not bad, bad
        assert "GPU: CPU" not in "\n".join(shown)


# ---------------------------------------------------------------------------- defect 4
async def test_a_variant_found_on_cpu_is_reachable_from_its_lens_and_a_code_action(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=replay_env(tmp_path, "interpreter_fresh.jsonl")) as (client, editor, rec):
        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def ask(ls, params: types.ShowMessageRequestParams):
            return types.MessageActionItem(title="Apply")

        uri = editor.open(ws / "add_scale.py")
        text = editor.text(uri)
        await command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        lens = next(candidate for candidate in await lens_list(client, uri) if candidate.command.title.startswith("Variant found"))
        assert lens.command.title == "Variant found: correct; speed needs a GPU · Review"
        assert lens.command.command == "kernelband.reviewVariant"
        acts = [a for a in await actions_at(client, uri, text, "axpy_kernel") if "variant" in a.title]
        assert len(acts) == 1 and "kernelband.reviewVariant" in str(acts[0].command)
        # the lens's command: diff shown, then the question; Apply applies it as a versioned edit
        out = await command(client, lens.command.command, **lens.command.arguments[0])
        assert out["applied"] is True, out
        assert client.shown_documents and client.shown_documents[-1].uri.endswith("axpy_kernel.diff")
        assert editor.text(uri) != text and "BLOCK_SIZE" in editor.text(uri)


# ---------------------------------------------------------------------------- defect 5
async def test_a_variant_follows_a_comment_and_hides_after_a_code_change(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=replay_env(tmp_path, "interpreter_fresh.jsonl")) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        text = editor.text(uri)
        await command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        assert "Variant found: correct; speed needs a GPU · Review" in await lens_titles(client, uri)
        # a comment line inside the kernel: the verified code is the same, the variant is carried over
        at = text.index("    mask = offsets < n_elements")
        editor.replace(uri, at, at, "    # bounds of the last block\n")
        commented = editor.text(uri)
        assert "Variant found: correct; speed needs a GPU · Review" in await lens_titles(client, uri)
        prop = await command(client, "kernelband.proposedEdit", uri=uri, kernel="axpy_kernel")
        assert "error" not in prop and "# bounds of the last block" in prop["proposed"]
        # a change of the kernel's code: the variant no longer applies, and nothing advertises it
        at = commented.index("alpha * x + y, mask=mask)")
        editor.replace(uri, at, at + len("alpha * x + y"), "alpha * x + 2 * y")
        titles = await lens_titles(client, uri)
        assert not [t for t in titles if "Variant found" in t or t.startswith("Apply")], titles
        assert not [a for a in await actions_at(client, uri, editor.text(uri), "axpy_kernel") if "variant" in a.title]
        card = await hover_text(client, uri, editor.text(uri), "axpy_kernel")
        assert "**Found:**" not in card
        assert "error" in await command(client, "kernelband.proposedEdit", uri=uri, kernel="axpy_kernel")


# ---------------------------------------------------------------------------- defect 6
async def test_inlay_hints_after_profile_without_a_keystroke_and_exact_across_a_space(tmp_path):
    ws = copy_examples(tmp_path)
    env = replay_env(tmp_path, "")
    async with start_session(ws, env=env) as (client, editor, rec):
        refreshes = []

        @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def inlay_refresh(ls, params):
            refreshes.append(1)

        uri = editor.open(ws / "add_scale.py")
        text = editor.text(uri)

        async def hints() -> list[str]:
            got = await client.text_document_inlay_hint_async(types.InlayHintParams(
                text_document=doc(uri), range=types.Range(start=types.Position(line=0, character=0),
                                                           end=types.Position(line=text.count("\n") + 1, character=0))))
            return [h.label for h in got or [] if isinstance(h.label, str)]

        assert not await hints()
        before = len(refreshes)
        res = await command(client, "kernelband.profile", uri=uri, kernel="axpy_kernel")
        assert res["profile"] is not None
        # the client is told to ask again: no keystroke needed
        await wait_until(lambda: len(refreshes) > before, 10, what="workspace/inlayHint/refresh")
        (label,) = await hints()
        assert label.startswith("32 regs") and "earlier version" not in label
        # a trailing space outside the kernel: the same code, still this version's profile
        end = editor.text(uri).index("\ndef axpy(")
        editor.replace(uri, end, end, " ")
        assert (await hints()) == [label]
        assert not [t for t in await lens_titles(client, uri) if "earlier version" in t]
        # a change of code (the launch's block size): an earlier version's profile
        at = editor.text(uri).index("BLOCK_SIZE=128")
        editor.replace(uri, at, at + len("BLOCK_SIZE=128"), "BLOCK_SIZE=256")
        (label2,) = await hints()
        assert label2.endswith("(earlier version)")


# ---------------------------------------------------------------------------- defect 8
BROKEN = '''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0
    offs = pid * BLOCK + tl.arange(0, BLOCK)
'''


async def test_a_triton_file_that_never_parsed_says_so(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "broken.py").write_text(BROKEN)
    (ws / "other.py").write_text("def f(:\n    pass\n")
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(ws / "broken.py")
        diags = await wait_until(lambda: client.diagnostics.get(uri), 20, what="a diagnostic")
        (d,) = diags
        assert d.code == "does-not-parse" and d.source == "kernelband" and d.severity == types.DiagnosticSeverity.Warning
        assert "does not parse" in d.message and "line 7" in d.message and d.range.start.line == 6
        other = editor.open(ws / "other.py")  # not Triton: someone else's syntax error, not ours to report
        await asyncio.sleep(1.0)
        assert not client.diagnostics.get(other)
        # fixed: the diagnostic goes, the lenses come
        editor.set_text(uri, BROKEN.replace("tl.program_id(0\n", "tl.program_id(0)\n"))
        await wait_until(lambda: not [x for x in client.diagnostics.get(uri, []) if x.code == "does-not-parse"], 20,
                         what="the diagnostic to clear")
        assert "No harness · Create harness" in await lens_titles(client, uri)


# ---------------------------------------------------------------------------- defect 10
async def test_the_re_check_of_a_stored_variant_and_the_last_count(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=replay_env(tmp_path, "interpreter_warm_start.jsonl")) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        await command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        msgs = [m for m in progress_messages(client) if m]
        assert "re-checked the variant an earlier session found: ok" in msgs, msgs
        assert not [m for m in msgs if "#0" in m or "0/4" in m], msgs
        counts = [m for m in msgs if "/4 evaluated" in m]
        assert counts[-1].startswith("finished: 4/4 evaluated"), counts
        ends = [r for rs in client.progress_reports.values() for r in rs if isinstance(r, types.WorkDoneProgressEnd)]
        assert ends and ends[-1].message.startswith("axpy_kernel: found a variant that is correct; speed needs a GPU")


# ---------------------------------------------------------------------------- defect 11
async def test_bookkeeping_is_no_progress_text_and_settings_are_words(tmp_path):
    ws = copy_examples(tmp_path)
    stream = tmp_path / "with_bookkeeping.jsonl"
    events = (EVENTS / "interpreter_fresh.jsonl").read_text().splitlines()
    stale = json.dumps({"type": "log", "t": 0.1, "level": "info",
                        "message": "marked 1 stale running session(s) as interrupted"})
    stream.write_text("\n".join([events[0], stale, *events[1:]]) + "\n")
    env = replay_env(tmp_path, "", FAKE_REPLAY=str(stream))
    async with start_session(ws, env=env, settings={"budget": {"evaluations": 4}}) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        await command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        assert not [m for m in progress_messages(client) if "stale" in m]
        assert [e for e in rec.job_events if "stale" in e["event"].get("message", "") and e["text"] is None]
        logs = [m.message for m in client.log_messages]
        assert "settings changed: budget.evaluations 16 → 4" in logs, logs
        assert not [m for m in logs if "{'budget'" in m or "{\"budget\"" in m]


def _frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def test_a_cancel_for_an_answered_request_says_nothing(tmp_path):
    """Clients cancel lens and hover requests that raced their answer: no warning reaches
    the user's output (stderr is what VS Code's output channel shows)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "server")]))
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None,
                                                                       "rootUri": tmp_path.as_uri()}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
         "params": {"command": "kernelband.status", "arguments": []}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 77}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None},
    ]
    p = subprocess.run([sys.executable, "-m", "kernelband_lsp"], input=b"".join(_frame(m) for m in msgs),
                       capture_output=True, env=env, timeout=60)
    assert b'"id": 2' in p.stdout and b'"id": 3' in p.stdout
    assert b"unknown message id" not in p.stderr, p.stderr.decode()[-2000:]


# ---------------------------------------------------------------------------- defect 12
async def test_progress_says_what_runs_while_no_event_comes(tmp_path):
    ws = copy_examples(tmp_path)
    env = replay_env(tmp_path, "interpreter_fresh.jsonl", FAKE_START_DELAY_S="5")
    async with start_session(ws, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        running = asyncio.ensure_future(command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel"))
        await asyncio.sleep(3.5)
        titles = await lens_titles(client, uri)
        await running
        waiting = [m for m in progress_messages(client) if m.startswith("starting the engine")]
        assert len(waiting) >= 2, progress_messages(client)  # it ticks: the elapsed time moves
        assert waiting[0].endswith(" s)") and waiting[0] != waiting[-1]
        assert "optimizing: starting the engine (Python, torch and Triton load)… · Cancel" in titles, titles
