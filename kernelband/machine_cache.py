"""Facts cached per machine, outside any workspace (also with ``--no-store``): the measured
peaks of each GPU, keyed by what changes them (the card itself, the driver, Triton).

Where: ``$KERNELBAND_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernelband``, else
``~/.cache/kernelband``. A cache that cannot be read or written is ignored (the facts are
measured again), never an error.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

from .json_types import JsonObject
from .profile.schema import DeviceFacts, decoded_facts


def cache_dir() -> Path:
    explicit = os.environ.get("KERNELBAND_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelband"


PERSISTENT_ENV = "KERNELBAND_PERSISTENT_CACHE"  # "0": compiled kernels are not kept between sessions


def trusted_triton_cache(name: str) -> Optional[Path]:
    """This machine's Triton cache folder ``name``, per Triton version, for kernels that only
    trusted processes compile: the judge's own (``"judge"``) and an original module's (its
    source hash). None when ``KERNELBAND_PERSISTENT_CACHE=0``. No variant process can write
    it: their sandbox hides the home directory and leaves only the job's own folder
    writable (tests/test_sandbox.py tries)."""
    if os.environ.get(PERSISTENT_ENV, "1") == "0":
        return None
    import triton

    return cache_dir() / "triton" / triton.__version__ / name


def bytecode_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a trusted process (the judge, its fork server) where the environment
    writes no compiled bytecode (PYTHONDONTWRITEBYTECODE, as on images whose packages were
    installed without .pyc files): Python keeps it here instead, under ``pycache/``, never
    beside anyone's sources. Without it each of those processes compiles torch from source
    at every start (3-4.5 s each on the GPU machine, against about 1 s). Variant processes
    never write it (the fork server's children turn bytecode writing off)."""
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        env.pop("PYTHONDONTWRITEBYTECODE")
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir() / "pycache")
    return env


def _facts_file() -> Path:
    return cache_dir() / "device_facts.json"


def device_key(info: Any) -> str:
    """What the peaks depend on: the card (name and UUID), its driver and Triton's version."""
    return "|".join(
        str(getattr(info, name, "") or "") for name in ("device_name", "gpu_uuid", "driver", "triton_version")
    )


def _read() -> JsonObject:
    try:
        data = json.loads(_facts_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def get_device_facts(key: str) -> Optional[DeviceFacts]:
    return decoded_facts(_read().get(key))


def put_device_facts(key: str, facts: DeviceFacts) -> None:
    data = _read()
    data[key] = facts.to_dict()
    path = _facts_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(fh.name, path)  # atomic: another session may read it meanwhile
    except OSError:
        pass
