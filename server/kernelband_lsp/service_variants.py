"""Found variants: which verified variant to offer on which text, and its edit, diff,
evidence, Apply and Review (commands kernelband.proposedEdit/applyVariant/reviewVariant)."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Optional

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from kernelband.model import Result, ResultStatus
from kernelband.verdict import is_improvement

from . import display as D
from . import edits as E
from . import evidence as EV
from . import lenses as L
from . import summary as S
from .display import INTERPRETED_NOTE
from .documents import Analysis, text_hash
from .jobmodel import Job
from .service_client import Client
from .storeview import StoreView

log = logging.getLogger("kernelband_lsp")


@dataclass
class FoundVariant:
    """A verified faster module found by a job, tied to the text the job started from."""

    uri: str
    path: str
    kernel: str
    job_id: str
    base_text: str
    result: Result
    background: bool

    @property
    def source(self) -> str:
        return self.result.best_source


def is_interpreted(result: Optional[Result]) -> bool:
    """A Result whose times may not be read as a speedup (display.py's rule)."""
    return result is not None and not D.result_claims_speed(result)


def offerable(result: Result, min_speedup: float) -> bool:
    """The offer rule is the engine's: ``Result.applicable`` (GPU times, the CI's lower
    bound above the session's floor), held to this editor's floor too when it is set
    higher (``verdict.is_improvement``, the rule behind ``applicable``), and never for
    interpreter times (display.py: a --cpu-tuning Result is applicable, not a speedup)."""
    ci = result.speedup_ci
    low = ci[0] if ci else result.speedup  # a Result written without its CI: the point
    return (
        result.applicable
        and bool(result.best_source)
        and not is_interpreted(result)
        and is_improvement(S.num(low), min_speedup)
    )


class FoundVariants:
    """Reads the editor's text through the client, never through the open documents: the
    documents publish this class's diagnostics with their own."""

    def __init__(self, client: Client, store: StoreView) -> None:
        self.client = client
        self.store = store
        self.found: dict[tuple[str, str], FoundVariant] = {}  # (path, kernel) -> the last found
        self._plans: dict[tuple, E.EditPlan] = {}

    def diagnostics(self, a: Analysis) -> list[types.Diagnostic]:
        """The "found variant" diagnostics of background finds on this text."""
        # found variants are kept even when applied or no longer applicable: an undo (or
        # reverting the kernel) brings the text back and the offer must come back with it
        return [
            L.variant_diagnostic(a, k, fv.result, fv.job_id)
            for k in a.detection.kernels
            if (fv := self.offer(a, k.name)) is not None and fv.background
        ]

    def variant_of(self, a: Analysis, kernel: str) -> Optional[FoundVariant]:
        """The found variant of a kernel: this session's, else a stored Result that started
        from exactly this text (a CLI run, an earlier server); remembered once seen so that
        Apply -> Undo finds it again."""
        return self._variant_on(a.uri, a.path, a.text, a.hash, kernel) if a.path else None

    def _variant_on(self, uri: str, path: str, text: str, module_hash: str, kernel: str) -> Optional[FoundVariant]:
        key = (self.store.abspath(path), kernel)
        fv = self.found.get(key)
        if fv is not None:
            return fv
        res = self.store.result(path, kernel)
        if res is not None and res.found and res.original_hash == module_hash:
            fv = FoundVariant(
                uri=uri,
                path=key[0],
                kernel=kernel,
                job_id=res.session_id or "store",
                base_text=text,
                result=res,
                background=False,
            )
            self.found[key] = fv
            return fv
        return None

    def offer(self, a: Analysis, kernel: str) -> Optional[FoundVariant]:
        """The variant to offer on this text: offerable and still applicable with a change
        (None once applied: the text already is the variant)."""
        if not a.parsed:
            return None
        fv = self.variant_of(a, kernel)
        if fv is None or not offerable(fv.result, self.client.settings.min_speedup):
            return None
        plan = self.cached_plan(fv, a)
        return fv if plan.ok and plan.hunks else None

    def reviewable(self, a: Analysis, kernel: str) -> Optional[FoundVariant]:
        """Any found correct variant (a GPU speedup or an interpreter-verified one) whose
        changes can still be applied to this text: what Review shows. None once the
        kernel's code changed (a stale variant is not advertised) or once it is applied."""
        if not a.parsed or a.partial:
            return None
        fv = self.variant_of(a, kernel)
        if fv is None or not fv.result.found:
            return None
        plan = self.cached_plan(fv, a)
        return fv if plan.ok and plan.hunks else None

    def cached_plan(self, fv: FoundVariant, a: Analysis, undo: bool = False) -> E.EditPlan:
        """Code actions are asked for on every cursor move: plan once per (variant, text).
        ``undo``: the plan that takes the variant's changes out of the text again (it is
        ok, with hunks, exactly when the variant is applied there)."""
        key = (fv.job_id, fv.kernel, a.uri, a.version, a.hash, undo)
        hit = self._plans.get(key)
        if hit is None:
            old, new = (fv.source, fv.base_text) if undo else (fv.base_text, fv.source)
            hit = E.plan_edit(old, new, a.text, fv.kernel)
            if len(self._plans) > 64:
                self._plans.clear()
            self._plans[key] = hit
        return hit

    def _plan_for(self, fv: FoundVariant) -> tuple[E.EditPlan, Optional[int], str]:
        text, version = self.client.text_of(fv.uri, fv.path)
        if text is None:
            return E.EditPlan(False, f"cannot read {fv.path}"), None, ""
        return E.plan_edit(fv.base_text, fv.source, text, fv.kernel), version, text

    # ================================================================== from jobs
    def found_by(self, job: Job) -> FoundVariant:
        """The variant an optimize job found, tied to the text it started from."""
        spec = job.spec
        return FoundVariant(
            uri=spec.uri or from_fs_path(spec.path) or spec.path,
            path=spec.path,
            kernel=spec.kernel,
            job_id=job.id,
            base_text=spec.source,
            result=job.result or Result(status=ResultStatus.FAILED),
            background=spec.background,
        )

    def remember(self, job: Job) -> FoundVariant:
        fv = self.found[(job.spec.path, job.spec.kernel)] = self.found_by(job)
        return fv

    def edit_for_result(self, job: Job) -> dict:
        """The optimize reply's edit: the found variant on the text as it is now."""
        res = job.result
        if res is None or not res.found:
            return {"edit": None}
        if is_interpreted(res):
            return {"edit": None, "editMessage": INTERPRETED_NOTE}
        fv = self.found.get((job.spec.path, job.spec.kernel))
        if fv is None or fv.job_id != job.id:
            fv = self.found_by(job)
        plan, version, text = self._plan_for(fv)
        if not plan.ok:
            return {"edit": None, "editMessage": plan.message}
        edit = self.client.workspace_edit(fv.uri, version, text, plan.hunks)
        return {"edit": edit, "editVersion": version, "editRebuilt": plan.rebuilt}

    # ================================================================== commands
    def lookup(self, uri: str, kernel: str) -> Optional[FoundVariant]:
        """The found variant of the kernel in the file as the editor holds it (else as on disk)."""
        path = to_fs_path(uri)
        if not path:
            return None
        text, _ = self.client.text_of(uri, path)
        if text is not None:
            return self._variant_on(uri, path, text, text_hash(text), kernel)
        return self.found.get((os.path.abspath(path), kernel))

    def _requested(self, args: dict) -> tuple[Optional[FoundVariant], str]:
        """The found variant a command's {uri, kernel} names, else (None, why not)."""
        uri, kernel = args.get("uri"), args.get("kernel")
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return None, "expected arguments {uri, kernel}"
        fv = self.lookup(uri, kernel)
        return fv, "" if fv is not None else f"no found variant for {kernel}: run Optimize first"

    async def proposed_edit(self, args: dict) -> dict:
        fv, error = self._requested(args)
        if fv is None:
            return {"error": error}
        plan, version, text = self._plan_for(fv)
        if not plan.ok:
            return {"error": plan.message, "original": text, "version": version}
        claim = D.result_claims_speed(fv.result)
        out = {
            "original": text,
            "proposed": plan.new_text,
            "diff": E.unified_diff(text, plan.new_text, os.path.basename(fv.path)),
            "version": version,
            "speedup": fv.result.speedup if claim else None,
            "speedup_ci": fv.result.speedup_ci if claim else None,
            "jobId": fv.job_id,
            "rebuilt": plan.rebuilt,
            "interpreted": not claim,
            "speedClaim": claim,
            # the words the clients show (display.py): what it claims, in one phrase and one line
            "what": _what(fv.result),
            "summary": D.result_summary(fv.result, fv.kernel),
            "evidence": EV.evidence(fv.result),
        }
        if not claim:
            out["note"] = INTERPRETED_NOTE
        return out

    async def apply_variant(self, args: dict) -> dict:
        fv, error = self._requested(args)
        if fv is None:
            return {"applied": False, "message": error}
        plan, version, text = self._plan_for(fv)
        if not plan.ok:
            return {"applied": False, "message": plan.message}
        edit = self.client.workspace_edit(args["uri"], version, text, plan.hunks)
        return await self.client.apply_edit(edit, f"KernelBand: apply the variant of {fv.kernel} ({_what(fv.result)})")

    async def review_variant(self, args: dict) -> dict:
        """kernelband.reviewVariant: show the found variant's diff and its evidence
        (window/showDocument of a file outside the workspace), ask Apply or Discard
        (window/showMessageRequest), and apply it as a versioned edit on Apply. For
        clients without a diff view of their own (Neovim, Helix, ...)."""
        prop = await self.proposed_edit(args)
        if prop.get("error"):
            return {"applied": False, "message": prop["error"]}
        kernel = str(args["kernel"])
        what = prop.get("what") or INTERPRETED_NOTE
        lines = [f"# KernelBand: found variant of {kernel} ({what})"]
        lines += [f"# {r['label']}: {r['value']}" for r in prop.get("evidence") or []]
        path = E.write_review_file(kernel, "\n".join(lines) + "\n" + str(prop.get("diff") or ""))
        ls = self.client.ls
        if self.client.cap("window", "show_document", "support"):
            try:
                await asyncio.wait_for(
                    ls.window_show_document_async(
                        types.ShowDocumentParams(uri=from_fs_path(path) or path, take_focus=True)
                    ),
                    timeout=10,
                )
            except Exception as e:
                log.info("window/showDocument: %s", e)
        try:
            choice = await asyncio.wait_for(
                ls.window_show_message_request_async(
                    types.ShowMessageRequestParams(
                        type=types.MessageType.Info,
                        message=f"Apply the KernelBand variant of {kernel} ({what})? Diff: {path}",
                        actions=[types.MessageActionItem(title="Apply"), types.MessageActionItem(title="Discard")],
                    )
                ),
                timeout=600,
            )
        except Exception as e:
            return {"applied": False, "message": f"no answer: {e}", "diffFile": path}
        if getattr(choice, "title", None) != "Apply":
            return {"applied": False, "message": "discarded", "diffFile": path}
        out = await self.apply_variant(args)
        out["diffFile"] = path
        return out


def _what(result: Result) -> str:
    """'1.43x (95% CI 1.30–1.50x) faster' or 'correct; speed needs a GPU'."""
    phrase = D.speedup_phrase(result)
    return f"{phrase} faster" if phrase else INTERPRETED_NOTE
