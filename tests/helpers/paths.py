"""Where things are: the repository and its examples."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def example_source(name: str) -> str:
    return (EXAMPLES / name).read_text(encoding="utf-8")
