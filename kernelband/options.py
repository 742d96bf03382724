"""The one owner of every user-facing option: name, CLI flag, editor setting, type,
default, range or choices, and help.

The CLI's argparse arguments are built from here (``add_arguments``); the language
server's settings take their defaults, types and checks from here and turn settings into
the engine's flags with ``engine_args``; the VS Code ``package.json`` contributions are
checked against it by tests/test_options.py. Adding an option (say ``--executor``) is one
``Option(...)`` below, in the list of its subcommands.

Zero means "no limit" for every budget (evaluations, seconds, tokens, dollars) at every
layer; a session still needs one limit, and says so in one line when all are 0.

Pure: no torch, no triton (the language server imports it).
"""

from __future__ import annotations

import argparse
import builtins
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, TypeVar, Union

from .strategies import STRATEGY_NAMES
from .verdict import DEFAULT_MIN_SPEEDUP

_Number = TypeVar("_Number", int, float)
Value = Union[bool, int, float, str, list[str], None]  # an option's value, of its Option.type (None: unset)

# the names the engine knows; kernelband.generators / kernelband.search check against these
GENERATOR_NAMES: tuple[str, ...] = ("rules", "openai")
EXHAUSTIVE = "exhaustive"  # not a policy: the session evaluates the generator's whole space
POLICY_NAMES: tuple[str, ...] = ("kernelband", "kernelband-v1", "kernelband-v2", "random", "ucb1", "greedy")
SEARCH_NAMES: tuple[str, ...] = POLICY_NAMES + (EXHAUSTIVE,)
DEVICE_HELP = "auto | cuda | cuda:N | cpu (Triton interpreter)"
EXECUTOR_NAMES: tuple[str, ...] = ("local", "ray")

OPTIMIZE, CHECK, PROFILE = "optimize", "check", "profile"
JOB_COMMANDS = (CHECK, OPTIMIZE, PROFILE)

NO_LIMIT = "no limit"


class OptionError(ValueError):
    """A value outside an option's type, range or choices (one line, naming the option)."""


@dataclass(frozen=True)
class Option:
    name: str  # argparse dest and the option's id
    flag: str  # "--budget"
    type: type  # int, float, str, bool (a store_true flag) or list (comma-separated names)
    default: Value
    help: str
    setting: Optional[str] = None  # editor setting under `kernelband.` ("budget.evaluations"); None: CLI only
    choices: Optional[tuple[Union[str, int], ...]] = None  # allowed values (for list: allowed items)
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    positive: bool = False  # strictly above 0
    zero_means: Optional[str] = None  # what 0 stands for ("no limit")
    commands: tuple[str, ...] = (OPTIMIZE,)
    requires: Optional[tuple[str, str]] = None  # only passed by the editor when (option, value) holds
    default_note: str = ""  # why the default is what it is (help: "default: X, <note>")

    @property
    def field(self) -> str:
        """The server Settings field of the setting: "budget.evaluations" -> budget_evaluations,
        "baseUrl" -> base_url."""
        key = (self.setting or self.name).replace(".", "_")
        return "".join("_" + c.lower() if c.isupper() else c for c in key)

    def check(self, value: object, label: Optional[str] = None) -> Value:
        """The value converted to the option's type, or OptionError saying what is allowed."""
        label = label or self.flag
        if value is None:
            return None
        t = self.type
        if t is bool:
            if not isinstance(value, bool):
                raise OptionError(f"{label}: expected true or false")
            return value
        if t is list:
            items = [s.strip() for s in value.split(",")] if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)) or not all(isinstance(s, str) for s in items):
                raise OptionError(f"{label}: expected a list of names")
            items = [s for s in items if s]
            unknown = [s for s in items if self.choices and s not in self.choices]
            if unknown:
                raise OptionError(
                    f"{label}: unknown {self.name}: {', '.join(unknown)} "
                    f"(known: {', '.join(map(str, self.choices or ()))})"
                )
            return list(dict.fromkeys(items))
        if t is str:
            if not isinstance(value, str):
                raise OptionError(f"{label}: expected a string")
            if self.choices and value not in self.choices:
                raise OptionError(f"{label}: expected one of {', '.join(map(str, self.choices))}, not {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise OptionError(f"{label}: expected {self._range_text()}")
        if t is int:
            if value != int(value):
                raise OptionError(f"{label}: expected {self._range_text()}, not {value}")
            value = int(value)
        else:
            value = float(value)
        if (
            (self.positive and value <= 0)
            or (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
            or (self.choices and value not in self.choices)
        ):
            raise OptionError(f"{label}: expected {self._range_text()}, not {value}")
        return value

    def _range_text(self) -> str:
        kind = "an integer" if self.type is int else "a number"
        if self.choices:
            return f"one of {', '.join(str(c) for c in self.choices)}"
        if self.positive:
            return f"{kind} above 0"
        if self.minimum is not None and self.maximum is not None:
            return f"{kind} from {self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            return f"{kind} of at least {self.minimum:g}"
        return kind

    def help_text(self) -> str:
        """The help line: what it does, what 0 means, and the default."""
        text = self.help
        if self.zero_means:
            text += f"; 0 = {self.zero_means}"
        notes = []
        if self.minimum and not self.zero_means and not self.choices and not self.default_note:
            notes.append(f"at least {self.minimum:g}")
        if self.type is not bool and self.default not in (None, "", []):
            notes.append(f"default: {self.default}" + (f", {self.default_note}" if self.default_note else ""))
        if notes:
            text += f" ({'; '.join(notes)})"
        return text.replace("%", "%%")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.type is bool:
            parser.add_argument(
                self.flag, dest=self.name, action="store_true", default=bool(self.default), help=self.help_text()
            )
            return
        kw: dict[str, Any] = {"dest": self.name, "default": self.default, "help": self.help_text()}
        if self.type is list:
            kw["type"] = self._arg_type(str)
            kw["metavar"] = "NAMES"
        else:
            kw["type"] = self._arg_type(self.type)
            if self.choices:
                kw["choices"] = self.choices
        parser.add_argument(self.flag, **kw)

    def _arg_type(self, base: builtins.type) -> Any:  # builtins: ``type`` here is the field
        def parse(text: str) -> Any:
            try:
                value = base(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected {self._range_text() if base is not str else 'a string'}, not {text!r}"
                ) from None
            if base is str and self.type is not list:
                return value
            try:
                return self.check(value, label="value")
            except OptionError as e:
                raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None

        parse.__name__ = base.__name__
        return parse

    def to_cli(self, value: Value) -> list[str]:
        """[flag, value] (or [flag] for a true boolean)."""
        if self.type is bool:
            return [self.flag] if value else []
        if isinstance(value, list):  # the list type's
            return [self.flag, ",".join(value)]
        return [self.flag, str(value)]


# Seconds one LLM request may take (--llm-timeout; the openai generator's default). A kernel
# rewrite of up to 4096 tokens from a hosted model takes 10-60 s; slow local or reasoning
# models need it raised. A hanging endpoint costs two of these (one retry), then the search ends.
DEFAULT_LLM_TIMEOUT_S = 60.0

OPTIONS: tuple[Option, ...] = (
    # ---- what every job command shares (check, optimize, profile)
    Option("device", "--device", str, "auto", DEVICE_HELP, setting="device", commands=JOB_COMMANDS),
    Option(
        "seeds",
        "--seeds",
        int,
        3,
        "seeds for the correctness check, fresh inputs each",
        minimum=3,
        commands=JOB_COMMANDS,
    ),
    Option(
        "timeout",
        "--timeout",
        float,
        120.0,
        "seconds one harness run may take before it counts as hung",
        positive=True,
        commands=JOB_COMMANDS,
    ),
    # ---- the budget: any combination, at least one above 0
    Option(
        "budget",
        "--budget",
        int,
        16,
        "evaluations one session may run",
        setting="budget.evaluations",
        minimum=0,
        zero_means=NO_LIMIT,
    ),
    Option(
        "seconds",
        "--seconds",
        float,
        0.0,
        "wall-clock budget of a session in seconds",
        setting="budget.seconds",
        minimum=0,
        zero_means=NO_LIMIT,
    ),
    Option(
        "tokens",
        "--tokens",
        int,
        0,
        "LLM token budget (prompt + completion)",
        setting="budget.tokens",
        minimum=0,
        zero_means=NO_LIMIT,
    ),
    Option(
        "dollars",
        "--dollars",
        float,
        0.0,
        "LLM cost budget in US dollars",
        setting="budget.dollars",
        minimum=0,
        zero_means=NO_LIMIT,
    ),
    # ---- who writes variants, and how the search picks
    Option(
        "generator",
        "--generator",
        str,
        "rules",
        "rules: offline rewrites of tunables; openai: an LLM through any OpenAI-compatible API",
        setting="generator",
        choices=GENERATOR_NAMES,
    ),
    Option(
        "model",
        "--model",
        str,
        "",
        "LLM model name (openai generator)",
        setting="model",
        requires=("generator", "openai"),
    ),
    Option(
        "base_url",
        "--base-url",
        str,
        "",
        "OpenAI-compatible base URL, e.g. http://localhost:11434/v1",
        setting="baseUrl",
        requires=("generator", "openai"),
    ),
    Option("temperature", "--temperature", float, None, "LLM temperature", minimum=0),
    Option(
        "llm_timeout",
        "--llm-timeout",
        float,
        DEFAULT_LLM_TIMEOUT_S,
        "seconds one LLM request may take; a timed-out request is retried once, and an endpoint that never "
        "answers ends the search",
        positive=True,
    ),
    Option(
        "search",
        "--search",
        str,
        "kernelband",
        "search policy (kernelband = the kb variant)",
        setting="search",
        choices=SEARCH_NAMES,
    ),
    Option(
        "strategies",
        "--strategies",
        list,
        [],
        f"comma-separated subset of: {', '.join(STRATEGY_NAMES)} (empty = all)",
        setting="strategies",
        choices=STRATEGY_NAMES,
    ),
    Option("seed", "--seed", int, 0, "random seed of the search and the rules generator: same seed, same candidates"),
    Option(
        "profile_tier",
        "--profile-tier",
        int,
        2,
        "profile each correct candidate up to this tier for the bandit's features",
        choices=(0, 1, 2, 3),
    ),
    # ---- the verdict
    Option(
        "rounds",
        "--rounds",
        int,
        10,
        "interleaved A/B rounds for the final speedup's confidence interval",
        minimum=2,
        commands=(CHECK, OPTIMIZE),
    ),
    Option(
        "min_speedup",
        "--min-speedup",
        float,
        DEFAULT_MIN_SPEEDUP,
        "'improved' only when the CI's lower bound is above this, at least 1",
        setting="minSpeedup",
        minimum=1.0,
        commands=(CHECK, OPTIMIZE),
        default_note="the measured noise floor; see README",
    ),
    Option(
        "cpu_tuning",
        "--cpu-tuning",
        bool,
        False,
        "under the interpreter (no GPU), let CPU times rank candidates, decide the verdict and --apply anyway "
        "(never a GPU claim)",
        commands=(CHECK, OPTIMIZE),
    ),
    Option(
        "allow_weak_harness",
        "--allow-weak-harness",
        bool,
        False,
        "search even if the harness cannot catch a broken kernel",
    ),
    # ---- where the evaluation workers run (docs/RAY.md)
    Option(
        "executor",
        "--executor",
        str,
        "local",
        "local: one worker process per visible GPU on this machine; ray: one Ray actor per GPU of a Ray cluster "
        "(pip install 'kernelband[ray]')",
        setting="executor",
        choices=EXECUTOR_NAMES,
    ),
    Option(
        "ray_address",
        "--ray-address",
        str,
        "",
        "Ray cluster address for --executor ray, e.g. ray://head:10001 or auto (empty: a local Ray instance)",
        setting="rayAddress",
        requires=("executor", "ray"),
    ),
    Option(
        "workers",
        "--workers",
        int,
        0,
        "number of evaluation workers; 0: one per visible GPU (1 under the CPU interpreter)",
        setting="workers",
        minimum=0,
    ),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
BY_SETTING: dict[str, Option] = {o.setting: o for o in OPTIONS if o.setting}
TASK_OPTIONS = tuple(o.name for o in OPTIONS if o.commands == JOB_COMMANDS)


def option(name: str) -> Option:
    return BY_NAME[name]


def default(name: str) -> Any:
    d = BY_NAME[name].default
    return list(d) if isinstance(d, list) else d


def options_for(command: str) -> list[Option]:
    return [o for o in OPTIONS if command in o.commands]


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The command's own options (not the TASK_OPTIONS every job command shares), as
    argparse arguments."""
    for o in options_for(command):
        if o.name not in TASK_OPTIONS:
            o.add_to(parser)


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    for name in TASK_OPTIONS:
        BY_NAME[name].add_to(parser)


def limit(value: Optional[_Number]) -> Optional[_Number]:
    """A budget value as the session takes it: 0 (or None) = no limit = None."""
    return value if value else None


def engine_args(command: str, values: Mapping[str, Value]) -> list[str]:
    """The engine flags for a command from option values by name (the editor's settings):
    every value that differs from the default (0 included: it means no limit)."""
    argv: list[str] = []
    for o in options_for(command):
        if o.name not in values:
            continue
        value = values[o.name]
        if value is None or value == o.default:
            continue
        if o.requires is not None and values.get(o.requires[0], default(o.requires[0])) != o.requires[1]:
            continue
        argv.extend(o.to_cli(value))
    return argv
