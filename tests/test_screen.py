"""The static screen of variants (DESIGN section 6, first bullet)."""
from __future__ import annotations

import pytest

from kernelband.screen import screen_variant
from tests.conftest import example_source

ORIG = example_source("add_scale.py")
K, H = "axpy_kernel", "harness_axpy"


def screen(variant: str, original: str = ORIG, harness: str | None = H) -> str | None:
    return screen_variant(original, variant, K, harness)


def test_original_and_legit_variant_pass():
    assert screen(ORIG) is None
    legit = ORIG.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=1024, num_warps=8)").replace(
        "mask = offsets < n_elements", "offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)\n    mask = offsets < n_elements"
    )
    assert legit != ORIG
    assert screen(legit) is None


def test_local_names_that_look_like_modules_pass():
    v = ORIG.replace("    out = torch.empty_like(x)\n", "    code, io = 1, 2\n    out = torch.empty_like(x)\n")
    assert screen(v) is None


def test_legit_variant_with_helper_and_allowed_imports_passes():
    v = ORIG.replace("import torch\n", "import math\nimport torch\nfrom triton.language.extra import libdevice\n")
    v = v.replace("\n\n@triton.jit", "\n\nCONFIGS = [1, 2]\n\n\n@triton.jit\ndef _twice(x):\n    return x * 2\n\n\n@triton.jit", 1)
    assert screen(v) is None


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda s: s.replace("import torch\n", "import os\nimport torch\n"), "adds import os"),
        (lambda s: s.replace("import torch\n", "import subprocess as sp\nimport torch\n"), "adds import subprocess as sp"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    open('/tmp/x', 'w').write('hi')\n    out = torch.empty_like(x)\n"), "uses open"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    eval('1')\n    out = torch.empty_like(x)\n"), "uses eval"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    __import__('os').system('true')\n    out = torch.empty_like(x)\n"), "__import__"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    getattr(torch, 'o' + 's')\n    out = torch.empty_like(x)\n"), "getattr"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    (1).__class__.__base__.__subclasses__()\n    out = torch.empty_like(x)\n"), "attribute __"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    torch.save(x, 'x.pt')\n    out = torch.empty_like(x)\n"), "torch.save"),
        (lambda s: s.replace("    out = torch.empty_like(x)\n", "    x.numpy().tofile('x.bin')\n    out = torch.empty_like(x)\n"), "tofile"),
        (lambda s: s.replace("import torch\n", "from socket import socket\nimport torch\n"), "adds from socket import socket"),
    ],
)
def test_file_process_network_and_imports_rejected(edit, expected):
    v = edit(ORIG)
    assert v != ORIG
    reason = screen(v)
    assert reason is not None and expected in reason, reason
    assert "\n" not in reason


def test_syntax_error_rejected():
    reason = screen(ORIG.replace("def axpy(", "def axpy(("))
    assert reason and reason.startswith("variant does not parse")


def test_renamed_kernel_rejected():
    v = ORIG.replace("axpy_kernel", "axpy_kernel_v2")
    assert "no longer defined" in screen(v)
    # renamed kernel while the old one is still defined but no longer launched
    v2 = ORIG.replace("axpy_kernel[grid]", "axpy_kernel_v2[grid]").replace(
        "\n\ndef axpy(", "\n\n@triton.jit\ndef axpy_kernel_v2(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):\n    pass\n\n\ndef axpy("
    )
    assert "no longer launched" in screen(v2)


def test_kernel_without_jit_rejected():
    assert "no longer a Triton kernel" in screen(ORIG.replace("@triton.jit\n", ""))


def test_changed_wrapper_signature_rejected():
    reason = screen(ORIG.replace("def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor)", "def axpy(alpha, x, y, block=128)"))
    assert reason and "signature of wrapper axpy changed" in reason
    assert "removed" in screen(ORIG.replace("def axpy(", "def axpy2(").replace("return axpy(", "return axpy2("))


def test_modified_harness_rejected():
    v = ORIG.replace("else 50_003", "else 16")
    assert "harness harness_axpy was modified" in screen(v)
    # the same edit is not the screen's business when the harness lives elsewhere
    assert screen(v, harness=None) is None


def test_harness_redefined_or_module_state_changed_rejected():
    twice = ORIG + "\n\ndef harness_axpy():\n    return None\n"
    assert "more than once" in screen(twice)
    assert "DEVICE" in screen(ORIG.replace('DEVICE = "cuda" if', 'DEVICE = "cpu" if'))
    rebind = ORIG.replace("\n\n@triton.jit", '\n\nDEVICE = "cpu"\n\n\n@triton.jit', 1)
    assert "rebinds DEVICE" in screen(rebind)


def test_imports_the_original_already_has_are_kept_not_extended():
    orig = ORIG.replace("import torch\n", "import os\nimport torch\n").replace(
        'DEVICE = "cuda"', 'DEBUG = os.environ.get("KB_DEBUG")\nDEVICE = "cuda"'
    )
    assert screen(orig, original=orig) is None
    more = orig.replace("    out = torch.empty_like(x)\n", "    os.system('true')\n    out = torch.empty_like(x)\n")
    assert "uses os" in screen(more, original=orig)


def test_never_raises_on_garbage():
    assert screen_variant("", "", K, None)
    assert screen_variant("def (", ORIG, K, H)  # broken original: a reason, not an exception
    assert screen_variant(ORIG, "\x00", K, H)
