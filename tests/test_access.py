"""The one static model of a Triton module: detect.TritonNames (import aliases) and
access.analyze_kernel (which pointers a kernel loads and stores), which the rules
generator, the traffic accounting and detection share."""
from __future__ import annotations

import ast

from kernelband.access import analyze_kernel
from kernelband.detect import TritonNames
from kernelband.generators.rewrites import Rewrites

HEAD = "import torch\nimport triton\nimport triton.language as tl\n\n\n"


def kernel(body: str, params: str = "x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr") -> str:
    return HEAD + f"@triton.jit\ndef k({params}):\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())


OFFS = "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)"


def test_a_pointer_on_the_right_of_the_address_is_still_its_base():
    """The rules generator once followed only the leftmost term: `offs + x_ptr` was missed,
    and an in-place kernel could be wrapped in @autotune (which replays it)."""
    src = kernel(f"{OFFS}\nx = tl.load(x_ptr + offs)\ntl.store(offs + x_ptr, x * 2)")
    assert analyze_kernel(src, "k").in_place()
    assert Rewrites(src, "k").in_place_or_atomic()


def test_offsets_strides_and_block_sizes_are_not_pointers():
    src = kernel(f"{OFFS}\nx = tl.load(x_ptr + offs * stride + BLOCK)\ntl.store(out_ptr + offs * stride + BLOCK, x)")
    acc = analyze_kernel(src, "k")
    assert not acc.in_place()
    assert acc.params["x_ptr"].base_loads and acc.params["out_ptr"].base_stores
    assert not acc.params["stride"].base_loads and not acc.params["BLOCK"].base_stores
    assert acc.params["stride"].loads and acc.params["stride"].stores  # the traffic view: it flows into both
    assert not Rewrites(src, "k").in_place_or_atomic()


def test_through_locals_block_pointers_and_helpers():
    src = HEAD + (
        "@triton.jit\ndef _store(p, v):\n    tl.store(p, v)\n\n\n"
        "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    base = x_ptr + tl.program_id(0) * BLOCK\n"
        "    bp = tl.make_block_ptr(base=base, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))\n"
        "    v = tl.load(bp)\n"
        "    _store(base + tl.arange(0, BLOCK), v + 1)\n")
    acc = analyze_kernel(src, "k")
    assert acc.params["x_ptr"].base_loads and acc.params["x_ptr"].base_stores and acc.in_place()


def test_atomics_are_in_place_even_on_a_non_parameter():
    src = kernel(f"{OFFS}\ntl.atomic_add(out_ptr + offs, 1)")
    assert analyze_kernel(src, "k").atomics == 1 and analyze_kernel(src, "k").in_place()


def test_triton_names_one_resolver():
    tree = ast.parse("import triton as tr\nfrom triton import language as lang\nfrom triton.language import load as ld\n")
    names = TritonNames.of(tree)
    assert names.language_spellings() == {"triton.language", "tr.language", "lang"}
    assert {"tr", "lang", "ld", "triton", "tl"} <= names.aliases()
    assert names.is_jit(ast.parse("tr.jit", mode="eval").body)
    bare = TritonNames.of(ast.parse("x = 1\n"))
    # defaults: triton/tl are understood, but never offered as a spelling for new code
    assert bare.language_spellings() == {"triton.language"} and {"triton", "tl"} <= bare.aliases()
