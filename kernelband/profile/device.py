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


FACTS_VERSION = 1  # bump when the measurement changes, so old cached facts are re-measured


def interpreter_facts() -> dict[str, Any]:
    """Placeholder facts for the CPU interpreter: nothing about a GPU is known."""
    return {
        "name": f"CPU ({platform.machine()}, Triton interpreter)",
        "interpreted": True,
        "placeholder": True,
        "note": "placeholder: no GPU under the Triton interpreter; peaks and limits are unknown",
        "copy_gbs": None,
        "matmul_tflops": {"bf16": None, "fp32": None, "tf32": None},
        "sm_count": None,
        "facts_version": FACTS_VERSION,
    }


def has_peaks(facts: Optional[dict[str, Any]]) -> bool:
    """Facts of a real GPU with at least a measured copy bandwidth."""
    return bool(facts and not facts.get("placeholder") and facts.get("copy_gbs"))


def valid_cached(facts: Optional[dict[str, Any]]) -> bool:
    return bool(facts and facts.get("facts_version") == FACTS_VERSION and not facts.get("placeholder"))


def cached_or_measure(store: Any, gpu: str, triton_version: str, measure: Callable[[], Optional[dict[str, Any]]],
                      refresh: bool = False) -> dict[str, Any]:
    """Facts for (gpu, triton_version) from the store, or measured once and stored.
    Placeholders (interpreter) are returned but never stored."""
    if not refresh and store is not None:
        cached = store.get_device_facts(gpu, triton_version)
        if valid_cached(cached):
            return cached
    facts = measure() or {}
    if store is not None and valid_cached(facts):
        store.put_device_facts(gpu, triton_version, facts)
    return facts
