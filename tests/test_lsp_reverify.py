"""A user can rerun the verification of an applied variant from the lens.

Over real LSP on stdio (pytest-lsp). After Apply the file holds the variant, so the
re-verification must check it against the original it replaced, not against itself:
the fake engine's ``check`` reports the sha256 of the original it got on stdin and of
the variant file, and the tests compare them with the texts the editor held. The real
engine's check (Triton interpreter) is in test_lsp_real.py.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lsprotocol import types

from kernelband.result_builder import unified_diff
from kernelband.store import Store

from helpers.lsp import copy_examples, job_data, start_session, write_fake_engine

KERNEL = "axpy_kernel"
APPLY = "Apply found variant (1.43x)"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fake_env(tmp_path, **extra: str) -> dict[str, str]:
    return {"KERNELBAND_LSP_JOB_COMMAND": json.dumps(write_fake_engine(tmp_path)), "FAKE_STEP_S": "0.02", **extra}


async def titles(client, uri) -> list[str]:
    res = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return [lens.command.title for lens in res or []]


async def lens_commands(client, uri) -> dict[str, str]:
    res = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return {lens.command.title: lens.command.command for lens in res or []}


async def command(client, name: str, **args):
    return job_data(await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=[args])))


async def hover_card(client, uri: str, text: str) -> str:
    i = text.index(f"def {KERNEL}") + 5
    line = text.count("\n", 0, i)
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=i - (text.rfind("\n", 0, i) + 1))))
    return h.contents.value if h else ""


async def refactor_titles(client, uri: str, text: str) -> list[str]:
    line = text[: text.index(f"def {KERNEL}")].count("\n")
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)),
        context=types.CodeActionContext(diagnostics=[])))
    return [a.title for a in acts or []]


def reverify_lens(ts: list[str]) -> list[str]:
    return [t for t in ts if t.endswith("· Re-verify")]


async def test_reverify_after_apply_checks_the_applied_text_against_the_original(tmp_path):
    ws = copy_examples(tmp_path)
    async with start_session(ws, env=fake_env(tmp_path)) as (client, editor, rec):
        uri = editor.open(ws / "add_scale.py")
        original = editor.text(uri)
        res = await command(client, "kernelband.optimize", uri=uri, kernel=KERNEL)
        assert res["status"] == "improved"
        assert not reverify_lens(await titles(client, uri))  # nothing applied yet
        assert (await command(client, "kernelband.applyVariant", uri=uri, kernel=KERNEL))["applied"] is True
        applied = editor.text(uri)
        assert applied != original and "BLOCK_SIZE=1024" in applied

        lenses = await lens_commands(client, uri)
        assert lenses.get("Applied variant (1.43x) · Re-verify") == "kernelband.reverify", lenses
        assert not [t for t in lenses if t.startswith("Apply found")]
        assert "Re-verify the applied variant of axpy_kernel against its original (KernelBand)" in \
            await refactor_titles(client, uri, applied)
        assert "**Applied:**" in await hover_card(client, uri, applied)

        out = await command(client, "kernelband.reverify", uri=uri, kernel=KERNEL)
        check = out["check"]
        # the job got the original on stdin and the text as it stands as the variant
        assert check["original_sha"] == sha(original) and check["variant_sha"] == sha(applied)
        assert check["argv"][0] == "check" and "--variant" in check["argv"] and "--stdin-source" in check["argv"]
        assert out["verified"] is True and out["summary"] == "re-verified: correct, 1.41x faster, 95% CI 1.30–1.52"
        assert "Re-verified: correct, 1.41x faster, 95% CI 1.30–1.52 · Re-verify" in await titles(client, uri)
        assert "re-verified: correct, 1.41x faster" in await hover_card(client, uri, applied)
        ends = [getattr(r, "message", "") for rs in client.progress_reports.values() for r in rs
                if isinstance(r, types.WorkDoneProgressEnd)]
        assert "re-verified: correct, 1.41x faster, 95% CI 1.30–1.52" in ends

        # the user's edit elsewhere: both sides carry it, the variant's change stays the difference
        editor.set_text(uri, "# a note\n" + applied)
        out = await command(client, "kernelband.reverify", uri=uri, kernel=KERNEL)
        assert out["check"]["original_sha"] == sha("# a note\n" + original)
        assert out["check"]["variant_sha"] == sha("# a note\n" + applied)

        editor.set_text(uri, original)  # Undo: nothing applied, the variant is offered again
        ts = await titles(client, uri)
        assert APPLY in ts and not reverify_lens(ts)
        out = await command(client, "kernelband.reverify", uri=uri, kernel=KERNEL)
        assert out["verified"] is False and out["jobId"] is None and "no applied KernelBand variant" in out["message"]


def store_applied_result(ws: Path, path: Path, original: str, variant: str, original_hash: str = "") -> None:
    session = "s1"
    result = {"status": "improved", "kernel": KERNEL, "file": str(path), "session_id": session,
              "original_hash": original_hash or sha(original), "baseline_ms": 0.642, "best_ms": 0.155, "speedup": 4.14,
              "speedup_ci": [3.9, 4.3], "evaluations": 8, "interpreted": False, "clock": "cuda-events",
              "gpu": "NVIDIA H100", "paired_rounds": 7, "strategy_path": ["tiling"], "best_source": variant,
              "diff": unified_diff(original, variant, str(path)), "warnings": [], "message": "", "applied": True}
    with Store.for_workspace(ws) as st:
        st.start_session(session, str(path), KERNEL, result["original_hash"], "NVIDIA H100", "3.0", {})
        st.finish_session(session, "improved", result)


async def test_a_fresh_server_rebuilds_the_original_from_the_stored_result(tmp_path):
    """`kernelband optimize --apply` (or an earlier server) left the variant in the file:
    the original exists only in the store, as the Result's variant and diff."""
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    original = path.read_text()
    variant = original.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")
    store_applied_result(ws, path, original, variant)
    path.write_text(variant)
    async with start_session(ws, env=fake_env(tmp_path, FAKE_CHECK_STATUS="mismatch")) as (client, editor, rec):
        uri = editor.open(path)
        assert "Applied variant (4.14x) · Re-verify" in await titles(client, uri)
        out = await command(client, "kernelband.reverify", uri=uri, kernel=KERNEL)
        assert out["check"]["original_sha"] == sha(original) and out["check"]["variant_sha"] == sha(variant)
        assert out["verified"] is False
        assert out["summary"] == "re-verification failed (mismatch): max abs error 2.0 > atol 1e-05"
        assert "Re-verification failed (mismatch): max abs error 2.0 > atol 1e-05 · Re-verify" in await titles(client, uri)
        editor.set_text(uri, original)  # Undo after a restart: the stored variant is offered again
        assert "Apply found variant (4.14x)" in await titles(client, uri)


async def test_no_reverify_when_the_stored_original_cannot_be_rebuilt(tmp_path):
    """A Result whose diff does not lead back to its original_hash is never guessed at."""
    ws = copy_examples(tmp_path)
    path = ws / "add_scale.py"
    original = path.read_text()
    variant = original.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")
    store_applied_result(ws, path, original, variant, original_hash=sha(original + "# another text\n"))
    path.write_text(variant)
    async with start_session(ws, env=fake_env(tmp_path)) as (client, editor, rec):
        uri = editor.open(path)
        assert not reverify_lens(await titles(client, uri))
        out = await command(client, "kernelband.reverify", uri=uri, kernel=KERNEL)
        assert out["verified"] is False and out["jobId"] is None
