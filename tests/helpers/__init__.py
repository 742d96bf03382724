"""Shared test helpers (kernel sources, evaluator plumbing). Test modules import from
here, never from each other."""
