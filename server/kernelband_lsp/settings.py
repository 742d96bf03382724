"""Settings of section ``kernelband``: from ``workspace/configuration`` and
``initializationOptions``; defaults as in docs/ARCHITECTURE.md.

Accepts the nested form VS Code sends (``{"budget": {"evaluations": 16}}``), the flat
dotted form (``{"budget.evaluations": 16}``) and either wrapped in ``{"kernelband": ...}``.
A value of the wrong type is ignored with a note (the default stays).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from kernelband.verdict import DEFAULT_MIN_SPEEDUP

SECTION = "kernelband"
GENERATORS = ("rules", "openai")
SEARCHES = ("kernelband", "kernelband-v1", "kernelband-v2", "random", "ucb1", "greedy", "exhaustive")
EXECUTORS = ("local", "ray")  # where optimize jobs evaluate candidates (issue 15)


@dataclass(frozen=True)
class Settings:
    budget_evaluations: int = 16
    budget_seconds: float = 0.0
    budget_tokens: int = 0
    budget_dollars: float = 0.0
    generator: str = "rules"
    model: str = ""
    base_url: str = ""
    search: str = "kernelband"
    strategies: tuple[str, ...] = ()
    background_on_save: bool = False
    min_speedup: float = DEFAULT_MIN_SPEEDUP  # one noise floor: the engine's (kernelband/verdict.py)
    device: str = "auto"
    python_path: str = ""  # used by the client to start the server; informational here
    harness: dict[str, str] = field(default_factory=dict)
    # server-only knobs (not in the client's contributes; harmless when absent)
    debounce_ms: int = 250
    # --- executors (issue 15): where an optimize job's workers run; passed as --executor,
    # --ray-address and --workers (a laptop without a GPU can send jobs to a Ray cluster)
    executor: str = "local"
    ray_address: str = ""
    workers: int = 0  # 0: the engine's default (one per GPU; 1 on the CPU)
    # --- end executors

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": {
                "evaluations": self.budget_evaluations,
                "seconds": self.budget_seconds,
                "tokens": self.budget_tokens,
                "dollars": self.budget_dollars,
            },
            "generator": self.generator,
            "model": self.model,
            "baseUrl": self.base_url,
            "search": self.search,
            "strategies": list(self.strategies),
            "backgroundOnSave": self.background_on_save,
            "minSpeedup": self.min_speedup,
            "device": self.device,
            "pythonPath": self.python_path,
            "harness": dict(self.harness),
            "debounceMs": self.debounce_ms,
            # --- executors (issue 15)
            "executor": self.executor,
            "rayAddress": self.ray_address,
            "workers": self.workers,
        }


# setting key (dotted, as in package.json) -> (field, type check/convert)
def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise TypeError("a non-negative integer")
    return int(v)


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise TypeError("a non-negative number")
    return float(v)


def _str(v: Any) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError("a string")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError("true or false")
    return v


def _choice(options: tuple[str, ...]):
    def conv(v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise TypeError("one of " + ", ".join(options))
        return v

    return conv


def _strategies(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        v = [s.strip() for s in v.split(",") if s.strip()]
    if not isinstance(v, (list, tuple)) or not all(isinstance(s, str) for s in v):
        raise TypeError("a list of strategy names")
    return tuple(v)


def _harness(v: Any) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(a, str) and isinstance(b, str) for a, b in v.items()):
        raise TypeError("an object {kernel: function}")
    return dict(v)


def _min_speedup(v: Any) -> float:
    f = _float(v)
    if f < 1.0:
        raise TypeError("a number >= 1.0")
    return f


_KEYS: dict[str, tuple[str, Any]] = {
    "budget.evaluations": ("budget_evaluations", _int),
    "budget.seconds": ("budget_seconds", _float),
    "budget.tokens": ("budget_tokens", _int),
    "budget.dollars": ("budget_dollars", _float),
    "generator": ("generator", _choice(GENERATORS)),
    "model": ("model", _str),
    "baseUrl": ("base_url", _str),
    "search": ("search", _choice(SEARCHES)),
    "strategies": ("strategies", _strategies),
    "backgroundOnSave": ("background_on_save", _bool),
    "minSpeedup": ("min_speedup", _min_speedup),
    "device": ("device", _str),
    "pythonPath": ("python_path", _str),
    "harness": ("harness", _harness),
    "debounceMs": ("debounce_ms", _int),
    # --- executors (issue 15)
    "executor": ("executor", _choice(EXECUTORS)),
    "rayAddress": ("ray_address", _str),
    "workers": ("workers", _int),
}

# secrets that may arrive in initializationOptions; never stored in Settings or logged
SECRET_KEYS = ("apiKey", "openaiApiKey")


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if key in _KEYS:  # a leaf we know (harness is a dict leaf)
            out[key] = v
        elif isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _unwrap(raw: Any) -> Any:
    if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict):
        inner = dict(raw[SECTION])
        # keys beside the section (rare) are ignored
        return inner
    return raw


def parse_settings(raw: Any, base: Optional[Settings] = None) -> tuple[Settings, list[str]]:
    """Overlay raw settings on base (defaults when None). Returns (settings, problems)."""
    base = base or Settings()
    problems: list[str] = []
    raw = _unwrap(raw)
    if raw is None:
        return base, problems
    if not isinstance(raw, dict):
        return base, [f"settings: expected an object, got {type(raw).__name__}"]
    flat = _flatten(raw)
    changes: dict[str, Any] = {}
    for key, value in flat.items():
        if key in SECRET_KEYS:
            continue
        spec = _KEYS.get(key)
        if spec is None:
            continue  # unknown keys are not ours to judge (client-only settings...)
        if value is None:
            continue
        fname, conv = spec
        try:
            changes[fname] = conv(value)
        except TypeError as e:
            problems.append(f"setting kernelband.{key}: expected {e}; keeping {getattr(base, fname)!r}")
    return dataclasses.replace(base, **changes), problems


def secret_from(raw: Any) -> Optional[str]:
    raw = _unwrap(raw)
    if isinstance(raw, dict):
        for k in SECRET_KEYS:
            v = raw.get(k)
            if isinstance(v, str) and v:
                return v
    return None
