"""Settings of section ``kernelband``: from ``workspace/configuration`` and
``initializationOptions``. The engine's settings (budget, generator, search, strategies,
minimum speedup, device...) take their names, defaults, types and ranges from
``kernelband.options`` (one owner for the CLI, this server and package.json); the
server's own (backgroundOnSave, harness, debounceMs, pythonPath) are declared here.

Accepts the nested form VS Code sends (``{"budget": {"evaluations": 16}}``), the flat
dotted form (``{"budget.evaluations": 16}``) and either wrapped in ``{"kernelband": ...}``.
A value of the wrong type is ignored with a note (the default stays).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kernelband import options as O
from kernelband.json_types import JsonObject

SECTION = "kernelband"


@dataclass(frozen=True)
class Settings:
    # the engine's options (kernelband/options.py); 0 in a budget means no limit, as on the CLI
    budget_evaluations: int = O.default("budget")
    budget_seconds: float = O.default("seconds")
    budget_tokens: int = O.default("tokens")
    budget_dollars: float = O.default("dollars")
    generator: str = O.default("generator")
    model: str = O.default("model")
    base_url: str = O.default("base_url")
    search: str = O.default("search")
    strategies: tuple[str, ...] = tuple(O.default("strategies"))
    min_speedup: float = O.default("min_speedup")  # one noise floor: the engine's (kernelband/verdict.py)
    device: str = O.default("device")
    # the server's own
    background_on_save: bool = False
    python_path: str = ""  # used by the client to start the server; informational here
    harness: dict[str, str] = field(default_factory=dict)
    # server-only knobs (not in the client's contributes; harmless when absent)
    debounce_ms: int = 250
    # where an optimize job's workers run (--executor, --ray-address, --workers): a laptop
    # without a GPU can send jobs to a Ray cluster
    executor: str = O.default("executor")
    ray_address: str = O.default("ray_address")
    workers: int = O.default("workers")  # 0: the engine's default (one per GPU; 1 on the CPU)

    def to_dict(self) -> JsonObject:
        """The settings by the names the editor uses, nested as it nests them
        (``{"budget": {"evaluations": 16}}``): one entry per key ``parse_settings`` reads."""
        out: JsonObject = {}
        for key, (fname, _) in _KEYS.items():
            *parents, leaf = key.split(".")
            node = out
            for p in parents:
                child = node.setdefault(p, {})
                assert isinstance(child, dict)  # a parent key is never a leaf
                node = child
            v = getattr(self, fname)
            node[leaf] = list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, dict) else v
        return out


def describe_changes(old: Settings, new: Settings) -> str:
    """'budget.evaluations 16 → 4, minSpeedup 1.03 → 1.05': the settings that changed, as
    the user names them (never a secret: the API key is not a setting)."""
    a, b = _flatten(old.to_dict()), _flatten(new.to_dict())
    from kernelband.redact import redact

    changed = [f"{k} {_show(a.get(k))} → {_show(v)}" for k, v in b.items() if a.get(k) != v]
    return redact(", ".join(changed)) or "no change"


def _show(v: object) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(str, v)) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {x}" for k, x in v.items()) + "}"
    return str(v)


# setting key (dotted, as in package.json) -> (field, type check/convert)
def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise TypeError("a non-negative integer")
    return int(v)


def _str(v: object) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError("a string")
    return v


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError("true or false")
    return v


def _option(opt: "O.Option") -> Callable[[object], object]:
    """The option's own check (type, range, choices), as this module's converters report."""

    def conv(v: object) -> object:
        if opt.type is str and v is None:
            return ""
        try:
            out = opt.check(v, label="")
        except O.OptionError as e:
            raise TypeError(str(e).split(": ", 1)[-1].removeprefix("expected ")) from None
        return tuple(out) if isinstance(out, list) else out

    return conv


def _harness(v: object) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(a, str) and isinstance(b, str) for a, b in v.items()):
        raise TypeError("an object {kernel: function}")
    return dict(v)


# the engine's settings, from kernelband/options.py; then the server's own
_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    key: (opt.field, _option(opt)) for key, opt in O.BY_SETTING.items()
}
_KEYS.update(
    {
        "backgroundOnSave": ("background_on_save", _bool),
        "pythonPath": ("python_path", _str),
        "harness": ("harness", _harness),
        "debounceMs": ("debounce_ms", _int),
    }
)

# secrets that may arrive in initializationOptions; never stored in Settings or logged
SECRET_KEYS = ("apiKey", "openaiApiKey")


def _flatten(obj: object, prefix: str = "") -> dict[str, object]:
    """The dotted form ``{"budget.evaluations": 16}`` of nested settings (a key of ours
    whose value is an object, the harness map, stays one leaf)."""
    out: dict[str, object] = {}
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


def _unwrap(raw: object) -> object:
    """The settings inside ``{"kernelband": {...}}`` (keys beside the section are ignored)."""
    return raw[SECTION] if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict) else raw


def parse_settings(raw: object, base: Optional[Settings] = None) -> tuple[Settings, list[str]]:
    """Overlay raw settings on base (defaults when None). Returns (settings, problems)."""
    base = base or Settings()
    raw = _unwrap(raw)
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"settings: expected an object, got {type(raw).__name__}"]
    changes: dict[str, Any] = {}  # field -> its converter's value (of the field's type: Any for replace)
    problems: list[str] = []
    for key, value in _flatten(raw).items():
        spec = _KEYS.get(key)
        if spec is None or value is None:
            continue  # unknown keys are not ours to judge (client-only settings, the secrets)
        fname, conv = spec
        try:
            changes[fname] = conv(value)
        except TypeError as e:
            problems.append(f"setting kernelband.{key}: expected {e}; keeping {getattr(base, fname)!r}")
    return dataclasses.replace(base, **changes), problems


def secret_from(raw: object) -> Optional[str]:
    raw = _unwrap(raw)
    if isinstance(raw, dict):
        for k in SECRET_KEYS:
            v = raw.get(k)
            if isinstance(v, str) and v:
                return v
    return None


def engine_values(s: Settings) -> dict[str, O.Value]:
    """The settings as values of kernelband.options (by option name), for ``engine_args``."""
    return {
        opt.name: (list(v) if isinstance(v, tuple) else v)
        for opt in O.BY_SETTING.values()
        for v in [getattr(s, opt.field)]
    }


def engine_args(kind: str, s: Settings) -> list[str]:
    """The engine's flags for a job of this kind (optimize, profile): each setting that is
    not its default, 0 included (no limit). Both ship in one wheel, so the flags are the
    options module's, never probed from ``--help``."""
    return O.engine_args(kind, engine_values(s))
