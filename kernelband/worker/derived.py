"""Inputs beyond the harness: the original is the oracle for calls of its wrapper that the
harness never makes (DESIGN section 6, "Beyond the harness's own inputs").

The harness's calls of the kernel's wrapper are recorded in the original's process
(``record_calls``: each argument described, tensors by shape, dtype, device, layout and
identity: ``call_spec``). From them the judge draws derived calls (``derive``, seeded per
session): other sizes (every distinct dimension mapped to another, integer arguments
that equal a dimension or a size mapped with it), non-contiguous views with the same
values, special values (+-0, +-inf, large magnitudes, constant and all -inf rows), and
other floating dtypes. Each call runs in the original's process and in the candidate's
(``derived_run``) on identical inputs, every tensor placed inside a canary-padded buffer: the
whole buffer comes back to the judge, which checks that nothing outside the tensor changed
(an out-of-bounds write) and that the outputs match the original's.

A derived call counts only where the original handles it: the original runs it twice,
with two different canaries; where it raises, or its results depend on the canary (it
reads out of bounds at that size), or it writes outside its tensors, the call is
dropped. So a candidate is held only to what the original itself does right.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Optional

from .call_spec import Arg, Call, DerivedCall, RecordedCall, TensorArg, ValueArg

MAX_CALLS_RECORDED = 2  # recorded calls per run (the first ones)
# How the original runs its derived calls (judge_derivation), kept here (no torch at import)
# so that the session's deadlines (deadlines.py) count those runs from the same numbers:
# each call once per canary (the names derived_run fills the padding by), in up to
# ATTEMPTS processes of the original (the calls may take that many down before none is checked)
CANARIES = ("a", "b")
ATTEMPTS = 3
_FLOAT_DTYPES = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- recording
def describe(value: Any, tensors: dict[int, int]) -> Optional[Arg]:
    """An argument as a spec, or None when it cannot be re-created (an object)."""
    import torch

    if isinstance(value, torch.Tensor):
        ident = tensors.setdefault(id(value), len(tensors))
        spec = TensorArg(
            shape=tuple(value.shape),
            dtype=str(value.dtype).replace("torch.", ""),
            device=value.device.type,
            contiguous=bool(value.is_contiguous()),
            id=ident,
            floating=bool(value.is_floating_point()),
        )
        return spec if spec.floating else with_index_facts(spec, value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return ValueArg(value)
    return None


def with_index_facts(spec: TensorArg, value: Any) -> TensorArg:
    """What a kernel may rely on in an integer tensor the harness passes (indices, slots,
    offsets): its largest value (so a derived call's stay below the size of what it
    indexes), whether its values are distinct (scatter slots: duplicates would make two
    programs write one place, in an order no oracle fixes) and sorted (offsets)."""
    import torch

    if value.dtype == torch.bool or value.is_complex() or value.numel() == 0 or value.numel() > 1 << 26:
        return spec
    flat = value.reshape(-1)
    return replace(
        spec,
        max=int(flat.max()),
        distinct=bool(torch.unique(flat).numel() == flat.numel()),
        sorted=bool(flat.numel() < 2 or bool((flat[1:] >= flat[:-1]).all())),
    )


@contextlib.contextmanager
def record_calls(module: Any, names: list[str]) -> Iterator[list[RecordedCall]]:
    """Record the first calls of the module's functions ``names`` (the kernel's wrappers)
    made inside the block, every argument described."""
    calls: list[RecordedCall] = []
    originals: dict[str, Callable[..., Any]] = {}
    for name in names:
        fn = getattr(module, name, None)
        if not callable(fn):
            continue
        originals[name] = fn

        def recorder(*args: Any, __name: str = name, __fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
            at: Optional[int] = None
            if len(calls) < MAX_CALLS_RECORDED:
                ids: dict[int, int] = {}
                described_args = [describe(a, ids) for a in args]
                described_kwargs = {k: describe(v, ids) for k, v in kwargs.items()}
                plain_args = [d for d in described_args if d is not None]
                plain_kwargs = {k: d for k, d in described_kwargs.items() if d is not None}
                if len(plain_args) == len(args) and len(plain_kwargs) == len(kwargs):
                    at = len(calls)
                    calls.append(RecordedCall(__name, tuple(plain_args), plain_kwargs))
            result = __fn(*args, **kwargs)
            if at is not None:  # what it returned: the shape an out= buffer of a derived call takes
                calls[at] = replace(calls[at], returns=describe(result, {}))
            return result

        setattr(module, name, recorder)
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(module, name, fn)


# --------------------------------------------------------------------------- deriving
_ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}
MAX_CALL_BYTES = 256 << 20  # a derived call's tensors (twice that with canaries and strides)


def call_bytes(call: Call) -> int:
    """The bytes of a call's tensor arguments, at their sizes."""
    return _call_bytes(call.tensors(), {})


def _call_bytes(tensors: list[TensorArg], mapping: dict[int, int]) -> int:
    return sum(_numel(t, mapping) * _ITEMSIZE.get(t.dtype, 8) for t in tensors)


def _numel(t: TensorArg, mapping: Optional[dict[int, int]] = None) -> int:
    """A tensor argument's elements, each dimension at its size in ``mapping`` (else its own)."""
    n = 1
    for d in t.shape:
        n *= (mapping or {}).get(d, d)
    return n


# Every session's draw holds one call of each flavour for each recorded call (where the
# call has what the flavour needs); the seed draws only the sizes and values within it.
FLAVOURS = ("sizes", "aligned", "strided", "special", "grow", "long", "transposed", "rank", "repeat")
OUT_NAMES = ("out", "output", "dst", "result", "y_out", "o")  # an output buffer, by convention
_RAGGED = (1, 3, 7, 17, 31, 97, 129, 257, 1000, 1001)  # no multiple of a tile of 16 or more
# multiples of 16 not of 32, of 32 not of 64, of 64 not of 128: block-aligned at first sight only
_ALIGNED = (16, 48, 80, 112, 144, 240, 96, 160, 224, 320, 448)
REDUCED_DTYPES = ("float16", "bfloat16")  # where accumulating in the input's dtype loses the result
GROWN = (1 << 16) + 3  # a grown dimension, past 2**16 where it fits: 16-bit indices break
# a long row: its values sum to about 0, so an accumulation in 16 bits shows long before
# 2**16 elements, and several rows make the precision of a result a statistic
LONG_ROW = (1 << 14) + 3
WIDE_INDEX = 1 << 15  # integer arguments of grown calls include values past int16's range


@dataclass(frozen=True)
class DefaultedParam:
    """A wrapper's parameter that has a default: its name, the default's source, and its
    index among the positional parameters (None: keyword-only)."""

    name: str
    default: str
    position: Optional[int] = None


def derive(
    calls: list[RecordedCall],
    seed: int,
    per_call: int = len(FLAVOURS),
    max_bytes: int = MAX_CALL_BYTES,
    interpreted: bool = False,
    optional: Optional[dict[str, list[DefaultedParam]]] = None,
) -> list[DerivedCall]:
    """Derived calls of the recorded ones, one per flavour (the same seed gives
    the same calls):
    - sizes: every dimension mapped to a ragged size (odd, no multiple of 16), inputs
      scaled by a power of ten, float arguments too, fresh memory zero-filled;
    - aligned: every dimension mapped to a multiple of 16 that is not one of 32 (a kernel
      that drops a mask when a size "looks" whole: K % 16 == 0 with BLOCK_K = 32);
    - strided: rows padded (a slice of a wider tensor), values with a large mean;
    - special: +-0, +-inf, large magnitudes, an all -inf row and a constant row;
    - grow: the largest dimension grown past 2**16 (larger vocabularies: integer arguments
      then include values past 2**15 and 2**16), another float dtype, small integral
      values (a sum of them is exact in any order: this call is about sizes and indices,
      the long one about rounding);
    - long: the last dimension of the floating inputs grown (past 2**14 where it fits), a
      few rows, in a reduced-precision dtype, of large values centred on zero: a sum
      accumulated in 16 bits loses it (and a sum of squares overflows fp16's range); and
      its float32 twin (``high``: the same values), the precision reference;
    - transposed: tensors of two or more dimensions column-major (1-D: every other element);
    - rank: the first dimension split in two (a 3-D input for a 2-D one);
    - repeat: the call made many times in a row, its inputs partly changed each time; the
      first result (as it is after all of them) and the last one are compared;
    - scalars: the plain arguments the harness passes one value of varied (floats negated,
      flags flipped, also the bool parameters it never passes: ``_scalar_calls``);
    - empty: the first tensor's first dimension 0, an empty batch (``_empty_call``; by
      position, in up to three calls, where that size is also another dimension);
    and where the wrapper has an output parameter (``optional``: function -> its
    ``DefaultedParam``s): float ones the harness never passes changed (an ``eps``), an
    output buffer passed strided, and the output buffer being an input (aliasing, whether
    the harness passes one or not), the last beside its twin without aliasing (the
    original must give the same: else it is not checked). A call's tensors stay under
    ``max_bytes``."""
    rng = random.Random(seed)
    out: list[DerivedCall] = []
    # the interpreter stores bfloat16 as raw 16-bit integers (numpy has none): arithmetic
    # on it there is not what a GPU computes, so a result there is no oracle
    dtypes = tuple(d for d in _FLOAT_DTYPES if not (interpreted and d == "bfloat16"))
    grown = rng.randrange(len(dtypes) or 1)  # grown and long calls take the other dtypes in turn
    for call in calls[:MAX_CALLS_RECORDED]:
        tensors = call.tensors()
        if not tensors:
            continue
        for k in range(per_call):
            flavour = _flavour_for(FLAVOURS[k % len(FLAVOURS)], tensors)
            if flavour is None:
                continue
            # a long call's float32 twin (twice its bytes) stays within the budget too
            budget = max_bytes // 2 if flavour == "long" else max_bytes
            out.append(_derive_one(call, flavour, tensors, rng, budget, dtypes, turn=grown, interpreted=interpreted))
            grown += flavour in ("grow", "long")
            if flavour == "long" and any(_reduced(a) for a in out[-1].tensors()):
                out.append(_precise_twin(out[-1]))
        params = (optional or {}).get(call.fn, [])
        out += _optional_calls(call, params, tensors, rng, max_bytes, dtypes, interpreted)
        out += _scalar_calls(call, params, tensors, rng, max_bytes, dtypes)
        out += _empty_call(call, tensors, rng, max_bytes, dtypes)
    # an aliased call and a float32 twin are judged beside the call just before them
    return [replace(c, twin=i - 1) if c.flavour in ("alias", "high") else c for i, c in enumerate(out)]


def _reduced(arg: Arg) -> bool:
    return isinstance(arg, TensorArg) and arg.floating and arg.dtype in REDUCED_DTYPES


def _precise_twin(call: DerivedCall) -> DerivedCall:
    """A long call again, its reduced-precision tensors in float32 holding the same values
    (rounded to the reduced dtype): the original's result there is the long call's
    higher-precision reference. An original that
    itself accumulates in 16 bits is not an oracle to the last bit on long rows: a
    candidate there only has to be as precise as it (``judge_derived``), as on the
    harness's own inputs."""

    def precise(arg: Arg) -> Arg:
        return (
            replace(arg, dtype="float32", round_to=arg.dtype) if isinstance(arg, TensorArg) and _reduced(arg) else arg
        )

    return replace(
        call,
        flavour="high",
        args=tuple(precise(a) for a in call.args),
        kwargs={k: precise(v) for k, v in call.kwargs.items()},
    )


def _flavour_for(flavour: str, tensors: list[TensorArg]) -> Optional[str]:
    """The flavour a call takes (None: none): a rank to split needs two dimensions, a long
    row a floating tensor."""
    if flavour == "rank" and not any(len(t.shape) >= 2 for t in tensors):
        return "sizes"
    if flavour == "long" and not any(t.floating and t.shape for t in tensors):
        return None
    return flavour


def _optional_calls(
    call: RecordedCall,
    params: list[DefaultedParam],
    tensors: list[TensorArg],
    rng: random.Random,
    max_bytes: int,
    dtypes: tuple[str, ...],
    interpreted: bool = False,
) -> list[DerivedCall]:
    """Calls passing the wrapper's optional parameters that the recorded call left out, and
    its output buffer written over an input."""
    missing = _not_passed(call, params)
    out: list[DerivedCall] = []
    floats = [(p.name, value) for p in missing if (value := _float_literal(p.default)) is not None]
    if floats:
        c = _derive_one(call, "sizes", tensors, rng, max_bytes, dtypes)
        # small inputs and a larger parameter: an ``eps`` then dominates what it is added
        # to, so a kernel that ignores the caller's shows it; a factor still scales
        kwargs = dict(c.kwargs)
        for name, value in floats:
            kwargs[name] = ValueArg((value or 1e-6) * 10.0 ** rng.choice((2, 3)))
        out.append(replace(c, flavour="defaults", scale=1e-3, kwargs=kwargs))
    return out + _output_calls(call, missing, tensors, rng, max_bytes, dtypes, interpreted)


def _output_calls(
    call: RecordedCall,
    missing: list[DefaultedParam],
    tensors: list[TensorArg],
    rng: random.Random,
    max_bytes: int,
    dtypes: tuple[str, ...],
    interpreted: bool = False,
) -> list[DerivedCall]:
    """An output buffer the harness never passes passed strided; the output buffer (passed
    by the harness or not) being an input of the same shape and dtype, beside its twin."""
    ret = call.returns
    absent = [p.name for p in missing if p.name in OUT_NAMES and p.default.strip() == "None"]
    present = [n for n, v in call.kwargs.items() if n in OUT_NAMES and isinstance(v, TensorArg)]
    out: list[DerivedCall] = []
    target: Arg
    if absent and isinstance(ret, TensorArg):
        name, target = absent[0], ret
        ident = max((t.id for t in tensors), default=-1) + 1
        # sizes of 2 or more: a single row cannot show its output's stride ignored
        strided = _derive_one(call, "out_strided", tensors, rng, max_bytes, dtypes)
        pad = rng.randrange(16, 257)
        buffer = replace(
            ret,
            id=ident,
            layout="spread",
            pad=(pad, pad),
            shape=tuple(int(strided.sizes.get(str(d), d)) for d in ret.shape),
        )
        out.append(replace(strided, kwargs={**strided.kwargs, name: buffer}))
    elif present:
        name, target = present[0], call.kwargs[present[0]]
    else:
        return out
    assert isinstance(target, TensorArg)
    same = [t for t in tensors if t is not target and t.shape == target.shape and t.dtype == target.dtype]
    if same:  # the wrapper may be told to write over its input: only where the original can
        # plain values of every size but 1: a call whose output differs little from its
        # input, or a single column, hides an in-place hazard
        twin = _derive_one(call, "alias_twin", tensors, rng, max_bytes, dtypes, interpreted=interpreted)
        # its twin: the call just before it (``derive``)
        alias = replace(
            twin, flavour="alias", alias_arg=name, kwargs={**twin.kwargs, name: _find_arg(twin, same[0].id)}
        )
        out += [twin, alias]
    return out


def _not_passed(call: RecordedCall, params: list[DefaultedParam]) -> list[DefaultedParam]:
    """The wrapper's defaulted parameters the call leaves out: not by keyword, and not by
    position (a call that passed one positionally and again by keyword would raise)."""
    return [p for p in params if p.name not in call.kwargs and (p.position is None or p.position >= len(call.args))]


def _scalar_calls(
    call: RecordedCall,
    params: list[DefaultedParam],
    tensors: list[TensorArg],
    rng: random.Random,
    max_bytes: int,
    dtypes: tuple[str, ...],
) -> list[DerivedCall]:
    """The call with the plain arguments a harness passes one value of varied: every float
    negated (a scale moved through a ReLU or a max is right for one sign only), every bool
    flipped, and each bool parameter the harness leaves at its default passed flipped (a
    flag's other branch dropped). Plain values and sizes otherwise. Integers are sizes,
    counts and strides (mapped with the sizes), never flipped; a float of 0 has no sign."""

    def varied(arg: Arg) -> Arg:
        if not isinstance(arg, ValueArg) or isinstance(arg.v, str) or arg.v is None:
            return arg
        if isinstance(arg.v, bool):
            return ValueArg(not arg.v)
        return ValueArg(-arg.v) if isinstance(arg.v, float) and arg.v != 0.0 else arg

    base = _derive_one(call, "scalars", tensors, rng, max_bytes, dtypes)
    args = tuple(varied(a) for a in base.args)
    kwargs = {k: varied(v) for k, v in base.kwargs.items()}
    for p in _not_passed(call, params):
        if p.default.strip() in ("True", "False"):
            kwargs[p.name] = ValueArg(p.default.strip() == "False")
    if args == base.args and kwargs == base.kwargs:
        return []
    return [replace(base, args=args, kwargs=kwargs)]


def _empty_call(
    call: RecordedCall, tensors: list[TensorArg], rng: random.Random, max_bytes: int, dtypes: tuple[str, ...]
) -> list[DerivedCall]:
    """The call with an empty batch: the first dimension of its first tensor 0 (a serving
    step with no tokens, a batch of no rows), other sizes drawn small. A kernel whose grid
    follows the rows launches no program and returns empty outputs; a rewrite that divides
    by the rows (programs per row of a persistent kernel) or indexes its first one fails.
    None where that dimension is already 1 or less. Where its size is also a later
    dimension of a tensor (a square matmul, M = N = K), sizes mapped by value would empty
    the reduction too, which is no batch: there the batch is emptied by position instead
    (``_positional_empty_calls``)."""
    first = tensors[0].shape[0] if tensors[0].shape else 0
    if first <= 1:
        return []
    if any(d == first for t in tensors for d in t.shape[1:]):
        return _positional_empty_calls(call, tensors, rng, max_bytes, dtypes)
    return [_derive_one(call, "empty", tensors, rng, max_bytes, dtypes)]


def _positional_empty_calls(
    call: RecordedCall, tensors: list[TensorArg], rng: random.Random, max_bytes: int, dtypes: tuple[str, ...]
) -> list[DerivedCall]:
    """Empty batches where the batch's size is also another dimension: every size drawn
    small by value (consistently: a reduction stays the same length in every tensor), then
    the first dimension of the first tensor set to 0 by position, and of the tensors shaped
    exactly like it, in a second call (an output buffer of the batch's shape), and, where
    the harness passes an output buffer by name, of that one alone in a third. Which of
    them is a valid call only the original knows (a square matmul's second operand has the
    first's shape too): the calls it raises on or mishandles are dropped before any
    candidate sees them (``judge_derived.absorb_original``)."""
    base = _derive_one(call, "empty_rows", tensors, rng, max_bytes, dtypes)
    shape = tensors[0].shape
    outputs = {v.id for k, v in call.kwargs.items() if k in OUT_NAMES and isinstance(v, TensorArg) and v.shape == shape}
    candidates = [{tensors[0].id}, {t.id for t in tensors if t.shape == shape}, {tensors[0].id} | outputs]
    out: list[DerivedCall] = []
    for ids in candidates:
        derived = _rows_emptied(base, ids)
        if derived not in out:
            out.append(derived)
    return out


def _rows_emptied(call: DerivedCall, ids: set[int]) -> DerivedCall:
    """``call`` as an empty batch: the first dimension of the tensors ``ids`` 0."""

    def emptied(arg: Arg) -> Arg:
        if isinstance(arg, TensorArg) and arg.id in ids and arg.shape:
            return replace(arg, shape=(0, *arg.shape[1:]))
        return arg

    return replace(
        call,
        flavour="empty",
        args=tuple(emptied(a) for a in call.args),
        kwargs={k: emptied(v) for k, v in call.kwargs.items()},
    )


def _find_arg(call: Call, ident: int) -> TensorArg:
    return next(a for a in call.tensors() if a.id == ident)


def _float_literal(source: str) -> Optional[float]:
    try:
        value = float(source)
    except (TypeError, ValueError):
        return None
    return value if value != 0.0 else None


@dataclass(frozen=True)
class _Plan:
    """What a derived call does to each argument of the recorded one (``_map_arg``)."""

    flavour: str
    mapping: dict[int, int]  # each recorded size's new one
    split: int  # rank: the first dimension split into this many (0: none)
    split_shape: Optional[tuple[int, ...]]  # rank: the recorded shape that is split
    other_dtype: Optional[str]  # the floating tensors' new dtype (None: theirs)
    highs: dict[int, int]  # an integer tensor's (by id) values stay below this


def _derive_one(
    call: Call,
    flavour: str,
    tensors: list[TensorArg],
    rng: random.Random,
    max_bytes: int,
    dtypes: tuple[str, ...],
    turn: int = 0,
    interpreted: bool = False,
    min_elements: int = 0,
) -> DerivedCall:
    dims = sorted({d for t in tensors for d in t.shape if d > 1})
    # a single row cannot show a row stride ignored; a long row needs no second one
    at_least = 1 if flavour in ("sizes", "aligned", "long") else 2
    mapping, grown = (
        _wide_mapping(tensors, dims, min_elements, rng)
        if flavour == "wide"
        else _mapping(flavour, tensors, dims, rng, interpreted)
    )
    _fit(tensors, mapping, grown, at_least, max_bytes, flavour)
    _room_for_distinct(tensors, mapping, grown)
    split = rng.choice((2, 3)) if flavour == "rank" else 0
    primary = _split_primary(tensors) if split else None
    if primary:
        _whole_split(primary, mapping, split)
    # the draws in this order: the same seed gives the same calls
    seed = rng.randrange(1 << 30)
    scale: Optional[float] = None
    if flavour == "sizes":
        scale = 10.0 ** rng.choice((-3, -1, 2))
    if flavour == "long":
        scale = rng.choice((4.0, 8.0))  # large values: fp16 sums of squares overflow
    repeats = rng.randrange(14, 25) if flavour == "repeat" else None
    other_dtype = _other_dtype(flavour, tensors, dtypes, turn)
    # integers are often indices into a floating argument: below its largest size (a long
    # row is no vocabulary: it is not indexed)
    indexable = sorted({d for t in tensors if t.floating for d in t.shape if flavour != "long" or d != grown})
    index_high = max([mapping.get(d, d) for d in indexable] or [1000])
    # an integer tensor whose values stayed below a size in the harness's call (the rows
    # of the table it indexes, say) stays below that size's new value: else its reads land
    # outside every tensor of the call, where no canary shows them
    highs = {t.id: _index_high(t, indexable, mapping, index_high) for t in tensors if not t.floating}
    plan = _Plan(flavour, mapping, split, primary, other_dtype, highs)
    args = tuple(_map_arg(a, call, plan, rng) for a in call.args)
    kwargs = {k: _map_arg(v, call, plan, rng) for k, v in call.kwargs.items()}
    return DerivedCall(
        fn=call.fn,
        args=args,
        kwargs=kwargs,
        flavour=flavour,
        seed=seed,
        sizes={str(k): v for k, v in mapping.items()},
        split_shape=plan.split_shape,
        split=split if flavour == "rank" else None,
        scale=scale,
        fresh_fill="zero" if flavour == "sizes" else None,
        repeats=repeats,
    )


def _split_primary(tensors: list[TensorArg]) -> Optional[tuple[int, ...]]:
    """The shape a rank call splits (it and the tensors shaped like it; None: nothing is
    split): the first floating input of two or more dimensions whose rows no unsorted
    integer argument's values stayed below in the harness's call. Those are indices of a
    lookup table's rows, and a table split in two is no input any wrapper takes: the
    indices, bounded by the rows it had, would point past the rows it has, on a GPU into
    memory beyond every canary, alike in the original's two runs and not in a candidate's
    (every candidate refused). Sorted offsets count the rows of a batch, which a split
    keeps (``_whole_split``)."""
    sizes = sorted({d for t in tensors if t.floating for d in t.shape})
    indexed = {_bounding_size(t, sizes) for t in tensors if not t.floating and not t.sorted}
    return next((t.shape for t in tensors if t.floating and len(t.shape) >= 2 and t.shape[0] not in indexed), None)


def _whole_split(primary: tuple[int, ...], mapping: dict[int, int], split: int) -> None:
    """The split dimension's new size a multiple of the split: a tensor that shares it (the
    positions of the rows, their offsets) then still counts the rows the split one holds."""
    if primary[0] > 1:  # a size 1 is no dimension of the mapping (broadcasts)
        first = primary[0]
        mapping[first] = split * max(2, mapping.get(first, first) // split)


def _index_high(spec: TensorArg, sizes: list[int], mapping: dict[int, int], default: int) -> int:
    """The bound an integer tensor's derived values stay below: the new value of the
    smallest size its values stayed below in the harness's call (``default`` where none
    was recorded or none bounds them)."""
    bound = _bounding_size(spec, sizes)
    if bound is None:
        return default
    # an offset may equal the size it bounds (the end of the last sequence), an index not
    return mapping.get(bound, bound) + (1 if bound == spec.max else 0)


def _bounding_size(spec: TensorArg, sizes: list[int]) -> Optional[int]:
    top = spec.max
    if top is None or top < 0:
        return None
    return next((d for d in sorted(sizes) if d >= top), None)


def _room_for_distinct(tensors: list[TensorArg], mapping: dict[int, int], grown: Optional[int]) -> None:
    """Distinct values need as many of them below their bound as there are elements: a
    size that bounds distinct slots stays at least their number (more tokens than cache
    slots is no input the harness's wrapper takes)."""
    sizes = sorted({d for t in tensors if t.floating for d in t.shape})
    for t in tensors:
        bound = _bounding_size(t, sizes) if t.distinct and not t.floating else None
        if bound is None or bound == grown:
            continue
        n = _numel(t, mapping)
        if mapping.get(bound, bound) < n:
            mapping[bound] = n


def _mapping(
    flavour: str, tensors: list[TensorArg], dims: list[int], rng: random.Random, interpreted: bool
) -> tuple[dict[int, int], Optional[int]]:
    """(each dimension's new size, the dimension grown or None) of a flavour's call. Under
    the interpreter a long row that is also a column (a square matrix, a matmul's M = N
    = K) grows only to twice its size: the work grows with its cube there."""
    if flavour == "sizes":
        return {d: _ragged(d, rng) for d in dims}, None
    if flavour == "aligned":
        return {d: _aligned(d, rng) for d in dims}, None
    if flavour == "alias_twin" and not interpreted:
        # an output written over its input shows an ordering hazard only where programs
        # run in several waves (a GPU runs a small grid's programs all at once: each reads
        # before any writes): the harness's sizes, within the call's bytes (``_fit``)
        return {d: d for d in dims}, None
    if flavour == "empty":  # the first tensor's first dimension (``_empty_call``)
        mapping = {d: _new_size(d, rng, 2) for d in dims}
        mapping[tensors[0].shape[0]] = 0
        return mapping, None
    if flavour not in ("grow", "long") or not dims:
        return {d: _new_size(d, rng, 2) for d in dims}, None
    grown = dims[-1]
    if flavour == "long":  # the rows of the floating inputs (their last dimension)
        grown = next((t.shape[-1] for t in tensors if t.floating and t.shape and t.shape[-1] > 1), grown)
    small, least = ((3, 7, 17, 33), GROWN) if flavour == "grow" else ((4, 8), LONG_ROW)
    mapping = {d: min(d, rng.choice(small)) for d in dims}
    # a grown size is a multiple of the harness's until it passes GROWN; a long row only needs
    # to pass LONG_ROW. On a GPU a kernel whose block is its row compiles once per row size, in
    # every candidate: a 2**17 block took 9-36 s, and a 32000 vocabulary grown 8x (a 2**18
    # block) kept sampler_logprobs's original from its first verdict for over 70 s
    base = grown * rng.choice((4, 8)) if flavour == "grow" and grown * 4 < least else grown
    mapping[grown] = max(base, least) + rng.choice((0, 1, 3))
    if flavour == "long" and grown >= 1 << 13:
        # the harness's row is long already: a new row size is a new compile of a kernel
        # whose block is its row (a 16384 block at one warp took 18.6 s on an H100, 0.9 s
        # at the harness's 8192), and 2**13 partial sums show a 16-bit accumulation as well
        mapping[grown] = grown
    if flavour == "long" and interpreted and any(grown in t.shape[:-1] for t in tensors):
        mapping[grown] = 2 * grown + rng.choice((0, 1, 3))
    return mapping, grown


def _fit(
    tensors: list[TensorArg], mapping: dict[int, int], grown: Optional[int], at_least: int, max_bytes: int, flavour: str
) -> None:
    """Too large: the largest other dimensions drawn smaller first (an aligned one to a
    smaller aligned size), the grown one last."""
    for _ in range(40):
        if _call_bytes(tensors, mapping) <= max_bytes:
            return
        others = [d for d in mapping if d != grown and mapping[d] > at_least]
        biggest = max(others or list(mapping), key=lambda d: mapping[d])
        half = max(at_least if biggest != grown else 1, mapping[biggest] // 2)
        if flavour == "aligned":
            half = max([s for s in range(16, half + 1, 32)] or [half])
        mapping[biggest] = half


def _ragged(d: int, rng: random.Random) -> int:
    """A size at most ``d`` that no tile of 16 or more divides (``d`` where none is smaller)."""
    options = [s for s in (*_RAGGED, d - 1, d // 2 + 1) if 1 <= s < d and s % 16]
    return rng.choice(options) if options else d


def _aligned(d: int, rng: random.Random) -> int:
    """A multiple of 16 that is not one of 32, at most ``d`` where one is (else ``d``)."""
    options = list(range(16, min(d, 16 * 63) + 1, 32))
    return rng.choice(options) if options else d


def _new_size(d: int, rng: random.Random, at_least: int = 1) -> int:
    """Another size for a dimension of size ``d``: at most ``d`` (memory stays within the
    harness's), odd, off a power of two, or block-aligned at first sight only."""
    options = [s for s in (*_RAGGED, *_ALIGNED, d - 1, d // 2 + 1) if at_least <= s <= d and s != d] or [d]
    return rng.choice(options)


def _other_dtype(flavour: str, tensors: list[TensorArg], dtypes: tuple[str, ...], turn: int) -> Optional[str]:
    """The float dtype a grown call (another one than the harness's) or a long one (a
    reduced-precision one, the harness's if it is one) takes; None: the harness's."""
    first_float = next((t.dtype for t in tensors if t.floating), None)
    if flavour == "long":
        reduced = [d for d in dtypes if d in REDUCED_DTYPES]
        if first_float in REDUCED_DTYPES or not reduced:
            return None
        # float16 first: statistics kept in the input's dtype overflow there (sums of
        # squares past 65504) in every session; in bfloat16 they only lose bits, which a
        # result's tolerance can hide
        return "float16" if "float16" in reduced else reduced[0]
    others = [d for d in dtypes if d != first_float]
    return others[turn % len(others)] if flavour == "grow" and others else None


def _map_arg(arg: Arg, call: Call, plan: _Plan, rng: random.Random) -> Arg:
    if isinstance(arg, TensorArg):
        return _map_tensor(arg, plan, rng, plan.highs.get(arg.id, 1000))
    value, mapping = arg.v, plan.mapping
    if isinstance(value, float) and plan.flavour == "sizes":
        return ValueArg(value * 10.0 ** rng.choice((-2, 2)))
    if isinstance(value, int) and not isinstance(value, bool) and value > 1:
        if value in mapping:  # a dimension passed on its own
            return ValueArg(mapping[value])
        for t in call.tensors():  # an element count passed on its own
            numel = 1
            for d in t.shape:
                numel *= d
            if value == numel and numel > 1:
                mapped = 1
                for d in t.shape:
                    mapped *= mapping.get(d, d)
                return ValueArg(mapped)
    return arg


def _map_tensor(arg: TensorArg, plan: _Plan, rng: random.Random, index_high: int) -> TensorArg:
    flavour = plan.flavour
    shape = [plan.mapping.get(d, d) for d in arg.shape]
    if flavour == "rank" and len(shape) >= 2 and arg.shape == plan.split_shape:
        split = plan.split
        shape = [split, max(2, shape[0] // split), *shape[1:]]  # x.shape[0] is then not the row count
    pad = (rng.choice((0, rng.randrange(16, 257))), rng.randrange(16, 257))
    layout = flavour if flavour in ("strided", "transposed") and len(shape) >= 2 else arg.layout
    new = replace(
        arg, shape=tuple(shape), pad=pad, layout=layout, max=None, distinct=None, sorted=None
    )  # the recorded facts, kept below where they still hold
    if arg.floating:
        values = {
            "special": "special",
            "strided": "offset",
            "sizes": "scaled",
            "long": "centred",
            "grow": "integral",
        }.get(flavour)
        return replace(
            new,
            values=values or arg.values,
            dtype=plan.other_dtype if plan.other_dtype and plan.other_dtype != arg.dtype else arg.dtype,
        )
    # what the values keep of the harness's (``_values``)
    return replace(
        new,
        index_high=index_high,
        wide=True if flavour in ("grow", "wide") else arg.wide,
        distinct=True if arg.distinct else None,
        sorted=True if arg.sorted else None,
    )


# --------------------------------------------------------------------------- past int32 offsets
WIDE_MARGIN = 1.25  # the largest tensor at 1.25x the threshold: a fifth of it lies past the wrap
NO_BYTE_CAP = 1 << 62  # a wide call is not fitted to a byte budget: the judge checks the device's room


def wide_calls(calls: list[RecordedCall], seed: int, min_elements: int) -> list[tuple[DerivedCall, int]]:
    """Calls past int32 offsets (flavour "wide"), each with the bytes it needs (``wide_bytes``):
    a recorded call with one dimension grown (``_wide_dim``) until its largest tensor holds
    more than ``min_elements`` elements (2**31 on the verification path: an offset such as
    ``row * stride`` computed in int32 wraps there), every other size the harness's. Integer
    tensors whose values stayed below that dimension span its new range (``_index_high``;
    ``wide`` values include the last row). Far too large for every candidate of a search
    (the "grow" calls stop past 2**16): the judge runs them once per verdict, on the
    verification path (``judge_wide``). A recorded call with the shapes and dtypes of an
    earlier one is drawn once (each such call is gigabytes)."""
    rng = random.Random(seed)
    out: list[tuple[DerivedCall, int]] = []
    seen: set[tuple[str, tuple[tuple[tuple[int, ...], str], ...]]] = set()
    for call in calls[:MAX_CALLS_RECORDED]:
        tensors = call.tensors()
        key = (call.fn, tuple((t.shape, t.dtype) for t in tensors))
        if not tensors or key in seen or _wide_dim(tensors) is None:
            continue
        seen.add(key)
        made = _derive_one(call, "wide", tensors, rng, NO_BYTE_CAP, (), min_elements=min_elements)
        out.append((made, wide_bytes(call, made)))
    return out


def wide_bytes(recorded: RecordedCall, call: DerivedCall) -> int:
    """What a derived call holds at its sizes: its tensor arguments and, where the harness's
    call returned a tensor, that tensor at the new sizes (an output the wrapper allocates
    is as large as an input in most kernels)."""
    returned = [recorded.returns] if isinstance(recorded.returns, TensorArg) else []
    mapping = {int(k): v for k, v in call.sizes.items()}
    return call_bytes(call) + _call_bytes(returned, mapping)


def _wide_dim(tensors: list[TensorArg]) -> Optional[int]:
    """The dimension a wide call grows: one of its largest floating tensor's (any tensor's
    where none floats), first the one integer arguments index (a vocabulary: their values
    then reach past the wrap), then one that is no tensor's last dimension (a row's block
    is often the row: a 2**31 block is no compile), then the first. None: nothing to grow."""
    data = [t for t in tensors if t.floating and _numel(t) > 1] or [t for t in tensors if _numel(t) > 1]
    if not data:
        return None
    largest = max(data, key=_numel)
    sizes = sorted({d for t in tensors if t.floating for d in t.shape})
    indexed = {_bounding_size(t, sizes) for t in tensors if not t.floating and not t.sorted}
    rows = {t.shape[-1] for t in tensors if len(t.shape) >= 2}
    options = [d for d in dict.fromkeys(largest.shape) if d > 1]
    return min(options, key=lambda d: (d not in indexed, d in rows, largest.shape.index(d)))


def _wide_mapping(
    tensors: list[TensorArg], dims: list[int], min_elements: int, rng: random.Random
) -> tuple[dict[int, int], Optional[int]]:
    """(each dimension's new size, the grown one) of a wide call: only ``_wide_dim`` changes,
    to the least size that takes some tensor past ``WIDE_MARGIN`` times ``min_elements``
    (a size shared by several dimensions of one tensor grows them all: sizes map by value),
    plus 0, 1 or 3 (off a power of two)."""
    mapping = {d: d for d in dims}
    grown = _wide_dim(tensors)
    if grown is None:
        return mapping, None
    target = int(min_elements * WIDE_MARGIN)
    least: Optional[int] = None
    for t in tensors:
        k = t.shape.count(grown)
        if not k:
            continue
        rest = max(_numel(t) // grown**k, 1)
        size = max(grown, int((target / rest) ** (1.0 / k)))
        while rest * size**k <= target:
            size += 1
        least = size if least is None else min(least, size)
    assert least is not None  # the grown dimension is one of a tensor's
    mapping[grown] = least + rng.choice((0, 1, 3))
    return mapping, grown


# --------------------------------------------------------------------------- describing
def describe_call(call: Call) -> str:
    """A derived call in a line, e.g. "softmax(97x1000 float32 strided) [strided]"."""

    def one(arg: Arg) -> str:
        if isinstance(arg, ValueArg):
            return repr(arg.v)
        extra = {"strided": " rows padded", "spread": " every dimension strided", "transposed": " column-major"}.get(
            arg.layout or "", ""
        )
        extra += {
            "special": " special values",
            "offset": " large mean",
            "scaled": " scaled",
            "centred": " large rows summing to about 0",
        }.get(arg.values or "", "")
        return f"{'x'.join(map(str, arg.shape)) or 'scalar'} {arg.dtype}{extra}"

    parts = [one(a) for a in call.args] + [f"{k}={one(v)}" for k, v in call.kwargs.items()]
    repeats = call.repeats if isinstance(call, DerivedCall) else None
    times = f", called {repeats} times in a row" if repeats else ""
    return f"{call.fn}({', '.join(parts)}){times}"
