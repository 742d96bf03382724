"""The optimize Result: one Python dataclass (kernelband/model.py), one TypeScript
interface (vscode-client/src/jobs.ts). The interface is parsed and compared field by
field both ways, so the two cannot drift; and the dataclass reads stored and hand-made
results tolerantly and writes the wire format's keys."""
from __future__ import annotations

import dataclasses
import enum
import json
import re
import sqlite3
import typing
from pathlib import Path

import pytest

from kernelband.model import FOUND_STATUSES, Result, ResultStatus
from kernelband.profile.schema import Profile
from kernelband.store import Store
from kernelband.verdict import decide_verdict

ROOT = Path(__file__).resolve().parent.parent
JOBS_TS = ROOT / "vscode-client" / "src" / "jobs.ts"
TS_ONLY = {"jobId"}  # the server's envelope around the Result (service.run_job)


def ts_interface(text: str, name: str) -> dict[str, str]:
    """{field: type} of `export interface NAME { ... }` (one field per line; the index
    signature and comments skipped)."""
    m = re.search(r"export interface " + re.escape(name) + r" \{\n(.*?)\n\}", text, re.S)
    if m is None:
        raise AssertionError(f"interface {name} not found")
    fields = {}
    for line in m.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith(("/", "*", "[")):
            continue
        fm = re.fullmatch(r"(\w+)\??:\s*(.+);", line)
        if fm is None:
            raise AssertionError(f"cannot read the line {line!r} of {name}")
        fields[fm.group(1)] = fm.group(2).strip()
    return fields


def ts_of(py: typing.Any) -> set[str]:
    """The TypeScript types a Python annotation may be written as."""
    origin, args = typing.get_origin(py), typing.get_args(py)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, py
        return {f"{t} | null" for t in ts_of(inner[0])}
    if py is str or (isinstance(py, type) and issubclass(py, str) and issubclass(py, enum.Enum)):
        return {"string"}  # a str-valued enum is written as its word
    if py in (int, float):
        return {"number"}
    if py is bool:
        return {"boolean"}
    if py is typing.Any:
        return {"unknown"}
    if origin is list:
        item = ts_of(args[0])
        out = {f"{t}[]" for t in item if "|" not in t}
        if item == {"number"}:
            out.add("[number, number]")  # a pair (speedup_ci) is a list of floats in Python
        return out
    if origin is dict:
        return {f"Record<string, {t}>" for t in ts_of(args[1])}
    if dataclasses.is_dataclass(py) and hasattr(py, "to_dict"):  # printed as its own object (the sanitizer report)
        return {"Record<string, unknown>"}
    if typing.is_typeddict(py):  # a record the client does not read into (a history entry)
        return {"Record<string, unknown>"}
    raise AssertionError(f"no TypeScript mapping for {py!r}")


def python_fields(cls: type) -> dict[str, typing.Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "extra"}


def contract_problems(py_fields: dict[str, typing.Any], ts_fields: dict[str, str]) -> list[str]:
    problems = []
    for name, ann in py_fields.items():
        if name not in ts_fields:
            problems.append(f"{name}: in the Python Result, missing from the TypeScript interface")
        elif ts_fields[name] not in ts_of(ann):
            problems.append(f"{name}: TypeScript says {ts_fields[name]!r}, Python {ann!r} (one of {sorted(ts_of(ann))})")
    for name in ts_fields:
        if name not in py_fields and name not in TS_ONLY:
            problems.append(f"{name}: in the TypeScript interface, not a field of the Python Result")
    return problems


def test_the_typescript_result_matches_the_python_dataclass():
    ts = ts_interface(JOBS_TS.read_text(encoding="utf-8"), "OptimizeResult")
    assert contract_problems(python_fields(Result), ts) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda ts: ts.pop("speed_claim"), "speed_claim: in the Python Result, missing"),
    (lambda ts: ts.update(speedup="string | null"), "speedup: TypeScript says"),
    (lambda ts: ts.update(gpu="string"), "gpu: TypeScript says"),  # Python allows None: TS must too
    (lambda ts: ts.update(best_speedup="number"), "best_speedup: in the TypeScript interface"),
])
def test_the_contract_check_catches_drift(edit, expected):
    ts = ts_interface(JOBS_TS.read_text(encoding="utf-8"), "OptimizeResult")
    edit(ts)
    problems = contract_problems(python_fields(Result), ts)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_python_field_the_interface_lacks_is_caught():
    @dataclasses.dataclass
    class Wider(Result):
        executor: str = ""

    ts = ts_interface(JOBS_TS.read_text(encoding="utf-8"), "OptimizeResult")
    assert contract_problems(python_fields(Wider), ts) == ["executor: in the Python Result, missing from the "
                                                           "TypeScript interface"]


def test_from_dict_reads_older_and_odd_results():
    # an older engine's stored Result: fewer keys, one of a wrong type, one it did not know
    old = {"status": "improved", "kernel": "k", "speedup": "1.4", "speedup_ci": [1.2, 1.5], "evaluations": 8.0,
           "best_source": "src", "gpu": None, "verification": {"seeds": [0, 1, 2]}}
    r = Result.from_dict(old)
    assert r.speedup is None and r.speedup_ci == [1.2, 1.5] and r.evaluations == 8 and r.gpu is None
    assert r.warnings == [] and r.strategy_path == [] and r.found
    assert r.extra == {"verification": {"seeds": [0, 1, 2]}}
    assert r.to_dict()["verification"] == {"seeds": [0, 1, 2]}  # kept through a round trip
    assert Result.from_dict({"message": "no status"}).status == "failed"
    with pytest.raises(TypeError):
        Result.from_dict(["not", "an", "object"])


def test_to_dict_keeps_the_wire_keys():
    r = Result(status="no_improvement", kernel="k", speedup=1.0, speedup_ci=[1.0, 1.0])
    d = r.to_dict()
    # keys set only by some outcomes are absent, as the engine always wrote them
    assert "paired_rounds" not in d and "unverified_diff" not in d and "applied" not in d
    assert {"status", "speedup", "speedup_ci", "best_source", "warnings", "history", "min_speedup"} <= set(d)
    assert "history" not in r.to_dict(history=False)
    assert Result.from_dict(d) == r


def test_cancelled_keeps_a_partial_result_and_says_why():
    partial = Result(status="improved", kernel="k", evaluations=5, warnings=["w"])
    r = Result.cancelled("k", "/f.py", "cancelled by the user", partial=partial, evaluations=2)
    assert r.status == "cancelled" and r.evaluations == 5 and r.message == "cancelled by the user"
    assert partial.status == "improved"  # the partial one is not changed
    bare = Result.cancelled("k", "/f.py", "", failed=True, evaluations=3)
    assert bare.status == "failed" and bare.evaluations == 3 and bare.file == "/f.py"


def test_profile_round_trip():
    raw = {"kernel": "k", "time_ms": 0.42, "tiers": {"timing": {"time_per_launch_ms": 0.42}, "counters": None},
           "saturation": {"DRAM": 0.7}, "diagnosis": {"bottleneck": "memory-bound"}, "interpreted": False,
           "unavailable": {"counters": "ncu not found"}}
    p = Profile.from_dict(raw)
    assert p.bottleneck == "memory-bound" and p.time_per_launch_ms == 0.42 and p.tiers.counters is None
    out = p.to_dict()  # every field, the given values unchanged
    assert {k: v for k, v in out.items() if k in raw and k not in ("tiers", "diagnosis")} == \
        {k: v for k, v in raw.items() if k not in ("tiers", "diagnosis")}
    assert out["tiers"]["timing"]["time_per_launch_ms"] == 0.42 and out["diagnosis"]["bottleneck"] == "memory-bound"
    assert Profile.from_dict(out) == p
    assert Profile.from_dict({"diagnosis": {"bottleneck": "unknown"}}).bottleneck is None


# ---------------------------------------------------------------- the status words
# The CLI's --json, the store's rows, the LSP notifications, the MCP replies and the
# TypeScript client all read these exact words; the enum is Python's name for them.
WIRE_WORDS = {"improved", "no_improvement", "verified_correct", "cancelled", "failed"}


def test_the_status_words_are_pinned():
    assert {s.value for s in ResultStatus} == WIRE_WORDS
    assert FOUND_STATUSES == {"improved", "verified_correct"}
    for status in ResultStatus:
        d = Result(status=status, kernel="k").to_dict()
        assert type(d["status"]) is str and d["status"] == status.value  # a plain word, not the member
        assert json.loads(json.dumps(d))["status"] == status.value
        assert Result.from_dict(d).status is status  # decoded once, to the member


def test_a_word_given_in_code_becomes_the_member():
    r = Result(status="verified_correct")  # the coercion under test
    assert r.status is ResultStatus.VERIFIED_CORRECT and r.found is False  # no best_source
    with pytest.raises(ValueError):
        Result(status="bogus")


def test_the_verdict_speaks_the_results_words():
    for verdict in (decide_verdict(2.0, interpreted=False), decide_verdict(1.0, interpreted=False),
                    decide_verdict(None, interpreted=True)):
        assert isinstance(verdict.status, ResultStatus) and verdict.status.value in WIRE_WORDS
    assert json.dumps({"verdict": decide_verdict(2.0, interpreted=False).status.value}) == '{"verdict": "improved"}'


@pytest.mark.parametrize("status", [None, "", 3, ["improved"], "exploded", "IMPROVED"])
def test_a_malformed_status_reads_as_failed(status):
    # as a wrong-typed field takes its default, a status that names no outcome is "failed":
    # nothing in such a Result can be trusted (no Apply, no speed claim)
    d = {"status": status, "kernel": "k", "speedup": "fast", "best_source": "src", "speed_claim": True}
    r = Result.from_dict(d)
    assert r.status is ResultStatus.FAILED and r.speedup is None and not r.found and not r.applicable
    assert r.to_dict()["status"] == "failed" and r.kernel == "k"


def test_the_store_keeps_the_words_and_reads_a_malformed_status_as_failed(tmp_path):
    db = tmp_path / "kb.sqlite"
    good = Result(status=ResultStatus.IMPROVED, kernel="k", file="/f.py", speedup=1.5, best_source="src",
                  applicable=True, speed_claim=True)
    with Store(db) as st:
        st.start_session("s1", "/f.py", "k", "h", "gpu", "3.0", {})
        st.finish_session("s1", good.status.value, good.to_dict(history=False))
        read = Result.from_dict(st.latest_result("/f.py", "k"))
    assert read.status is ResultStatus.IMPROVED and read.found and read.applicable
    with sqlite3.connect(db) as conn:
        (column, stored), = conn.execute("SELECT status, result FROM sessions WHERE id='s1'").fetchall()
    assert column == "improved" and json.loads(stored)["status"] == "improved"
    bad = {**good.to_dict(history=False), "status": "exploded"}  # a hand-edited or newer engine's row
    with Store(db) as st:
        st.start_session("s2", "/g.py", "k", "h", "gpu", "3.0", {})
        st.finish_session("s2", "exploded", bad)
        odd = Result.from_dict(st.latest_result("/g.py", "k"))
    assert odd.status is ResultStatus.FAILED and not odd.found and odd.best_source == "src"
