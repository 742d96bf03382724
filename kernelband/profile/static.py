"""Tier 1, static: what the compiler decided for each launched kernel.

Triton 3.x returns (and caches) a ``CompiledKernel`` per specialization. Across
3.2 .. 3.9 it has ``n_regs`` / ``n_spills`` (set once the binary is loaded, i.e.
after the first launch; 3.3+ also ``n_max_threads``) and ``metadata``, a namedtuple
(a dict in older releases) with ``shared``, ``num_warps``, ``num_stages``,
``num_ctas`` and ``name``; the warp size is ``metadata.warp_size`` (3.4+) or
``metadata.target.warp_size``. The kernel is the launch's return value where Triton
returns one, else it is found in the JIT function's cache: ``device_caches[dev][0]``
(3.3+) or ``cache[dev]`` (3.2). Everything is read defensively.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from .occupancy import limits_from_facts, occupancy
from .schema import DeviceFacts

INTERPRETER_REASON = "interpreter: no compiled binary"


def _meta(md: Any, key: str) -> Any:
    if md is None:
        return None
    if isinstance(md, dict):
        return md.get(key)
    return getattr(md, key, None)


def is_compiled_kernel(obj: Any) -> bool:
    return obj is not None and _meta(getattr(obj, "metadata", None), "num_warps") is not None


def jit_function(obj: Any) -> Any:
    """The JITFunction under an Autotuner / Heuristics chain (objects with arg_names
    and a ``fn`` that is itself a kernel object)."""
    seen = 0
    while seen < 8 and hasattr(obj, "fn") and hasattr(obj.fn, "arg_names"):
        obj = obj.fn
        seen += 1
    return obj


def _cached_kernels(jf: Any) -> list[Any]:
    out: list[Any] = []
    caches = getattr(jf, "device_caches", None)
    if isinstance(caches, dict):  # 3.3+: device -> (kernel_cache, key_cache, target, backend, binder)
        for entry in caches.values():
            kc = entry[0] if isinstance(entry, (tuple, list)) and entry else None
            if isinstance(kc, dict):
                out.extend(kc.values())
    cache = getattr(jf, "cache", None)
    if isinstance(cache, dict):  # 3.2: device -> {key: kernel}
        for per_dev in cache.values():
            if isinstance(per_dev, dict):
                out.extend(per_dev.values())
    return [k for k in out if is_compiled_kernel(k)]


def find_compiled(launch: Any) -> tuple[Optional[Any], str]:
    """(CompiledKernel or None, where it came from)."""
    if is_compiled_kernel(getattr(launch, "result", None)):
        return launch.result, "launch result"
    kernels = _cached_kernels(jit_function(launch.obj))
    if kernels:
        want = getattr(launch, "name", None)
        named = [k for k in kernels if _meta(k.metadata, "name") == want] or kernels
        return named[-1], "JIT cache (most recent specialization)"
    return None, ""


def kernel_metadata(ck: Any) -> dict[str, Any]:
    """Registers, spills, shared memory, warps, stages of a CompiledKernel."""
    md = getattr(ck, "metadata", None)
    n_regs = getattr(ck, "n_regs", None)
    if n_regs is None and hasattr(ck, "_init_handles"):
        try:  # the binary loads lazily; it has run, so this is cheap and safe
            ck._init_handles()
            n_regs = getattr(ck, "n_regs", None)
        except Exception:  # noqa: BLE001
            pass
    target = _meta(md, "target")
    warp_size = _meta(md, "warp_size") or _meta(target, "warp_size") or 32
    num_warps = _meta(md, "num_warps")
    return {
        "kernel_name": _meta(md, "name"),
        "n_regs": n_regs,
        "n_spills": getattr(ck, "n_spills", None),
        "shared_bytes": _meta(md, "shared"),
        "num_warps": num_warps,
        "num_stages": _meta(md, "num_stages"),
        "num_ctas": _meta(md, "num_ctas"),
        "warp_size": warp_size,
        "threads_per_program": num_warps * warp_size if num_warps else None,
        "max_threads": getattr(ck, "n_max_threads", None),
        "hash": getattr(ck, "hash", None),
    }


def dot_shapes_from_ir(ck: Any) -> list[str]:
    """The tt.dot result types in the kernel's TTIR (per-program tile shapes), if present."""
    asm = getattr(ck, "asm", None)
    try:
        ttir = asm.get("ttir") if asm is not None else None
    except Exception:  # noqa: BLE001
        ttir = None
    if not isinstance(ttir, str):
        return []
    return re.findall(r"tt\.dot\b[^\n]*->\s*tensor<([0-9x]+x\w+)>", ttir)


def static_profile(launch: Any, facts: DeviceFacts, programs: Optional[int]) -> tuple[Optional[dict[str, Any]], str]:
    """Tier 1 for one launch: (dict, "") or (None, why not)."""
    ck, where = find_compiled(launch)
    if ck is None:
        return None, "no compiled kernel found for the launch (neither returned by it nor in the JIT cache)"
    info = kernel_metadata(ck)
    info["source"] = where
    dots = dot_shapes_from_ir(ck)
    if dots:
        info["dot_tiles"] = dots
    if facts.known and not facts.placeholder and info["num_warps"]:
        limits = limits_from_facts(facts)
        limits["warp_size"] = info["warp_size"]
        info["occupancy"] = occupancy(
            info["num_warps"], info["n_regs"], info["shared_bytes"], limits, programs=programs, sm_count=facts.sm_count
        )
    else:
        info["occupancy"] = None
    return info, ""


def grid_programs(grid: list[int]) -> Optional[int]:
    return math.prod(grid) if grid else None
