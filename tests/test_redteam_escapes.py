"""Red team, escapes: every payload in tests/redteam/escapes/ is blocked with no side effect.

Each payload is a complete variant of examples/add_scale.py that, if it ran, would create
the file named by its ``{MARKER}`` placeholder (shell, pickle, eval, file I/O, native
code, hooks, monkeypatches, imports, env, network, processes...). Its ``# expect:`` line
names what the screen must catch. Three checks:

1. the screen rejects it, and catches the payload's own primitive (``expect``);
2. through the real evaluation path (one shared Evaluator with a real worker) it is not
   ok, and no marker file appears;
3. a handful really do create the marker when run unscreened (in a throwaway
   subprocess), so the corpus is not vacuous.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelband.evaluate import Evaluator
from kernelband.model import Status, Task, Variant
from kernelband.screen import policy_violations, screen_variant
from helpers.paths import REPO, example_source
from tests.redteam.correct_rewrites import REWRITES

ESCAPES = REPO / "tests" / "redteam" / "escapes"
PAYLOADS = sorted(ESCAPES.glob("e*.py"))
ORIGINAL = example_source("add_scale.py")
KERNEL, HARNESS = "axpy_kernel", "harness_axpy"
# Payloads shown to work when run unscreened (cheap: no new network or long shell work).
PROVEN = ("e01_getattr_alias", "e12_module_alias_assign", "e20_namespace_member_pkgutil", "e25_collect_env_run",
          "e34_dunder_import", "e41_tensor_tofile", "e46_format_globals_env", "e61_tensor_method_patch")
# The correct axpy rewrites run end to end take seconds each under the interpreter: the
# default tier runs three unlike ones (a loop, a new jit helper, rewritten masks), the slow
# tier the rest (every one is screened in the default tier: test_screen_false_rejections).
DEFAULT_TIER_REWRITES = ("axpy_persistent_tl_range", "axpy_new_jit_helper", "axpy_masks_rewritten")
AXPY_REWRITES = [r for r in REWRITES if r.base == "examples/add_scale.py" and "autotune" not in r.name]


def expected(path: Path) -> str:
    m = re.search(r"^# expect: (.+)$", path.read_text(encoding="utf-8"), re.M)
    assert m, f"{path.name} has no '# expect:' line"
    return m.group(1).strip()


def payload(path: Path, marker: Path) -> str:
    text = path.read_text(encoding="utf-8")
    assert "{MARKER}" in text, path.name
    return text.replace("{MARKER}", str(marker))


def test_corpus_is_large_and_well_formed():
    assert len(PAYLOADS) >= 40
    assert set(DEFAULT_TIER_REWRITES) <= {r.name for r in AXPY_REWRITES}
    assert len({p.stem.split("_", 1)[1] for p in PAYLOADS}) == len(PAYLOADS)
    for p in PAYLOADS:
        compile(payload(p, Path("/nonexistent/marker")), p.name, "exec")


@pytest.mark.parametrize("path", PAYLOADS, ids=[p.stem for p in PAYLOADS])
def test_screen_rejects_payload_for_its_primitive(path: Path, tmp_path: Path):
    source = payload(path, tmp_path / "marker")
    reason = screen_variant(ORIGINAL, source, KERNEL, HARNESS)
    assert reason and reason.strip() and "\n" not in reason
    reasons = [reason, *policy_violations(ORIGINAL, source)]
    assert any(expected(path) in r for r in reasons), reasons


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    work = tmp_path_factory.mktemp("escapes")
    module = work / "add_scale.py"
    module.write_text(ORIGINAL, encoding="utf-8")
    ev = Evaluator(Task(module_path=str(module), source=ORIGINAL, kernel=KERNEL, harness=HARNESS,
                        device="cpu", seeds=[0], timeout_s=60.0))
    assert ev.prepare(time_it=False).ok
    yield ev
    ev.close()


@pytest.mark.slow
def test_payloads_end_to_end_leave_no_marker(evaluator: Evaluator, tmp_path: Path):
    markers = tmp_path / "markers"
    markers.mkdir()
    for path in PAYLOADS:
        marker = markers / path.stem
        ev = evaluator.evaluate(Variant(source=payload(path, marker)), time_it=False)
        assert ev.status != Status.OK, f"{path.name} evaluated ok"
        assert ev.status == Status.REJECTED and ev.message, (path.name, ev.status, ev.message)
        assert not marker.exists(), f"{path.name} created its marker"
    assert list(markers.iterdir()) == []  # nor anything else ('{MARKER}.so', ...)
    # the same Evaluator still runs a correct variant: the rejections are not an artefact
    ok = evaluator.evaluate(Variant(source=ORIGINAL.replace("BLOCK_SIZE=128)", "BLOCK_SIZE=512)")), time_it=False)
    assert ok.status == Status.OK, ok.message


@pytest.mark.parametrize("rewrite", [pytest.param(r, id=r.name, marks=[] if r.name in DEFAULT_TIER_REWRITES else
                                                  [pytest.mark.slow]) for r in AXPY_REWRITES])
@pytest.mark.slow
def test_correct_axpy_rewrites_pass_end_to_end(evaluator: Evaluator, rewrite):
    """The hand-written correct rewrites of axpy are not only screened in: they run and
    match (autotuned ones need a GPU driver, which the CPU interpreter lacks)."""
    ev = evaluator.evaluate(Variant(source=rewrite.build()), time_it=False)
    assert ev.status == Status.OK, (rewrite.name, ev.message)


RUNNER = textwrap.dedent(
    """
    import importlib.util, json, sys, torch
    results = {}
    for name, path in json.loads(sys.argv[1]).items():
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            mod.axpy(0.5, torch.randn(8), torch.randn(8))
            results[name] = "ran"
        except BaseException as e:  # a payload may raise after its side effect
            results[name] = f"{type(e).__name__}: {e}"
    print(json.dumps(results))
    """
)


def test_some_payloads_do_create_their_marker_when_unscreened(tmp_path: Path):
    """Run a few payloads as plain Python (no screen) in a throwaway process whose cwd
    and marker paths live in tmp_path: each creates its marker, so the screen is what
    stopped them above."""
    modules: dict[str, str] = {}
    for stem in PROVEN:
        path = ESCAPES / f"{stem}.py"
        module = tmp_path / f"{stem}.py"
        module.write_text(payload(path, tmp_path / f"{stem}.marker"), encoding="utf-8")
        modules[stem] = str(module)
    env = {**os.environ, "TRITON_INTERPRET": "1", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(modules)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for stem in PROVEN:
        assert (tmp_path / f"{stem}.marker").exists(), (stem, results[stem])
