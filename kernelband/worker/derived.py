"""Inputs beyond the harness: the original is the oracle for calls of its wrapper that the
harness never makes (DESIGN section 6, "Beyond the harness's own inputs").

The harness's calls of the kernel's wrapper are recorded in the original's process
(``record_calls``: each argument described, tensors by shape, dtype, device, layout and
identity). From them the judge draws derived calls (``derive``, plain data, seeded per
session): other sizes (every distinct dimension mapped to another, integer arguments
that equal a dimension or a size mapped with it), non-contiguous views with the same
values, special values (+-0, +-inf, large magnitudes, constant and all -inf rows), and
other floating dtypes. Each call runs in the original's process and in the candidate's
(``run_call``) on identical inputs, every tensor placed inside a canary-padded buffer: the
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
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from .messages import Derived, DerivedOutputs

MAX_CALLS_RECORDED = 2  # recorded calls per run (the first ones)
PAD_ELEMENTS = 64  # canary elements before and after a tensor whose spec names none
_FLOAT_DTYPES = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- recording
def describe(value: Any, tensors: dict[int, int]) -> Optional[dict[str, Any]]:
    """An argument as plain data, or None when it cannot be re-created (an object)."""
    import torch

    if isinstance(value, torch.Tensor):
        ident = tensors.setdefault(id(value), len(tensors))
        spec = {"t": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
                "device": value.device.type, "contiguous": bool(value.is_contiguous()), "id": ident,
                "floating": bool(value.is_floating_point())}
        return dict(spec, **index_facts(value)) if not spec["floating"] else spec
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"t": "value", "v": value}
    return None


def index_facts(value: Any) -> dict[str, Any]:
    """What a kernel may rely on in an integer tensor the harness passes (indices, slots,
    offsets): its largest value (so a derived call's stay below the size of what it
    indexes), whether its values are distinct (scatter slots: duplicates would make two
    programs write one place, in an order no oracle fixes) and sorted (offsets)."""
    import torch

    if value.dtype == torch.bool or value.is_complex() or value.numel() == 0 or value.numel() > 1 << 26:
        return {}
    flat = value.reshape(-1)
    return {"max": int(flat.max()), "distinct": bool(torch.unique(flat).numel() == flat.numel()),
            "sorted": bool(flat.numel() < 2 or bool((flat[1:] >= flat[:-1]).all()))}



@contextlib.contextmanager
def record_calls(module: Any, names: list[str]) -> Iterator[list[dict[str, Any]]]:
    """Record the first calls of the module's functions ``names`` (the kernel's wrappers)
    made inside the block: ``[{"fn", "args", "kwargs"}]`` with every argument described."""
    calls: list[dict[str, Any]] = []
    originals: dict[str, Callable[..., Any]] = {}
    for name in names:
        fn = getattr(module, name, None)
        if not callable(fn):
            continue
        originals[name] = fn

        def recorder(*args: Any, __name: str = name, __fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
            entry: Optional[dict[str, Any]] = None
            if len(calls) < MAX_CALLS_RECORDED:
                ids: dict[int, int] = {}
                described_args = [describe(a, ids) for a in args]
                described_kwargs = {k: describe(v, ids) for k, v in kwargs.items()}
                if all(d is not None for d in described_args) and all(d is not None for d in described_kwargs.values()):
                    entry = {"fn": __name, "args": described_args, "kwargs": described_kwargs}
                    calls.append(entry)
            result = __fn(*args, **kwargs)
            if entry is not None:  # what it returned: the shape an out= buffer of a derived call takes
                entry["returns"] = describe(result, {})
            return result

        setattr(module, name, recorder)
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(module, name, fn)


# --------------------------------------------------------------------------- deriving
def _tensor_specs(call: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in [*call["args"], *call["kwargs"].values()] if a["t"] == "tensor"]


_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
             "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}
MAX_CALL_BYTES = 256 << 20  # a derived call's tensors (twice that with canaries and strides)


def _call_bytes(tensors: list[dict[str, Any]], mapping: dict[int, int]) -> int:
    total = 0
    for t in tensors:
        n = 1
        for d in t["shape"]:
            n *= mapping.get(d, d)
        total += n * _ITEMSIZE.get(t["dtype"], 8)
    return total


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


def derive(calls: list[dict[str, Any]], seed: int, per_call: int = len(FLAVOURS), max_bytes: int = MAX_CALL_BYTES,
           interpreted: bool = False, optional: Optional[dict[str, list[tuple[str, str]]]] = None
           ) -> list[dict[str, Any]]:
    """Derived calls of the recorded ones, one per flavour (plain data; the same seed gives
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
    and where the wrapper has an output parameter (``optional``: function -> [(name,
    default's source)]): float ones the harness never passes changed (an ``eps``), an
    output buffer passed strided, and the output buffer being an input (aliasing, whether
    the harness passes one or not), the last beside its twin without aliasing (the
    original must give the same: else it is not checked). A call's tensors stay under
    ``max_bytes``."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    # the interpreter stores bfloat16 as raw 16-bit integers (numpy has none): arithmetic
    # on it there is not what a GPU computes, so a result there is no oracle
    dtypes = tuple(d for d in _FLOAT_DTYPES if not (interpreted and d == "bfloat16"))
    grown = rng.randrange(len(dtypes) or 1)  # grown and long calls take the other dtypes in turn
    for call in calls[:MAX_CALLS_RECORDED]:
        tensors = _tensor_specs(call)
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
            if flavour == "long" and any(_reduced(a) for a in _tensor_specs(out[-1])):
                out.append(_precise_twin(out[-1]))
        out += _optional_calls(call, (optional or {}).get(call["fn"], []), tensors, rng, max_bytes, dtypes,
                               interpreted)
    for i, c in enumerate(out):
        if c["flavour"] in ("alias", "high"):
            c["twin"] = i - 1
    return out


def _reduced(arg: dict[str, Any]) -> bool:
    return arg["t"] == "tensor" and bool(arg.get("floating")) and arg["dtype"] in REDUCED_DTYPES


def _precise_twin(call: dict[str, Any]) -> dict[str, Any]:
    """A long call again, its reduced-precision tensors in float32 holding the same values
    (rounded to the reduced dtype): the original's result there is the long call's
    higher-precision reference. An original that
    itself accumulates in 16 bits is not an oracle to the last bit on long rows: a
    candidate there only has to be as precise as it (``judge_derived``), as on the
    harness's own inputs."""
    def precise(arg: dict[str, Any]) -> dict[str, Any]:
        return dict(arg, dtype="float32", round_to=arg["dtype"]) if _reduced(arg) else arg

    return dict(call, flavour="high", args=[precise(a) for a in call["args"]],
                kwargs={k: precise(v) for k, v in call["kwargs"].items()})


def _flavour_for(flavour: str, tensors: list[dict[str, Any]]) -> Optional[str]:
    """The flavour a call takes (None: none): a rank to split needs two dimensions, a long
    row a floating tensor."""
    if flavour == "rank" and not any(len(t["shape"]) >= 2 for t in tensors):
        return "sizes"
    if flavour == "long" and not any(t.get("floating") and t["shape"] for t in tensors):
        return None
    return flavour


def _optional_calls(call: dict[str, Any], params: list[tuple[str, str]], tensors: list[dict[str, Any]],
                    rng: random.Random, max_bytes: int, dtypes: tuple[str, ...], interpreted: bool = False
                    ) -> list[dict[str, Any]]:
    """Calls passing the wrapper's optional parameters that the recorded call left out, and
    its output buffer written over an input."""
    given = set(call["kwargs"]) | {str(i) for i in range(len(call["args"]))}
    missing = [(n, d) for n, d in params if n not in given]
    out: list[dict[str, Any]] = []
    floats = [(n, value) for n, d in missing if (value := _float_literal(d)) is not None]
    if floats:
        c = _derive_one(call, "sizes", tensors, rng, max_bytes, dtypes)
        # small inputs and a larger parameter: an ``eps`` then dominates what it is added
        # to, so a kernel that ignores the caller's shows it; a factor still scales
        c.update(flavour="defaults", scale=1e-3)
        for name, value in floats:
            c["kwargs"][name] = {"t": "value", "v": (value or 1e-6) * 10.0 ** rng.choice((2, 3))}
        out.append(c)
    return out + _output_calls(call, missing, tensors, rng, max_bytes, dtypes, interpreted)


def _output_calls(call: dict[str, Any], missing: list[tuple[str, str]], tensors: list[dict[str, Any]],
                  rng: random.Random, max_bytes: int, dtypes: tuple[str, ...], interpreted: bool = False
                  ) -> list[dict[str, Any]]:
    """An output buffer the harness never passes passed strided; the output buffer (passed
    by the harness or not) being an input of the same shape and dtype, beside its twin."""
    ret = call.get("returns")
    absent = [n for n, d in missing if n in OUT_NAMES and d.strip() == "None"]
    present = [n for n, v in call["kwargs"].items() if n in OUT_NAMES and v["t"] == "tensor"]
    out: list[dict[str, Any]] = []
    if absent and isinstance(ret, dict) and ret.get("t") == "tensor":
        name, target = absent[0], ret
        ident = max((t["id"] for t in tensors), default=-1) + 1
        # sizes of 2 or more: a single row cannot show its output's stride ignored
        strided = _derive_one(call, "out_strided", tensors, rng, max_bytes, dtypes)
        strided["kwargs"][name] = dict(ret, id=ident, layout="spread", pad=[rng.randrange(16, 257)] * 2,
                                       shape=[int(strided["sizes"].get(str(d), d)) for d in ret["shape"]])
        out.append(strided)
    elif present:
        name, target = present[0], call["kwargs"][present[0]]
    else:
        return out
    same = [t for t in tensors if t is not target and t["shape"] == target["shape"] and t["dtype"] == target["dtype"]]
    if same:  # the wrapper may be told to write over its input: only where the original can
        # plain values of every size but 1: a call whose output differs little from its
        # input, or a single column, hides an in-place hazard
        twin = _derive_one(call, "alias_twin", tensors, rng, max_bytes, dtypes, interpreted=interpreted)
        alias = dict(twin, flavour="alias", alias_arg=name)  # its twin: the call just before it (``derive``)
        alias["kwargs"] = dict(twin["kwargs"], **{name: dict(_find_arg(twin, same[0]["id"]))})
        out += [twin, alias]
    return out


def _find_arg(call: dict[str, Any], ident: int) -> dict[str, Any]:
    return next(a for a in [*call["args"], *call["kwargs"].values()] if a["t"] == "tensor" and a["id"] == ident)


def _float_literal(source: str) -> Optional[float]:
    try:
        value = float(source)
    except (TypeError, ValueError):
        return None
    return value if value != 0.0 else None


def _derive_one(call: dict[str, Any], flavour: str, tensors: list[dict[str, Any]], rng: random.Random,
                max_bytes: int, dtypes: tuple[str, ...], turn: int = 0, interpreted: bool = False) -> dict[str, Any]:
    dims = sorted({d for t in tensors for d in t["shape"] if d > 1})
    # a single row cannot show a row stride ignored; a long row needs no second one
    at_least = 1 if flavour in ("sizes", "aligned", "long") else 2
    mapping, grown = _mapping(flavour, tensors, dims, rng, interpreted)
    _fit(tensors, mapping, grown, at_least, max_bytes, flavour)
    _room_for_distinct(tensors, mapping, grown)
    split = rng.choice((2, 3)) if flavour == "rank" else 0
    if split:
        _whole_split(tensors, mapping, split)
    derived: dict[str, Any] = {"fn": call["fn"], "flavour": flavour, "seed": rng.randrange(1 << 30),
                               "sizes": {str(k): v for k, v in mapping.items()}}
    if flavour == "sizes":
        derived["scale"] = 10.0 ** rng.choice((-3, -1, 2))
        derived["fresh_fill"] = "zero"
    if flavour == "long":
        derived["scale"] = rng.choice((4.0, 8.0))  # large values: fp16 sums of squares overflow
    if flavour == "repeat":
        derived["repeats"] = rng.randrange(14, 25)
    if flavour == "rank":
        derived["split"] = split
    other_dtype = _other_dtype(flavour, tensors, dtypes, turn)
    # integers are often indices into a floating argument: below its largest size (a long
    # row is no vocabulary: it is not indexed)
    indexable = sorted({d for t in tensors if t.get("floating") for d in t["shape"] if flavour != "long" or d != grown})
    index_high = max([mapping.get(d, d) for d in indexable] or [1000])
    # an integer tensor whose values stayed below a size in the harness's call (the rows
    # of the table it indexes, say) stays below that size's new value: else its reads land
    # outside every tensor of the call, where no canary shows them
    highs = {t["id"]: _index_high(t, indexable, mapping, index_high) for t in tensors if not t.get("floating")}
    # a rank split applies to the first floating input of two or more dimensions and those
    # shaped like it: a lookup table split in two is no input any wrapper takes
    primary = next((t["shape"] for t in tensors if t.get("floating") and len(t["shape"]) >= 2), None)
    derived["split_shape"] = primary if flavour == "rank" else None
    derived["args"] = [_map_arg(a, mapping, call, derived, rng, other_dtype, highs) for a in call["args"]]
    derived["kwargs"] = {k: _map_arg(v, mapping, call, derived, rng, other_dtype, highs)
                         for k, v in call["kwargs"].items()}
    return derived


def _whole_split(tensors: list[dict[str, Any]], mapping: dict[int, int], split: int) -> None:
    """The split dimension's new size a multiple of the split: a tensor that shares it (the
    positions of the rows, their offsets) then still counts the rows the split one holds."""
    primary = next((t["shape"] for t in tensors if t.get("floating") and len(t["shape"]) >= 2), None)
    if primary and primary[0] > 1:  # a size 1 is no dimension of the mapping (broadcasts)
        first = primary[0]
        mapping[first] = split * max(2, mapping.get(first, first) // split)


def _index_high(spec: dict[str, Any], sizes: list[int], mapping: dict[int, int], default: int) -> int:
    """The bound an integer tensor's derived values stay below: the new value of the
    smallest size its values stayed below in the harness's call (``default`` where none
    was recorded or none bounds them)."""
    bound = _bounding_size(spec, sizes)
    if bound is None:
        return default
    # an offset may equal the size it bounds (the end of the last sequence), an index not
    return mapping.get(bound, bound) + (1 if bound == spec["max"] else 0)


def _bounding_size(spec: dict[str, Any], sizes: list[int]) -> Optional[int]:
    top = spec.get("max")
    if not isinstance(top, int) or isinstance(top, bool) or top < 0:
        return None
    return next((d for d in sorted(sizes) if d >= top), None)


def _room_for_distinct(tensors: list[dict[str, Any]], mapping: dict[int, int], grown: Optional[int]) -> None:
    """Distinct values need as many of them below their bound as there are elements: a
    size that bounds distinct slots stays at least their number (more tokens than cache
    slots is no input the harness's wrapper takes)."""
    sizes = sorted({d for t in tensors if t.get("floating") for d in t["shape"]})
    for t in tensors:
        bound = _bounding_size(t, sizes) if t.get("distinct") and not t.get("floating") else None
        if bound is None or bound == grown:
            continue
        n = 1
        for d in t["shape"]:
            n *= mapping.get(d, d)
        if mapping.get(bound, bound) < n:
            mapping[bound] = n


def _mapping(flavour: str, tensors: list[dict[str, Any]], dims: list[int], rng: random.Random,
             interpreted: bool) -> tuple[dict[int, int], Optional[int]]:
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
    if flavour not in ("grow", "long") or not dims:
        return {d: _new_size(d, rng, 2) for d in dims}, None
    grown = dims[-1]
    if flavour == "long":  # the rows of the floating inputs (their last dimension)
        grown = next((t["shape"][-1] for t in tensors if t.get("floating") and t["shape"] and t["shape"][-1] > 1),
                     grown)
    small, least = ((3, 7, 17, 33), GROWN) if flavour == "grow" else ((4, 8), LONG_ROW)
    mapping = {d: min(d, rng.choice(small)) for d in dims}
    # a grown size is a multiple of the harness's; a long row only needs to pass LONG_ROW (on a
    # GPU a kernel whose block is its row compiles once per row size: a 2**17 block took 9-36 s)
    base = grown * rng.choice((4, 8)) if flavour == "grow" else grown
    mapping[grown] = max(base, least) + rng.choice((0, 1, 3))
    if flavour == "long" and grown >= 1 << 13:
        # the harness's row is long already: a new row size is a new compile of a kernel
        # whose block is its row (a 16384 block at one warp took 18.6 s on an H100, 0.9 s
        # at the harness's 8192), and 2**13 partial sums show a 16-bit accumulation as well
        mapping[grown] = grown
    if flavour == "long" and interpreted and any(grown in t["shape"][:-1] for t in tensors):
        mapping[grown] = 2 * grown + rng.choice((0, 1, 3))
    return mapping, grown


def _fit(tensors: list[dict[str, Any]], mapping: dict[int, int], grown: Optional[int], at_least: int,
         max_bytes: int, flavour: str) -> None:
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


def _other_dtype(flavour: str, tensors: list[dict[str, Any]], dtypes: tuple[str, ...], turn: int) -> Optional[str]:
    """The float dtype a grown call (another one than the harness's) or a long one (a
    reduced-precision one, the harness's if it is one) takes; None: the harness's."""
    first_float = next((t["dtype"] for t in tensors if t.get("floating")), None)
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


def _map_arg(arg: dict[str, Any], mapping: dict[int, int], call: dict[str, Any], derived: dict[str, Any],
             rng: random.Random, other_dtype: Optional[str], highs: dict[int, int]) -> dict[str, Any]:
    if arg["t"] == "tensor":
        return _map_tensor(arg, mapping, derived, rng, other_dtype, highs.get(arg["id"], 1000))
    value = arg.get("v")
    if isinstance(value, float) and derived["flavour"] == "sizes":
        return {"t": "value", "v": value * 10.0 ** rng.choice((-2, 2))}
    if isinstance(value, int) and not isinstance(value, bool) and value > 1:
        if value in mapping:  # a dimension passed on its own
            return {"t": "value", "v": mapping[value]}
        for t in _tensor_specs(call):  # an element count passed on its own
            numel = 1
            for d in t["shape"]:
                numel *= d
            if value == numel and numel > 1:
                mapped = 1
                for d in t["shape"]:
                    mapped *= mapping.get(d, d)
                return {"t": "value", "v": mapped}
    return arg


def _map_tensor(arg: dict[str, Any], mapping: dict[int, int], derived: dict[str, Any], rng: random.Random,
                other_dtype: Optional[str], index_high: int) -> dict[str, Any]:
    flavour = derived["flavour"]
    shape = [mapping.get(d, d) for d in arg["shape"]]
    if flavour == "rank" and len(shape) >= 2 and arg["shape"] == derived.get("split_shape"):
        split = derived["split"]
        shape = [split, max(2, shape[0] // split), *shape[1:]]  # x.shape[0] is then not the row count
    new = dict(arg, shape=shape, pad=[rng.choice((0, rng.randrange(16, 257))), rng.randrange(16, 257)])
    if flavour == "strided" and len(shape) >= 2:
        new["layout"] = "strided"
    if flavour == "transposed" and len(shape) >= 2:
        new["layout"] = "transposed"
    if arg.get("floating"):
        values = {"special": "special", "strided": "offset", "sizes": "scaled", "long": "centred",
                  "grow": "integral"}.get(flavour)
        if values:
            new["values"] = values
        if other_dtype and other_dtype != arg["dtype"]:
            new["dtype"] = other_dtype
    else:
        new["index_high"] = index_high
        if flavour == "grow":
            new["wide"] = True
    for fact in ("max", "distinct", "sorted"):
        new.pop(fact, None)
    if not arg.get("floating"):  # what the values keep of the harness's (``_values``)
        new.update({fact: True for fact in ("distinct", "sorted") if arg.get(fact)})
    return new


# --------------------------------------------------------------------------- running
@dataclass
class Placed:
    """A tensor argument inside its canary-padded buffer."""

    view: Any
    buffer: Any
    offset: int  # first element of the view in the buffer


def canary_value(dtype: Any, which: str) -> Any:
    import torch

    if dtype.is_floating_point or dtype.is_complex:
        return float("nan") if which == "a" else 7.25
    if dtype == torch.bool:
        return which == "a"
    return -1 if which == "a" else 3


def fresh_value(dtype: Any, which: str) -> Any:
    """What an empty tensor a derived call makes holds before the kernel writes it: it
    differs between the original's two canary runs, so what the original leaves unwritten
    shows (``judge_derived.unwritten_masks``); NaN in a candidate's run."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan") if which == "a" else -5.5
    return -1 if which == "a" else -2


def _generator(seed: int, device: str) -> Any:
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _values(spec: dict[str, Any], dtype: Any, device: str, seed: int, scale: float = 1.0) -> Any:
    import torch

    shape = spec["shape"]
    g = _generator(seed, device)
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g, device=device, dtype=torch.float32)
        if spec.get("values") == "scaled":
            x = x * scale
        if spec.get("values") == "centred" and x.dim() >= 1 and x.numel() > 0:
            # large values whose rows sum to about zero: the partial sums are large, the
            # result small, so an accumulation in 16 bits shows, and squares overflow fp16
            x = x * scale
            x = x - x.mean(dim=-1, keepdim=True)
        if spec.get("values") == "integral":  # -6..6: sums exact in any order, up to 2**11 in fp16
            x = torch.round(x * 2.0)
        if spec.get("values") == "offset":  # a large mean, a small spread (one-pass variance fails here)
            x = x * 0.01 + 300.0
        if spec.get("values") == "special" and x.numel() > 0:
            flat = x.view(-1)
            n = flat.numel()
            picks = torch.randint(0, n, (max(n // 16, 1),), generator=g, device=device)
            specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 3.0e4, -3.0e4], device=device)
            flat[picks] = specials[torch.arange(picks.numel(), device=device) % specials.numel()]
            if x.dim() >= 2 and x.shape[0] >= 2:
                x[0] = float("-inf")  # a fully masked row
                x[1] = 2.5  # a constant row
        if spec.get("round_to"):  # the values a reduced-precision twin holds, in a wider dtype
            x = x.to(getattr(torch, spec["round_to"]))
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g, device=device).to(torch.bool)
    # integers are often indices into another argument: drawn below its largest size
    high = 100 if dtype in (torch.int8, torch.uint8) else max(int(spec.get("index_high") or 1000), 1)
    if dtype in (torch.int16,):
        high = min(high, 1 << 15)
    n = 1
    for d in shape:
        n *= d
    if spec.get("distinct") and n <= high:  # scatter slots stay distinct: no two programs write one place
        ids = torch.randperm(high, generator=g, device=device)[:n].reshape(shape)
    else:
        ids = torch.randint(0, high, shape, generator=g, device=device, dtype=torch.int64)
    if spec.get("wide") and high > WIDE_INDEX + 1 and ids.numel():
        # past int16's range every few elements, and the largest index (past 2**16 where it is)
        flat = ids.view(-1)
        if not spec.get("distinct"):
            picks = flat[::max(flat.numel() // 4, 1)]
            flat[::max(flat.numel() // 4, 1)] = torch.randint(WIDE_INDEX, high, (picks.numel(),), generator=g,
                                                              device=device, dtype=torch.int64)
        if not bool((flat == high - 1).any()):
            flat[0] = high - 1
    if spec.get("sorted"):
        ids = ids.view(-1).sort().values.reshape(shape)
    return ids.to(dtype)


def pads(spec: dict[str, Any]) -> tuple[int, int]:
    """Canary elements before and after the tensor (drawn per call: sometimes none before,
    so a tensor at the start of its buffer is shown too)."""
    before, after = spec.get("pad") or (PAD_ELEMENTS, PAD_ELEMENTS)
    return int(before), int(after)


def layout(spec: dict[str, Any]) -> tuple[list[int], list[int], int]:
    """(shape, strides, buffer elements) of a derived tensor: the view starts after
    ``pads(spec)[0]`` canaries and is followed by ``pads(spec)[1]``. The judge recomputes it
    from the spec it made, so where the tensor lies in its buffer is never the variant's
    word."""
    shape = list(spec["shape"])
    if spec.get("layout") == "spread" and shape:
        strides: list[int] = []
        step = 2
        for d in reversed(shape):  # every dimension spread out, the last one too
            strides.insert(0, step)
            step *= max(d, 1) * 2
    elif spec.get("layout") == "transposed" and len(shape) >= 2:
        strides, step = [0] * len(shape), 1
        for i in range(len(shape)):  # column-major: the first dimension varies fastest
            strides[i] = step
            step *= max(shape[i], 1)
    elif spec.get("layout") == "strided" and len(shape) >= 2:
        strides, step = [], 1
        for d in reversed(shape):  # rows padded (a slice of a wider tensor): the last dimension stays dense
            strides.insert(0, step)
            step = step * max(d, 1) + 1 + max(d, 1) // 7
    else:
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= max(d, 1)
    extent = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) if all(d > 0 for d in shape) else 0
    before, after = pads(spec)
    return shape, strides, before + extent + after


def distinct_tensors(call: dict[str, Any]) -> list[dict[str, Any]]:
    """The call's tensor arguments, each identity once, in the order ``build`` places them."""
    seen: dict[int, dict[str, Any]] = {}
    for arg in [*call["args"], *call["kwargs"].values()]:
        if arg["t"] == "tensor" and arg["id"] not in seen:
            seen[arg["id"]] = arg
    return list(seen.values())


def place(spec: dict[str, Any], seed: int, which: str, scale: float = 1.0) -> Placed:
    """A tensor as the derived call describes it, inside a buffer of canaries."""
    import torch

    dtype = getattr(torch, spec["dtype"])
    shape, strides, total = layout(spec)
    buffer = torch.full((total,), canary_value(dtype, which), dtype=dtype, device=spec["device"])
    view = buffer.as_strided(shape, strides, pads(spec)[0])
    if view.numel():
        view.copy_(_values(spec, dtype, spec["device"], seed, scale))
    return Placed(view, buffer, pads(spec)[0])


def build(call: dict[str, Any], which: str, repeat: int = 0) -> tuple[list[Any], dict[str, Any], list[Placed]]:
    """The arguments of a derived call: tensors placed in canary buffers (the same tensor
    where the recorded call passed one tensor twice), values as they are. ``repeat`` > 0:
    the inputs of that repetition (every other float element drawn again, the first kept:
    a result remembered by part of its input must not be returned)."""
    placed: dict[int, Placed] = {}
    order: list[Placed] = []

    def make(i: int, arg: dict[str, Any]) -> Any:
        if arg["t"] != "tensor":
            return arg.get("v")
        if arg["id"] not in placed:
            p = place(arg, call["seed"] + 7919 * arg["id"], which, float(call.get("scale", 1.0)))
            if repeat and p.view.is_floating_point() and p.view.numel() > 1:
                again = place(arg, call["seed"] + 7919 * arg["id"] + 104729 * repeat, which,
                              float(call.get("scale", 1.0)))
                flat, fresh = p.view.reshape(-1), again.view.reshape(-1)
                if flat.data_ptr() == p.view.data_ptr() and p.view.is_contiguous():
                    flat[1::2] = fresh[1::2]
                else:
                    mixed = p.view.clone().reshape(-1)
                    mixed[1::2] = fresh[1::2]
                    p.view.copy_(mixed.view(p.view.shape))
            placed[arg["id"]] = p
            order.append(p)
        return placed[arg["id"]].view

    args = [make(i, a) for i, a in enumerate(call["args"])]
    kwargs = {k: make(-1, v) for k, v in call["kwargs"].items()}
    return args, kwargs, order


def split_buffer(buffer: Any, spec: dict[str, Any]) -> tuple[Any, Any]:
    """(the tensor, the canaries around and between its elements) of a returned buffer,
    by the layout the judge computes from its own spec; None when the buffer is not the
    size that layout needs."""
    import torch

    shape, strides, total = layout(spec)
    if buffer.dim() != 1 or buffer.numel() != total:
        return None, None
    before = pads(spec)[0]
    view = buffer.as_strided(shape, strides, before)
    mask = torch.ones(total, dtype=torch.bool, device=buffer.device)
    if view.numel():
        mask.as_strided(shape, strides, before).fill_(False)
    return view, buffer[mask]


def allocation_canaries(buffer: Any, before: int, n: int) -> Any:
    """The canaries around a tensor the call's own code allocated (``padded_allocations``)."""
    import torch

    if buffer.dim() != 1 or before < 0 or n < 0 or buffer.numel() < before + n:
        return None
    return torch.cat([buffer[:before], buffer[before + n:]])


def canaries_intact(rest: Any, which: str) -> bool:
    """Every canary still holds its value (nothing wrote outside the tensor)."""
    import torch

    if rest is None:
        return False
    if not rest.numel():
        return True
    value = canary_value(rest.dtype, which)
    if isinstance(value, float) and value != value:
        return bool(torch.isnan(rest).all())
    return bool((rest == value).all())


def describe_call(call: dict[str, Any]) -> str:
    """A derived call in a line, e.g. "softmax(97x1000 float32 strided) [strided]"."""
    def one(arg: dict[str, Any]) -> str:
        if arg["t"] != "tensor":
            return repr(arg.get("v"))
        extra = {"strided": " rows padded", "spread": " every dimension strided",
                 "transposed": " column-major"}.get(arg.get("layout") or "", "")
        extra += {"special": " special values", "offset": " large mean", "scaled": " scaled",
                  "centred": " large rows summing to about 0"}.get(arg.get("values") or "", "")
        return f"{'x'.join(map(str, arg['shape'])) or 'scalar'} {arg['dtype']}{extra}"

    parts = [one(a) for a in call["args"]] + [f"{k}={one(v)}" for k, v in call["kwargs"].items()]
    times = f", called {call['repeats']} times in a row" if call.get("repeats") else ""
    return f"{call['fn']}({', '.join(parts)}){times}"


_FACTORIES = ("empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like")
_PLAIN_KWARGS = {"dtype", "device", "requires_grad"}


@contextlib.contextmanager
def padded_allocations(which: str, pad: int, fresh_fill: Optional[str] = None) -> Iterator[list[tuple[Any, int, int]]]:
    """While a derived call runs, the tensors its code makes with torch's factories
    (``torch.empty_like(x)`` for an output, say) lie inside canary-padded buffers too, so a
    write past an output the wrapper allocated itself is seen. Yields the list of
    (buffer, canaries before, elements) of each such tensor; torch is restored after."""
    import torch

    made: list[tuple[Any, int, int]] = []
    originals = {name: getattr(torch, name) for name in _FACTORIES}
    full = originals["full"]

    def padded(name: str, template: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if set(kwargs) - _PLAIN_KWARGS:  # layout, memory format, out=...: as torch does it
            return originals[name](*args, **kwargs)
        like = name.endswith("_like")
        if like:
            shape, rest = list(template.shape), args[1:]
        else:
            sizes = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
            if name == "full":
                sizes, rest = args[0], args[1:]
            else:
                rest = ()
            if not all(isinstance(d, int) for d in sizes):
                return originals[name](*args, **kwargs)
            shape = list(sizes)
        dtype = kwargs.get("dtype") or (template.dtype if like else None)
        device = kwargs.get("device") or (template.device if like else None)
        if dtype is None:
            value0 = rest[0] if name.startswith("full") and rest else 0.0
            dtype = torch.get_default_dtype() if isinstance(value0, float) else torch.int64
        n = 1
        for d in shape:
            n *= d
        buffer = full((pad + n + pad,), canary_value(dtype, which), dtype=dtype, device=device)
        view = buffer[pad:pad + n].view(shape)
        if name.startswith("zeros"):
            view.zero_()
        elif name.startswith("ones"):
            view.fill_(1)
        elif name.startswith("full"):
            view.fill_(rest[0])
        elif fresh_fill == "zero":  # empty: fresh memory is not always NaN outside the judge
            view.zero_()
        else:  # empty: what a kernel must write, as fresh memory reads in the variant process
            view.fill_(fresh_value(dtype, which))
        if kwargs.get("requires_grad"):
            view.requires_grad_(True)
        made.append((buffer, pad, n))
        return view

    def factory(name: str) -> Any:
        def make(*args: Any, **kwargs: Any) -> Any:
            template = args[0] if name.endswith("_like") and args else None
            return padded(name, template, args, kwargs)

        return make

    for name in _FACTORIES:
        setattr(torch, name, factory(name))
    try:
        yield made
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)


def _autotuners(module: Any) -> list[Any]:
    """The module's Triton autotuners, also those under heuristics or another wrapper."""
    try:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import KernelInterface
    except ImportError:
        return []
    found: list[Any] = []
    for value in list(vars(module).values()):
        seen = 0
        while isinstance(value, KernelInterface) and seen < 8:  # the chain (Heuristics.fn, Autotuner.fn)
            if isinstance(value, Autotuner) and not any(value is f for f in found):
                found.append(value)
            value, seen = value.__dict__.get("fn"), seen + 1
    return found


@contextlib.contextmanager
def one_run_autotuning(module: Any, synchronize: Callable[[], None]) -> Iterator[None]:
    """Derived calls have sizes (autotune keys) the harness never had: Triton's autotuner
    would benchmark every config again at each, some twenty runs a config. Every config of
    a kernel must compute the same result, so here one timed run a config picks one."""
    import time

    def bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
        t0 = time.perf_counter()
        kernel_call()
        synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        return [ms, ms, ms] if quantiles else ms

    saved: list[tuple[Any, str, Any]] = []
    for tuner in _autotuners(module):
        # Triton 3.3+ reads ``_do_bench`` through a ``do_bench`` property; older ones the attribute
        name = "_do_bench" if isinstance(getattr(type(tuner), "do_bench", None), property) else "do_bench"
        saved.append((tuner, name, tuner.__dict__.get(name, _ABSENT)))
        setattr(tuner, name, bench)
    try:
        yield
    finally:
        for tuner, name, value in saved:
            if value is _ABSENT:
                tuner.__dict__.pop(name, None)
            else:
                setattr(tuner, name, value)


_ABSENT = object()


def run_calls(version: Any, step: Derived, steps: Any) -> None:
    """In the variant process: each derived call of ``step`` on inputs in canary-padded
    buffers; one frame per call with what it returned and the whole buffers after it (or
    the error it raised: the judge decides what that means)."""
    from .capture import install
    from .runner import synchronize

    install()
    with one_run_autotuning(version.module, synchronize):
        _run_calls(version, step, steps)


def _run_calls(version: Any, step: Derived, steps: Any) -> None:
    import time

    from .gpu_lock import gpu_lock
    from .runner import seed_everything, synchronize

    which = step.which
    for i, call in enumerate(step.calls):
        steps.await_judge()
        t0 = time.perf_counter()
        try:
            fn = getattr(version.module, call["fn"])
            seed_everything(int(call["seed"]))
            first = None
            # every repetition's inputs made first: inside, torch's factories make padded buffers
            calls = [build(call, which, r) for r in range(int(call.get("repeats") or 1))]
            with gpu_lock(exclusive=False), padded_allocations(which, PAD_ELEMENTS, call.get("fresh_fill")) as made:
                for r, (args, kwargs, placed) in enumerate(calls):
                    out = fn(*args, **kwargs)
                    if r == 0:
                        first = (out, placed)
                synchronize()
        except Exception as e:  # noqa: BLE001 - the judge decides what a failure means here
            steps.check_runtime()
            steps.send(DerivedOutputs(i, which, error=f"{type(e).__name__}: {e}"[:2000],
                                      seconds=round(time.perf_counter() - t0, 4)))
            continue
        steps.check_runtime()
        meta = DerivedOutputs(i, which, allocs=[[before, n] for _, before, n in made],
                              seconds=round(time.perf_counter() - t0, 4))
        tree: dict[str, Any] = {"returned": out, "buffers": [p.buffer for p in placed],
                                "allocs": [buffer for buffer, _, _ in made]}
        if call.get("repeats") and first is not None:  # the first call's result, as it is now
            tree["first"] = {"returned": first[0], "buffers": [p.buffer for p in first[1]]}
        steps.send(meta, tree)
