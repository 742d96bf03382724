"""Variant generators (DESIGN section 5): who writes a variant.

``make_generator("rules", seed=0, ...)`` is the offline default; ``make_generator(
"openai", model=..., base_url=...)`` asks an OpenAI-compatible endpoint. See
``base.py`` for the protocol and how a session records a Generation.
"""

from __future__ import annotations

from typing import Any

from .base import GenContext, Generation, GenerationOutcome, Generator

GENERATOR_NAMES: tuple[str, ...] = ("rules", "openai")


def make_generator(name: str, **options: Any) -> Generator:
    """Build a generator by name. Options a generator does not know are ignored, so a
    caller can pass one settings dict to either."""
    if name == "rules":  # libcst and triton (a second or more): imported only when used
        from .rules import RulesGenerator

        return RulesGenerator(**options)
    if name == "openai":
        from .openai_gen import OpenAIGenerator  # needs the openai package

        return OpenAIGenerator(**options)
    raise ValueError(f"unknown generator {name!r}; known: {', '.join(GENERATOR_NAMES)}")


__all__ = ["GENERATOR_NAMES", "GenContext", "Generation", "GenerationOutcome", "Generator", "make_generator"]
