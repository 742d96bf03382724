"""A warm sibling's compiles in a few threads (kernelband/worker/compile_pool.py). What must
hold: a launch in the sibling runs nothing and returns at once, each distinct
specialization is compiled once (an autotuner's every config included), a compile that
raises is dropped, the sibling holds at most ``CALLS_AHEAD`` earlier calls' inputs, and
the pool is drained before the sibling's step ends. Under the interpreter a "compile" is
the interpreted function's warmup; the GPU machine measures the time (eval_speed).

What would abuse it: the sibling is the candidate's own code, so a launch that raises in
a pool thread must not end the sibling's other compiles, and a compile that never ends
must not let the sibling pile up inputs without bound."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.kernels import AUTOTUNED, AXPY, axpy_task, load_module

from kernelband.worker.compile_pool import CALLS_AHEAD, CompilePool
from kernelband.worker.jobs import VariantJob
from kernelband.worker.messages import Job, Warm


def test_each_distinct_launch_compiles_once_and_a_raising_one_is_dropped() -> None:
    import torch

    ran: list[tuple[Any, ...]] = []

    def compile_it(kernel: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("BLOCK") == 13:
            raise RuntimeError("the candidate's compile fails")
        ran.append((kernel, args[1], kwargs["BLOCK"]))

    kernel = object()
    x = torch.ones(64)
    pool = CompilePool(3)
    for _ in range(3):  # the same launch again (another call with the same specialization)
        pool.submit(compile_it, kernel, (x, 64), {"BLOCK": 32, "grid": (2,), "warmup": True})
    pool.submit(compile_it, kernel, (x, 64), {"BLOCK": 13, "grid": (5,), "warmup": True})
    pool.submit(compile_it, kernel, (x, 64), {"BLOCK": 64, "grid": (1,), "warmup": True})
    pool.submit(compile_it, kernel, (x, 1), {"BLOCK": 32, "grid": (1,), "warmup": True})  # n == 1 specializes
    pool.submit(compile_it, kernel, (x.half(), 64), {"BLOCK": 32, "grid": (2,), "warmup": True})
    pool.submit(compile_it, kernel, (x[1:], 64), {"BLOCK": 32, "grid": (2,), "warmup": True})  # misaligned
    pool.drain()
    assert pool.submitted == 6
    assert sorted((a, b) for _, a, b in ran) == [(1, 32), (64, 32), (64, 32), (64, 32), (64, 64)]


def test_a_call_waits_while_more_than_calls_ahead_earlier_calls_are_compiling() -> None:
    """A compile that does not end holds its call's inputs: the sibling then stops at the
    call after ``CALLS_AHEAD`` more, rather than piling up every call's tensors."""
    release = threading.Event()
    reached: list[int] = []

    def stuck(kernel: Any, *args: Any, **kwargs: Any) -> None:
        release.wait(30)

    pool = CompilePool(2)

    def walk() -> None:
        for call in range(CALLS_AHEAD + 3):
            pool.next_call()
            reached.append(call)
            pool.submit(stuck, object(), (call,), {})

    walker = threading.Thread(target=walk)
    walker.start()
    time.sleep(0.5)
    assert reached == list(range(CALLS_AHEAD + 1))  # the next call waits for the first's compile
    release.set()
    walker.join(30)
    pool.drain()
    assert reached == list(range(CALLS_AHEAD + 3))


def test_launches_handed_to_the_pool_run_nothing_and_return_at_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelband.worker.autotune_clock import one_config_per_call
    from kernelband.worker.derived_run import launches_as_warmups

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    plain = load_module(tmp_path, AXPY, "axpy_pool")
    tuned = load_module(tmp_path, AUTOTUNED, "scale_pool")
    x = torch.ones(300)
    out = torch.full((300,), -7.0)
    pool = CompilePool(2)
    with one_config_per_call(lambda: None), launches_as_warmups(pool.submit):
        assert plain.axpy_kernel[(3,)](x, x, out, 2.0, 300, BLOCK_SIZE=128) is None
        tuned.scale(torch.ones(1000), 2.0)
    pool.drain()
    assert bool((out == -7.0).all())  # nothing ran, in this thread or the pool's
    assert pool.submitted == 1 + 1  # the plain launch; the call's one config (not again for the chosen one)
    plain.axpy_kernel[(3,)](x, x, out, 2.0, 300, BLOCK_SIZE=128)
    assert bool((out == 3.0).all())  # and launches run again after the block


def test_a_sibling_with_a_pool_ends_its_step_after_its_compiles(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """In a real sibling process (sent straight to the sandbox): its calls are made, every
    compile drained, and the step ends with ``done``, a failing call skipped."""
    from kernelband.worker.call_spec import DerivedCall, TensorArg, ValueArg

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = axpy_task(tmp_path, AXPY)

    def call(n: int, alpha: "float | str", seed: int) -> DerivedCall:
        x, y = (TensorArg((n,), "float32", "cpu", True, k, True) for k in (0, 1))
        return DerivedCall("axpy", (ValueArg(alpha), x, y), {}, flavour="sizes", seed=seed, sizes={})

    # three specializations (n % 16, n == 16 * k, n == 1), one twice, and a launch whose
    # compile raises (a string where the kernel takes a float): dropped, the rest compiled
    calls = [call(n, 2.0, k) for k, n in enumerate((17, 300, 32, 1))] + [call(64, "two", 9)]
    sibling = VariantJob(Job(task, {"v": AXPY}, [Warm(calls, "v", compile_threads=3)], interpreted=True), timeout_s=120)
    try:
        sibling.start()
        assert [f.kind for f in sibling.frames()] == ["done"], sibling.stderr_tail()
    finally:
        sibling.close()
