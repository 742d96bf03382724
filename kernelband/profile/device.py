"""Device facts: the limits and measured peaks a profile is judged against.

Measured once per (GPU, Triton version) inside the worker, which owns the GPU
(``kernelband.worker.device_facts``), and cached in the store by the session
(``cached_or_measure``). Peaks are measured, not
taken from a data sheet: a device-to-device copy for bandwidth (bytes read plus bytes
written over time), and dense bf16 / fp32 / tf32 matrix products for compute.

Under the Triton interpreter there is no GPU: ``interpreter_facts()`` is a clearly
labelled placeholder whose peaks are all None.
"""

from __future__ import annotations

import platform
from typing import Any, Callable, Optional

from .schema import DeviceFacts

FACTS_VERSION = 1  # bump when the measurement changes, so old cached facts are re-measured


def interpreter_facts() -> DeviceFacts:
    """Placeholder facts for the CPU interpreter: nothing about a GPU is known."""
    return DeviceFacts(
        name=f"CPU ({platform.machine()}, Triton interpreter)",
        interpreted=True,
        placeholder=True,
        note="placeholder: no GPU under the Triton interpreter; peaks and limits are unknown",
        matmul_tflops={"bf16": None, "fp32": None, "tf32": None},
        facts_version=FACTS_VERSION,
    )


def valid_cached(facts: Optional[DeviceFacts]) -> bool:
    return facts is not None and facts.facts_version == FACTS_VERSION and not facts.placeholder


def cached_or_measure(
    store: Any, gpu: str, triton_version: str, measure: Callable[[], DeviceFacts], refresh: bool = False
) -> DeviceFacts:
    """Facts for (gpu, triton_version) from the store, or measured once and stored.
    Placeholders (interpreter) are returned but never stored."""
    if not refresh and store is not None:
        cached = store.get_device_facts(gpu, triton_version)
        if valid_cached(cached):
            return cached
    facts = measure()
    if store is not None and valid_cached(facts):
        store.put_device_facts(gpu, triton_version, facts)
    return facts
