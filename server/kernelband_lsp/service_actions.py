"""Code actions: lint quick fixes, Apply/Review found variant, Create harness (and its
command, kernelband.createHarness), Optimize, Profile, Re-verify, Cancel."""

from __future__ import annotations

from lsprotocol import types

from . import edits as E
from . import lenses as L
from . import lints as LN
from . import summary as S
from .display import INTERPRETED_NOTE
from .documents import Analysis
from .service_client import Client
from .service_documents import OpenDocuments
from .service_features import Features
from .service_variants import FoundVariants


class CodeActions:
    """The code actions of a range and the Create harness command."""

    def __init__(self, client: Client, documents: OpenDocuments, variants: FoundVariants, features: Features) -> None:
        self.client = client
        self.documents = documents
        self.variants = variants
        self.features = features

    def _lint_actions(self, a: Analysis, params: types.CodeActionParams) -> list[types.CodeAction]:
        if not L.wants(list(params.context.only or []), types.CodeActionKind.QuickFix):
            return []
        out = []
        rng = params.range
        sent = [d for d in params.context.diagnostics or [] if d.source == LN.SOURCE]
        for f in LN.cached_lint(a):
            if f.fix_title is None or not f.fix_edits:
                continue
            drange = a.index.ast_range(f.line, f.col, f.end_line, f.end_col)
            if not L.overlaps(drange, rng.start.line, rng.end.line):
                continue
            hunks = [
                E.Hunk(a.index.ast_to_offset(l0, c0), a.index.ast_to_offset(l1, c1), new)
                for l0, c0, l1, c1, new in f.fix_edits
            ]
            edit = self.client.workspace_edit(a.uri, a.version, a.text, hunks)
            match = [d for d in sent if d.code == f.code and d.range == drange] or None
            out.append(
                types.CodeAction(
                    title=f"{f.fix_title} (KernelBand {f.code})",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=match,
                    edit=edit,
                    is_preferred=True,
                )
            )
        return out

    @staticmethod
    def _review_action(kernel: str, args: list, what: str) -> types.CodeAction:
        return types.CodeAction(
            title=f"Review found variant of {kernel} ({what}): diff, then Apply or Discard (KernelBand)",
            kind=types.CodeActionKind.QuickFix,
            data={"kernel": kernel, "uri": args[0]["uri"]},
            command=types.Command(title="Review found variant", command=L.REVIEW_COMMAND, arguments=args),
        )

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        a = await self.documents.analysis(uri)
        if a is None or not a.parsed:
            return []
        only = list(params.context.only or [])
        diags = list(params.context.diagnostics or [])
        out: list[types.CodeAction] = self._lint_actions(a, params)
        for k in L.relevant_kernels(a, params.range, diags):
            st = self.features.kernel_status(a, k)
            args = [{"uri": uri, "kernel": k.name}]
            kd = [
                d for d in diags if d.source == L.SOURCE and isinstance(d.data, dict) and d.data.get("kernel") == k.name
            ]
            fv = self.variants.offer(a, k.name)
            if fv is not None and L.wants(only, types.CodeActionKind.QuickFix):
                plan = self.variants.cached_plan(fv, a)
                title = f"Apply found variant of {k.name}: {S.speedup_phrase(fv.result)} faster (KernelBand)"
                act = types.CodeAction(
                    title=title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d for d in kd if d.code == L.CODE_VARIANT] or None,
                    is_preferred=True,
                    data={"kernel": k.name, "uri": uri},
                )
                if plan.ok:
                    act.edit = self.client.workspace_edit(uri, a.version, a.text, plan.hunks)
                else:
                    act.disabled = types.CodeActionDisabled(reason=plan.message)
                out.append(act)
                if plan.ok and "visual studio code" not in self.client.client_name.lower():
                    out.append(self._review_action(k.name, args, f"{S.speedup_phrase(fv.result)} faster"))
            elif L.wants(only, types.CodeActionKind.QuickFix):
                # an interpreter-verified variant: reviewed (and applied) from its diff, never
                # offered as a speedup
                rv = self.variants.reviewable(a, k.name)
                if rv is not None:
                    out.append(self._review_action(k.name, args, INTERPRETED_NOTE))
            if not st.harness.found and L.wants(only, types.CodeActionKind.QuickFix):
                offset, text = L.stub_insertion(a, k)
                out.append(
                    types.CodeAction(
                        title=f"Create harness for {k.name} (KernelBand)",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[d for d in kd if d.code == L.CODE_NO_HARNESS] or None,
                        is_preferred=True,
                        edit=self.client.workspace_edit(uri, a.version, a.text, [E.Hunk(offset, offset, text)]),
                    )
                )
            if st.harness.found and not st.job_id:
                if L.wants(only, types.CodeActionKind.RefactorRewrite):
                    out.append(
                        types.CodeAction(
                            title=f"Optimize kernel {k.name} (KernelBand)",
                            kind=types.CodeActionKind.RefactorRewrite,
                            command=types.Command(
                                title="Optimize kernel (KernelBand)", command="kernelband.optimize", arguments=args
                            ),
                        )
                    )
                if L.wants(only, types.CodeActionKind.Refactor):
                    out.append(
                        types.CodeAction(
                            title=f"Profile kernel {k.name} (KernelBand)",
                            kind=types.CodeActionKind.Refactor + ".kernelband",
                            command=types.Command(
                                title="Profile kernel (KernelBand)", command="kernelband.profile", arguments=args
                            ),
                        )
                    )
            if st.applied_text and not st.job_id and L.wants(only, types.CodeActionKind.Refactor):
                out.append(
                    types.CodeAction(
                        title=f"Re-verify the applied variant of {k.name} against its original (KernelBand)",
                        kind=types.CodeActionKind.Refactor + ".kernelband",
                        command=types.Command(
                            title="Re-verify (KernelBand)", command="kernelband.reverify", arguments=args
                        ),
                    )
                )
            if st.job_id and L.wants(only, types.CodeActionKind.Refactor):
                out.append(
                    types.CodeAction(
                        title=f"Cancel KernelBand job on {k.name}",
                        kind=types.CodeActionKind.Refactor + ".kernelband",
                        command=types.Command(
                            title="Cancel", command="kernelband.cancel", arguments=[{"jobId": st.job_id}]
                        ),
                    )
                )
        return out

    async def create_harness(self, args: dict) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return {"applied": False, "message": "expected arguments {uri, kernel}"}
        a = await self.documents.analysis(uri)
        if a is None or not a.parsed:
            return {"applied": False, "message": "the file does not parse"}
        k = a.detection.kernel(kernel)
        if k is None:
            return {"applied": False, "message": f"no Triton kernel named {kernel!r}"}
        offset, text = L.stub_insertion(a, k)
        edit = self.client.workspace_edit(uri, a.version, a.text, [E.Hunk(offset, offset, text)])
        return await self.client.apply_edit(edit, f"KernelBand: harness for {kernel}")
