"""Per-document detection cache.

One ``Analysis`` per (document, text): the kernels found by ``kernelband.detect`` with
a line index for position conversion, and lazily the harness of each kernel. While a
file does not parse, the last good analysis keeps serving lenses, symbols and hovers
(``stale`` is set) instead of everything disappearing mid-edit.

Changes are analysed after a debounce; a request that needs the current text analyses
it at once (detection of a 3,000-line file takes milliseconds).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from kernelband.detect import DetectionResult, detect
from kernelband.harness import HarnessChoice, find_harness
from kernelband.model import KernelInfo, ParseError

from .incremental import Change, shift
from .positions import UTF16, LineIndex

log = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_hash(text: str) -> Optional[str]:
    """A hash of the module's code without comments and layout (its AST): a trailing space
    or a comment does not make a profile or a result belong to another version."""
    import ast

    try:
        return hashlib.sha256(ast.dump(ast.parse(text)).encode("utf-8")).hexdigest()
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@dataclass
class Analysis:
    uri: str
    path: str
    version: Optional[int]
    text: str
    index: LineIndex
    detection: DetectionResult
    # when the text does not parse: the last analysis that did (its kernels, its index)
    good: Optional["Analysis"] = None
    # shifted from the previous analysis by an edit that cannot change what is detected
    # (incremental.py); the analysis of the text itself follows after the debounce
    provisional: bool = False
    # only the top-level block under the cursor and the imports were detected (a hover
    # answered while the whole file is still being analysed): no harnesses, no variants
    partial: bool = False
    _harness: dict[tuple[str, Optional[str]], HarnessChoice] = field(default_factory=dict)
    _kernel_texts: dict[str, str] = field(default_factory=dict)

    @property
    def parsed(self) -> bool:
        return self.detection.error is None

    @property
    def error(self) -> Optional[ParseError]:
        return self.detection.error

    @property
    def stale(self) -> bool:
        """Kernels shown come from an older text (this one does not parse)."""
        return not self.parsed

    @property
    def source(self) -> Optional["Analysis"]:
        """The analysis whose kernels are shown: this one, else the last good one."""
        return self if self.parsed else self.good

    @property
    def kernels(self) -> list[KernelInfo]:
        src = self.source
        return src.detection.kernels if src else []

    @functools.cached_property
    def hash(self) -> str:
        return text_hash(self.text)

    @functools.cached_property
    def code_hash(self) -> Optional[str]:
        """code_hash(text), computed once (only asked when a profile is not of this exact text)."""
        return code_hash(self.text) if self.parsed else None

    def kernel(self, name: str) -> Optional[KernelInfo]:
        return next((k for k in self.kernels if k.name == name), None)

    def kernel_text(self, name: str) -> Optional[str]:
        """Source text of a kernel (decorators included) in this text; None if absent/unparsed."""
        if not self.parsed:
            return None
        if name not in self._kernel_texts:
            k = self.detection.kernel(name)
            if k is None:
                return None
            r = k.range
            self._kernel_texts[name] = self.index.segment(r.start_line, 0, r.end_line, r.end_col)
        return self._kernel_texts[name]

    def harness(self, name: str, explicit: Optional[str] = None) -> HarnessChoice:
        """Harness of a kernel (cached per text). Uses the last good text while unparsed."""
        src = self.source
        if src is None:
            return HarnessChoice(None, reason="the file does not parse")
        key = (name, explicit or None)
        if key not in src._harness:
            try:
                src._harness[key] = find_harness(
                    src.path, src.text, name, explicit=explicit or None, result=src.detection.scoped_to(name)
                )
            except Exception as e:  # an unreadable companion file must not break hovers
                log.warning("harness discovery for %s failed: %s", name, e)
                src._harness[key] = HarnessChoice(None, reason=f"harness discovery failed: {e}")
        return src._harness[key]


def _call_graph(d: DetectionResult) -> tuple:
    """What a harness choice depends on (who calls and launches whom), not positions."""
    return (
        tuple(k.name for k in d.kernels),
        tuple((f.name, f.kind, tuple(f.calls), tuple(f.launches)) for f in d.functions),
    )


_TOP = re.compile(r"(@|def |async def |class )")
_IMPORT = re.compile(r"(import |from )")


def partial_analysis(
    uri: str, path: str, text: str, version: Optional[int], line0: int, encoding: str = UTF16
) -> Optional[Analysis]:
    """Detection of only the imports and the top-level definition holding ``line0``,
    with every other line blanked (positions stay the document's). Milliseconds on a
    20,000-line file whose full detection takes seconds."""
    lines = text.splitlines(keepends=True)
    if not (0 <= line0 < len(lines)):
        return None
    start = line0
    while start > 0 and not _TOP.match(lines[start]):
        start -= 1
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    if not _TOP.match(lines[start]):
        return None
    end = start
    while end < len(lines) and lines[end].startswith("@"):
        end += 1  # decorators (a multi-line one: its continuation lines are indented or ")")
        while end < len(lines) and (lines[end][:1].isspace() or lines[end].startswith((")", "]", "}"))):
            end += 1
    end += 1  # the def or class line
    while end < len(lines):
        ln = lines[end]
        if ln.strip() and not ln[0].isspace() and not ln.startswith(("#", ")")):
            break  # the next top-level statement
        end += 1
    keep = set(range(start, end))
    depth = 0
    for i, ln in enumerate(lines):  # module-level imports, with parenthesised continuations
        if depth > 0 or _IMPORT.match(ln):
            keep.add(i)
            depth = max(depth + ln.count("(") - ln.count(")"), 0)
    mini = "".join(ln if i in keep else ("\n" if ln.endswith("\n") else "") for i, ln in enumerate(lines))
    det = detect(mini, path)
    if det.error is not None:
        return None
    return Analysis(uri, path, version, text, LineIndex(text, encoding), det, partial=True)


# ast.parse holds the GIL for its whole run (about a second for 20,000 lines here):
# on a thread it would stall the event loop and every request with it. Texts this long
# are detected in a helper process instead.
BIG_TEXT_LINES = 5000
_pool = None
_pool_lock = threading.Lock()


def _quiet_child() -> None:
    """The helper inherits the server's stdout, which carries the protocol."""
    import os
    import sys

    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _detector():
    global _pool
    with _pool_lock:
        if _pool is None:
            import concurrent.futures
            import multiprocessing

            _pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet_child
            )
        return _pool


def warm_detector() -> None:
    """Start the helper process before the first large file needs it."""
    try:
        _detector().submit(detect, "", "<warm-up>")
    except Exception as e:  # no helper: large files are detected on a thread
        log.info("no detection helper process: %s", e)


def shutdown_detector() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None


def detect_text(text: str, path: str) -> DetectionResult:
    if text.count("\n") >= BIG_TEXT_LINES:
        try:
            return _detector().submit(detect, text, path).result()
        except Exception as e:
            log.warning("detection helper failed (%s); detecting on a thread", e)
    return detect(text, path)


def analyse(
    uri: str, path: str, text: str, version: Optional[int], encoding: str = UTF16, previous: Optional[Analysis] = None
) -> Analysis:
    detection = detect_text(text, path)
    a = Analysis(uri, path, version, text, LineIndex(text, encoding), detection)
    if not a.parsed and previous is not None:
        a.good = previous if previous.parsed else previous.good
    return a


class Documents:
    """Analyses of open documents (and of files read from disk), debounced on change.

    Analysis runs on a worker thread (``aget``), so a large file being re-detected
    never stalls the event loop: other requests and job events keep flowing. A request
    for a version being analysed waits for that analysis instead of starting another.
    """

    def __init__(
        self, encoding: str = UTF16, debounce_s: float = 0.25, on_analysed: Optional[Callable[[Analysis], None]] = None
    ) -> None:
        self.encoding = encoding
        self.debounce_s = debounce_s
        self.on_analysed = on_analysed
        self._cache: dict[str, Analysis] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._inflight: dict[str, list[tuple[Optional[int], str, asyncio.Future]]] = {}
        self._seq = 0
        self._stored_seq: dict[str, int] = {}
        self._provisional: dict[str, Analysis] = {}
        # called when the analysis of a text differs from the provisional one served for it
        self.on_provisional_mismatch: Optional[Callable[[str], None]] = None

    @staticmethod
    def _matches(a: Analysis, text: str, version: Optional[int]) -> bool:
        return a.version == version and (a.text is text or a.text == text)

    def _store(self, uri: str, a: Analysis, seq: int) -> None:
        if seq >= self._stored_seq.get(uri, -1):
            self._stored_seq[uri] = seq
            self._cache[uri] = a
            if not a.parsed:
                log.info(
                    "%s does not parse (line %s: %s); keeping the last good detection",
                    a.path,
                    a.error.line if a.error else "?",
                    a.error.message if a.error else "",
                )

    async def aget(self, uri: str, path: str, text: str, version: Optional[int]) -> Analysis:
        """The analysis of exactly this text, computed on a worker thread if needed."""
        cur = self._cache.get(uri)
        if cur is not None and self._matches(cur, text, version):
            return cur
        for v, t, fut in self._inflight.get(uri, []):
            if v == version and (t is text or t == text):
                return await asyncio.shield(fut)
        loop = asyncio.get_running_loop()
        self._seq += 1
        seq = self._seq
        fut = loop.run_in_executor(None, analyse, uri, path, text, version, self.encoding, cur)
        entry = (version, text, fut)
        self._inflight.setdefault(uri, []).append(entry)
        try:
            a = await asyncio.shield(fut)
        finally:
            lst = self._inflight.get(uri, [])
            if entry in lst:
                lst.remove(entry)
            if not lst:
                self._inflight.pop(uri, None)
        self._store(uri, a, seq)
        return a

    def cached(self, uri: str) -> Optional[Analysis]:
        return self._cache.get(uri)

    def analysing(self, uri: str, text: str, version: Optional[int]) -> bool:
        """Is the analysis of exactly this text running (not yet done)?"""
        cur = self._cache.get(uri)
        if cur is not None and self._matches(cur, text, version):
            return False
        return any(v == version and (t is text or t == text) for v, t, _ in self._inflight.get(uri, []))

    def note_change(
        self, uri: str, path: str, changes: Optional[list[Change]], text: str, version: Optional[int]
    ) -> Optional[Analysis]:
        """Right after a change: the last analysis moved by the change, when the change
        cannot alter what detection finds (incremental.py); None otherwise."""
        base = self._provisional.get(uri) or self._cache.get(uri)
        self._provisional.pop(uri, None)
        if base is None or changes is None or not base.parsed:
            return None
        got = shift(base.detection, base.index, changes)
        if got is None:
            return None
        detection, index = got
        if index.text != text:  # not the text this change was made to: the slow path
            return None
        a = Analysis(uri, path, version, text, index, detection, provisional=True)
        if _call_graph(detection) == _call_graph(base.detection):
            a._harness = dict(base._harness)  # harness choices depend on structure, not positions
        self._provisional[uri] = a
        return a

    def provisional(self, uri: str, text: str, version: Optional[int]) -> Optional[Analysis]:
        a = self._provisional.get(uri)
        return a if a is not None and self._matches(a, text, version) else None

    def schedule(self, uri: str, fetch: Callable[[], Optional[tuple[str, str, Optional[int]]]]) -> None:
        """Analyse after the debounce; fetch() returns (path, text, version) at that time."""
        loop = asyncio.get_running_loop()
        old = self._timers.pop(uri, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._timers.pop(uri, None)
            loop.create_task(self._run_scheduled(uri, fetch))

        self._timers[uri] = loop.call_later(self.debounce_s, fire)

    async def _run_scheduled(self, uri: str, fetch: Callable[[], Optional[tuple[str, str, Optional[int]]]]) -> None:
        got = fetch()
        if got is None:
            return
        path, text, version = got
        try:
            a = await self.aget(uri, path, text, version)
        except Exception:  # pragma: no cover - detect never raises, but be safe
            log.exception("analysis of %s failed", uri)
            return
        prov = self._provisional.get(uri)
        if prov is not None and prov.version == a.version:
            del self._provisional[uri]
            same = (
                a.parsed
                and prov.detection.kernels == a.detection.kernels
                and prov.detection.functions == a.detection.functions
            )
            if not same and self.on_provisional_mismatch is not None:
                self.on_provisional_mismatch(uri)
        if self._cache.get(uri) is a and self.on_analysed is not None:
            self.on_analysed(a)

    async def now(self, uri: str, path: str, text: str, version: Optional[int]) -> Analysis:
        """Analyse at once (open, save) and notify."""
        old = self._timers.pop(uri, None)
        if old is not None:
            old.cancel()
        a = await self.aget(uri, path, text, version)
        if self.on_analysed is not None:
            self.on_analysed(a)
        return a

    def close(self, uri: str) -> None:
        t = self._timers.pop(uri, None)
        if t is not None:
            t.cancel()
        self._cache.pop(uri, None)
        self._stored_seq.pop(uri, None)
        self._provisional.pop(uri, None)
