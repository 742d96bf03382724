"""Siblings that compile a job's calls beyond the harness ahead of it.

On a GPU, a job's calls beyond the harness (``derived_run``) cost mostly Triton compiles,
one per new specialization and in series: 2-33 s of the original's derivation and 5-15 s
of a candidate's checks after its timing (benchmarks/results/eval_speed/h200_7425702,
the traces' frame seconds). A sibling is a second process of the same module, in the
same sandbox, that makes those calls with every launch a warmup (``derived_run.warm_calls``)
into the job's own Triton cache, while the job runs its harness, waits for its GPU turn
or for the original's references; the job then finds its kernels compiled. The sibling
runs the job's own code and writes only that job's private cache (which that code can
write anyway), and the judge reads nothing of it: no verdict depends on it. It is
closed with its job.
"""

from __future__ import annotations

import os
import time
from typing import Optional

from ..trace import mark
from .call_spec import DerivedCall
from .compile_pool import CALLS_AHEAD, pool_threads
from .deadlines import deadline_s
from .derived import MAX_CALL_BYTES
from .jobs import VariantJob
from .judge_core import GPU_MARGIN_BYTES, MAX_LANES, JudgeCore, Reference, gpu
from .messages import Job, Warm
from .warm_ahead import WARM_ENV

DERIVATION_SIBLINGS = 2  # the original's derivation: its calls split among this many siblings
# what a sibling may hold on the GPU: the canary-padded tensors and what the wrapper
# allocates of its current call and of the calls whose compiles are pending, and the context
SIBLING_BYTES = (1 + CALLS_AHEAD) * 2 * MAX_CALL_BYTES + GPU_MARGIN_BYTES
MIN_CPUS = 4  # with fewer cores a sibling's compiles only slow down the job's own
# a candidate's sibling pays where the original's calls beyond the harness took this long
# (mostly compiles); below it a sibling cost the first verdicts more than it saved (on one
# H200 at 9302aa6: gelu_fp32 69.8 -> 55.5 evaluations a minute, its calls 2.1 s; and
# matmul_rowmajor_fp16 17.2 -> 33.6, its calls 8.3 s)
CANDIDATE_MIN_S = 6.0
# a candidate whose own first run (its compile, mostly) took this long, and this many times
# the original's, gets a sibling whatever the original's calls took: an autotuned rewrite
# compiles every config at each call beyond the harness (one gemv candidate: a first run of
# 5.6 s, then nine calls of 0.9-1.7 s in series, 18.9 s of a 19.3 s search; benchmarks/
# results/eval_speed/h200_d990d51, the traces' frame seconds)
HEAVY_FIRST_RUN_S = 2.0
HEAVY_RATIO = 2.0


def enabled(judge: JudgeCore, siblings: int) -> bool:
    """Whether ``siblings`` more processes are worth starting: "auto" on a GPU whose free
    memory holds them four times over, on a machine with cores to spare (under the
    interpreter nothing is compiled)."""
    wanted = os.environ.get(WARM_ENV, "auto")
    if wanted in ("on", "off"):
        return wanted == "on"
    if judge.interpreted or not gpu() or (os.cpu_count() or 1) < MIN_CPUS:
        return False
    import torch

    free, _ = torch.cuda.mem_get_info()
    return 4 * siblings * SIBLING_BYTES <= free


def pays_off(ref: Reference, first_run_s: float = 0.0, lanes: int = MAX_LANES) -> bool:
    """Whether a candidate gets a sibling: where the original's calls beyond the harness
    took ``min_seconds(lanes)``, or are still running that long after they started (a
    compile of minutes shows only when it ends), or the candidate's own first run
    (``first_run_s``, 0 before it) shows it compiles far slower than the original
    (``compiles_heavily``), or warming is "on"."""
    least_s = min_seconds(lanes)
    if os.environ.get(WARM_ENV, "auto") == "on" or ref.derived_calls_s >= least_s or compiles_heavily(ref, first_run_s):
        return True
    running = ref.derive_started > 0 and not ref.derived_ready.is_set()
    return running and time.monotonic() - ref.derive_started >= least_s


def min_seconds(lanes: int) -> float:
    """The original's calls beyond the harness that make a candidate's sibling pay:
    ``CANDIDATE_MIN_S`` where every lane is busy (the siblings' compiles take the cores
    the other candidates compile on), a share of it with fewer lanes (their cores idle:
    a 32 GiB harness has one lane, and its candidates compiled 7.7 s in series each,
    benchmarks/results/eval_speed/h200_8379740_probe)."""
    return CANDIDATE_MIN_S * min(max(lanes, 1), MAX_LANES) / MAX_LANES


def compiles_heavily(ref: Reference, first_run_s: float) -> bool:
    """Whether a candidate's first run of the harness (compile included) took
    ``HEAVY_FIRST_RUN_S`` and ``HEAVY_RATIO`` times the original's first run."""
    return first_run_s >= max(HEAVY_FIRST_RUN_S, HEAVY_RATIO * ref.first_run_s)


def start(
    judge: JudgeCore, job: VariantJob, calls: list[DerivedCall], module: str, siblings: int = 1
) -> list[VariantJob]:
    """Up to ``siblings`` processes compiling ``calls`` (split among them in turn) into
    ``job``'s Triton cache, started now; none where warming is off or there is nothing to
    compile. A sibling that cannot start is left out (the job compiles for itself)."""
    calls = list(calls)
    siblings = min(siblings, len(calls))
    if siblings <= 0 or not enabled(judge, siblings):
        return []
    task = judge.require_task()
    started: list[VariantJob] = []
    for k in range(siblings):
        part = calls[k::siblings]
        sibling = VariantJob(
            Job(task, dict(job.job.modules), [Warm(part, module, pool_threads())], judge.interpreted),
            timeout_s=deadline_s(task.timeout_s, len(part)),
            shared_cache=job.cache,
            extra_env=dict(job.extra_env),
        )
        try:
            sibling.start(judge.live_zygote())
        except Exception as e:  # noqa: BLE001 - a head start, never a requirement
            sibling.close()
            mark("warm.failed", job=job.nonce[:8], error=f"{type(e).__name__}: {e}"[:200])
            continue
        mark("warm.start", job=job.nonce[:8], sibling=sibling.nonce[:8], calls=len(part))
        started.append(sibling)
    return started


def close(siblings: Optional[list[VariantJob]]) -> None:
    """End the siblings (done or not) and remove their own directories."""
    for sibling in siblings or []:
        sibling.close()
