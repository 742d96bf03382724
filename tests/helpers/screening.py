"""Variants of the add_scale example for the screen's tests: code put into its wrapper,
definitions put above it."""
from __future__ import annotations

import textwrap
from typing import Optional

from helpers.paths import example_source
from kernelband.screen import policy_violations, screen_variant

ORIG = example_source("add_scale.py")
BODY = "    out = torch.empty_like(x)\n"


def in_wrapper(code: str, source: str = ORIG) -> str:
    """``source`` with ``code`` at the top of the axpy wrapper."""
    assert BODY in source
    return source.replace(BODY, textwrap.indent(textwrap.dedent(code), "    ") + BODY, 1)


def with_definitions(code: str, source: str = ORIG) -> str:
    """``source`` with top-level ``code`` (functions, classes) above the wrapper."""
    return source.replace("def axpy(", textwrap.dedent(code) + "\n\ndef axpy(", 1)


def screen(variant: str, original: str = ORIG) -> Optional[str]:
    return screen_variant(original, variant, "axpy_kernel", "harness_axpy")


def every_reason(variant: str, original: str = ORIG) -> list[str]:
    """The screen's reason and every finding of the grammar and the device rule."""
    return [screen(variant, original) or "", *policy_violations(original, variant)]


# a plain helper of the module that takes a container of devices and returns one of them
FIRST_DEVICE_HELPER = "def _first(devices):\n    return devices[0]\n"
