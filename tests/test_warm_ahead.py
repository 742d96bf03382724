"""A job's calls beyond the harness compiled a few threads at a time before they run one
by one (kernelband/worker/warm_ahead.py). On a GPU that overlaps their Triton compiles;
here, under the interpreter, what is tested is what must hold anywhere: the warm calls
run in threads and launch nothing, the threads are gone before the step's checks, an
autotuned module is left alone, and no verdict changes.

What would abuse it: the warm calls are the candidate's own code in threads of its
process, so a candidate could tell them from the real calls (by the thread) and leave
something behind: a thread of its own that outlives them."""
from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.kernels import AUTOTUNED, SCALE, SLOW_BEYOND, axpy_task, judges_beyond_the_harness, load_module

from kernelband.worker.call_spec import DerivedCall, TensorArg, ValueArg
from kernelband.worker.jobs import VariantJob
from kernelband.worker.messages import Derived, Job, Mark
from kernelband.worker.warm_ahead import warm_ahead

# the wrapper notes who called it and what it returned, on a fill a launch would overwrite
_SEEN = '''

SEEN = []


def scale_seen(x, factor):
    import threading as _threading
    out = torch.full_like(x, -7.0)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 128),)](x, out, n, factor, BLOCK=128)
    SEEN.append((_threading.current_thread().name, out))
    return out
'''


def _calls(sizes: tuple[int, ...], fn: str = "scale_seen") -> list[DerivedCall]:
    return [DerivedCall(fn=fn, args=(TensorArg(shape=(n,), dtype="float32", device="cpu", contiguous=True, id=0,
                                               floating=True), ValueArg(v=1.5)),
                        kwargs={}, flavour="sizes", seed=k, sizes={}) for k, n in enumerate(sizes)]


def test_warm_calls_run_in_threads_launch_nothing_and_leave_no_thread(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    module = load_module(tmp_path, SCALE + _SEEN, "scale_warm")
    before = threading.active_count()
    seconds = warm_ahead(SimpleNamespace(module=module), _calls((300, 1001, 17, 4097)), threads=3)
    assert seconds > 0
    assert threading.active_count() == before  # joined before the step's runtime check
    assert sorted(out.numel() for _, out in module.SEEN) == [17, 300, 1001, 4097]
    assert all(name.startswith("kernelband-warm") for name, _ in module.SEEN), module.SEEN
    assert all(bool((out == -7.0).all()) for _, out in module.SEEN)  # no launch ran
    module.SEEN.clear()
    module.scale_seen(module.torch.ones(300), 2.0)
    assert bool((module.SEEN[0][1] == 2.0).all())  # and launches run again after


def test_nothing_is_warmed_for_one_call_no_threads_or_an_autotuned_module(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An autotuner keeps its chosen configs and its lent bench on the instance, not per
    thread: concurrent warm calls would leave them changed for the real ones."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    plain = SimpleNamespace(module=load_module(tmp_path, SCALE + _SEEN, "scale_plain"))
    assert warm_ahead(plain, _calls((300,)), threads=4) == 0.0
    assert warm_ahead(plain, _calls((300, 1001)), threads=1) == 0.0
    assert warm_ahead(plain, _calls((300, 1001)), threads=0) == 0.0
    assert plain.module.SEEN == []
    tuned = SimpleNamespace(module=load_module(tmp_path, AUTOTUNED + _SEEN.replace(
        "scale_kernel[(triton.cdiv(n, 128),)](x, out, n, factor, BLOCK=128)",
        'scale_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, out, n, factor)'), "scale_tuned"))
    assert warm_ahead(tuned, _calls((300, 1001, 17)), threads=4) == 0.0
    assert tuned.module.SEEN == []


# correct on every call, but a warm call (told apart by its thread) leaves a thread behind
_LEAVES_A_THREAD = SCALE + _SEEN.replace(
    "    SEEN.append((_threading.current_thread().name, out))\n",
    "    if _threading.current_thread().name.startswith('kernelband-warm'):\n"
    "        _threading.Thread(target=__import__('time').sleep, args=(30,), daemon=True).start()\n"
    "    SEEN.append((_threading.current_thread().name, out))\n")


def test_a_thread_left_behind_by_a_warm_call_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sent straight to the variant process (no screen): the step's first runtime check
    sees the thread, and the job fails as tampered rather than reporting its outputs."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = axpy_task(tmp_path, _LEAVES_A_THREAD)
    steps = [Derived(_calls((300, 1001, 17)), "v", "a", warm_threads=3), Mark()]
    job = VariantJob(Job(task, {"v": _LEAVES_A_THREAD}, steps, interpreted=True), timeout_s=120)
    try:
        job.start()
        frames = list(job.frames())
    finally:
        job.close()
    errors = [f.meta for f in frames if f.kind == "error"]
    assert errors and "thread" in errors[0].message, [f.kind for f in frames]
    assert not any(f.kind == "outputs" for f in frames)
    honest = SCALE + _SEEN
    job = VariantJob(Job(axpy_task(tmp_path, honest), {"v": honest}, steps, interpreted=True), timeout_s=120)
    try:
        job.start()
        kinds = [f.kind for f in job.frames()]
    finally:
        job.close()
    assert kinds == ["outputs", "outputs", "outputs", "mark", "done"], kinds


def test_warming_ahead_changes_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads on, siblings off: a candidate wrong only beyond the harness is refused there
    and a correct one passes."""
    from helpers.kernels import prepared_evaluator

    monkeypatch.setenv("KERNELBAND_WARM", "off")
    monkeypatch.setenv("KERNELBAND_WARM_THREADS", "4")
    ev = prepared_evaluator(tmp_path, "slow_beyond", SLOW_BEYOND, "scale_kernel", "harness_scale")
    try:
        judges_beyond_the_harness(ev)
    finally:
        ev.close()
