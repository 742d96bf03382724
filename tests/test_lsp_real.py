"""End-to-end: kernelband-lsp over stdio (pytest-lsp, VS Code's capabilities) running
real KernelBand jobs (``python -m kernelband``) under the Triton interpreter."""
from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from helpers.lsp import copy_examples, descendants, process_alive, start_session, wait_until
from helpers.lsp import doc, hover, lenses, name_pos, run_command

pytestmark = pytest.mark.slow

# Tiling only, three evaluations: the workspace's add_scale.py is made to have an
# obvious tiling win (see speedup_workspace), found by the first evaluation.
BUDGET = {"budget": {"evaluations": 3}, "strategies": ["tiling"]}


def speedup_workspace(tmp_path):
    """The examples, with add_scale.py launched at BLOCK_SIZE=16 on a small CPU input
    (2,003 elements: the interpreter's programs are most of a job's time): each program
    costs about the same, so BLOCK_SIZE 16 -> 32 is an obvious tiling win. The rules generator picks among equally near rewrites with a seed
    derived from the source; a header comment is chosen so that its first tiling
    rewrite is that one, which keeps the search (and the test) short and deterministic."""
    ws = copy_examples(tmp_path)
    base = (ws / "add_scale.py").read_text().replace("BLOCK_SIZE=128)", "BLOCK_SIZE=16)").replace(
        "else 50_003", "else 2_003")
    assert "BLOCK_SIZE=16)" in base and "2_003" in base
    chosen = "# KernelBand LSP test workspace\n" + base
    try:
        from kernelband.generators import make_generator
        from kernelband.generators.base import GenContext
        from kernelband.model import Variant

        for i in range(64):
            src = f"# KernelBand LSP test workspace ({i})\n" + base
            gen = make_generator("rules").generate(
                Variant(src), "tiling", GenContext(kernel="axpy_kernel", harness="harness_axpy", module_path=str(ws)))
            if gen.variant is not None and gen.variant.description.startswith("BLOCK_SIZE 16 -> 32"):
                chosen = src
                break
    except Exception:  # the engine's internals moved: the 3-evaluation search still usually finds it
        pass
    (ws / "add_scale.py").write_text(chosen)
    return ws


async def test_real_optimize_reports_progress_and_its_edit_keeps_the_users_changes(tmp_path):
    ws = speedup_workspace(tmp_path)
    async with start_session(ws, settings=BUDGET) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        task = asyncio.ensure_future(run_command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel"))
        await wait_until(lambda: rec.events(etype="baseline"), 120, what="the baseline")
        # the server answers while the job runs
        line, col = name_pos(editor.text(uri), "axpy_kernel")
        t0 = time.perf_counter()
        h = await hover(client, uri, line, col)
        assert time.perf_counter() - t0 < 1.0 and "optimizing" in h.contents.value
        # the user keeps typing outside the kernel while the job runs
        editor.replace(uri, 0, 0, "# note typed during the job\n")
        end = len(editor.text(uri))
        editor.replace(uri, end, end, "# and another at the end\n")
        res = await asyncio.wait_for(task, 400)
        # under the interpreter the engine verifies correctness and claims no speed
        assert res["status"] == "verified_correct", res.get("message")
        assert res["speedup"] is None and res["speedup_ci"] is None and res["interpreted"] is True
        # timed under the CPU interpreter: correct, but never offered as a speedup (no edit in
        # the reply, no Apply lens); the explicit review-and-apply commands still work
        assert res["edit"] is None and res["editMessage"] == "correct; speed needs a GPU"
        assert "Variant found: correct; speed needs a GPU · Review" in [lens.command.title for lens in await lenses(client, uri)]
        prop = await run_command(client, "kernelband.proposedEdit", uri=uri, kernel="axpy_kernel")
        assert prop["interpreted"] is True and prop["rebuilt"] is True and prop["version"] == editor.version(uri)
        out = await run_command(client, "kernelband.applyVariant", uri=uri, kernel="axpy_kernel")
        assert out["applied"] is True, out
        assert editor.text(uri) == "# note typed during the job\n" + res["best_source"] + "# and another at the end\n"
        # progress: begin (cancellable), reports up to 100%, end
        (token,) = list(client.progress_reports)
        reports = client.progress_reports[token]
        assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
        assert isinstance(reports[-1], types.WorkDoneProgressEnd) and "speed needs a GPU" in reports[-1].message
        pcts = [r.percentage for r in reports if isinstance(r, types.WorkDoneProgressReport) and r.percentage is not None]
        assert pcts == sorted(pcts) and pcts[-1] == 100
        kinds = [e["event"]["type"] for e in rec.events(res["jobId"])]
        assert kinds[0] == "started" and kinds.count("candidate") == 3 and kinds[-1] == "result"
        status = await run_command(client, "kernelband.status")
        assert status["torchLoaded"] is False and status["tritonLoaded"] is False
        # the lens re-runs the check of the applied variant (the user's notes on both sides)
        assert "Applied variant (correct; speed needs a GPU) · Re-verify" in [
            lens.command.title for lens in await lenses(client, uri)]
        rv = await asyncio.wait_for(run_command(client, "kernelband.reverify", uri=uri, kernel="axpy_kernel"), 300)
        assert rv["verified"] is True and rv["summary"] == "re-verified: correct; speed needs a GPU", rv
        assert rv["check"]["status"] == "ok" and rv["check"]["verdict"] == "verified_correct"


async def test_real_reverify_catches_a_wrong_applied_variant(tmp_path):
    """The applied text is checked against the original it replaced (rebuilt from the
    store), not against itself: a wrong variant in the file fails."""
    import hashlib

    from kernelband.result_builder import unified_diff
    from kernelband.store import Store

    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    original = path.read_text()
    wrong = original.replace("alpha * x + y", "alpha * x - y")
    result = {"status": "improved", "kernel": "axpy_kernel", "file": str(path), "session_id": "s1",
              "original_hash": hashlib.sha256(original.encode()).hexdigest(), "speedup": 1.5, "speedup_ci": [1.4, 1.6],
              "best_source": wrong, "diff": unified_diff(original, wrong, str(path)), "gpu": "NVIDIA H100"}
    with Store.for_workspace(ws) as st:
        st.start_session("s1", str(path), "axpy_kernel", result["original_hash"], "NVIDIA H100", "3.0", {})
        st.finish_session("s1", "improved", result)
    path.write_text(wrong)  # `optimize --apply` wrote it
    async with start_session(ws) as (client, editor, rec):
        uri = editor.open(path)
        assert "Applied variant (1.50x) · Re-verify" in [lens.command.title for lens in await lenses(client, uri)]
        rv = await asyncio.wait_for(run_command(client, "kernelband.reverify", uri=uri, kernel="axpy_kernel"), 300)
        assert rv["verified"] is False and rv["check"]["status"] == "mismatch", rv
        assert rv["summary"].startswith("re-verification failed (mismatch)")
        titles = [lens.command.title for lens in await lenses(client, uri)]
        assert [t for t in titles if t.startswith("Re-verification failed (mismatch)") and t.endswith("· Re-verify")]


async def test_real_cancel_stops_the_job_and_its_processes(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, settings={"budget": {"evaluations": 16}}) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        task = asyncio.ensure_future(run_command(client, "kernelband.optimize", uri=uri, kernel="axpy_kernel"))
        await wait_until(lambda: rec.events(etype="baseline"), 120, what="the baseline (the worker is up)")
        server_pid = client._server.pid
        job_pid = rec.events(etype="baseline")[0]["pid"]
        assert job_pid in descendants(server_pid)
        # the job's processes: the session, its judge, the judge's fork server and its jobs
        # (the server may have helper processes of its own, which are not the job's)
        procs = {job_pid} | descendants(job_pid)
        assert len(procs) >= 2, "expected the session and its evaluation worker"
        token = next(iter(client.progress_reports))
        t0 = time.monotonic()
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        res = await asyncio.wait_for(task, 30)
        assert res["status"] == "cancelled" and res["edit"] is None
        await wait_until(lambda: not any(process_alive(p) for p in procs), 15, what="every job process to exit")
        assert time.monotonic() - t0 < 15
        assert isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd)
        # the server is fine afterwards
        assert await lenses(client, uri)


async def test_real_profile_then_background_on_save_with_a_quick_fix(tmp_path):
    ws = speedup_workspace(tmp_path)
    settings = {"backgroundOnSave": True, **BUDGET}
    async with start_session(ws, settings=settings) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        prof = await asyncio.wait_for(run_command(client, "kernelband.profile", uri=uri, kernel="axpy_kernel"), 300)
        assert prof["profile"] and prof["profile"]["kernel"] == "axpy_kernel", prof
        summary = (await lenses(client, uri))[2].command.title
        assert summary.startswith("last: ") and "interpreter" in summary
        line, col = name_pos(editor.text(uri), "axpy_kernel")
        assert "| time |" in (await hover(client, uri, line, col)).contents.value

        editor.save(uri)  # background job on save
        await wait_until(lambda: [e for e in rec.events(etype="result") if e["background"]], 400, interval=0.5,
                         what="the background result")
        result = rec.events(etype="result")[-1]["event"]["result"]
        assert result["status"] == "verified_correct" and result["interpreted"] is True
        # an interpreter-timed result: no "faster variant" diagnostic or quick fix, a label instead
        titles: list = []
        for _ in range(100):  # the job's state settles just after its result event
            titles = [lens.command.title for lens in await lenses(client, uri)]
            if "Variant found: correct; speed needs a GPU · Review" in titles:
                break
            await asyncio.sleep(0.1)
        assert "Variant found: correct; speed needs a GPU · Review" in titles and not [t for t in titles if t.startswith("Apply")]
        assert not [d for d in client.diagnostics.get(uri, []) if d.code == "variant-found"]
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=doc(uri), range=types.Range(start=types.Position(line=line, character=0),
                                                       end=types.Position(line=line, character=0)),
            context=types.CodeActionContext(diagnostics=[])))
        assert not [a for a in actions or [] if getattr(a, "title", "").startswith("Apply found variant")]
