"""Shared helpers for the language-server tests (no tests here).

- ``Editor``: the client side of the documents, behaving like VS Code: it applies
  ``workspace/applyEdit`` only when the edit's version matches the document's, sends
  incremental ``didChange`` notifications, and saves to disk.
- ``start_session``: starts ``python -m kernelband_lsp`` over stdio with pytest-lsp's
  client, impersonating VS Code's capabilities.
- ``FAKE_ENGINE``: a stand-in for ``python -m kernelband`` used only for the job
  plumbing tests (event stream, progress, cancellation of a process tree); the real
  engine is used for the end-to-end optimize tests.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

from helpers.paths import EXAMPLES, REPO  # noqa: F401 (re-exported for the LSP tests)

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _offset(text: str, pos: types.Position) -> int:
    """LSP position (UTF-16 columns) -> offset; written independently of the server's code."""
    lines = _LINE.findall(text)
    if pos.line >= len(lines):
        return len(text)
    start = sum(len(ln) for ln in lines[: pos.line])
    line = lines[pos.line].rstrip("\r\n")
    units = 0
    for i, ch in enumerate(line):
        if units >= pos.character:
            return start + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return start + len(line)


def _position(text: str, offset: int) -> types.Position:
    before = text[:offset]
    lines = _LINE.findall(before)
    if not lines:
        return types.Position(line=0, character=0)
    if before.endswith(("\n", "\r")):
        return types.Position(line=len(lines), character=0)
    last = lines[-1]
    return types.Position(line=len(lines) - 1, character=len(last.encode("utf-16-le")) // 2)


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    spans = sorted(((_offset(text, e.range.start), _offset(text, e.range.end), e.new_text) for e in edits))
    for (s1, e1, _), (s2, _e2, _) in zip(spans, spans[1:]):
        assert e1 <= s2, "overlapping edits"
    out, pos = [], 0
    for s, e, new in spans:
        out.append(text[pos:s])
        out.append(new)
        pos = e
    out.append(text[pos:])
    return "".join(out)


class Editor:
    """Documents as the editor holds them."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.docs: dict[str, list] = {}  # uri -> [version, text, path]
        self.applied: list[types.ApplyWorkspaceEditParams] = []
        self.refused: list[str] = []

    def text(self, uri: str) -> str:
        return self.docs[uri][1]

    def version(self, uri: str) -> int:
        return self.docs[uri][0]

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        text = path.read_text(encoding="utf-8")
        self.docs[uri] = [1, text, path]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        return uri

    def replace(self, uri: str, start: int, end: int, new: str) -> None:
        """Type: replace text[start:end] with new (one incremental change)."""
        version, text, path = self.docs[uri]
        rng = types.Range(start=_position(text, start), end=_position(text, end))
        text = text[:start] + new + text[end:]
        version += 1
        self.docs[uri] = [version, text, path]
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new)]))

    def set_text(self, uri: str, new_text: str) -> None:
        version, _, path = self.docs[uri]
        version += 1
        self.docs[uri] = [version, new_text, path]
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=new_text)]))

    def save(self, uri: str) -> None:
        _, text, path = self.docs[uri]
        Path(path).write_text(text, encoding="utf-8")
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    def apply_workspace_edit(self, edit: types.WorkspaceEdit) -> tuple[bool, str]:
        """Apply like VS Code: every versioned document edit must match the current version."""
        changes: list[tuple[str, Optional[int], list]] = []
        for dc in edit.document_changes or []:
            assert isinstance(dc, types.TextDocumentEdit), f"unexpected change {dc!r}"
            changes.append((dc.text_document.uri, dc.text_document.version, list(dc.edits)))
        for uri, edits in (edit.changes or {}).items():
            changes.append((uri, None, list(edits)))
        for uri, version, _ in changes:
            if uri not in self.docs:
                return False, f"{uri} is not open"
            if version is not None and version != self.docs[uri][0]:
                return False, f"version mismatch for {uri}: edit is for {version}, document is at {self.docs[uri][0]}"
        for uri, _, edits in changes:
            version, text, path = self.docs[uri]
            # send the edits bottom-up, each as an incremental change, as the editor does
            for e in sorted(edits, key=lambda e: (_offset(text, e.range.start), _offset(text, e.range.end)), reverse=True):
                s, t = _offset(text, e.range.start), _offset(text, e.range.end)
                new_text = text[:s] + e.new_text + text[t:]
                version += 1
                self.client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangePartial(range=e.range, text=e.new_text)]))
                text = new_text
            self.docs[uri] = [version, text, path]
        return True, ""


def edit_from_json(client: LanguageClient, obj: Any) -> types.WorkspaceEdit:
    return client.protocol._converter.structure(obj, types.WorkspaceEdit)


class Recorder:
    def __init__(self) -> None:
        self.job_events: list[dict] = []
        self.lens_refreshes = 0

    def events(self, job_id: Optional[str] = None, etype: Optional[str] = None) -> list[dict]:
        return [e for e in self.job_events if (job_id is None or e["jobId"] == job_id)
                and (etype is None or e["event"]["type"] == etype)]


def copy_examples(dst: Path) -> Path:
    ws = dst / "ws"
    ws.mkdir()
    for p in EXAMPLES.glob("*.py"):
        shutil.copy(p, ws / p.name)
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n", encoding="utf-8")
    return ws


@contextlib.asynccontextmanager
async def start_session(workspace: Path, settings: Optional[dict] = None, env: Optional[dict] = None,
                        init_options: Optional[dict] = None):
    client = make_test_lsp_client()
    editor = Editor(client)
    rec = Recorder()
    config = {"kernelband": settings or {}}
    client.set_configuration(config)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(ls, params: types.ApplyWorkspaceEditParams):
        ok, why = editor.apply_workspace_edit(params.edit)
        if ok:
            editor.applied.append(params)
        else:
            editor.refused.append(why)
        return types.ApplyWorkspaceEditResult(applied=ok, failure_reason=why or None)

    @client.feature("kernelband/jobEvent")
    def job_event(ls, params):
        rec.job_events.append(to_plain(params))

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(ls, params):
        rec.lens_refreshes += 1

    full_env = dict(os.environ)
    full_env.pop("KERNELBAND_LSP_JOB_COMMAND", None)
    full_env.update(env or {})
    await client.start_io(sys.executable, "-m", "kernelband_lsp", env=full_env)
    try:
        caps = client_capabilities("visual-studio-code")
        # VS Code asks for inlay hints again on workspace/inlayHint/refresh (pytest-lsp's capture predates it)
        caps.workspace.inlay_hint = types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
        await client.initialize_session(types.InitializeParams(
            capabilities=caps,
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            initialization_options=init_options,
        ))
        yield client, editor, rec
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), timeout=20)
        with contextlib.suppress(Exception):
            await client.stop()


async def wait_until(pred: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def to_plain(obj: Any) -> Any:
    """pygls hands untyped JSON objects over as named tuples: back to dicts and lists."""
    if hasattr(obj, "_asdict"):
        return {k: to_plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    return obj


def job_data(obj: Any) -> dict:
    """Command results as plain dicts."""
    return to_plain(obj)


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode()
        return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            stat = open(f"/proc/{n}/stat", "rb").read().decode()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        children.setdefault(int(rest[1]), []).append(int(n))
    out, stack = set(), [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


# A stand-in engine for plumbing tests: `python fake_engine.py optimize FILE --kernel K ...`.
# It reads the module from stdin, starts a "worker" child in its own session (like the
# real engine), emits events with a pause between them, and proposes BLOCK_SIZE=1024.
FAKE_ENGINE = r'''
import argparse, json, os, subprocess, sys, time
from kernelband.model import Result
from kernelband.profile.schema import Profile
from kernelband.options import OPTIONS
p = argparse.ArgumentParser()
p.add_argument("cmd"); p.add_argument("file")
p.add_argument("--kernel"); p.add_argument("--events"); p.add_argument("--stdin-source", action="store_true")
p.add_argument("--json", action="store_true"); p.add_argument("--harness"); p.add_argument("--variant")
for o in OPTIONS:  # the engine's own flags, as the server passes them
    o.add_to(p)
a = p.parse_args()
src = sys.stdin.read()
step = float(os.environ.get("FAKE_STEP_S", "0.2"))
INTERP = os.environ.get("FAKE_INTERPRETED", "0") == "1"  # a CPU-interpreter result: correct, no speed claim
import hashlib
if a.cmd == "check":  # `check --json`: one JSON object; says which texts it was given
    time.sleep(step)
    variant = open(a.variant, encoding="utf-8").read()
    status = os.environ.get("FAKE_CHECK_STATUS", "ok")
    from kernelband.check_outcome import CheckOutcome, CheckScope
    from kernelband.model import ResultStatus, SanitizerReport, Status
    scope = CheckScope(seeds=[0], harness="h", harnesses=["h"], checks=["c"], memcheck=SanitizerReport.not_run("-"))
    out = CheckOutcome(file=a.file, kernel=a.kernel or "", harness="h", variant=a.variant, checked=scope,
                       status=Status(status), message="" if status == "ok" else "max abs error 2.0 > atol 1e-05",
                       interpreted=INTERP, clock="cpu-interpreter" if INTERP else "cuda-events",
                       speed_claim=not INTERP, paired=status == "ok", speedup=1.41 if status == "ok" else None,
                       speedup_ci=(1.3, 1.52) if status == "ok" else None,
                       verdict=ResultStatus.IMPROVED if status == "ok" else None)
    # beside the real object: which texts it was given, for the tests to check
    out.extra = {"argv": sys.argv[1:], "original_sha": hashlib.sha256(src.encode()).hexdigest(),
                 "variant_sha": hashlib.sha256(variant.encode()).hexdigest()}
    print(json.dumps(out.to_dict(), indent=2))
    sys.exit(0 if status == "ok" else 1)
t0 = time.time()
def emit(t, **d):
    sys.stdout.write(json.dumps({"type": t, "t": round(time.time() - t0, 3), **d}) + "\n"); sys.stdout.flush()
time.sleep(float(os.environ.get("FAKE_START_DELAY_S", "0")))  # the engine's imports and worker start
if os.environ.get("FAKE_REPLAY"):
    # replay the events a real engine wrote (tests/data/events), on this text
    for line in open(os.environ["FAKE_REPLAY"], encoding="utf-8"):
        ev = json.loads(line)
        if ev["type"] == "result":
            ev["result"]["original_hash"] = hashlib.sha256(src.encode()).hexdigest()
            ev["result"]["file"] = a.file
        time.sleep(step)
        emit(ev.pop("type"), **{k: v for k, v in ev.items() if k != "t"})
    sys.exit(0)
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
emit("log", level="info", message=f"worker pid {worker.pid}", worker_pid=worker.pid)
if os.environ.get("FAKE_FAIL"):
    # fail during setup and leave the worker behind: the server must clean it up
    time.sleep(1.5)
    emit("error", message="fake failure", kind="setup"); sys.exit(2)
if a.cmd == "profile":
    emit("started", kernel=a.kernel, file=a.file)
    time.sleep(step)
    emit("profile", profile=Profile.from_dict(dict(kernel=a.kernel, time_ms=0.42, tiers={"static": {"n_regs": 32, "n_spills": 0, "num_warps": 4, "num_stages": 1},
         "timing": {"time_per_launch_ms": 0.42, "launches": 1, "bandwidth_gbs": 2380.0, "bandwidth_frac": 0.71}, "counters": None}, saturation={"L2": 0.3, "DRAM": 0.71, "SM": 0.1},
         diagnosis={"bottleneck": "memory-bound", "evidence": "71% of DRAM peak", "strategies": ["tiling"]},
         interpreted=False)).to_dict())
    worker.kill(); sys.exit(0)
emit("started", kernel=a.kernel, file=a.file, budget={"evaluations": a.budget}, generator="rules", search="kernelband")
time.sleep(step)
emit("baseline", time_ms=2.0, clock="cpu-interpreter", deterministic=True, weak_harness=False, message="")
for i in range(1, a.budget + 1):
    time.sleep(step)
    emit("candidate", index=i, variant_id=f"v{i}", parent="v0", strategy="tiling", generator="rules",
         status="ok", time_ms=2.0 / (1 + i / 10), speedup=1 + i / 10, message="ok", description="")
    emit("progress", done=i, total=a.budget, best_ms=2.0 / (1 + i / 10), best_speedup=1 + i / 10, message=f"{i}/{a.budget}")
best = src.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")
emit("result", result=Result(
     status="improved" if best != src else "no_improvement", kernel=a.kernel, file=a.file, session_id="fake",
     original_hash=hashlib.sha256(src.encode()).hexdigest(), baseline_ms=2.0, best_ms=1.4, speedup=1.43,
     speedup_ci=[1.3, 1.5], evaluations=a.budget, interpreted=INTERP, clock="cpu-interpreter" if INTERP else "cuda-events",
     gpu=None if INTERP else "FAKE GPU", paired_rounds=5, strategy_path=["tiling"], diff="", best_source=best,
     best_variant_id="v4", seconds=1.0, tokens=0, cost_usd=0.0, message="1.43x", warnings=[],
     applicable=best != src and not INTERP).to_dict())
worker.kill()
'''


def write_fake_engine(dst: Path) -> list[str]:
    p = dst / "fake_engine.py"
    p.write_text(FAKE_ENGINE, encoding="utf-8")
    return [sys.executable, str(p)]


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def lenses(client, uri):
    return await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(uri)))


async def hover(client, uri, line, character):
    return await client.text_document_hover_async(
        types.HoverParams(text_document=doc(uri), position=types.Position(line=line, character=character)))


def name_pos(text: str, name: str) -> tuple[int, int]:
    i = text.index(f"def {name}") + 4
    line = text.count("\n", 0, i)
    return line, i - (text.rfind("\n", 0, i) + 1) + 1


async def run_command(client, command, **args):
    res = await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=[args]))
    return job_data(res)


def typical_profile() -> dict:
    """A tier-1/2 profile of add_scale.py's kernel as the engine reports it (a fresh copy)."""
    return {
        "kernel": "axpy_kernel",
        "time_ms": 0.42,
        "tiers": {"static": {"n_regs": 32, "n_spills": 0, "shared_bytes": 0, "num_warps": 4, "num_stages": 3,
                             "occupancy": {"theoretical": 1.0, "limiter": "warps"}},
                  "timing": {"time_per_launch_ms": 0.42, "launches": 1, "bytes_total": 1.0e9, "bytes_read": 6.7e8,
                             "bytes_written": 3.3e8, "bandwidth_gbs": 2380.0, "bandwidth_frac": 0.71, "copy_peak_gbs": 3350.0},
                  "counters": None},
        "unavailable": {"counters": "ncu not found"},
        "saturation": {"L2": 0.2, "DRAM": 0.71, "SM": 0.05},
        "diagnosis": {"bottleneck": "memory-bound", "evidence": "memory-bound: 71% of DRAM peak", "strategies": ["tiling", "vectorization"]},
        "interpreted": False,
    }
