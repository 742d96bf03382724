"""Tiered profiling and bottleneck diagnosis (DESIGN section 7): pure analysis.

    schema.py            the one typed Profile: tiers, derived fields, to_dict / from_dict
    tier 1  static.py    compile metadata (registers, spills, shared memory, warps,
                         stages) + occupancy.py from the device's limits
    tier 2  traffic.py   bytes moved and FLOPs, against device.py's measured peaks
    tier 3  ncu.py       Nsight Compute's command and CSV -> the 9-dim vector phi
    diagnose.py          numbers -> bottleneck class, evidence, strategies
    assemble.py          tiers -> phi, clustering vectors (FEATURE_SETS), saturation, diagnosis
    render.py            terminal table and ``profile_card_markdown`` (hover)

Collection, which runs module code or touches the GPU, lives under the worker:
``kernelband.worker.profiling`` (``collect_profile``, in the variant process),
``worker.traffic_replay`` (write detection by replay), ``worker.device_facts``
(measured peaks), ``worker.counters`` (``add_counters``: ncu around
``worker.ncu_target``). Nothing in this package imports the worker, and importing it
does not import torch or triton (the language server uses ``render``).
"""

from .assemble import FEATURE_SETS, PHI_NAMES, attach_counters, derive, runtime_vector
from .diagnose import Numbers, diagnose, diagnose_profile
from .render import profile_card_markdown, render_table
from .schema import Diagnosis, Profile, ProfileError

__all__ = [
    "FEATURE_SETS",
    "PHI_NAMES",
    "attach_counters",
    "derive",
    "runtime_vector",
    "Diagnosis",
    "Numbers",
    "diagnose",
    "diagnose_profile",
    "profile_card_markdown",
    "render_table",
    "Profile",
    "ProfileError",
]
