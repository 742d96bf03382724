"""Tiered profiling and bottleneck diagnosis (DESIGN section 7).

    tier 1  static.py    compile metadata (registers, spills, shared memory, warps,
                         stages) + occupancy.py from the device's limits
    tier 2  traffic.py   bytes moved and FLOPs, against device.py's measured peaks
    tier 3  ncu.py       Nsight Compute counters -> the 9-dim vector phi
    diagnose.py          numbers -> bottleneck class, evidence, strategies
    assemble.py          tiers -> phi, clustering vectors, saturation, diagnosis
    collect.py           in-worker entry point ``collect_profile``; ``add_counters``
    render.py            terminal table and ``profile_card_markdown`` (hover)

Importing this package does not import torch or triton (the language server uses
``render``); the worker-only parts import them lazily.
"""
from .assemble import PHI_NAMES, attach_counters, finalize
from .collect import add_counters, collect_profile
from .diagnose import Diagnosis, Numbers, diagnose, diagnose_profile
from .render import profile_card_markdown, render_table

__all__ = [
    "PHI_NAMES", "attach_counters", "finalize", "add_counters", "collect_profile", "Diagnosis", "Numbers",
    "diagnose", "diagnose_profile", "profile_card_markdown", "render_table",
]
