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
