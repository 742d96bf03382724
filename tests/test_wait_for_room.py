"""A job of a harness that fills the GPU waits while a closed job's process gives its memory
back (``judge_core.wait_for_room``), and never for memory no teardown will return."""
from __future__ import annotations


def test_a_job_waits_while_a_closed_jobs_memory_comes_back_and_not_for_memory_that_never_will():
    from kernelband.worker import judge_core

    gib = 1 << 30
    freeing = iter([10 * gib, 40 * gib, 70 * gib, 100 * gib, 120 * gib])
    waited = judge_core.wait_for_room(110 * gib, lambda: next(freeing), timeout_s=5)
    assert 0.15 <= waited < 1.0  # four polls, until the teardown gave the room back
    held = judge_core.wait_for_room(110 * gib, lambda: 50 * gib, timeout_s=5)  # another program holds it
    assert judge_core.ROOM_STALL_S <= held < judge_core.ROOM_STALL_S + 0.3
    assert judge_core.wait_for_room(1 * gib, lambda: 50 * gib) < 0.01
