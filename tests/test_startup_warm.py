"""What a session does to reach its first verdict sooner: the wall-clock trace that
measures it, the generator built and the original analysed while the judge starts, and the
trusted processes' bytecode kept in the machine cache (never a variant's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelband import machine_cache, trace
from kernelband.model import Variant
from kernelband.session_warm import GeneratorWarmup, warm_imports

REPO = Path(__file__).resolve().parent.parent


def test_trace_marks_are_whole_json_lines_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.jsonl"
    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    trace.mark("nothing")
    assert not path.exists()
    monkeypatch.setenv(trace.TRACE_ENV, str(path))
    threads = [threading.Thread(target=lambda i=i: [trace.mark("m", i=i, k=k, pad="x" * 500) for k in range(50)])
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = [json.loads(line) for line in path.read_text().splitlines()]  # every line whole
    assert len(lines) == 200 and {m["what"] for m in lines} == {"m"}
    assert all(m["pid"] == os.getpid() and isinstance(m["t"], float) for m in lines)


def test_the_generator_is_built_and_warmed_in_the_background() -> None:
    seen: list[tuple[str, str, str]] = []

    class Generator:
        def warm(self, variant: Variant, kernel: str) -> None:
            seen.append((threading.current_thread().name, variant.source, kernel))

    gen = Generator()
    got = GeneratorWarmup(lambda: gen, Variant("src"), "k").result()
    assert got is gen
    assert seen == [("kernelband-warm-generator", "src", "k")]


def test_a_generator_that_fails_to_build_fails_the_session_as_before() -> None:
    def broken() -> object:
        raise ValueError("unknown generator 'nope'")

    with pytest.raises(ValueError, match="unknown generator"):
        GeneratorWarmup(broken, Variant("src"), "k").result()


def test_a_failing_warm_up_is_left_to_the_search() -> None:
    class Generator:
        def warm(self, variant: Variant, kernel: str) -> None:
            raise RuntimeError("analysis failed")

    gen = Generator()
    assert GeneratorWarmup(lambda: gen, Variant("src"), "k").result() is gen


def test_warm_imports_ignore_a_missing_package() -> None:
    warm_imports(("json", "kernelband_no_such_package")).join(timeout=30)
    assert "json" in sys.modules


def test_bytecode_goes_to_the_machine_cache_only_where_the_environment_writes_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_CACHE_DIR", str(tmp_path))
    plain = {"PATH": "/bin"}
    assert machine_cache.bytecode_env(dict(plain)) == plain  # a normal machine: left alone
    chosen = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"}
    assert machine_cache.bytecode_env(dict(chosen)) == chosen  # the user's own prefix wins
    env = machine_cache.bytecode_env({"PYTHONDONTWRITEBYTECODE": "1"})
    assert env == {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}


def test_a_fork_server_child_never_writes_bytecode(tmp_path: Path) -> None:
    """The attack: a job's code imports a module with bytecode writing on, leaving a .pyc
    in the cache the next trusted fork server loads. The child turns writing off before any
    job code runs (checked on the zygote's own child set-up, not on a variant's word)."""
    src = (REPO / "kernelband" / "worker" / "zygote.py").read_text()
    child = src[src.index("def _child("):]
    body = child[:child.index("\ndef ")]
    first = [line.strip() for line in body.splitlines()[1:] if line.strip() and not line.strip().startswith('"""')]
    assert first[:2] == ["try:", "sys.dont_write_bytecode = True  # a job never writes bytecode a trusted process could load"]
    prefix = tmp_path / "pycache"
    (tmp_path / "helper_mod.py").write_text("X = 1\n")
    code = ("import sys; sys.dont_write_bytecode = True; sys.path.insert(0, %r); import helper_mod" % str(tmp_path))
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(prefix))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert not list(prefix.rglob("helper_mod*.pyc"))
    subprocess.run([sys.executable, "-c", code.replace("sys.dont_write_bytecode = True; ", "")], env=env, check=True)
    assert list(prefix.rglob("helper_mod*.pyc"))  # the control: without the flag it is written
