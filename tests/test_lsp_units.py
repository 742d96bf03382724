"""Unit tests of the language server's logic modules (no LSP I/O): positions, edits,
settings, detection cache, lenses and the hover card."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelband_lsp import edits as E
from kernelband_lsp import summary as S
from kernelband_lsp.documents import Documents, analyse
from kernelband.model import Result
from kernelband.profile.schema import Profile
from kernelband_lsp.hover import CardInputs, card
from kernelband_lsp.lenses import KernelStatus, code_lenses, stub_insertion
from kernelband_lsp.positions import LineIndex, split_lines
from kernelband_lsp.settings import Settings, parse_settings, secret_from

from helpers.lsp import EXAMPLES, apply_text_edits, typical_profile

ADD = (EXAMPLES / "add_scale.py").read_text(encoding="utf-8")


# ------------------------------------------------------------------ positions
def test_split_lines_only_on_editor_line_breaks():
    text = "a\fb\r\nc\rd\u2028e\n"
    assert split_lines(text) == ["a\fb\r\n", "c\r", "d\u2028e\n"]


def test_ast_columns_are_converted_to_utf16():
    text = "s = '😀é'; k = 1\n"
    idx = LineIndex(text)
    col_bytes = text.encode("utf-8").index(b"k")
    pos = idx.ast_to_position(1, col_bytes)
    assert pos.character == len(text[: text.index("k")].encode("utf-16-le")) // 2
    assert idx.position_to_offset(pos) == text.index("k")
    assert idx.offset_to_position(text.index("k")) == pos


# ------------------------------------------------------------------ edits
def variant_of(src: str) -> str:
    return src.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024").replace(
        "    mask = offsets < n_elements\n", "    offsets = tl.multiple_of(offsets, 16)\n    mask = offsets < n_elements\n")


def test_minimal_hunks_are_small_and_apply():
    new = variant_of(ADD)
    hunks = E.minimal_hunks(ADD, new)
    assert len(hunks) == 2
    assert all(len(h.new) < 60 for h in hunks)
    assert E.apply_hunks(ADD, hunks) == new
    # the LSP form, applied by an independent implementation, gives the same text
    assert apply_text_edits(ADD, E.to_text_edits(ADD, hunks)) == new


def test_plan_unchanged_document_is_the_variant():
    plan = E.plan_edit(ADD, variant_of(ADD), ADD, "axpy_kernel")
    assert plan.ok and not plan.rebuilt and plan.new_text == variant_of(ADD)


def test_plan_rebuilt_when_user_edited_elsewhere():
    current = "# my note\n" + ADD.replace("def harness_axpy():", "def harness_axpy():\n    # bigger soon")
    plan = E.plan_edit(ADD, variant_of(ADD), current, "axpy_kernel")
    assert plan.ok and plan.rebuilt, plan.message
    assert plan.new_text == "# my note\n" + variant_of(ADD).replace("def harness_axpy():", "def harness_axpy():\n    # bigger soon")
    assert apply_text_edits(current, E.to_text_edits(current, plan.hunks)) == plan.new_text


def test_plan_refused_when_kernel_changed():
    current = ADD.replace("alpha * x + y", "alpha * x + 2 * y")
    plan = E.plan_edit(ADD, variant_of(ADD), current, "axpy_kernel")
    assert not plan.ok and "edited after the job started" in plan.message


def test_plan_refused_when_user_touched_a_changed_line():
    current = ADD.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=128)  # tuned by hand")
    plan = E.plan_edit(ADD, variant_of(ADD), current, "axpy_kernel")
    assert not plan.ok and "touch lines the variant changes" in plan.message


def test_plan_refused_when_file_does_not_parse_or_kernel_gone():
    assert not E.plan_edit(ADD, variant_of(ADD), ADD + "\ndef broken(:\n", "axpy_kernel").ok
    gone = ADD.replace("axpy_kernel", "other_kernel")
    assert "no longer in the file" in E.plan_edit(ADD, variant_of(ADD), gone, "axpy_kernel").message


def test_user_lines_inserted_at_a_hunk_boundary_survive():
    # the user adds a line right above the launch line the variant rewrites
    launch = "    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=128)\n"
    current = ADD.replace(launch, "    # launching\n" + launch)
    plan = E.plan_edit(ADD, variant_of(ADD), current, "axpy_kernel")
    assert plan.ok, plan.message
    assert "    # launching\n    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=1024)\n" in plan.new_text


def test_workspace_edit_is_versioned():
    we = E.workspace_edit("file:///x.py", 7, ADD, E.minimal_hunks(ADD, variant_of(ADD)))
    (tde,) = we.document_changes
    assert tde.text_document.version == 7 and len(tde.edits) == 2
    plain = E.workspace_edit("file:///x.py", 7, ADD, E.minimal_hunks(ADD, variant_of(ADD)), document_changes=False)
    assert list(plain.changes) == ["file:///x.py"]


# ------------------------------------------------------------------ settings
def test_settings_defaults_and_forms():
    s, problems = parse_settings(None)
    assert s == Settings() and s.budget_evaluations == 16 and s.min_speedup == 1.03 and not problems
    nested, _ = parse_settings({"budget": {"evaluations": 4, "seconds": 30}, "backgroundOnSave": True,
                                "strategies": ["tiling"], "harness": {"k": "harness_k"}})
    flat, _ = parse_settings({"kernelband": {"budget.evaluations": 4, "budget.seconds": 30, "backgroundOnSave": True,
                                             "strategies": ["tiling"], "harness": {"k": "harness_k"}}})
    assert nested == flat
    assert nested.budget_evaluations == 4 and nested.budget_seconds == 30.0 and nested.background_on_save
    assert nested.strategies == ("tiling",) and nested.harness == {"k": "harness_k"}


def test_settings_bad_values_keep_defaults_and_secret_is_not_a_setting():
    s, problems = parse_settings({"budget": {"evaluations": "many"}, "generator": "gpt", "minSpeedup": 0.5,
                                  "apiKey": "sk-secret"})
    assert s.budget_evaluations == 16 and s.generator == "rules" and s.min_speedup == 1.03
    assert len(problems) == 3 and not any("sk-secret" in p for p in problems)
    assert "sk-secret" not in repr(s.to_dict())
    assert secret_from({"apiKey": "sk-secret"}) == "sk-secret"


# ------------------------------------------------------------------ detection cache
async def test_documents_keep_last_good_detection_while_unparsable():
    docs = Documents()
    a1 = await docs.aget("file:///a.py", "/tmp/a.py", ADD, 1)
    assert [k.name for k in a1.kernels] == ["axpy_kernel"] and not a1.stale
    a2 = await docs.aget("file:///a.py", "/tmp/a.py", ADD + "\ndef oops(:\n", 2)
    assert a2.stale and [k.name for k in a2.kernels] == ["axpy_kernel"]
    assert await docs.aget("file:///a.py", "/tmp/a.py", ADD + "\ndef oops(:\n", 2) is a2  # cached per version
    a3 = await docs.aget("file:///b.py", "/tmp/b.py", "def oops(:\n", 1)
    assert a3.kernels == [] and a3.stale


# ------------------------------------------------------------------ lenses and card
PROFILE_DICT = typical_profile()
PROFILE = Profile.from_dict(PROFILE_DICT)


def test_lens_summary_text():
    assert S.lens_summary(PROFILE, None) == "last: 0.42 ms, 71% of HBM peak, memory-bound"
    assert S.lens_summary(None, None) == "not profiled yet"
    res = Result(status="improved", baseline_ms=3.0, best_ms=1.5, best_source="x")
    assert S.lens_summary(None, res) == "last: 3.00 ms"


def test_code_lenses_per_kernel(tmp_path: Path):
    p = tmp_path / "add_scale.py"
    p.write_text(ADD)
    a = analyse(p.as_uri(), str(p), ADD, 1)
    (k,) = a.kernels
    lenses = code_lenses(a, lambda k: KernelStatus(kernel=k, harness=a.harness(k.name), profile=PROFILE,
                                                   profile_exact=True))
    titles = [lens.command.title for lens in lenses]
    assert titles == ["Optimize", "Profile", "last: 0.42 ms, 71% of HBM peak, memory-bound"]
    assert all(lens.range.start.line == k.range.start_line - 1 for lens in lenses)
    assert lenses[0].command.arguments == [{"uri": p.as_uri(), "kernel": "axpy_kernel"}]


def test_card():
    a = analyse("file:///x.py", "/nonexistent/x.py", ADD, 1)
    (k,) = a.kernels
    md = card(CardInputs(kernel=k, profile=PROFILE, profile_exact=True, harness=a.harness(k.name),
                         result=Result(status="improved", speedup=1.31, speedup_ci=[1.25, 1.38], strategy_path=["tiling"],
                                       evaluations=16, baseline_ms=0.42, best_ms=0.32)))
    assert "| time | 0.420 ms per launch" in md and "71% of measured copy peak" in md and "32/thread, 0 spilled" in md
    assert "memory-bound: 71% of DRAM peak" in md and "1.31x (95% CI 1.25–1.38x)" in md and "ncu not found" in md
    assert "| occupancy | 100% theoretical" in md
    text = card(CardInputs(kernel=k, profile=None, profile_exact=False, result=None, harness=a.harness(k.name)))
    assert "not profiled yet" in text.lower() and "harness_axpy" in text


def test_stub_goes_after_the_wrapper(tmp_path: Path):
    src = ADD[: ADD.index("def harness_axpy")]
    a = analyse("file:///x.py", str(tmp_path / "x.py"), src, 1)
    (k,) = a.kernels
    offset, text = stub_insertion(a, k)
    new = src[:offset] + text + src[offset:]
    assert "def harness_axpy_kernel():" in new
    assert new.index("def harness_axpy_kernel") > new.index("def axpy(")
    import ast

    ast.parse(new)


async def test_request_registry_cancels_the_command_task_even_before_it_starts():
    import asyncio

    from kernelband_lsp.cancellation import RequestRegistry

    reg = RequestRegistry()
    started = asyncio.Event()

    async def command() -> str:
        started.set()
        await asyncio.sleep(60)
        return "done"

    # cancelled while running: the task gets CancelledError (the command cancels its job)
    task = asyncio.ensure_future(reg.track(1, command)())
    await started.wait()
    assert reg.in_flight() == [1] and reg.cancel(1)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reg.in_flight() == [] and not reg.cancel(1)
    # cancelled between dispatch and the task's first step: the command never runs
    started.clear()
    task = asyncio.ensure_future(reg.track("r2", command)())
    assert reg.cancel("r2")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not started.is_set() and reg.in_flight() == []

    # a finished command leaves nothing behind
    async def quick() -> int:
        return 7

    assert await reg.track(3, quick)() == 7 and reg.in_flight() == []


def test_the_noise_floor_has_one_owner():
    """The editor's default minimum speedup is the engine's (kernelband/verdict.py), in the
    server's settings and in the VS Code extension's contribution."""
    import json
    from pathlib import Path

    from kernelband.verdict import DEFAULT_MIN_SPEEDUP

    pkg = json.loads((Path(__file__).resolve().parent.parent / "vscode-client" / "package.json").read_text())
    assert pkg["contributes"]["configuration"]["properties"]["kernelband.minSpeedup"]["default"] == DEFAULT_MIN_SPEEDUP
    assert Settings().min_speedup == DEFAULT_MIN_SPEEDUP
