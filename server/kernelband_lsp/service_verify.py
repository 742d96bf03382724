"""Re-verify an applied variant (command kernelband.reverify, lens "Re-verify").

After Apply the file holds the variant, so checking "the file" would check the variant
against itself. The original is the text the variant's session started from: this
session's job remembers it, and a stored Result (a CLI run, ``optimize --apply``, an
earlier server) carries it through its variant and diff, checked by its hash
(kernelband/reverify.py). The check runs the variant *as it stands in the file* against
*this text with the variant's changes taken out*: the original itself when nothing else
changed, and with the user's other edits (a new harness shape, say) on both sides when
something did. It is ``kernelband check`` (correctness on every seed with the trust
checks, then the interleaved re-measurement), run as a job like optimize and profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import tempfile
from dataclasses import dataclass
from typing import Iterator, Optional

from lsprotocol import types

from kernelband.model import Result
from kernelband.reverify import original_of, verdict_line

from . import summary as S
from .display import INTERPRETED_NOTE
from .documents import Analysis
from .jobs import CANCELLED, CHECK
from .service_client import Client
from .service_documents import OpenDocuments
from .service_jobs import JobRunner
from .service_variants import FoundVariant, FoundVariants, is_interpreted
from .storeview import StoreView

log = logging.getLogger("kernelband_lsp")


@dataclass(frozen=True)
class Reverified:
    """The verdict of the last re-verification of a kernel, for the text it ran on."""

    text_hash: str
    passed: bool
    line: str
    job_id: str


class Reverifier:
    """Which found variant is applied in a text, and its re-verification as a check job."""

    def __init__(
        self, client: Client, documents: OpenDocuments, variants: FoundVariants, jobs: JobRunner, store: StoreView
    ) -> None:
        self.client = client
        self.documents = documents
        self.variants = variants
        self.jobs = jobs
        self.store = store
        # the last re-verification of an applied variant, per (path, kernel); originals rebuilt
        # from stored Results, per Result
        self.reverified: dict[tuple[str, str], Reverified] = {}
        self._originals: dict[tuple, Optional[str]] = {}

    def applied_variant(self, a: Analysis, kernel: str) -> Optional[tuple[FoundVariant, str]]:
        """(the found variant whose changes are in this text, the text to check it
        against: this one with those changes taken out), or None when no variant is
        applied here."""
        if not a.parsed or not a.path or a.partial:
            return None
        key = (self.store.abspath(a.path), kernel)
        found = self.variants.found
        for fv in self._applied_candidates(a, key, kernel):
            plan = self.variants.cached_plan(fv, a, undo=True)
            if plan.ok and plan.hunks:
                if found.get(key) is not fv:
                    found[key] = fv  # Undo then finds it: the Apply lens comes back
                return fv, plan.new_text
        return None

    def _applied_candidates(self, a: Analysis, key: tuple[str, str], kernel: str) -> Iterator[FoundVariant]:
        fv = self.variants.found.get(key)
        if fv is not None:
            yield fv
        res = self.store.result(a.path, kernel)
        if res is None or not res.found or res.original_hash == a.hash:
            return
        if fv is not None and fv.result.session_id == res.session_id and fv.source == res.best_source:
            return
        original = self._original_of(res)
        if original is not None:
            yield FoundVariant(
                uri=a.uri,
                path=key[0],
                kernel=kernel,
                job_id=res.session_id or "store",
                base_text=original,
                result=res,
                background=False,
            )

    def _original_of(self, res: Result) -> Optional[str]:
        key = (res.session_id, res.original_hash, len(res.diff), len(res.best_source))
        if key not in self._originals:
            if len(self._originals) > 64:
                self._originals.clear()
            self._originals[key] = original_of(res)
        return self._originals[key]

    def applied_line(self, a: Analysis, kernel: str, fv: FoundVariant) -> str:
        """What the lens says of an applied variant: the last re-verification of this text,
        else what the variant was found to be."""
        v = self.reverified.get((self.store.abspath(a.path), kernel))
        if v is not None and v.text_hash == a.hash:
            return v.line[:1].upper() + v.line[1:]
        sp = S.num(fv.result.speedup)
        what = INTERPRETED_NOTE if is_interpreted(fv.result) else (f"{sp:.2f}x" if sp is not None else "verified")
        return f"Applied variant ({what})"

    async def reverify(self, args: dict, token: Optional[types.ProgressToken] = None) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")

        def fail(msg: str) -> dict:
            return {"jobId": None, "kernel": kernel, "verified": False, "summary": msg, "message": msg}

        if not isinstance(uri, str) or not isinstance(kernel, str):
            return fail("expected arguments {uri, kernel}")
        a = await self.documents.analysis(uri)
        if a is None or not a.parsed:
            return fail(f"cannot read {uri}" if a is None else "the file does not parse")
        if not uri.startswith("file:") or not a.path:
            return fail("save the file first: KernelBand runs kernels from a file on disk")
        found = self.applied_variant(a, kernel)
        if found is None:
            return fail(
                f"no applied KernelBand variant of {kernel} in this text: Re-verify checks a found "
                "variant after Apply (against the original it replaced)"
            )
        fv, original = found
        settings = self.client.settings  # pulled from the editor before the command (service.py)
        variant_path = _write_variant(kernel, a.text)
        spec = dataclasses.replace(
            self.jobs.spec(CHECK, a, kernel, settings, background=False), source=original, variant_path=variant_path
        )
        job = self.jobs.manager.submit(spec)
        try:
            await self.jobs.run_to_end(job, token)
        finally:
            if job.finished:
                _remove(variant_path)
            else:  # cancelled while running: remove it once the process is gone
                asyncio.get_running_loop().call_later(10, _remove, variant_path)
        if job.state == CANCELLED:
            return {**fail("re-verification cancelled"), "jobId": job.id}
        passed, line = (
            verdict_line(job.check)
            if job.check is not None
            else (False, f"re-verification failed: {job.error or job.state}")
        )
        self.reverified[(fv.path, kernel)] = Reverified(a.hash, passed, line, job.id)
        self.client.refresh_lenses()
        log.info("%s: %s: %s", job.id, kernel, line)
        return {
            "jobId": job.id,
            "kernel": kernel,
            "verified": passed,
            "summary": line,
            "check": job.check.to_dict() if job.check is not None else None,
            "message": line,
            "foundBy": fv.job_id,
        }


def _write_variant(kernel: str, text: str) -> str:
    """The variant as the check reads it: a file outside the workspace (never in the user's tree)."""
    fd, path = tempfile.mkstemp(prefix=f"kernelband-applied-{kernel[:40]}-", suffix=".py")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
