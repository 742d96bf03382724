"""Every autotuner in a KernelBand process times its configs with the judge's clock
(``worker.autotune_clock``), except inside derived calls (one config a call) and under the
interpreter. The GPU timing itself is measured on the device (benchmarks/eval_speed.py);
here, with a CPU stand-in for the clock, which bench each autotuner uses and what it gets back."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from helpers.kernels import AUTOTUNED

SCRIPT = textwrap.dedent("""
    import torch
    import tuned
    from kernelband.worker import autotune_clock

    timed = []

    def clock(kernel_call, quantiles=None, **_):  # config i takes i units: the first config wins
        kernel_call()
        timed.append(1)
        t = float(len(timed))
        return [t, t, t] if quantiles else t

    autotune_clock.judges_bench = clock
    autotune_clock._on_gpu = lambda: True
    autotune_clock.install()
    autotune_clock.install()  # idempotent: one wrapper, not two
    tuner = tuned.scale_kernel
    name = autotune_clock.bench_attribute(tuner)
    before = tuner.__dict__.get(name, "absent")
    assert torch.equal(tuned.scale(torch.ones(1000), 2.0), torch.full((1000,), 2.0))
    after = tuner.__dict__.get(name, "absent")
    print("clock", len(timed), tuner.best_config.kwargs["BLOCK"], after is before or after == before)
    runs = []
    with autotune_clock.one_config_per_call(lambda: runs.append(1)):
        assert torch.equal(tuned.scale(torch.ones(3000), 2.0), torch.full((3000,), 2.0))  # a new key
    print("derived", len(timed), len(runs))
    autotune_clock._on_gpu = lambda: False
    tuner.cache.clear()
    try:
        tuned.scale(torch.ones(1000), 2.0)  # Triton's own bench: no GPU driver under the interpreter
        print("own", "ran")
    except Exception as e:
        print("own", type(e).__name__ != "AssertionError", len(timed))
""")


def test_autotuners_time_configs_on_the_judges_clock_but_derived_calls_run_one_config(tmp_path):
    (tmp_path / "tuned.py").write_text(AUTOTUNED, encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [line.split() for line in p.stdout.splitlines()]
    # three configs timed on the judge's clock, the fastest (the first) picked, the
    # autotuner's own bench back in place after
    assert lines[0] == ["clock", "3", "64", "True"], p.stdout
    # a derived call's new key: one config run, the judge's clock untouched
    assert lines[1] == ["derived", "3", "1"], p.stdout
    # off the GPU the wrapper steps aside: the judge's clock is not called again
    assert lines[2][0] == "own" and lines[2][-1] in ("ran", "3"), p.stdout


SANITIZE_SCRIPT = textwrap.dedent("""
    import torch
    import tuned
    from kernelband.worker import autotune_clock

    timed, synced = [], []
    autotune_clock.judges_bench = lambda *a, **k: timed.append(1)
    autotune_clock._on_gpu = lambda: True
    calls = []
    original = tuned.scale_kernel.fn.run
    def counted(*args, **kwargs):
        calls.append(kwargs.get("BLOCK"))
        return original(*args, **kwargs)
    tuned.scale_kernel.fn.run = counted
    with autotune_clock.every_config_once(lambda: synced.append(1)):
        assert torch.equal(tuned.scale(torch.ones(1000), 2.0), torch.full((1000,), 2.0))
    print("sanitize", len(timed), len(synced), len(set(calls)), len(calls))
""")


def test_under_the_sanitizer_every_config_runs_once_and_none_is_timed(tmp_path):
    """compute-sanitizer's run (``Run`` mode sanitize): each config of an autotuner runs
    once, so the tool sees every config the variant could run, and the judge's timing
    loop (minutes, instrumented) is not asked. Abuse: a config that reads out of bounds
    hidden behind a faster one is still run under the tool."""
    (tmp_path / "tuned.py").write_text(AUTOTUNED, encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    p = subprocess.run([sys.executable, "-c", SANITIZE_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    words = p.stdout.split()
    # the judge's clock not called; three configs synchronised once each; each config
    # launched (its tuning run), then the pick once more
    assert words == ["sanitize", "0", "3", "3", "4"], p.stdout
