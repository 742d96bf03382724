"""End-to-end tests of kernelband-lsp over stdio with pytest-lsp, impersonating VS Code.

Lenses, symbols, hovers, diagnostics and code actions run against the real server;
job plumbing (progress, cancellation of a process tree, versioned edits, background
queueing, watchdog) runs against a stand-in engine here and against the real engine in
test_lsp_real.py.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from kernelband.profile.schema import Profile
from kernelband.store import ProfileKey, Store

from helpers.lsp import (
    copy_examples, doc, edit_from_json, hover, lenses, name_pos, process_alive, run_command, start_session,
    typical_profile, wait_until, write_fake_engine,
)

PROFILE = typical_profile()


# ---------------------------------------------------------------------------- detection
async def test_lenses_symbols_and_hover_for_each_kernel(tmp_path):
    ws = copy_examples(tmp_path)
    text = (ws / "add_scale.py").read_text()
    with Store.for_workspace(ws) as st:  # a profile measured earlier, on exactly this text
        st.put_profile(ProfileKey(hashlib.sha256(text.encode()).hexdigest(), "h", "gpu", "3", "axpy_kernel"),
                       Profile.from_dict(PROFILE), file=str(ws / "add_scale.py"))
    async with start_session(ws) as (client, editor, rec):
        expected = {"add_scale.py": ["axpy_kernel"], "softmax.py": ["softmax_kernel"], "matmul.py": None}
        for fname, kernels in expected.items():
            uri = editor.open(ws / fname)
            got = await lenses(client, uri)
            syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(uri)))
            names = [s.name for s in syms]
            assert names and (kernels is None or names == kernels)
            for s in syms:
                assert s.kind == types.SymbolKind.Function and s.detail.startswith("@triton.jit")
                at = [lens for lens in got if lens.range.start.line == s.range.start.line]
                titles = [lens.command.title for lens in at]
                assert titles[:2] == ["Optimize", "Profile"], titles
                assert all(lens.command.arguments[0] == {"uri": uri, "kernel": s.name} for lens in at[:2])
                h = await hover(client, uri, s.selection_range.start.line, s.selection_range.start.character + 1)
                assert h is not None and h.contents.kind == types.MarkupKind.Markdown
                assert f"**{s.name}**" in h.contents.value

        uri = (ws / "add_scale.py").as_uri()
        got = await lenses(client, uri)
        assert got[2].command.title == "last: 0.42 ms, 71% of HBM peak, memory-bound"
        line, col = name_pos(editor.text(uri), "axpy_kernel")
        card = (await hover(client, uri, line, col)).contents.value
        assert "0.420 ms" in card and "71%" in card and "memory-bound" in card and "harness_axpy" in card
        # a hover on the launch site shows the card too; on other words nothing
        launch = editor.text(uri).index("axpy_kernel[grid]")
        ll = editor.text(uri).count("\n", 0, launch)
        assert (await hover(client, uri, ll, 6)) is not None
        assert (await hover(client, uri, 0, 1)) is None


async def test_a_file_that_does_not_parse(tmp_path):
    ws = copy_examples(tmp_path)
    broken = ws / "broken.py"
    broken.write_text("import triton\n\n@triton.jit\ndef k(x_ptr:\n    pass\n")
    async with start_session(ws) as (client, editor, rec):
        buri = editor.open(broken)
        assert not await lenses(client, buri)
        assert (await hover(client, buri, 3, 4)) is None
        res = await run_command(client, "kernelband.optimize", uri=buri, kernel="k")
        assert res["status"] == "failed" and "does not parse" in res["message"]

        uri = editor.open(ws / "add_scale.py")
        before = await lenses(client, uri)
        # the user is typing: the file stops parsing; the last good kernels stay
        text = editor.text(uri)
        at = text.index("def axpy(")
        editor.replace(uri, at, at, "def half_typed(:\n")
        assert [lens.command.title for lens in await lenses(client, uri)] == [lens.command.title for lens in before]
        line, col = name_pos(editor.text(uri), "axpy_kernel")
        assert "parse" in (await hover(client, uri, line, col)).contents.value
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=doc(uri), range=types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)),
            context=types.CodeActionContext(diagnostics=[])))
        assert not actions
        status = await run_command(client, "kernelband.status")
        assert status["torchLoaded"] is False and status["tritonLoaded"] is False


async def test_no_harness_warning_and_create_harness(tmp_path):
    ws = copy_examples(tmp_path)
    src = (ws / "add_scale.py").read_text()
    nh = ws / "noharness.py"
    nh.write_text(src[: src.index("def harness_axpy")])
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(nh)
        diags = await wait_until(lambda: client.diagnostics.get(uri), 10, what="the no-harness diagnostic")
        (d,) = diags
        assert d.severity == types.DiagnosticSeverity.Warning and d.code == "no-harness"
        assert "no harness for axpy_kernel" in d.message and "harness_" in d.message
        assert [lens.command.title for lens in await lenses(client, uri)][0] == "No harness · Create harness"
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=doc(uri), range=d.range, context=types.CodeActionContext(diagnostics=[d])))
        fix = next(a for a in actions if a.title.startswith("Create harness"))
        assert fix.kind == types.CodeActionKind.QuickFix and fix.diagnostics
        ok, why = editor.apply_workspace_edit(fix.edit)
        assert ok, why
        assert "def harness_axpy_kernel():" in editor.text(uri)
        await wait_until(lambda: client.diagnostics.get(uri) == [] or client.diagnostics.get(uri) == (), 10,
                         what="the diagnostic to clear")
        titles = [lens.command.title for lens in await lenses(client, uri)]
        assert titles[:2] == ["Optimize", "Profile"]
        # the command form inserts through workspace/applyEdit (nothing to do for a kernel with a harness, but it works)
        uri2 = editor.open(ws / "softmax.py")
        res = await run_command(client, "kernelband.createHarness", uri=uri2, kernel="softmax_kernel")
        assert res["applied"] is True and "def harness_softmax_kernel():" in editor.text(uri2)


# ---------------------------------------------------------------------------- jobs (stand-in engine)
def fake_engine_env(tmp_path, step_s: str) -> dict[str, str]:
    """The server's environment for jobs run by the stand-in engine, step_s seconds a step."""
    return {"KERNELBAND_LSP_JOB_COMMAND": json.dumps(write_fake_engine(tmp_path)), "FAKE_STEP_S": step_s}


async def started_job_pids(rec) -> tuple[int, int]:
    """(job process, its worker) from the first job's first log event."""
    log_ev = await wait_until(lambda: rec.events(etype="log"), 20, what="the job to start")
    return log_ev[0]["pid"], log_ev[0]["event"]["worker_pid"]


async def test_optimize_progress_edit_and_refusal(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="0.1")
    async with start_session(ws, settings={"budget": {"evaluations": 5}}, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        original = editor.text(uri)
        res = await run_command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        assert res["status"] == "improved" and res["jobId"]
        assert res["editVersion"] == editor.version(uri) and res["editRebuilt"] is False
        # $/progress: begin, reports with rising percentages, end
        (token,) = [t for t in client.progress_reports]
        reports = client.progress_reports[token]
        assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
        assert isinstance(reports[-1], types.WorkDoneProgressEnd)
        pcts = [r.percentage for r in reports if isinstance(r, types.WorkDoneProgressReport) and r.percentage is not None]
        assert pcts == sorted(pcts) and pcts[-1] == 100
        # kernelband/jobEvent for every engine event
        kinds = [e["event"]["type"] for e in rec.events(res["jobId"])]
        assert kinds[:3] == ["log", "started", "baseline"] and kinds[-1] == "result" and kinds.count("progress") == 5
        # the edit is minimal and applies cleanly
        edit = edit_from_json(client, res["edit"])
        assert len(edit.document_changes[0].edits) == 1
        ok, why = editor.apply_workspace_edit(edit)
        assert ok, why
        assert editor.text(uri) == original.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")

        # the user edits the kernel while a job runs: the result is refused, the text kept
        uri2 = editor.open(ws / "softmax.py")
        editor.set_text(uri2, editor.text(uri2).replace("BLOCK_SIZE=BLOCK_SIZE, num_warps=1", "BLOCK_SIZE=128, num_warps=1"))
        task = asyncio.ensure_future(run_command(client, "kernelband.optimize", uri=uri2, kernel="softmax_kernel"))
        await wait_until(lambda: [e for e in rec.events(etype="started") if e["uri"] == uri2], 20, what="started")
        t = editor.text(uri2)
        # a change of the kernel's code (a comment alone would be carried over: same code)
        mine = t.replace("num = tl.exp(x)", "num = tl.exp(x - 0.0)")
        editor.set_text(uri2, mine)
        res2 = await asyncio.wait_for(task, 60)
        assert res2["status"] == "improved" and res2["edit"] is None and "edited after the job started" in res2["editMessage"]
        assert editor.text(uri2) == mine
        res3 = await run_command(client, "kernelband.applyVariant", uri=uri2, kernel="softmax_kernel")
        assert res3["applied"] is False and "edited after the job started" in res3["message"]
        assert editor.text(uri2) == mine and not editor.refused


async def test_stale_edit_is_rejected_by_version_and_apply_variant_rebuilds(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="0.05")
    async with start_session(ws, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        res = await run_command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        edit = edit_from_json(client, res["edit"])
        editor.replace(uri, 0, 0, "# a note typed after the result\n")
        ok, why = editor.apply_workspace_edit(edit)  # the old version: the editor refuses it
        assert not ok and "version" in why
        prop = await run_command(client, "kernelband.proposedEdit", uri=uri, kernel="axpy_kernel")
        assert prop["version"] == editor.version(uri) and prop["rebuilt"] is True
        assert prop["proposed"].startswith("# a note typed after the result\n") and "BLOCK_SIZE=1024" in prop["proposed"]
        assert "-    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=128)" in prop["diff"]
        out = await run_command(client, "kernelband.applyVariant", uri=uri, kernel="axpy_kernel")
        assert out["applied"] is True, out
        assert editor.text(uri) == prop["proposed"]


async def test_cancel_from_the_progress_notification_kills_the_tree(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="3")
    async with start_session(ws, settings={"budget": {"evaluations": 50}}, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        task = asyncio.ensure_future(run_command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel"))
        job_pid, worker_pid = await started_job_pids(rec)
        assert process_alive(job_pid) and process_alive(worker_pid)
        token = next(iter(client.progress_reports))
        # responsive while the job runs
        t0 = time.perf_counter()
        assert (await lenses(client, uri))[0].command.command == "kernelband.cancel"
        assert time.perf_counter() - t0 < 1.0
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        res = await asyncio.wait_for(task, 20)
        assert res["status"] == "cancelled" and res["edit"] is None
        await wait_until(lambda: not process_alive(job_pid) and not process_alive(worker_pid), 10,
                         what="the job and its worker to be gone")
        assert isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd)
        # kernelband.cancel with no job: nothing to cancel
        assert (await run_command(client, "kernelband.cancel"))["cancelled"] == []


def execute_with_id(client, msg_id: str, command: str, **args):
    """An executeCommand request with a known id (for $/cancelRequest); an asyncio future."""
    params = types.ExecuteCommandParams(command=command, arguments=[args])
    return asyncio.ensure_future(client.protocol.send_request_async(types.WORKSPACE_EXECUTE_COMMAND, params,
                                                                     msg_id=msg_id))


def live_jobs(status: dict) -> list[dict]:
    return [j for j in status["jobs"] if j["state"] in ("running", "queued")]


async def queued_job(client, kernel: str) -> dict:
    """The job of kernel once the server has queued it (the request first reads settings)."""
    for _ in range(200):
        mine = [j for j in live_jobs(await run_command(client, "kernelband.status")) if j["kernel"] == kernel]
        if mine:
            (job,) = mine
            assert job["state"] == "queued"
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"no queued job for {kernel}")


async def test_cancel_request_stops_the_job_and_its_tree(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="3")
    async with start_session(ws, settings={"budget": {"evaluations": 50}}, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        uri_sm = editor.open(ws / "softmax.py")
        running = execute_with_id(client, "opt-running", "kernelband.optimize", uri=uri, kernel="axpy_kernel")
        job_pid, worker_pid = await started_job_pids(rec)
        assert process_alive(job_pid) and process_alive(worker_pid)
        # a second request queues behind it; cancelling that request drops the queued job
        queued = execute_with_id(client, "opt-queued", "kernelband.optimize", uri=uri_sm, kernel="softmax_kernel")
        qjob = await queued_job(client, "softmax_kernel")
        client.cancel_request(types.CancelParams(id="opt-queued"))
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(queued, 10)
        st = await run_command(client, "kernelband.status")
        assert {j["jobId"]: j["state"] for j in st["jobs"]}[qjob["jobId"]] == "cancelled"
        assert process_alive(job_pid), "cancelling the queued request left the running job alone"

        # cancelling the running request kills the job's process tree and frees the slot
        client.cancel_request(types.CancelParams(id="opt-running"))
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(running, 10)  # answered at once, not when the job ends
        await wait_until(lambda: not process_alive(job_pid) and not process_alive(worker_pid), 10,
                         what="the job and its worker to be gone")
        for _ in range(50):  # the job manager reaps the killed process just after it dies
            st = await run_command(client, "kernelband.status")
            if not live_jobs(st):
                break
            await asyncio.sleep(0.1)
        assert live_jobs(st) == [] and all(j["state"] == "cancelled" for j in st["jobs"]), st["jobs"]
        assert (await run_command(client, "kernelband.cancel"))["cancelled"] == []


async def test_cancel_by_uri_and_kernel(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="3")
    async with start_session(ws, settings={"budget": {"evaluations": 50}}, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        uri_sm = editor.open(ws / "softmax.py")
        first = asyncio.ensure_future(run_command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel"))
        job_pid, worker_pid = await started_job_pids(rec)
        second = asyncio.ensure_future(run_command(client, "kernelband.optimize", uri=uri_sm, kernel="softmax_kernel"))
        qjob = await queued_job(client, "softmax_kernel")
        # another kernel, or another kind, matches nothing
        assert (await run_command(client, "kernelband.cancel", uri=uri_sm, kernel="other"))["cancelled"] == []
        assert (await run_command(client, "kernelband.cancel", uri=uri_sm, kernel="softmax_kernel",
                                  kind="profile"))["cancelled"] == []
        # the queued job of that kernel goes; the running one of another kernel stays
        res = await run_command(client, "kernelband.cancel", uri=uri_sm, kernel="softmax_kernel")
        assert res["cancelled"] == [qjob["jobId"]]
        out = await asyncio.wait_for(second, 10)
        assert out["status"] == "cancelled" and out["jobId"] == qjob["jobId"]
        assert process_alive(job_pid) and not first.done()
        # the running job of a kernel, by uri and kernel: its process tree is killed
        res = await run_command(client, "kernelband.cancel", uri=uri, kernel="axpy_kernel")
        assert len(res["cancelled"]) == 1
        assert (await asyncio.wait_for(first, 20))["status"] == "cancelled"
        await wait_until(lambda: not process_alive(job_pid) and not process_alive(worker_pid), 10,
                         what="the job and its worker to be gone")
        assert live_jobs(await run_command(client, "kernelband.status")) == []


async def test_profile_command_fills_the_card(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="0.05")
    async with start_session(ws, env=env) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        res = await run_command(client, "kernelband.profile", uri=uri, kernel="axpy_kernel")
        assert res["profile"]["diagnosis"]["bottleneck"] == "memory-bound"
        assert (await lenses(client, uri))[2].command.title == "last: 0.42 ms, 71% of HBM peak, memory-bound"
        line, col = name_pos(editor.text(uri), "axpy_kernel")
        card = (await hover(client, uri, line, col)).contents.value
        assert "32/thread" in card or "registers / spills | 32 / 0" in card


async def test_background_on_save_supersede_and_files_changed_on_disk(tmp_path):
    ws = copy_examples(tmp_path)
    env = fake_engine_env(tmp_path, step_s="0.3")
    settings = {"backgroundOnSave": True, "budget": {"evaluations": 3}}
    async with start_session(ws, settings=settings, env=env) as (client, editor, rec):
        await wait_until(lambda: any("watching" in m.message for m in client.log_messages), 10, what="the watcher")
        uri = editor.open(ws / "add_scale.py")
        uri_sm = editor.open(ws / "softmax.py")
        editor.save(uri)  # job 1 runs
        await wait_until(lambda: rec.events(etype="started"), 20, what="the first background job")
        editor.save(uri_sm)  # job 2 queued (softmax has no BLOCK_SIZE=128: no improvement)
        await queued_job(client, "softmax_kernel")  # queued before the next save (it reads settings first)
        t = editor.text(uri_sm)
        editor.set_text(uri_sm, t.replace("x = x - tl.max(x, axis=0)", "x = x - tl.max(x, axis=0)  # stable"))
        editor.save(uri_sm)  # job 3 supersedes the queued job 2
        sup = await wait_until(lambda: [e for e in rec.job_events if e.get("synthetic") and e["kernel"] == "softmax_kernel"],
                               20, what="the superseded job")
        assert "superseded" in sup[0]["event"]["result"]["message"]
        diags = await wait_until(lambda: [d for d in client.diagnostics.get(uri, []) if d.code == "variant-found"], 30,
                                 what="the variant diagnostic")
        (d,) = diags
        assert d.severity == types.DiagnosticSeverity.Information and "1.43x" in d.message
        # saving again without changing the kernel queues nothing
        n = len(rec.events(etype="started"))
        editor.save(uri)
        await asyncio.sleep(0.5)
        # a file written outside the editor is noticed through watchdog
        other = ws / "pkg" / "other.py"
        other.parent.mkdir()
        other.write_text((ws / "add_scale.py").read_text())
        await wait_until(lambda: [e for e in rec.events(etype="started") if e["uri"].endswith("pkg/other.py")], 30,
                         what="a job for the file changed on disk")
        odiags = await wait_until(lambda: [d for d in client.diagnostics.get(other.as_uri(), []) if d.code == "variant-found"],
                                  30, what="the diagnostic of the file changed on disk")
        assert odiags
        started_for_add = [e for e in rec.events(etype="started") if e["uri"] == uri]
        assert len(started_for_add) == 1, "an unchanged save must not queue another job"
        _ = n


async def test_settings_from_initialization_options_and_workspace_configuration(tmp_path):
    ws = copy_examples(tmp_path)
    init = {"kernelband": {"budget": {"evaluations": 3, "seconds": 20}, "generator": "rules", "apiKey": "sk-do-not-log"}}
    async with start_session(ws, settings={"minSpeedup": 1.2}, init_options=init) as (client, editor, rec):
        for _ in range(100):  # the first pull of workspace/configuration follows `initialized`
            st = await run_command(client, "kernelband.status")
            if st["settings"]["minSpeedup"] != 1.03:
                break
            await asyncio.sleep(0.05)
        s = st["settings"]
        assert s["budget"]["evaluations"] == 3 and s["budget"]["seconds"] == 20.0  # initializationOptions
        assert s["minSpeedup"] == 1.2 and s["backgroundOnSave"] is False  # workspace/configuration on top
        assert st["watching"] is False
        # the user flips a setting: VS Code sends didChangeConfiguration, the server pulls again
        client.set_configuration({"minSpeedup": 1.2, "backgroundOnSave": True, "budget": {"evaluations": 5}},
                                 section="kernelband")
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        for _ in range(100):
            st = await run_command(client, "kernelband.status")
            if st["watching"]:
                break
            await asyncio.sleep(0.05)
        assert st["watching"] is True and st["settings"]["budget"]["evaluations"] == 5
        logs = "\n".join(m.message for m in client.log_messages)
        assert "sk-do-not-log" not in logs
