"""The judge's side of inputs beyond the harness (``derived.py``, ``derived_run.py``): which
calls to derive, which of them the original handles (its references), and the verdict on
a candidate's.

A derived call's frame carries what the wrapper returned and the canary-padded buffers of
its tensor arguments after the call. The judge splits each buffer by the layout it
computes from its own spec: the tensor (compared like any output, inputs included: they
must be as the original leaves them) and its canaries (which must be untouched).
"""

from __future__ import annotations

import ast
import secrets
from typing import Any, Iterator, Optional

import torch

from ..detect import detect, wrappers_of
from ..model import Status
from . import checks, derived, derived_run
from .call_spec import Arg, DerivedCall, RecordedCall, TensorArg
from .compare import TOLERANCES, Bounds, compare_outputs
from .jobs import Frame
from .messages import Derived, DerivedOutputs, Step
from .observe import materialize
from .warm_ahead import ahead_threads
from .wire import WireObject


def optional_parameters(source: str, kernel: str) -> dict[str, list[derived.DefaultedParam]]:
    """Each wrapper's parameters that have a default, with their positions."""
    try:
        tree = ast.parse(source)
        defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        out = {}
        for f in wrappers_of(detect(source, tree=tree), kernel):
            node = defs.get(f.name)
            positional = [a.arg for a in node.args.posonlyargs + node.args.args] if node is not None else []
            out[f.name] = [
                derived.DefaultedParam(p.name, p.default, positional.index(p.name) if p.name in positional else None)
                for p in f.params
                if p.default is not None
            ]
        return out
    except Exception:  # noqa: BLE001
        return {}


def wrapper_names(source: str, kernel: str) -> list[str]:
    """The module functions that launch the kernel (the wrappers whose calls are derived)."""
    try:
        return [f.name for f in wrappers_of(detect(source), kernel)]
    except Exception:  # noqa: BLE001 - a module detect cannot read has no derivable wrapper
        return []


def new_session_seed() -> int:
    """Unpredictable per judge: a variant cannot know which calls it will be shown."""
    return secrets.randbelow(1 << 30)


INTERPRETED_CALL_BYTES = 1 << 20  # the interpreter takes ~ms a program: its derived calls stay small


def calls_to_derive(
    recorded: list[RecordedCall],
    seed: int,
    interpreted: bool,
    optional: Optional[dict[str, list[derived.DefaultedParam]]] = None,
) -> list[DerivedCall]:
    return derived.derive(
        recorded,
        seed,
        max_bytes=INTERPRETED_CALL_BYTES if interpreted else derived.MAX_CALL_BYTES,
        interpreted=interpreted,
        optional=optional,
    )


def observed(frame: Frame[DerivedOutputs], call: DerivedCall) -> tuple[Optional[Any], list[Any], Optional[str]]:
    """(outputs to compare, canary regions, a reason the frame is malformed) of a derived
    call's frame: outputs are ``{"returned", "args"}`` with each tensor argument's view
    (and ``"first"``, the same for the first of repeated calls, as it is after them all)."""
    tree = frame.tree if isinstance(frame.tree, dict) else {}
    out, rests, bad = _split(tree, call, frame.meta.allocs)
    if bad or not call.repeats:
        return out, rests, bad
    first = tree.get("first")
    if not isinstance(first, dict):
        return None, [], "no first result of the repeated calls"
    first_out, first_rests, bad = _split(dict(first, allocs=[]), call, [])
    if bad:
        return None, [], bad
    assert out is not None  # _split gives outputs whenever it gives no reason
    return {**out, "first": first_out}, rests + first_rests, None


def _split(
    tree: dict[str, Any], call: DerivedCall, layout: list[list[int]]
) -> tuple[Optional[Any], list[Any], Optional[str]]:
    buffers = tree.get("buffers")
    specs = derived_run.distinct_tensors(call)
    if not isinstance(buffers, list) or len(buffers) != len(specs):
        return None, [], f"{len(buffers) if isinstance(buffers, list) else 'no'} buffers for {len(specs)} tensors"
    views, rests = [], []
    for buffer, spec in zip(buffers, specs):
        view, rest = derived_run.split_buffer(buffer, spec) if hasattr(buffer, "as_strided") else (None, None)
        if view is None:
            return None, [], "a buffer of the wrong size"
        views.append(view)
        rests.append(rest)
    # tensors the call's own code allocated (its outputs, say), each in a padded buffer
    allocs = tree.get("allocs") or []
    if not isinstance(allocs, list) or len(allocs) != len(layout):
        return None, [], "allocations without their layout"
    for buffer, where in zip(allocs, layout):
        rest = derived_run.allocation_canaries(buffer, *where) if len(where) == 2 and hasattr(buffer, "dim") else None
        if rest is None:
            return None, [], "an allocation of the wrong size"
        rests.append(rest)
    return {"returned": tree.get("returned"), "args": views}, rests, None


def absorb_original(
    judge: Any, calls: list[DerivedCall], frames: dict[tuple[str, int], Frame[DerivedOutputs]]
) -> tuple[list[tuple[DerivedCall, Any]], list[str]]:
    """The derived calls the original handles, with its outputs as their references: it ran
    them with both canaries, left every canary alone, and gave the same outputs both times
    (so it read nothing beyond its tensors); and notes on the calls dropped."""
    kept: dict[int, tuple[DerivedCall, Any]] = {}
    dropped: list[str] = []
    for i, call in enumerate(calls):
        a, b = frames.get(("a", i)), frames.get(("b", i))
        why = None
        if a is None or b is None:
            why = "no result"
        elif a.meta.error or b.meta.error:
            why = f"the original raises ({(a.meta.error or b.meta.error or '')[:120]})"
        else:
            out_a, rests_a, bad_a = observed(a, call)
            out_b, rests_b, bad_b = observed(b, call)
            masks = (
                {}
                if bad_a or bad_b
                else _union(
                    unwritten_masks(out_a, out_b), config_masks(call, out_a, config_twins(frames, i), _tol_scale(call))
                )
            )
            if bad_a or bad_b:
                why = bad_a or bad_b
            elif not all(derived_run.canaries_intact(r, "a") for r in rests_a) or not all(
                derived_run.canaries_intact(r, "b") for r in rests_b
            ):
                why = "the original writes outside its tensors at these sizes"
            elif not compare_outputs(out_a, with_undefined(out_b, out_a, masks)).ok:
                why = "the original's result depends on memory beyond its tensors at these sizes"
            elif call.flavour == "alias" and not _alias_safe(
                call, out_a, frames.get(("a", call.twin)) if call.twin is not None else None, calls
            ):
                why = "the original gives another result when told to write over its input"
            else:
                reference = materialize(out_a, judge.ref_device if judge.refs_on_gpu else None)
                if masks:  # what the original left as fresh memory or its configs disagree on: no oracle there
                    masks = {p: m.to(judge.ref_device) if judge.refs_on_gpu else m.cpu() for p, m in masks.items()}
                    reference = dict(reference, **{UNDEFINED: masks})
                kept[i] = (call, reference)
        if why:
            dropped.append(f"{derived.describe_call(call)}: {why}")
    return with_precise(kept), dropped


PRECISE = "precise"  # a long call's reference: the original's result on its float32 twin
UNDEFINED = "undefined"  # a reference's masks of the elements the original left unwritten
LONG_ROW_FLOOR = 2.0**-16  # of the largest output magnitude: float32 reordering noise passes, fp16 accumulation not
UNBOUNDED_ELEMENTS = 1e30  # a tolerance scale that leaves only structure, NaN and Inf positions compared
HIGH_TOLERANCE_SCALE = 100.0  # the float32 twin's and the special values' tolerance, times the plain one


def unwritten_masks(a: Any, b: Any) -> dict[str, torch.Tensor]:
    """For each output tensor, the elements the original's two canary runs left as the
    fresh memory each run's allocations held (``derived_run.fresh_value``): at such sizes the
    original does not define them (a block fixed at 128 columns, a row of 16387), so no
    candidate is held to them. Only tensors with such elements are listed."""
    masks: dict[str, torch.Tensor] = {}
    for path, x, y in _paired_tensors(a, b):
        if x.dtype == torch.bool:
            continue
        fresh_a = (
            torch.isnan(x) if x.is_floating_point() or x.is_complex() else x == derived_run.fresh_value(x.dtype, "a")
        )
        mask = fresh_a & (y == derived_run.fresh_value(y.dtype, "b"))
        if bool(mask.any()):
            masks[path] = mask
    return masks


def _paired_tensors(a: Any, b: Any) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(path, a's tensor, b's tensor) for each non-empty tensor of ``a`` that ``b`` holds at
    the same path with the same shape and dtype."""
    found = dict(checks.leaves(b))
    for path, x in checks.leaves(a):
        y = found.get(path)
        if (
            isinstance(x, torch.Tensor)
            and isinstance(y, torch.Tensor)
            and x.shape == y.shape
            and x.dtype == y.dtype
            and x.numel() > 0
        ):
            yield path, x, y


def twin_key(config: int) -> str:
    """Where the frames of the original's config twins (``derived_run.run_config_twins``)
    sit among its derived frames: (``twin_key(config)``, the call's index)."""
    return f"config{config}"


def config_twins(frames: dict[tuple[str, int], Frame[DerivedOutputs]], index: int) -> list[Frame[DerivedOutputs]]:
    """The original's config twins of call ``index``, in config order (only frames that
    came back as config twins: the original's own job sends them)."""
    found = [
        (config, frame)
        for key, frame in frames.items()
        if (config := frame.meta.config) is not None and key == (twin_key(config), index)
    ]
    return [frame for _, frame in sorted(found, key=lambda cf: cf[0])]


def config_masks(
    call: DerivedCall, out_a: Any, twins: list[Frame[DerivedOutputs]], tol_scale: float
) -> dict[str, torch.Tensor]:
    """For each output tensor, the elements where the original's result under one of its
    own autotune configs differs from its run "a" (NaN or inf positions, or a value beyond
    the call's tolerance): a derived call runs the config at its turn among those its
    process's autotuner keeps (``autotune_clock.one_config_per_call``), which need not be
    the original's, so no candidate is held to a value the original itself gives only
    under some configs (a block's max NaN with one block
    shape, finite with another). A twin that raises is not a config the original can run
    there: skipped; one that writes outside its tensors or does not decode: no twin of the
    call counts (the masks come only from runs of the original that behaved)."""
    outs = []
    for twin in twins:
        if twin.meta.error:
            continue
        out, rests, bad = observed(twin, call)
        if bad or not all(derived_run.canaries_intact(r, "a") for r in rests):
            return {}
        outs.append(out)
    masks: dict[str, torch.Tensor] = {}
    for out in outs:
        differ = {path: d for path, x, y in _paired_tensors(out_a, out) if bool((d := ~_close(x, y, tol_scale)).any())}
        masks = _union(masks, differ)
    return masks


def _close(x: torch.Tensor, y: torch.Tensor, tol_scale: float) -> torch.Tensor:
    """Elementwise: equal NaN-ness, the same infinity, finite values within the dtype's
    tolerance times ``tol_scale`` (``compare.TOLERANCES``); integers and booleans exact."""
    if not (x.is_floating_point() or x.is_complex()):
        return x == y
    tol = TOLERANCES.get(x.dtype, TOLERANCES[torch.float32])
    wide = (
        torch.float64
        if x.dtype in (torch.float64, torch.complex128)
        else (torch.complex64 if x.is_complex() else torch.float32)
    )
    return torch.isclose(x.to(wide), y.to(wide), rtol=tol_scale * tol.rtol, atol=tol_scale * tol.atol, equal_nan=True)


def _union(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = dict(a)
    for path, mask in b.items():
        out[path] = out[path] | mask if path in out else mask
    return out


def _tol_scale(call: DerivedCall) -> float:
    # a long call's float32 twin: its rows sum to about 0, where any other summation order
    # is about 1e-4 off in float32 (a correct reordering was refused at the plain
    # tolerance); at 100 times it, that noise passes and a wrong result does not
    # the special-values call holds magnitudes of 3e4 too: atomics landing in another order
    # round its sums ulp(3e4) = 0.004 apart (a scatter-add rewrite was refused so, 1 element
    # of 20736, relative L2 1.1e-8); NaN and inf positions are still compared exactly
    return HIGH_TOLERANCE_SCALE if call.flavour in ("high", "special") else 1.0


def with_undefined(out: Any, reference: Any, masks: dict[str, torch.Tensor], path: str = "output") -> Any:
    """``out`` with the elements ``masks`` name taken from ``reference`` (the same tree
    shape as ``checks.leaves`` walks): what the original left undefined is not compared."""
    if not masks:
        return out
    if isinstance(out, dict) and isinstance(reference, dict):
        fields = {k: with_undefined(v, reference.get(k), masks, f"{path}[{k!r}]") for k, v in out.items()}
        return WireObject(out.type_name, fields) if isinstance(out, WireObject) else fields
    if type(out) in (list, tuple) and isinstance(reference, (list, tuple)) and len(out) == len(reference):
        return type(out)(with_undefined(v, r, masks, f"{path}[{i}]") for i, (v, r) in enumerate(zip(out, reference)))
    mask = masks.get(path)
    if (
        mask is None
        or not isinstance(out, torch.Tensor)
        or not isinstance(reference, torch.Tensor)
        or out.shape != mask.shape
        or reference.shape != mask.shape
        or out.dtype != reference.dtype
    ):
        return out
    return torch.where(mask.to(out.device), reference.to(out.device), out)


def with_precise(kept: dict[int, tuple[DerivedCall, Any]]) -> list[tuple[DerivedCall, Any]]:
    """The kept calls in order, each long call's reference holding its float32 twin's
    result (where the original handles that twin too)."""
    highs = {c.twin: ref for c, ref in kept.values() if c.flavour == "high" and c.twin is not None}
    out = []
    for i, (call, ref) in sorted(kept.items()):
        if i in highs and isinstance(ref, dict):
            ref = dict(ref, **{PRECISE: highs[i]})
        out.append((call, ref))
    return out


# calls whose values are plain normal draws (no scale, offset, special values or large
# centred rows): a correct candidate is as close to the original there as on the harness
PLAIN_FLAVOURS = ("aligned", "transposed", "rank", "repeat", "alias_twin", "out_strided", "scalars")


def plain_deviations(judge: Any, frame: Frame[DerivedOutputs]) -> dict[str, tuple[torch.dtype, float]]:
    """How far a candidate's derived call of a plain flavour is from the original's, output
    by output (relative L2; ``checks.deviations``); empty for other calls. The verdict on
    its tolerance comes first (``verdict_of``): this feeds the consistency rule, precision
    judged on every call and not only where the float64 rerun ran."""
    index = frame.meta.index
    if frame.meta.error or frame.meta.config is not None or not 0 <= index < len(judge.ref.derived):
        return {}
    call, reference = judge.ref.derived[index]
    if call.flavour not in PLAIN_FLAVOURS or not isinstance(reference, dict):
        return {}
    out, _, bad = observed(frame, call)
    if bad or not isinstance(out, dict):
        return {}
    reference, _, out = _reference_parts(reference, out)
    return {
        path.replace("output['written']", "output['args']"): dev
        for path, dev in checks.deviations(
            {"returned": reference.get("returned"), "written": reference.get("args")},
            {"returned": out.get("returned"), "written": out.get("args")},
        ).items()
    }


def _reference_parts(reference: Any, out: Any) -> tuple[Any, Any, Any]:
    """(the original's outputs, its float32 twin's or None, the candidate's outputs with
    what the original left undefined taken from the original's)."""
    if not isinstance(reference, dict):
        return reference, None, out
    masks = reference.get(UNDEFINED) or {}
    plain = {k: v for k, v in reference.items() if k not in (PRECISE, UNDEFINED)}
    return plain, reference.get(PRECISE), with_undefined(out, plain, masks)


def _as_precise(reference: dict[str, Any], out: Any, precise: Any) -> bool:
    """A long call's outputs outside the tolerance of the original's are still right where
    they are as close to the higher-precision result as the original's are (the rule for
    the harness's own outputs: ``checks.precision_reason``), their NaN and Inf positions,
    shapes and dtypes the original's."""
    if not compare_outputs(reference, out, tol_scale=UNBOUNDED_ELEMENTS).ok or not isinstance(out, dict):
        return False
    found = dict(checks.leaves(out))
    high = dict(checks.leaves(precise))
    for path, ref in checks.leaves(reference):
        got, hp = found.get(path), high.get(path)
        if not isinstance(ref, torch.Tensor) or not ref.is_floating_point() or not ref.numel():
            continue
        if not isinstance(got, torch.Tensor) or not isinstance(hp, torch.Tensor) or hp.shape != ref.shape:
            return False
        if checks.precision_reason(path, ref.dtype, checks.error_against(hp, ref), checks.error_against(hp, got)):
            return False
    return True


def _alias_safe(
    call: DerivedCall, aliased: Any, twin: Optional[Frame[DerivedOutputs]], calls: list[DerivedCall]
) -> bool:
    """The original's result with its output written over its input equals its result
    without (the twin call: same inputs, a fresh output): what it returns, or where it
    returns nothing, the output buffer (the twin's) and the input written over."""
    if twin is None or twin.meta.error:
        return False
    index = twin.meta.index
    twin_call = calls[index] if 0 <= index < len(calls) else None
    twin_out, _, bad = observed(twin, twin_call) if twin_call is not None else (None, [], "no twin")
    if bad or twin_call is None or not isinstance(twin_out, dict) or not isinstance(aliased, dict):
        return False
    name = call.alias_arg
    if twin_out.get("returned") is None and aliased.get("returned") is None and name in twin_call.kwargs:
        written = _arg_view(twin_call, twin_out, twin_call.kwargs[name])
        over = _arg_view(call, aliased, call.kwargs.get(name))
        return written is not None and over is not None and compare_outputs(written, over).ok
    return compare_outputs(twin_out.get("returned"), aliased.get("returned")).ok


def _arg_view(call: DerivedCall, outputs: dict[str, Any], spec: Optional[Arg]) -> Any:
    """The view of the tensor argument ``spec`` among a derived call's outputs (None: none)."""
    ids = [t.id for t in derived_run.distinct_tensors(call)]
    views = outputs.get("args") or []
    if not isinstance(spec, TensorArg) or spec.id not in ids:
        return None
    where = ids.index(spec.id)
    return views[where] if where < len(views) else None


def candidate_steps(judge: Any) -> list[Step]:
    calls = [call for call, _ in judge.ref.derived]
    return [Derived(calls, "v", "a", warm_threads=ahead_threads(judge.on_gpu))] if calls else []


def verdict_of(
    judge: Any, frame: Frame[DerivedOutputs], references: Optional[list[tuple[DerivedCall, Any]]] = None
) -> Optional[tuple[Status, str]]:
    """None when a candidate's derived call agrees with the original's, else the verdict.
    ``references``: the calls it was asked for with the original's outputs (default: the
    session's, ``judge.ref.derived``; the wide calls bring their own, ``judge_wide``)."""
    derived_refs = judge.ref.derived if references is None else references
    index = frame.meta.index
    if not 0 <= index < len(derived_refs) or frame.meta.config is not None:  # config twins: the original's only
        return Status.REJECTED, "trust: a result for a derived call that was not asked for"
    call, reference = derived_refs[index]
    where = f"beyond the harness, {derived.describe_call(call)}"
    if frame.meta.error:
        return Status.MISMATCH, f"{where}: raises where the original does not: {frame.meta.error[:300]}"
    out, rests, bad = observed(frame, call)
    if bad:
        return Status.REJECTED, f"trust: {where}: {bad}"
    if not all(derived_run.canaries_intact(r, "a") for r in rests):
        return Status.MISMATCH, f"{where}: writes outside its tensors (out of bounds), which the original does not"
    reference, precise, out = _reference_parts(reference, out)
    verdict = compare_outputs(reference, out, tol_scale=_tol_scale(call))
    if not verdict.ok and not _right_on_a_long_row(call, reference, out, precise):
        return Status.MISMATCH, f"{where}: {verdict.message}"
    return None


def _right_on_a_long_row(call: DerivedCall, reference: Any, out: Any, precise: Any) -> bool:
    """Whether a long call's outputs outside the plain tolerance are still right. With the
    float32 twin's result: as precise as the original against it (``_as_precise``).
    Without one (an original that takes only its reduced dtype, one that asserts fp16,
    say): within the plain tolerance plus LONG_ROW_FLOOR times the output's largest
    magnitude. A correct float32 reordering of the long rows moves a result by a few
    float32 ulps of the partial sums, which near 0 is past the plain tolerance (two
    split-K matmuls were refused so on an H200: 634 of 16.8M elements, relative L2 error
    4.1e-5); a sum accumulated in 16 bits moves by fp16 ulps of them, hundreds of times
    more (tests/test_compare.py, the fp16 accumulations in chunks of 16 to 1024)."""
    if call.flavour != "long":
        return False
    if precise is not None:
        return _as_precise(reference, out, precise)
    return compare_outputs(reference, out, bounds=Bounds(of_largest=LONG_ROW_FLOOR)).ok
