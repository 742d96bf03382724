"""One definition of each option (kernelband/options.py): the CLI's arguments, the
server's settings, the VS Code package.json contributions and the client's name lists
are compared with it; and 0 means "no limit" for a budget at every layer."""
from __future__ import annotations

import argparse
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernelband import options as O
from kernelband.cli import build_parser
from kernelband_lsp.jobs import OPTIMIZE, PROFILE, JobManager, JobSpec
from kernelband_lsp.settings import _KEYS, Settings, engine_args, parse_settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = json.loads((ROOT / "vscode-client" / "package.json").read_text(encoding="utf-8"))
SETTINGS_TS = (ROOT / "vscode-client" / "src" / "settings.ts").read_text(encoding="utf-8")
SERVER_ONLY = {"backgroundOnSave", "pythonPath", "harness", "debounceMs"}  # the server's and client's own
CLIENT_ONLY = {"trace.server"}
JSON_TYPE = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array"}


def package_problems(props: dict[str, Any]) -> list[str]:
    """Where package.json's contributions disagree with the options module."""
    out = []
    for key, opt in O.BY_SETTING.items():
        prop = props.get(f"kernelband.{key}")
        if prop is None:
            out.append(f"{key}: not contributed")
            continue
        if prop.get("default") != opt.default:
            out.append(f"{key}: default {prop.get('default')!r}, options say {opt.default!r}")
        if prop.get("type") != JSON_TYPE[opt.type]:
            out.append(f"{key}: type {prop.get('type')!r}, options say {JSON_TYPE[opt.type]!r}")
        enum = (prop.get("items") or {}).get("enum") if opt.type is list else prop.get("enum")
        if opt.choices and list(enum or []) != list(opt.choices):
            out.append(f"{key}: enum {enum!r}, options say {list(opt.choices)!r}")
        if opt.minimum is not None and prop.get("minimum") != opt.minimum:
            out.append(f"{key}: minimum {prop.get('minimum')!r}, options say {opt.minimum!r}")
        if opt.zero_means and "0 means no limit" not in prop.get("description", ""):
            out.append(f"{key}: the description does not say that 0 means no limit")
    for full in props:
        key = full.removeprefix("kernelband.")
        if key not in O.BY_SETTING and key not in SERVER_ONLY | CLIENT_ONLY:
            out.append(f"{key}: contributed, but neither an engine option nor a known server/client setting")
    return out


def test_package_json_contributions_match_the_options():
    assert package_problems(PACKAGE["contributes"]["configuration"]["properties"]) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda p: p["kernelband.budget.evaluations"].update(default=8), "budget.evaluations: default"),
    (lambda p: p["kernelband.budget.evaluations"].update(minimum=1), "budget.evaluations: minimum"),
    (lambda p: p["kernelband.search"]["enum"].remove("kernelband-v1"), "search: enum"),
    (lambda p: p["kernelband.strategies"]["items"]["enum"].append("magic"), "strategies: enum"),
    (lambda p: p["kernelband.minSpeedup"].update(default=1.05), "minSpeedup: default"),
    (lambda p: p.pop("kernelband.generator"), "generator: not contributed"),
    (lambda p: p.update({"kernelband.notAnOption": {"type": "string"}}), "notAnOption: contributed, but"),
])
def test_a_drifted_package_json_is_caught(edit, expected):
    props = copy.deepcopy(PACKAGE["contributes"]["configuration"]["properties"])
    edit(props)
    problems = package_problems(props)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_server_settings_take_the_options_names_and_defaults():
    s = Settings()
    for key, opt in O.BY_SETTING.items():
        value = getattr(s, opt.field)
        assert (list(value) if isinstance(value, tuple) else value) == opt.default, key
        assert _KEYS[key][0] == opt.field, key
    assert set(_KEYS) == set(O.BY_SETTING) | SERVER_ONLY


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


# optimize-all runs one optimize session per kernel: it takes optimize's options
CLI_OPTIONS = {**{c: c for c in O.JOB_COMMANDS}, "optimize-all": O.OPTIMIZE}


def cli_problems(parser: argparse.ArgumentParser, command: str) -> list[str]:
    """Where a subcommand's argparse arguments disagree with the options module."""
    actions = {a.dest: a for a in parser._actions}
    out = []
    for opt in O.options_for(command):
        a = actions.get(opt.name)
        if a is None or opt.flag not in a.option_strings:
            out.append(f"{opt.name}: no {opt.flag} argument")
            continue
        if a.default != opt.default:
            out.append(f"{opt.name}: default {a.default!r}, options say {opt.default!r}")
        if (tuple(a.choices) if a.choices else None) != (opt.choices if opt.type is not list else None):
            out.append(f"{opt.name}: choices {a.choices!r}, options say {opt.choices!r}")
        if a.help != opt.help_text():
            out.append(f"{opt.name}: help {a.help!r} is not the option's")
    # and no option of the module is declared by hand beside it under another name
    by_flag = {f: a for a in actions.values() for f in a.option_strings}
    out += [f"{o.flag}: declared under dest {by_flag[o.flag].dest!r}" for o in O.OPTIONS
            if o.flag in by_flag and by_flag[o.flag].dest != o.name]
    return out


@pytest.mark.parametrize("command", sorted(CLI_OPTIONS))
def test_cli_arguments_are_the_options(command):
    assert cli_problems(_subparser(command), CLI_OPTIONS[command]) == []
    for a in _subparser(command)._actions:
        if a.dest in ("budget", "seconds", "tokens", "dollars"):
            assert "0 = no limit" in a.help and "default" in a.help, (command, a.dest)


def _drifted(flag: str, **changes: Any) -> argparse.ArgumentParser:
    """optimize-all's parser with one argument as a hand-written declaration would
    drift: another default, help, choices or dest."""
    parser = copy.deepcopy(_subparser("optimize-all"))
    action = next(a for a in parser._actions if flag in a.option_strings)
    for key, value in changes.items():
        setattr(action, key, value)
    return parser


@pytest.mark.parametrize("flag, changes, expected", [
    ("--budget", {"help": "evaluations per kernel (default 16; 0 = no limit)"}, "budget: help"),
    ("--seconds", {"default": None}, "seconds: default None"),
    ("--search", {"choices": ("kernelband", "random")}, "search: choices"),
    ("--min-speedup", {"dest": "min_gain"}, "min_speedup: no --min-speedup argument"),
])
def test_a_hand_written_session_flag_is_caught(flag, changes, expected):
    problems = cli_problems(_drifted(flag, **changes), O.OPTIMIZE)
    assert problems and problems[0].startswith(expected), problems


def test_cli_rejects_values_out_of_range_in_one_line():
    p = _subparser(OPTIMIZE)
    for argv, needle in [(["--budget", "-1"], "at least 0"), (["--min-speedup", "0.9"], "at least 1"),
                         (["--rounds", "1"], "at least 2"), (["--strategies", "tiling,magic"], "unknown strategies"),
                         (["--search", "best"], "invalid choice"), (["--seeds", "2"], "at least 3"),
                         (["--timeout", "0"], "above 0")]:
        with pytest.raises(SystemExit):
            p.parse_args(["f.py", *argv])
    for opt, value, needle in [("budget", -1, "at least 0"), ("min_speedup", 0.9, "at least 1"),
                               ("strategies", "tiling,magic", "unknown strategies: magic"),
                               ("search", "best", "one of kernelband"), ("timeout", 0, "above 0")]:
        with pytest.raises(O.OptionError, match=needle):
            O.option(opt).check(value)
    assert O.option("strategies").check("tiling, fusion,tiling") == ["tiling", "fusion"]


def test_client_name_lists_match_the_options():
    def ts_list(name: str) -> list[str]:
        m = re.search(rf"export const {name} = \[(.*?)\] as const;", SETTINGS_TS, re.S)
        assert m is not None, name
        return re.findall(r"'([^']+)'", m.group(1))

    assert ts_list("SEARCH_POLICIES") == list(O.SEARCH_NAMES)
    assert ts_list("GENERATORS") == list(O.GENERATOR_NAMES)
    assert ts_list("STRATEGY_NAMES") == list(O.option("strategies").choices)


def test_the_engines_registries_know_the_same_names():
    from kernelband.generators import GENERATOR_NAMES
    from kernelband.search.base import POLICY_NAMES
    from kernelband.strategies import STRATEGY_NAMES

    assert tuple(GENERATOR_NAMES) == O.GENERATOR_NAMES
    assert tuple(POLICY_NAMES) == O.POLICY_NAMES
    assert tuple(STRATEGY_NAMES) == O.option("strategies").choices


# ------------------------------------------------------------------ 0 = no limit, everywhere
def test_a_zero_budget_means_no_limit_at_every_layer():
    from kernelband.commands.common import UsageError
    from kernelband.commands.optimize_cmd import _config

    # the server keeps 0 (it used to drop it and send nothing: the engine's 16 applied)...
    s, problems = parse_settings({"budget": {"evaluations": 0, "seconds": 30}})
    assert not problems and s.budget_evaluations == 0 and s.budget_seconds == 30
    # ...and passes it on: 0 differs from the default 16
    argv = engine_args(OPTIMIZE, s)
    assert argv[argv.index("--budget") + 1] == "0" and argv[argv.index("--seconds") + 1] == "30.0"
    # the CLI reads 0 as no limit
    cfg = _config(_subparser(OPTIMIZE).parse_args(["f.py", *argv]))
    assert cfg.budget.evaluations is None and cfg.budget.seconds == 30.0
    # a session still needs one limit: all 0 is refused in one line, naming what 0 means
    with pytest.raises(UsageError, match="0 means no limit"):
        _config(_subparser(OPTIMIZE).parse_args(["f.py", "--budget", "0"]))


def test_default_settings_pass_no_flags_and_each_change_passes_its_own():
    assert engine_args(OPTIMIZE, Settings()) == []
    s, _ = parse_settings({"generator": "openai", "model": "m", "baseUrl": "http://x/v1", "search": "ucb1",
                           "strategies": ["tiling"], "minSpeedup": 1.1, "device": "cpu", "budget": {"tokens": 500}})
    assert engine_args(OPTIMIZE, s) == ["--device", "cpu", "--tokens", "500", "--generator", "openai", "--model", "m",
                                        "--base-url", "http://x/v1", "--search", "ucb1", "--strategies", "tiling",
                                        "--min-speedup", "1.1"]
    # a profile job takes only the options its command has
    assert engine_args(PROFILE, s) == ["--device", "cpu"]
    # the model is the openai generator's: not passed with the rules generator
    rules, _ = parse_settings({"model": "m"})
    assert engine_args(OPTIMIZE, rules) == []


def test_job_argv_comes_from_the_options_without_running_the_engine(tmp_path):
    # a command that does not exist: building the argv must not run it (no --help probe)
    jm = JobManager(command_prefix=[str(tmp_path / "no-such-engine")])
    s, _ = parse_settings({"budget": {"evaluations": 0, "dollars": 2}})
    argv = jm.build_argv(JobSpec(kind=OPTIMIZE, path=str(tmp_path / "m.py"), kernel="k", source="", settings=s,
                                 harness="bench_k"))
    assert argv[:3] == [str(tmp_path / "no-such-engine"), OPTIMIZE, str(tmp_path / "m.py")]
    assert argv[argv.index("--budget") + 1] == "0" and argv[argv.index("--dollars") + 1] == "2.0"
    assert argv[argv.index("--harness") + 1] == "bench_k" and "--json" in argv
    # every flag passed is one the engine's parser takes
    _subparser(OPTIMIZE).parse_args(argv[2:])
