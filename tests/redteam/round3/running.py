"""Running round-3 cases: through the real evaluation path (screen, then the worker under
the Triton interpreter), straight to the judge with the screen skipped (what the
sandbox and the judge must hold on their own), and their witnesses outside the judge."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from kernelband.evaluate import Evaluator, SetupError
from kernelband.model import Evaluation, PairedTiming, Status, Task, Variant
from kernelband.worker.client import WorkerError
from kernelband.worker.requests import Evaluate
from redteam.corpus import make_task
from redteam.round3.corpus import KERNELS, Case, Escape

Prepared = Union[Evaluator, SetupError]


class Evaluators:
    """One prepared Evaluator per original (kernel module or escape original), made on
    first use. Escapes' originals are copied into ``workdir`` first: payloads write beside
    the user's module and into the evaluator's trusted cache, so both live in tmp."""

    def __init__(self, workdir: Path, device: str = "cpu") -> None:
        self.workdir = workdir
        self.device = device
        self.prepared: dict[str, Prepared] = {}

    def for_case(self, case: Case) -> Evaluator:
        return self._get(f"kernel:{case.spec.kernel}", lambda: make_task(KERNELS[case.spec.kernel], self.device))

    def for_escape(self, escape: Escape) -> Evaluator:
        def task() -> Task:
            folder = self.workdir / "modules" / Path(escape.original_path).stem
            folder.mkdir(parents=True, exist_ok=True)
            module = folder / Path(escape.original_path).name
            module.write_text(escape.original, encoding="utf-8")
            return Task(module_path=str(module), source=escape.original, kernel=escape.kernel,
                        harness=escape.harness, device=self.device, seeds=[0], timeout_s=60.0)
        return self._get(f"escape:{escape.original_path}", task)

    def _get(self, key: str, make) -> Evaluator:  # type: ignore[no-untyped-def]
        if key not in self.prepared:
            work = self.workdir / "evaluators" / key.replace(":", "_").replace("/", "_")
            work.mkdir(parents=True, exist_ok=True)
            ev = Evaluator(make(), workdir=str(work))
            try:
                ev.prepare(time_it=True)
                self.prepared[key] = ev
            except SetupError as e:
                ev.close()
                self.prepared[key] = e
        got = self.prepared[key]
        if isinstance(got, SetupError):
            raise got
        return got

    def close(self) -> None:
        for ev in self.prepared.values():
            if isinstance(ev, Evaluator):
                ev.close()


def evaluate_unscreened(ev: Evaluator, source: str, time_it: bool = True) -> Evaluation:
    """The judge's evaluation of ``source`` with the screen skipped (code sent straight
    to the worker): what must hold when the screen is fooled."""
    try:
        ev._ensure_worker()
        request = Evaluate(source=source, variant_id="unscreened", time=time_it, profile_tier=0, facts=ev.facts)
        raw = ev.client.send(request, ev._deadline("evaluate"))
        return Evaluation.from_dict(raw)
    except WorkerError as e:
        return ev._failure(Variant(source=source), e)


def paired_unscreened(ev: Evaluator, source: str, rounds: int = 6) -> Union[PairedTiming, str]:
    """The paired re-measurement of ``source`` (never screened there: the session screens
    and evaluates first); a failure's message instead of a timing."""
    try:
        return ev.paired_timing(Variant(source=source), rounds=rounds)
    except (WorkerError, RuntimeError) as e:
        return f"{type(e).__name__}: {e}"


@dataclass
class Outcome:
    """One run of a case: what the evaluation said and, for timing, the would-be speedup."""

    status: str
    ok: bool
    message: str
    speedup: Optional[float] = None  # original's median / variant's (evaluate) or paired speedup
    ci_low: Optional[float] = None  # the paired speedup's 95% CI lower bound

    def row(self) -> str:
        sp = f" {self.speedup:.2f}x" if self.speedup is not None else ""
        return f"{self.status}{sp}"


def outcome(ev: Evaluator, evaluation: Evaluation) -> Outcome:
    speed = None
    base = ev.baseline.timing if ev.baseline else None
    if evaluation.ok and evaluation.timing and base and evaluation.timing.median_ms > 0:
        speed = base.median_ms / evaluation.timing.median_ms
    return Outcome(evaluation.status.value, evaluation.ok, " ".join(evaluation.message.split())[:300], speed)


def run_case(evs: Evaluators, case: Case, screened: bool = True) -> Outcome:
    """A WRONG or TIMING case through the evaluation path (``screened``) or straight to
    the judge; ``measure == "paired"`` cases are then re-measured against the original."""
    ev = evs.for_case(case)
    if screened:
        evaluation = ev.evaluate(Variant(source=case.source, description=case.spec.why))
    else:
        evaluation = evaluate_unscreened(ev, case.source)
    got = outcome(ev, evaluation)
    if case.spec.measure != "paired" or not evaluation.ok:
        return got
    paired = paired_unscreened(ev, case.source)
    if isinstance(paired, str):
        return Outcome("paired_failed", False, paired[:300])
    return Outcome(Status.OK.value, True, f"paired: {paired.speedup:.2f}x [{paired.ci_low:.2f}, {paired.ci_high:.2f}]",
                   paired.speedup, paired.ci_low)


# --------------------------------------------------------------------------- witnesses
_WITNESS_CHILD = textwrap.dedent(
    """
    import importlib.util, json, math, sys, tempfile, traceback
    import torch
    from kernelband.worker.compare import TOLERANCES

    def load(source, name, folder):
        path = f"{folder}/{name}.py"
        open(path, "w", encoding="utf-8").write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def run(mod, code):
        torch.manual_seed(1234)
        scope = vars(mod)
        exec(code, scope)
        return scope["result"]

    def differs(a, b, strict):
        if type(a) is not type(b):
            return f"types differ: {type(a).__name__} vs {type(b).__name__}"
        if isinstance(a, (tuple, list)):
            for x, y in zip(a, b):
                why = differs(x, y, strict)
                if why:
                    return why
            return "" if len(a) == len(b) else "lengths differ"
        if not isinstance(a, torch.Tensor):
            return "" if a == b else f"{a!r} vs {b!r}"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
        a64, b64 = a.double(), b.double()
        if not torch.equal(torch.isnan(a64), torch.isnan(b64)):
            return f"NaN at {int((torch.isnan(a64) != torch.isnan(b64)).sum())} positions that differ"
        fin = torch.isfinite(a64) & torch.isfinite(b64)
        if not torch.equal(a64[~fin].nan_to_num(0.0), b64[~fin].nan_to_num(0.0)):
            return "infinities differ"
        rtol, atol = (1e-6, 1e-7) if strict else (TOLERANCES[a.dtype].rtol, TOLERANCES[a.dtype].atol)
        bad = (a64[fin] - b64[fin]).abs() > atol + rtol * a64[fin].abs()
        return f"{int(bad.sum())} of {a.numel()} elements beyond rtol={rtol:g}" if bool(bad.any()) else ""

    out = {}
    folder = tempfile.mkdtemp()
    for i, item in enumerate(json.load(sys.stdin)):
        try:
            want = run(load(item["original"], f"original_{i}", folder), item["witness"])
        except BaseException:
            out[item["id"]] = {"differs": False, "detail": "the original fails: " + traceback.format_exc(limit=2)[-300:]}
            continue
        try:
            got = run(load(item["variant"], f"variant_{i}", folder), item["witness"])
            why = differs(want, got, item["strict"])
        except BaseException as e:
            why = f"the variant raises {type(e).__name__}: {str(e)[:160]}"
        out[item["id"]] = {"differs": bool(why), "detail": why}
    print(json.dumps(out))
    """
)


def run_witnesses(cases: list[Case], timeout_s: float = 600.0) -> dict[str, dict[str, object]]:
    """{case id: {"differs": bool, "detail": str}} for every case with a witness, run in
    one throwaway process under the Triton interpreter (no judge, no NaN-filled memory)."""
    items = [{"id": c.id, "original": c.kernel.source, "variant": c.source, "witness": c.spec.witness,
              "strict": c.spec.witness_strict} for c in cases if c.spec.witness]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _WITNESS_CHILD], input=json.dumps(items), capture_output=True,
                          text=True, timeout=timeout_s, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])
