"""Latency of kernelband-lsp as an editor sees it: request round trips over stdio.

Drives the real server (``python -m kernelband_lsp``) with pygls's LanguageClient,
announcing VS Code's capabilities, on a generated 2,040-line module with 60 Triton
kernels (each with a wrapper and a harness, and a stored profile so lenses and hovers
render real cards), and measures:

- code lens: first request after open, repeated requests, and a request right after
  each keystroke (didChange then codeLens), typed inside kernel bodies and on comment
  lines (answered from the last analysis moved by the edit), and typed in a wrapper's
  launch line (re-detection of that wrapper alone);
- a 600-kernel file: hover and documentSymbol sent right behind the first code lens
  (they must not wait for the lens's 600 harness look-ups and statuses);
- ``kernelband list`` (a subprocess: wall time, and its CPU time, which other work on
  the machine inflates less) on files of 600 and 1,200 kernels;
- hover on kernel names (random kernels);
- document symbols;
- hover while a real optimization job (``kernelband optimize``, Triton interpreter
  on the CPU, or the GPU if there is one) runs on another file of the workspace.

Writes benchmarks/results/lsp_latency.json and .md.

    python benchmarks/lsp_latency.py [--repeats 200] [--budget 4] [--out benchmarks/results]
    python benchmarks/lsp_latency.py --list-only      # re-time `kernelband list`, keep the rest
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from common import ROOT as REPO
N_KERNELS = 60
LINES_PER_BLOCK = 34


# ---------------------------------------------------------------------------- the module
def block(i: int) -> list[str]:
    lines = [
        "@triton.jit",
        f"def kernel_{i}(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):",
        f'    """Kernel {i}: out = alpha * f(x) + y, elementwise."""',
        "    pid = tl.program_id(axis=0)",
        "    block_start = pid * BLOCK_SIZE",
        "    offsets = block_start + tl.arange(0, BLOCK_SIZE)",
        "    mask = offsets < n_elements",
        "    x = tl.load(x_ptr + offsets, mask=mask)",
        "    y = tl.load(y_ptr + offsets, mask=mask)",
        f"    z = x * {1 + i % 7}.0 + {i % 5}.0",
        "    z = tl.where(z > 0, z, 0.01 * z)",
        "    tl.store(out_ptr + offsets, alpha * z + y, mask=mask)",
        "",
        "",
        f"def launch_{i}(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:",
        "    out = torch.empty_like(x)",
        "    n = out.numel()",
        '    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)',
        f"    kernel_{i}[grid](x, y, out, alpha, n, BLOCK_SIZE=128)",
        "    return out",
        "",
        "",
        f"def harness_{i}():",
        "    n = 4099",
        "    x = torch.randn(n, device=DEVICE)",
        "    y = torch.randn(n, device=DEVICE)",
        f"    return launch_{i}(0.5, x, y)",
        "",
        "",
    ]
    while len(lines) < LINES_PER_BLOCK - 2:
        lines.insert(len(lines) - 2, f"# notes on kernel {i}: line {len(lines)} of its block")
    lines += ["", ""]
    return lines[:LINES_PER_BLOCK]


def big_module(n: int = N_KERNELS) -> str:
    head = [f'"""Generated: {n} kernels, {module_lines(n)} lines (kernelband-lsp latency benchmark)."""',
            "import torch", "import triton", "import triton.language as tl", "",
            'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"', "", ""]
    body: list[str] = []
    for i in range(n):
        body += block(i)
    return "\n".join(head + body) + "\n"


def module_lines(n: int) -> int:
    return n * LINES_PER_BLOCK + 8


def seed_store(ws: Path, path: Path, text: str, n: int = N_KERNELS) -> None:
    from kernelband.profile.schema import Profile
    from kernelband.store import ProfileKey, Store

    h = hashlib.sha256(text.encode()).hexdigest()
    with Store.for_workspace(ws) as st:
        for i in range(n):
            prof = {
                "kernel": f"kernel_{i}", "time_ms": 0.1 + i / 100, "interpreted": False,
                "device": {"name": "NVIDIA H100 80GB HBM3"}, "tier": 2,
                "tiers": {"static": {"n_regs": 24 + i % 16, "n_spills": 0, "shared_bytes": 0, "num_warps": 4, "num_stages": 3,
                                     "occupancy": {"theoretical": 1.0, "limiter": "warps"}},
                          "timing": {"time_per_launch_ms": 0.1 + i / 100, "launches": 1, "bytes_total": 2.0e8,
                                     "bytes_read": 1.3e8, "bytes_written": 6.7e7, "bandwidth_gbs": 2000.0 - i,
                                     "bandwidth_frac": 0.6 + i / 200, "copy_peak_gbs": 3000.0,
                                     "flops": 1e8, "flops_note": None, "roofline": {"bound": "memory"}},
                          "counters": None},
                "unavailable": {"counters": "ncu not found"},
                "saturation": {"L2": 0.3, "DRAM": 0.6 + i / 200, "SM": 0.05},
                "diagnosis": {"bottleneck": "memory-bound", "evidence": f"memory-bound: {60 + i // 2}% of DRAM peak",
                              "strategies": ["tiling", "vectorization"]},
            }
            st.put_profile(ProfileKey(h, "h", "gpu", "3", f"kernel_{i}"), Profile.from_dict(prof), file=str(path))


# ---------------------------------------------------------------------------- client
def vscode_capabilities() -> types.ClientCapabilities:
    try:
        from pytest_lsp import client_capabilities

        return client_capabilities("visual-studio-code")
    except Exception:  # pytest-lsp absent: the parts that matter here
        return types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            workspace=types.WorkspaceClientCapabilities(
                configuration=True, workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
                code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True)),
            text_document=types.TextDocumentClientCapabilities(
                hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
                document_symbol=types.DocumentSymbolClientCapabilities(hierarchical_document_symbol_support=True)))


def make_client(settings: dict[str, Any], events: list, progress: dict) -> LanguageClient:
    client = LanguageClient("lsp-latency-bench", "1")

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def configuration(ls, params: types.ConfigurationParams):
        return [settings if item.section == "kernelband" else None for item in params.items]

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def create(ls, params):
        progress.setdefault(params.token, [])

    @client.feature(types.PROGRESS)
    def prog(ls, params):
        progress.setdefault(params.token, []).append(params.value)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diags(ls, params):
        pass

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def logmsg(ls, params):
        pass

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def showmsg(ls, params):
        events.append((time.monotonic(), {"showMessage": params.message}))

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def refresh(ls, params):
        return None

    @client.feature("kernelband/jobEvent")
    def job_event(ls, params):
        ev = params._asdict() if hasattr(params, "_asdict") else params
        events.append((time.monotonic(), ev))

    return client


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    res = await fn()
    return (time.perf_counter() - t0) * 1000.0, res


def stats(samples: list[float]) -> dict[str, Any]:
    s = sorted(samples)
    if not s:
        return {"n": 0}

    def pct(p: float) -> float:
        k = (len(s) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)

    return {"n": len(s), "median_ms": round(statistics.median(s), 3), "p95_ms": round(pct(0.95), 3),
            "p99_ms": round(pct(0.99), 3), "min_ms": round(s[0], 3), "max_ms": round(s[-1], 3),
            "mean_ms": round(statistics.fmean(s), 3)}


# ---------------------------------------------------------------------------- run
async def bench(repeats: int, budget: int, job_file: str, with_job: bool = True) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="kb-lsp-bench-"))
    try:
        ws = tmp / "ws"
        ws.mkdir()
        (ws / "pyproject.toml").write_text("[project]\nname='bench'\nversion='0'\n")
        text = big_module()
        assert text.count("\n") == module_lines(N_KERNELS) and text.count("@triton.jit") == N_KERNELS
        big = ws / "big_module.py"
        big.write_text(text)
        shutil.copy(REPO / "examples" / job_file, ws / job_file)
        seed_store(ws, big, text)

        events: list = []
        progress: dict = {}
        settings = {"budget": {"evaluations": budget}}
        client = make_client(settings, events, progress)
        env = dict(os.environ)
        env.pop("KERNELBAND_LSP_JOB_COMMAND", None)
        # this checkout's server and engine, not an installed copy
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "server"), env.get("PYTHONPATH", "")])
        await client.start_io(sys.executable, "-m", "kernelband_lsp", env=env)
        stderr_log = tmp / "server.stderr"

        async def drain() -> None:  # keep the server's stderr pipe from filling up
            with open(stderr_log, "wb") as f:
                while client._server and client._server.stderr:
                    line = await client._server.stderr.readline()
                    if not line:
                        break
                    f.write(line)

        drainer = asyncio.ensure_future(drain())
        await client.initialize_async(types.InitializeParams(
            capabilities=vscode_capabilities(), root_uri=ws.as_uri(), process_id=os.getpid(),
            workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="ws")]))
        client.initialized(types.InitializedParams())
        uri = big.as_uri()
        ident = types.TextDocumentIdentifier(uri=uri)
        version = 1
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))

        async def lens():
            return await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident))

        lines = text.split("\n")
        name_at = [(n, lines[n].index("kernel_") ) for n in range(len(lines)) if lines[n].startswith("def kernel_")]
        assert len(name_at) == N_KERNELS

        async def hover_random(rng: random.Random):
            line, col = rng.choice(name_at)
            return await client.text_document_hover_async(types.HoverParams(
                text_document=ident, position=types.Position(line=line, character=col + 2)))

        out: dict[str, Any] = {}
        first_ms, first = await timed(lens)
        assert len(first) >= 3 * N_KERNELS, len(first)
        out["code_lens_first_after_open"] = {"ms": round(first_ms, 3), "lenses": len(first)}

        for _ in range(5):
            await lens()
        out["code_lens_repeat"] = stats([(await timed(lens))[0] for _ in range(repeats)])

        # keystroke then code lens, three kinds of place
        # (line, column) of a keystroke that keeps the file valid Python
        body_lines = [(n, 8) for n in range(len(lines)) if lines[n].startswith("    z = tl.where")]
        comment_lines = [(n, 2) for n in range(len(lines)) if lines[n].startswith("# notes on kernel")]
        launch_lines = [(n, lines[n].index("(x") + 1) for n in range(len(lines)) if "[grid](" in lines[n]]

        async def keystrokes(where: list[tuple[int, int]], typed: str, n_max: int) -> dict[str, Any]:
            nonlocal version
            samples = []
            t_cap = time.monotonic() + 60.0  # at least 10 samples, then at most a minute
            for i in range(n_max):
                if i >= 10 and time.monotonic() > t_cap:
                    break
                version += 1
                line, col = where[i % len(where)]
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(line=line, character=col),
                                          end=types.Position(line=line, character=col)),
                        text=typed)]))
                ms, res = await timed(lens)
                assert len(res) >= 3 * N_KERNELS
                samples.append(ms)
            return stats(samples)

        out["code_lens_after_keystroke_in_kernel_body"] = await keystrokes(body_lines, " ", repeats // 2)
        out["code_lens_after_keystroke_on_comment"] = await keystrokes(comment_lines, "x", repeats // 2)
        out["code_lens_after_keystroke_in_launch_line"] = await keystrokes(launch_lines, " ", max(repeats // 8, 10))
        rng = random.Random(0)
        h_ms, h = await timed(lambda: hover_random(rng))
        assert h is not None and "kernel_" in h.contents.value
        out["hover_idle"] = stats([(await timed(lambda: hover_random(rng)))[0] for _ in range(repeats)])
        out["document_symbols"] = stats([(await timed(lambda: client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=ident))))[0] for _ in range(max(repeats // 4, 10))])

        # a 600-kernel file: hover and documentSymbol right behind the first code lens
        huge = ws / "huge_module.py"
        huge_text = big_module(600)
        huge.write_text(huge_text)
        huri = huge.as_uri()
        hident = types.TextDocumentIdentifier(uri=huri)
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=huri, language_id="python", version=1, text=huge_text)))
        hlines = huge_text.split("\n")
        hname = next(n for n in range(len(hlines)) if hlines[n].startswith("def kernel_599"))
        t0 = time.perf_counter()
        done_at: dict[str, float] = {}

        async def at(name: str, coro) -> Any:
            res = await coro
            done_at[name] = (time.perf_counter() - t0) * 1000.0
            return res

        lens_t = asyncio.ensure_future(at("code_lens", client.text_document_code_lens_async(
            types.CodeLensParams(text_document=hident))))
        await asyncio.sleep(0.01)
        hover_t = asyncio.ensure_future(at("hover", client.text_document_hover_async(types.HoverParams(
            text_document=hident, position=types.Position(line=hname, character=6)))))
        sym_t = asyncio.ensure_future(at("document_symbols", client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=hident))))
        hres, _, lres = await asyncio.gather(hover_t, sym_t, lens_t)
        assert hres is not None and len(lres) >= 3 * 600
        out["file_600_kernels_first_requests_ms"] = {k: round(v, 1) for k, v in done_at.items()}
        t1 = time.perf_counter()
        await client.text_document_hover_async(types.HoverParams(
            text_document=hident, position=types.Position(line=hname, character=6)))
        out["file_600_kernels_hover_after_ms"] = round((time.perf_counter() - t1) * 1000.0, 1)

        if not with_job:
            out["optimization_job"] = None
            return await _finish(client, drainer, stderr_log, events, out)

        # hover while a real optimization job runs on another file
        job_uri = (ws / job_file).as_uri()
        job_text = (ws / job_file).read_text()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=job_uri, language_id="python", version=1, text=job_text)))
        from kernelband.detect import detect

        kernel = detect(job_text).kernels[0].name
        t_job = time.monotonic()
        task = asyncio.ensure_future(client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="kernelband.optimize", arguments=[{"uri": job_uri, "kernel": kernel}])))
        while not any(ev.get("event", {}) and _etype(ev) == "started" for _, ev in events):
            await asyncio.sleep(0.02)
            if task.done():
                break
        during, lens_during = [], []
        while not task.done():
            during.append((await timed(lambda: hover_random(rng)))[0])
            if len(during) % 10 == 0:
                lens_during.append((await timed(lens))[0])
            await asyncio.sleep(0.05)
        res = task.result()
        res = res._asdict() if hasattr(res, "_asdict") else res
        job_s = time.monotonic() - t_job
        out["hover_during_optimization"] = stats(during)
        out["code_lens_during_optimization"] = stats(lens_during)
        out["optimization_job"] = {
            "file": job_file, "kernel": kernel, "budget_evaluations": budget, "status": res.get("status"),
            "speedup": res.get("speedup"), "interpreted": res.get("interpreted"), "clock": res.get("clock"),
            "seconds": round(job_s, 1), "job_events": len(events),
            "progress_notifications": sum(len(v) for v in progress.values()),
        }

        return await _finish(client, drainer, stderr_log, events, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _finish(client: LanguageClient, drainer: Any, stderr_log: Path, events: list, out: dict) -> dict:
    out["server_messages"] = [ev["showMessage"] for _, ev in events if isinstance(ev, dict) and "showMessage" in ev]
    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.sleep(0.2)
    await client.stop()
    drainer.cancel()
    errors = [ln for ln in stderr_log.read_text(errors="replace").splitlines() if " ERROR " in ln or "Traceback" in ln]
    out["server_errors"] = errors[:20]
    return out


def list_input(tmp: Path, n: int) -> tuple[Path, dict[str, str]]:
    """An n-kernel module in tmp, and the environment that runs this checkout's engine."""
    f = tmp / f"k{n}.py"
    f.write_text(big_module(n))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return f, env


def list_timing(n: int, runs: int = 5) -> dict[str, Any]:
    """Wall and CPU time of `python -m kernelband list FILE --json` on an n-kernel module
    (CPU: user + system of the process, from getrusage of the children)."""
    import resource
    import subprocess

    def child_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    tmp = Path(tempfile.mkdtemp(prefix="kb-list-bench-"))
    try:
        f, env = list_input(tmp, n)
        times, cpus, loads = [], [], []
        for _ in range(runs):
            loads.append(os.getloadavg()[0])
            c0, t0 = child_cpu(), time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "kernelband", "list", str(f), "--json"], env=env,
                               capture_output=True, text=True, timeout=600)
            times.append(time.perf_counter() - t0)
            cpus.append(child_cpu() - c0)
            assert r.returncode == 0, r.stderr[-2000:]
        assert len(json.loads(r.stdout)["kernels"]) == n
        c0, t0 = child_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-c", "import kernelband.cli, kernelband.commands.list_cmd"], env=env,
                       check=True, timeout=120)
        startup, startup_cpu = time.perf_counter() - t0, child_cpu() - c0
        return {"kernels": n, "lines": module_lines(n), "best_s": round(min(times), 3),
                "median_s": round(statistics.median(times), 3), "runs": runs,
                "cpu_best_s": round(min(cpus), 3), "cpu_median_s": round(statistics.median(cpus), 3),
                "load_average_1min": round(statistics.median(loads), 2),
                "python_startup_and_imports_s": round(startup, 3), "python_startup_and_imports_cpu_s": round(startup_cpu, 3)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def list_instructions(n: int) -> Optional[int]:
    """Instructions `python -m kernelband list FILE --json` executes on an n-kernel module,
    counted by valgrind's callgrind (None without valgrind): the same on a busy machine as
    on an idle one, so it tells linear from superlinear where wall time cannot."""
    import re
    import subprocess

    if shutil.which("valgrind") is None:
        return None
    tmp = Path(tempfile.mkdtemp(prefix="kb-list-ir-"))
    try:
        f, env = list_input(tmp, n)
        python = os.path.realpath(sys.executable)  # not a shim script: valgrind must see the interpreter
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}", python, "-m",
                            "kernelband", "list", str(f), "--json"], env=env, capture_output=True, text=True, timeout=1800)
        # one count per process: `list` forks a child that checks the kernel bodies (its count
        # starts from the parent's at the fork); the main process's is the largest
        counts = [int(c) for c in re.findall(r"Collected : (\d+)", r.stderr)]
        return max(counts) if r.returncode == 0 and counts else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _etype(ev: Any) -> Any:
    e = ev.get("event") if isinstance(ev, dict) else None
    if hasattr(e, "_asdict"):
        e = e._asdict()
    return e.get("type") if isinstance(e, dict) else None


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    def ver(p: str) -> str:
        try:
            return md.version(p)
        except Exception:
            return "?"

    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), platform.processor())
    except OSError:
        cpu = platform.processor()
    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu,
            "cpus": os.cpu_count(), "pygls": ver("pygls"), "lsprotocol": ver("lsprotocol"), "triton": ver("triton"),
            "torch": ver("torch")}


def markdown(res: dict[str, Any]) -> str:
    env = res["environment"]
    r = res["results"]
    job = r.get("optimization_job")

    def row(name: str, st: Optional[dict]) -> str:
        st = st or {}
        return f"| {name} | {st.get('median_ms', '-')} | {st.get('p95_ms', '-')} | {st.get('n', 0)} |"

    lines = [
        "# kernelband-lsp latency",
        "",
        f"Round trips measured by a client over stdio (pygls LanguageClient announcing VS Code's capabilities) "
        f"against `python -m kernelband_lsp`, on a generated module of {res['lines']} lines with {res['kernels']} "
        "`@triton.jit` kernels, each with a wrapper, a harness and a stored profile (so every lens and hover "
        "renders real text). `python benchmarks/lsp_latency.py` regenerates this.",
        "",
        f"Machine: {env['cpu']} ({env['cpus']} CPUs, shared with other work while measured), Python {env['python']}, "
        f"pygls {env['pygls']}. Date: {res['date']}.",
        "",
        "| request | median (ms) | p95 (ms) | n |",
        "| --- | ---: | ---: | ---: |",
        f"| code lens, first request after open (detection + {res['kernels']} harness look-ups) | "
        f"{r['code_lens_first_after_open']['ms']} | - | 1 |",
        row("code lens, repeated", r["code_lens_repeat"]),
        row("code lens right after a keystroke in a kernel body (last analysis moved by the edit)",
            r["code_lens_after_keystroke_in_kernel_body"]),
        row("code lens right after a keystroke on a comment line", r["code_lens_after_keystroke_on_comment"]),
        row("code lens right after a keystroke in a launch line (re-detects that wrapper alone)",
            r["code_lens_after_keystroke_in_launch_line"]),
        row("hover on a kernel name", r["hover_idle"]),
        row("document symbols", r["document_symbols"]),
    ]
    if job:
        lines += [row("hover while an optimization job runs", r["hover_during_optimization"]),
                  row("code lens while an optimization job runs", r["code_lens_during_optimization"])]
    f600 = r.get("file_600_kernels_first_requests_ms") or {}
    lines += [
        "",
        f"A 600-kernel file ({module_lines(600):,} lines), opened, then code lens, hover and documentSymbol sent at once; "
        "milliseconds from the code lens request until each answer:",
        "",
        "| code lens | hover | document symbols | a later hover |",
        "| ---: | ---: | ---: | ---: |",
        f"| {f600.get('code_lens', '-')} | {f600.get('hover', '-')} | {f600.get('document_symbols', '-')} | "
        f"{r.get('file_600_kernels_hover_after_ms', '-')} |",
        "",
        "Hover and symbols need the file's detection (shared with the lens) but not the lens's harness look-ups "
        "and statuses, which run after it (harness look-ups on a thread, statuses yielding to other requests).",
    ]
    lt = res.get("list") or []
    if lt:
        when = f", measured {res['list_date']} with `{res['list_command']}`" if res.get("list_date") else ""
        lines += ["", f"`kernelband list FILE --json` (a new process each run{when}): wall time, and CPU time (user + "
                  "system), which the other work on this shared 2-core machine inflates less; the load average is the "
                  "machine's during the runs:", "",
                  "| kernels | lines | best (s) | median (s) | CPU best (s) | CPU median (s) | load average | "
                  "of which Python start-up and imports (s) |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {x['kernels']} | {x['lines']} | {x['best_s']} | {x['median_s']} | {x.get('cpu_best_s', '-')} | "
                  f"{x.get('cpu_median_s', '-')} | {x.get('load_average_1min', '-')} | "
                  f"{x['python_startup_and_imports_s']} |" for x in lt]
        if all(x.get("instructions") for x in lt):
            lines += ["", "Instructions executed by the main process (valgrind's callgrind; the same however busy the "
                      "machine is; not counting the forked child that checks the kernel bodies meanwhile): "
                      + ", ".join(f"{x['kernels']} kernels {x['instructions'] / 1e9:.2f} G" for x in lt)
                      + (f"; {lt[-1]['instructions'] / lt[0]['instructions']:.2f}x for "
                         f"{lt[-1]['kernels'] / lt[0]['kernels']:.0f}x the kernels." if len(lt) > 1 else ".")]
    if job:
        lines += [
            "",
            f"The optimization job: `kernelband optimize {job['file']} --kernel {job['kernel']} --budget "
            f"{job['budget_evaluations']}` started from the server (status `{job['status']}`, "
            f"{'Triton interpreter on the CPU' if job['interpreted'] else 'GPU'}), {job['seconds']} s, "
            f"{job['job_events']} job events and {job['progress_notifications']} `$/progress` notifications relayed "
            "while the hovers above were answered.",
        ]
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--budget", type=int, default=4, help="evaluations of the optimization job")
    ap.add_argument("--job-file", default="add_scale.py", help="example optimized during the hover measurement")
    ap.add_argument("--no-job", action="store_true", help="skip the hover-during-an-optimization measurement")
    ap.add_argument("--list-kernels", default="600,1200", help="kernel counts for the `kernelband list` timing ('' = skip)")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions of `kernelband list` under valgrind (minutes)")
    ap.add_argument("--list-only", action="store_true",
                    help="time `kernelband list` only; keep the server's results of the last full run (in --out)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args()
    out = Path(args.out)
    command = "python benchmarks/lsp_latency.py " + " ".join(sys.argv[1:])
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.list_only:
        res = json.loads((out / "lsp_latency.json").read_text())
    else:
        results = asyncio.run(bench(args.repeats, args.budget, args.job_file, with_job=not args.no_job))
        res = {"benchmark": "lsp_latency", "date": now, "lines": module_lines(N_KERNELS), "kernels": N_KERNELS,
               "repeats": args.repeats, "command": command, "environment": environment(), "results": results}
    res.update(list=[list_timing(int(n)) for n in args.list_kernels.split(",") if n.strip()], list_date=now,
               list_command=command)
    if args.instructions:
        for row in res["list"]:
            row["instructions"] = list_instructions(row["kernels"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "lsp_latency.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "lsp_latency.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
