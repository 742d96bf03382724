"""The language server sends optimize jobs to a Ray cluster when asked: the
settings `kernelband.executor` / `rayAddress` / `workers` become the engine's flags,
checked against the real engine's `optimize --help`."""
from __future__ import annotations

import sys

from kernelband_lsp.jobs import OPTIMIZE, PROFILE, JobManager, JobSpec
from kernelband_lsp.settings import Settings, parse_settings


def _spec(kind: str, settings: Settings) -> JobSpec:
    return JobSpec(kind=kind, path="/ws/add_scale.py", kernel="axpy_kernel", source="", uri="", version=1,
                   background=False, settings=settings)


def test_executor_settings_parse_and_bad_values_keep_the_default():
    s, problems = parse_settings({"kernelband": {"executor": "ray", "rayAddress": "ray://gpu-box:10001", "workers": 2}})
    assert (s.executor, s.ray_address, s.workers) == ("ray", "ray://gpu-box:10001", 2) and not problems
    assert s.to_dict()["rayAddress"] == "ray://gpu-box:10001"
    bad, problems = parse_settings({"executor": "slurm", "workers": -2})
    assert (bad.executor, bad.workers) == ("local", 0) and len(problems) == 2


async def test_optimize_jobs_carry_the_executor_flags_the_engine_accepts():
    jm = JobManager(command_prefix=[sys.executable, "-m", "kernelband"], on_event=lambda j, e: None)
    ray = Settings(executor="ray", ray_address="ray://gpu-box:10001", workers=2)
    argv = jm.build_argv(_spec(OPTIMIZE, ray))
    i = argv.index("--executor")
    assert argv[i:i + 2] == ["--executor", "ray"]
    assert argv[argv.index("--ray-address") + 1] == "ray://gpu-box:10001" and argv[argv.index("--workers") + 1] == "2"
    # the default (local, the engine's own worker count) adds nothing: the command line is as before
    plain = jm.build_argv(_spec(OPTIMIZE, Settings()))
    assert not {"--executor", "--ray-address", "--workers"} & set(plain)
    # an address without the ray executor is not passed (the engine would refuse it)
    local = jm.build_argv(_spec(OPTIMIZE, Settings(ray_address="ray://gpu-box:10001")))
    assert "--ray-address" not in local
    # profile jobs run no search: no executor flags
    assert "--executor" not in jm.build_argv(_spec(PROFILE, ray))
