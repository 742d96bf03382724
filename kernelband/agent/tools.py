"""What each agent tool does, free of the MCP SDK (``server.py`` is the thin layer).

- ``list_kernels``: in this process (the list command's own function; no torch);
- ``check_variant``, ``profile_kernel``, ``optimize_kernel``: engine jobs
  (``python -m kernelband check|profile|optimize ...``), the exact commands a user runs,
  so the verdict behind an agent's answer is the CLI's and the editor's;
- ``stored_results``: the workspace store, read only (never created by a read).

Every path is resolved inside the workspace root first (``workspace.py``). Nothing here
writes the user's files: the original goes to a job on stdin, a variant given as text
goes to a private temporary file, and optimize never gets ``--apply``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional, TypeVar
from urllib.parse import quote

from kernelband_lsp.jobs import CHECK, DONE, OPTIMIZE, PROFILE, Job, JobSpec
from kernelband_lsp.settings import Settings

from .. import options as O
from ..batch import python_files
from ..commands.common import UsageError, detect_or_fail, pick_kernel
from ..commands.list_cmd import KernelListing
from ..commands.list_cmd import list_kernels as list_rows
from ..detect import read_source
from ..events import Baseline, Candidate, Event, Log, Progress, Started
from ..model import Result
from ..store import DB_DIR, DB_NAME, Store, find_workspace
from . import reports as R
from .jobs import AgentJobs, ProgressSink
from .workspace import MAX_VARIANT_BYTES, PathRefused, Workspace

MAX_FILES_LISTED = 200  # a folder's Python files scanned by list_kernels
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "node_modules", "__pycache__", DB_DIR, "build", "dist", ".tox"}
RESULTS_URI = "kernelband://results/{kernel}{?file}"
T = TypeVar("T")


class ToolRefusal(ValueError):
    """The call cannot run as asked (bad input, or the engine could not start the job):
    one line saying why, returned to the agent as a tool error."""


def results_uri(kernel: str, file: str) -> str:
    return f"kernelband://results/{quote(kernel, safe='')}?file={quote(file, safe='/')}"


class AgentTools:
    def __init__(self, workspace: Workspace, jobs: AgentJobs, settings: Optional[Settings] = None) -> None:
        self.workspace = workspace
        self.jobs = jobs
        self.settings = settings or Settings()
        self._scratch = Path(tempfile.mkdtemp(prefix="kernelband-agent-"))  # variants given as text

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    # ------------------------------------------------------------ list_kernels
    async def list_kernels(self, path: str) -> R.KernelList:
        target = self.workspace.resolve(path, "path")
        if not target.exists():
            raise PathRefused(f"path {path}: no such file or folder")
        return await asyncio.to_thread(self._list, target)

    def _list(self, target: Path) -> R.KernelList:
        if target.is_file():
            if target.suffix != ".py":
                raise PathRefused(f"path {self.workspace.relative(target)}: not a Python file (.py)")
            rows = list_rows(str(target), self._read(target), self.workspace.relative(target))
            return R.scrubbed(R.KernelList(files=[self._kernel_file(target, rows)]))
        files, truncated = _python_files(target)
        out = R.KernelList(files=[], truncated=truncated)
        for f in files:
            try:
                f = self.workspace.resolve(str(f))  # a symlink out of the root is refused, not followed
                text = read_source(str(f))
                if "triton" not in text:  # no kernel can be here: skip the parse
                    continue
                rows = list_rows(str(f), text, self.workspace.relative(f))
            except (OSError, UnicodeDecodeError, UsageError, PathRefused) as e:
                out.skipped.append(f"{self.workspace.relative(f)}: {_line(e)}")
                continue
            if rows:
                out.files.append(self._kernel_file(f, rows))
        return R.scrubbed(out)

    def _kernel_file(self, path: Path, rows: list[KernelListing]) -> R.KernelFile:
        return R.KernelFile(
            file=self.workspace.relative(path), kernels=[R.kernel_entry(r, self.workspace.relative) for r in rows]
        )

    # ------------------------------------------------------------ check_variant
    async def check_variant(
        self,
        file: str,
        kernel: Optional[str],
        variant_source: Optional[str],
        variant_path: Optional[str],
        harness: Optional[str] = None,
        progress: Optional[ProgressSink] = None,
    ) -> R.CheckReport:
        path, source, kernel = self._target(file, kernel)
        if (variant_source is None) == (variant_path is None):
            raise ToolRefusal("give exactly one of variant_source (the whole module's text) or variant_path")
        scratch: Optional[Path] = None
        if variant_path is not None:
            variant = self.workspace.python_file(variant_path, "variant_path")
        else:
            assert variant_source is not None
            if len(variant_source.encode("utf-8", "replace")) > MAX_VARIANT_BYTES:
                raise ToolRefusal(
                    f"variant_source: over {MAX_VARIANT_BYTES // (1024 * 1024)} MiB; "
                    "a variant is a copy of the module with the kernel changed"
                )
            scratch = Path(tempfile.mkdtemp(dir=self._scratch))
            variant = scratch / path.name
            variant.write_text(variant_source, encoding="utf-8")
        try:
            job = await self.jobs.run(
                self._spec(CHECK, path, source, kernel, harness, variant_path=str(variant)), progress, describe=None
            )
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        check = self._output(job, job.check)
        report = R.check_report(check, self.workspace.relative(path))
        variant_text = variant_source if variant_source is not None else self._read(variant)
        report.warnings = reference_warnings(path, source, variant_text) + report.warnings
        return report

    # ------------------------------------------------------------ profile_kernel
    async def profile_kernel(
        self,
        file: str,
        kernel: Optional[str],
        tier: int = 2,
        harness: Optional[str] = None,
        progress: Optional[ProgressSink] = None,
    ) -> R.ProfileReport:
        if tier not in (1, 2, 3):
            raise ToolRefusal(f"tier: expected 1, 2 or 3, not {tier}")
        path, source, kernel = self._target(file, kernel)
        spec = self._spec(PROFILE, path, source, kernel, harness, extra_args=("--tier", str(tier)))
        job = await self.jobs.run(spec, progress, describe=describe_event)
        profile = self._output(job, job.profile)
        return R.profile_report(profile, self.workspace.relative(path), tier)

    # ------------------------------------------------------------ optimize_kernel
    async def optimize_kernel(
        self,
        file: str,
        kernel: Optional[str],
        budget: Optional[int] = None,
        seconds: Optional[float] = None,
        harness: Optional[str] = None,
        progress: Optional[ProgressSink] = None,
    ) -> R.OptimizeReport:
        evaluations: int = self._option("budget", budget)
        limit_seconds: float = self._option("seconds", seconds)
        if evaluations == 0 and limit_seconds == 0:
            raise ToolRefusal("budget and seconds are both 0 (no limit): give a session one limit")
        path, source, kernel = self._target(file, kernel)
        settings = dataclasses.replace(self.settings, budget_evaluations=evaluations, budget_seconds=limit_seconds)
        job = await self.jobs.run(
            self._spec(OPTIMIZE, path, source, kernel, harness, settings=settings), progress, describe=describe_event
        )
        result = self._output(job, job.result)
        rel = self.workspace.relative(path)
        return R.optimize_report(result, rel, results_uri(kernel, rel))

    # ------------------------------------------------------------ stored results
    def stored_results(self, kernel: str, file: str) -> R.StoredResults:
        path = self.workspace.python_file(file, "file")
        rel = self.workspace.relative(path)
        db = find_workspace(path) / DB_DIR / DB_NAME
        if not db.exists():  # a read never creates the store
            return R.StoredResults(rel, kernel, None, None, note="no stored results: nothing was run on this workspace")
        with Store(db) as store:
            raw_result = store.latest_result(str(path), kernel)
            profile = store.latest_profile(kernel, file=str(path))
        result = Result.from_dict(raw_result) if isinstance(raw_result, dict) else None
        out = R.StoredResults(
            file=rel,
            kernel=kernel,
            optimize=R.optimize_report(result, rel, results_uri(kernel, rel)) if result else None,
            profile=R.profile_report(profile, rel, profile.tier or 2) if profile else None,
            note="" if result or profile else f"no stored optimize result or profile of {kernel} in {rel}",
        )
        return R.scrubbed(out)

    # ------------------------------------------------------------ shared steps
    def _read(self, path: Path) -> str:
        try:
            return read_source(str(path))
        except (OSError, UnicodeDecodeError) as e:
            raise PathRefused(f"{self.workspace.relative(path)}: cannot read ({_line(e)})") from None

    def _target(self, file: str, kernel: Optional[str]) -> tuple[Path, str, str]:
        """The module's real path and text, and the kernel named (or the only one)."""
        path = self.workspace.python_file(file)
        source = self._read(path)
        rel = self.workspace.relative(path)
        try:
            info = pick_kernel(detect_or_fail(rel, source), rel, kernel or None)
        except UsageError as e:
            raise ToolRefusal(str(e).replace("choose one with --kernel", "choose one with kernel")) from None
        return path, source, info.name

    def _spec(
        self,
        kind: str,
        path: Path,
        source: str,
        kernel: str,
        harness: Optional[str],
        settings: Optional[Settings] = None,
        variant_path: Optional[str] = None,
        extra_args: tuple[str, ...] = (),
    ) -> JobSpec:
        return JobSpec(
            kind=kind,
            path=str(path),
            kernel=kernel,
            source=source,
            settings=settings or self.settings,
            harness=harness or None,
            cwd=str(path.parent),
            variant_path=variant_path,
            extra_args=extra_args,
        )

    @staticmethod
    def _option(name: str, value: object) -> Any:
        """A tool argument checked as the CLI checks the option (kernelband/options.py): a
        value of the option's type."""
        if value is None:
            return O.default(name)
        try:
            return O.option(name).check(value, label=name)
        except O.OptionError as e:
            raise ToolRefusal(str(e)) from None

    @staticmethod
    def _output(job: Job, output: Optional[T]) -> T:
        """What the job ended with, or a refusal saying why there is none (the engine's line)."""
        if job.state == DONE and output is not None:
            return output
        raise ToolRefusal(_line(job.error or f"the {job.spec.kind} job ended without a result ({job.state})"))


def describe_event(ev: Event) -> Optional[tuple[Optional[float], Optional[float], str]]:
    """(done, total, message) of an optimize or profile event worth a notification.
    Under the interpreter no ratio is shown: CPU times are never a speedup."""
    p = ev.payload
    if isinstance(p, Started):
        total = p.evaluations
        return 0.0, float(total) if total else None, f"started {p.kernel}"
    if isinstance(p, Baseline):
        if p.interpreted:
            return None, None, "original checked under the Triton interpreter (CPU: correctness only, no speed claim)"
        timed = f"{p.time_ms:.4g} ms" if p.time_ms is not None else "timed"
        return None, None, f"original: {timed} on {p.device or 'the GPU'}"
    if isinstance(p, Progress):
        if p.speed_claim is False or not p.best_speedup:
            speed = "" if p.speed_claim is False else "; nothing faster yet"
        else:
            speed = f"; best so far {p.best_speedup:.2f}x (single measurement; the final one is paired)"
        return float(p.done), float(p.total) if p.total else None, f"{p.done}/{p.total or '?'} evaluations{speed}"
    if isinstance(p, Candidate):
        return None, None, f"candidate {p.index} ({p.strategy or '-'}): {p.status}"
    if isinstance(p, Log) and p.message:
        return None, None, _line(p.message)[:200]
    return None


def reference_warnings(path: Path, original: str, variant: str) -> list[str]:
    """What the agent should know about the reference: the original is the file as it is
    on disk, which an agent may have edited itself."""
    out = []
    if variant == original:
        out.append("the variant is the original itself: this checks nothing")
    if _differs_from_git_head(path):
        out.append(
            f"{path.name} differs from its last commit: the reference is the file as it is now; "
            "if it holds your own edit, the check compares your variant with that edit"
        )
    return out


def _differs_from_git_head(path: Path) -> bool:
    """The file is tracked by git and has changes since HEAD (False when unknown)."""

    def git(*args: str) -> int:
        return subprocess.run(
            ["git", *args], cwd=path.parent, capture_output=True, timeout=10, stdin=subprocess.DEVNULL
        ).returncode

    try:  # outside a repository `git diff` compares files instead: ask whether it is tracked first
        return (
            git("ls-files", "--error-unmatch", "--", path.name) == 0
            and git("diff", "--quiet", "HEAD", "--", path.name) == 1
        )
    except (OSError, subprocess.SubprocessError):
        return False


def _python_files(folder: Path) -> tuple[list[Path], bool]:
    """Python files under ``folder`` (tooling folders skipped), at most MAX_FILES_LISTED;
    and whether that cap was reached."""
    out = list(itertools.islice(python_files(folder, skip=SKIP_DIRS), MAX_FILES_LISTED))
    return out, len(out) >= MAX_FILES_LISTED


def _line(e: object) -> str:
    text = str(e)
    return " | ".join(x.strip() for x in text.splitlines() if x.strip()) or type(e).__name__
