"""``optimize-all``: every kernel with a harness under a directory, one session each,
scheduled over the executor's workers (one kernel per worker at a time).

Resumable through the store: a kernel whose result is stored for the exact key (its
module's text, its harness file's text and names, the session settings) is not run
again. The user's files are never written: each verified edit becomes a unified-diff
patch file in the output directory (paths relative to the scanned root, so
``git apply`` / ``patch -p1`` from the root applies it).
"""

from __future__ import annotations

import difflib
import json
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Iterator, Optional, TypedDict, cast

from .detect import detect, read_source
from .harness import find_harness
from .json_types import JsonObject
from .model import Result, ResultStatus, Task, sha256_text
from .session_config import SessionConfig

if TYPE_CHECKING:  # the executors load when the batch runs
    from .executor.base import Executor, Slot

KV_PREFIX = "optimize-all/"
# folders never scanned: environments, caches, our own output
SKIP_DIRS = {
    ".git",
    ".hg",
    ".kernelband",
    "__pycache__",
    "node_modules",
    ".venv",
    "venv",
    "env",
    "site-packages",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    "build",
    "dist",
}
# statuses worth keeping (a finished search)
RAN = frozenset({ResultStatus.IMPROVED, ResultStatus.NO_IMPROVEMENT, ResultStatus.VERIFIED_CORRECT})

# what a kernel's row and patch are made of: its session's Result in these keys (as its
# to_dict() writes them), stored as they are under KV_PREFIX + its key with the worker
# that ran it; a stored one is read back unchecked, as it was written
KeptResult = TypedDict(
    "KeptResult",
    {
        "status": str,
        "message": str,
        "speedup": Optional[float],
        "speedup_ci": Optional[list[float]],
        "evaluations": int,
        "seconds": float,
        "best_source": str,
        "applicable": bool,
        "speed_claim": bool,
        "_worker": str,
    },
    total=False,
)


def kept_of(r: Result) -> KeptResult:
    """The keys of ``r.to_dict()`` a row, a patch and the store keep."""
    return {
        "status": r.status.value,
        "message": r.message,
        "speedup": r.speedup,
        "speedup_ci": list(r.speedup_ci) if r.speedup_ci is not None else None,
        "evaluations": r.evaluations,
        "seconds": r.seconds,
        "best_source": r.best_source,
        "applicable": r.applicable,
        "speed_claim": r.speed_claim,
    }


@dataclass
class KernelJob:
    """One kernel to optimize, or why it cannot be (no harness, unreadable file)."""

    file: str  # absolute
    rel: str  # relative to the root
    kernel: str
    task: Optional[Task] = None
    skip_reason: str = ""
    key: str = ""


@dataclass
class Row:
    """One line of the summary (and of --json)."""

    file: str
    kernel: str
    status: str  # a Result status, or no_harness | error | stored statuses
    message: str = ""
    speedup: Optional[float] = None
    speedup_ci: Optional[list[float]] = None
    evaluations: int = 0
    seconds: float = 0.0
    worker: str = ""
    patch: Optional[str] = None  # path of the patch file written
    resumed: bool = False  # taken from the store, not run again
    speed_claim: bool = False

    def to_dict(self) -> JsonObject:
        return asdict(self)


def python_files(root: Path, exclude: Optional[Path] = None, skip: Collection[str] = SKIP_DIRS) -> Iterator[Path]:
    """The Python files under ``root`` in a stable order, the folders in ``skip``, hidden
    ones and ``exclude`` left out; ``root`` itself when it is a file."""
    if root.is_file():
        yield root
        return
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(
            x
            for x in dirs
            if x not in skip and not x.startswith(".") and (exclude is None or Path(d, x).resolve() != exclude)
        )
        yield from (Path(d, f) for f in sorted(files) if f.endswith(".py"))


def discover(root: str, device: str, seeds: int, timeout_s: float, exclude: Optional[str] = None) -> list[KernelJob]:
    """Every @triton.jit kernel under root with the harness found for it (detect.py and
    harness.py, as `kernelband list` does); kernels without one are kept with the reason."""
    base = Path(root).resolve()
    top = base if base.is_dir() else base.parent
    jobs: list[KernelJob] = []
    for path in python_files(base, Path(exclude).resolve() if exclude else None):
        rel = str(path.resolve().relative_to(top))
        try:
            source = read_source(path)
        except (OSError, UnicodeDecodeError) as e:
            jobs.append(KernelJob(str(path.resolve()), rel, "-", skip_reason=f"cannot read: {e}"))
            continue
        result = detect(source, str(path))
        if result.error:
            continue  # not parseable: not ours to judge (`kernelband list` says why)
        for k in result.kernels:
            choice = find_harness(str(path.resolve()), source, k.name, result=result.scoped_to(k.name))
            job = KernelJob(str(path.resolve()), rel, k.name)
            if not choice.found:
                job.skip_reason = f"no harness: {choice.reason}"
            else:
                job.task = Task(
                    module_path=str(path.resolve()),
                    source=source,
                    kernel=k.name,
                    harness=choice.name or "",
                    harness_path=choice.path,
                    device=device,
                    seeds=list(range(seeds)),
                    timeout_s=timeout_s,
                    check_harnesses=list(choice.checks),
                )
            jobs.append(job)
    return jobs


def job_key(task: Task, settings: JsonObject) -> str:
    """The exact inputs of a kernel's session: module text, harness text and names, settings."""
    harness_text = ""
    if task.harness_path:
        try:
            harness_text = Path(task.harness_path).read_text(encoding="utf-8")
        except OSError:
            harness_text = f"<unreadable {task.harness_path}>"
    blob = json.dumps(
        {
            "source": task.source,
            "kernel": task.kernel,
            "harness": task.harness,
            "checks": task.check_harnesses,
            "harness_text": harness_text,
            "device": task.device,
            "seeds": task.seeds,
            "timeout_s": task.timeout_s,
            "settings": settings,
        },
        sort_keys=True,
    )
    return sha256_text(blob)


def patch_text(original: str, new: str, rel: str, header: str = "") -> str:
    diff = "".join(
        difflib.unified_diff(original.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}")
    )
    return (header + diff) if diff else ""


def write_patch(out_dir: Path, job: KernelJob, result: KeptResult) -> Optional[str]:
    """The verified edit of a kernel as a patch file: improved (and applicable) results in
    out_dir, correct-only ones (no speed claim: the interpreter) in out_dir/correct-only."""
    status = result.get("status")
    if status == ResultStatus.IMPROVED and result.get("applicable"):
        folder, header = out_dir, f"# kernelband: {job.rel}:{job.kernel}: {result.get('message', '')}\n"
    elif status == ResultStatus.VERIFIED_CORRECT:
        folder = out_dir / "correct-only"
        header = f"# kernelband: {job.rel}:{job.kernel}: verified correct, speed not measured (no GPU): not a speedup\n"
    else:
        return None
    assert job.task is not None
    text = patch_text(
        job.task.source, result.get("best_source") or job.task.source, job.rel, header.replace("\n", " ").strip() + "\n"
    )
    if not text.strip() or "@@" not in text:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    name = job.rel.replace(os.sep, "__").replace("/", "__")
    path = folder / f"{name[:-3] if name.endswith('.py') else name}.{job.kernel}.patch"
    path.write_text(text, encoding="utf-8")
    return str(path)


def row_of(job: KernelJob, result: KeptResult, worker: str, patch: Optional[str], resumed: bool) -> Row:
    return Row(
        file=job.rel,
        kernel=job.kernel,
        status=str(result.get("status")),
        message=str(result.get("message", "")),
        speedup=result.get("speedup"),
        speedup_ci=result.get("speedup_ci"),
        evaluations=int(result.get("evaluations") or 0),
        seconds=float(result.get("seconds") or 0.0),
        worker=worker,
        patch=patch,
        resumed=resumed,
        speed_claim=bool(result.get("speed_claim")),
    )


@dataclass
class BatchRun:
    """Run the jobs over the executor's slots; one thread per slot takes the next kernel."""

    jobs: list[KernelJob]
    executor: Executor
    config: SessionConfig
    store_path: Optional[str]  # the SQLite file (each thread opens its own connection); None: no store
    out_dir: Path
    settings: JsonObject  # the session settings a stored result must match (json.dumps'd into its key)
    device: str = "auto"
    on_progress: Callable[[str], None] = lambda line: None
    stop: threading.Event = field(default_factory=threading.Event)
    force: bool = False  # run again even when a result is stored

    def run(self) -> list[Row]:
        from .store import Store

        rows: dict[int, Row] = {}
        todo: "queue.Queue[tuple[int, KernelJob]]" = queue.Queue()
        runnable = [(i, j) for i, j in enumerate(self.jobs) if j.task is not None]
        total = len(runnable)
        done = [0]
        lock = threading.Lock()

        def progress(job: KernelJob, row: Row) -> None:
            with lock:
                done[0] += 1
                self.on_progress(f"[{done[0]}/{total}] {job.rel}:{job.kernel}: {_describe(row)}")

        for i, j in enumerate(self.jobs):
            if j.task is None:
                rows[i] = Row(
                    file=j.rel,
                    kernel=j.kernel,
                    status="no_harness" if j.skip_reason.startswith("no harness") else "error",
                    message=j.skip_reason,
                )
        store = Store(self.store_path) if self.store_path else None
        try:
            for i, j in runnable:
                assert j.task is not None
                j.key = job_key(j.task, self.settings)
                stored = store.get(KV_PREFIX + j.key) if store and not self.force else None
                if isinstance(stored, dict) and stored.get("status") in RAN:
                    kept = cast(KeptResult, stored)  # as _worker wrote it
                    patch = write_patch(self.out_dir, j, kept)
                    rows[i] = row_of(j, kept, kept.get("_worker", ""), patch, resumed=True)
                    progress(j, rows[i])
                else:
                    todo.put((i, j))
        finally:
            if store:
                store.close()
        slots = self.executor.slots(self.device)
        threads = [
            threading.Thread(target=self._worker, args=(slot, todo, rows, progress), daemon=True) for slot in slots
        ]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.5)  # short joins: Ctrl-C reaches the main thread
        return [rows[i] for i in sorted(rows)]

    def _worker(
        self,
        slot: Slot,
        todo: "queue.Queue[tuple[int, KernelJob]]",
        rows: dict[int, Row],
        progress: Callable[[KernelJob, Row], None],
    ) -> None:
        from .session import Session
        from .store import Store

        while not self.stop.is_set():
            try:
                i, job = todo.get_nowait()
            except queue.Empty:
                return
            assert job.task is not None
            store = Store(self.store_path) if self.store_path else None
            t0 = time.monotonic()
            try:
                evaluator = self.executor.evaluator(slot, job.task, None, self.config.profile_tier)
                result = kept_of(Session(job.task, self.config, None, store, self.stop, evaluator=evaluator).run())
            except Exception as e:  # noqa: BLE001 - one kernel's failure never ends the batch
                rows[i] = Row(
                    file=job.rel,
                    kernel=job.kernel,
                    status="error",
                    message=f"{type(e).__name__}: {e}",
                    seconds=round(time.monotonic() - t0, 3),
                    worker=slot.label,
                )
                progress(job, rows[i])
                continue
            finally:
                if store:
                    store.close()
            patch = write_patch(self.out_dir, job, result)
            rows[i] = row_of(job, result, slot.label, patch, resumed=False)
            if result.get("status") in RAN and self.store_path:
                with Store(self.store_path) as s:
                    s.put(KV_PREFIX + job.key, {**result, "_worker": slot.label})
            progress(job, rows[i])


def _describe(row: Row) -> str:
    if row.resumed:
        return f"{row.status} (stored result, not run again)"
    if row.status == ResultStatus.IMPROVED and row.speedup:
        lo = row.speedup_ci[0] if row.speedup_ci else None
        ci = f" (CI low {lo:.3f})" if lo is not None else ""
        return f"improved {row.speedup:.3f}x{ci} in {row.evaluations} evaluations, {row.seconds:.1f} s [{row.worker}]"
    if row.status == "error":
        return f"error: {row.message}"
    return f"{row.status} in {row.evaluations} evaluations, {row.seconds:.1f} s [{row.worker}]"


def summary_table(rows: list[Row]) -> str:
    head = ("file", "kernel", "status", "speedup", "evals", "seconds", "patch")
    body = []
    for r in rows:
        sp = f"{r.speedup:.3f}x" if (r.speedup and r.speed_claim) else "-"
        body.append(
            (
                r.file,
                r.kernel,
                r.status + (" (stored)" if r.resumed else ""),
                sp,
                str(r.evaluations),
                f"{r.seconds:.1f}",
                r.patch or "-",
            )
        )
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(line.rstrip() for line in lines)
