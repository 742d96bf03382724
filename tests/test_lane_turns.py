"""The reference lane as a control of each candidate's timing turn (kernelband/worker/
lane_turns.py): a turn where the original ran off its usual level is taken again, and a
candidate gains nothing from slowing the original's samples. The turns here are the
samples a turn returns (ms); the GPU measurement they stand for is in the module's
docstring (softmax_out on an H200)."""
from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from kernelband.worker.lane_turns import DRIFT, MAX_TURNS, SHIFT_CANDIDATES, LaneLevel, Turn, TurnQueue, timed_turns


def _turns(*pairs: tuple[float, float]) -> Callable[[], Turn]:
    """A turn taker returning (candidate ms, original ms) turns in order, five rounds each."""
    queue = list(pairs)

    def take() -> Turn:
        cand, orig = queue.pop(0)
        return Turn([cand] * 5, [orig * f for f in (0.99, 1.0, 1.0, 1.01, 1.0)], "cuda-events")
    return take


def _speedup(turn: Turn) -> float:
    return turn.original_median / sorted(turn.candidate_ms)[len(turn.candidate_ms) // 2]


def test_an_undisturbed_turn_counts_at_once_and_sets_the_level():
    level = LaneLevel(0.459)
    turn, taken = timed_turns(_turns((0.40, 0.46)), level)
    assert taken == 1 and abs(_speedup(turn) - 0.46 / 0.40) < 1e-9
    assert abs(level.ms - 0.4595) < 1e-3


def test_the_softmax_out_turn_is_taken_again_and_the_undisturbed_one_counts():
    """The H200 turn: original 0.837 ms (baseline 0.459), candidate 0.648: ranked 1.29x.
    Taken again, the candidate runs as fast as the original."""
    level = LaneLevel(0.459)
    turn, taken = timed_turns(_turns((0.648, 0.837), (0.458, 0.459)), level)
    assert taken == 2
    assert abs(_speedup(turn) - 1.0) < 0.01


def test_a_candidate_that_slows_the_original_in_every_turn_gains_nothing():
    """The cheat: the candidate's process makes the original's samples slower (work of
    its own on the GPU between its samples) in all its turns. It is compared with the
    original at its level: its own time, not the slowed original's, decides."""
    level = LaneLevel(0.459)
    turn, taken = timed_turns(_turns((0.46, 0.83), (0.46, 0.85), (0.46, 0.80)), level)
    assert taken == MAX_TURNS
    assert abs(_speedup(turn) - 0.459 / 0.46) < 0.01
    # and its turns do not move the level that honest candidates are held to
    assert abs(level.ms - 0.459) < 1e-9
    honest, taken = timed_turns(_turns((0.40, 0.46)), level)
    assert taken == 1 and abs(_speedup(honest) - 0.46 / 0.40) < 1e-9


def test_a_turn_within_the_drift_is_not_taken_again():
    level = LaneLevel(0.459)
    inside = 0.459 * (1 + DRIFT * 0.9)
    _, taken = timed_turns(_turns((0.40, inside)), level)
    assert taken == 1


def test_a_candidate_settled_as_far_slower_is_not_timed_again():
    level = LaneLevel(0.459)
    _, taken = timed_turns(_turns((9.0, 0.9), (9.0, 0.459)), level, settled=lambda turn: True)
    assert taken == 1


def test_without_a_level_one_turn_counts_as_taken():
    """The interpreter (its times are no speed claim) and a lane without a baseline."""
    turn, taken = timed_turns(_turns((0.648, 0.837), (0.458, 0.459)), None)
    assert taken == 1 and turn.original_median == 0.837


def test_the_level_follows_its_recent_undisturbed_turns():
    level = LaneLevel(0.459)
    for ms in (0.47, 0.48, 0.49, 0.50, 0.51):  # drifting slowly, each within DRIFT of the level
        _, taken = timed_turns(_turns((0.4, ms)), level)
        assert taken == 1
    assert 0.47 <= level.ms <= 0.50


def test_an_original_that_runs_otherwise_beside_candidates_moves_the_level_after_five():
    """Every turn 30% off the baseline, alike (the original's caches beside a candidate):
    five candidates take three turns each, then the level is there and one turn does."""
    level = LaneLevel(0.459)
    shifted = 0.459 * 1.3
    for _ in range(SHIFT_CANDIDATES):
        _, taken = timed_turns(_turns(*[(0.40, shifted)] * MAX_TURNS), level)
        assert taken == MAX_TURNS
    assert abs(level.ms - shifted) < 1e-9
    turn, taken = timed_turns(_turns((0.40, shifted)), level)
    assert taken == 1 and abs(_speedup(turn) - shifted / 0.40) < 1e-9


def test_disturbances_that_do_not_agree_never_move_the_level():
    """Candidates that slow the original each by their own amount, or an undisturbed one
    among them, leave the level where the undisturbed turns put it."""
    level = LaneLevel(0.459)
    for slowed in (0.83, 0.61, 0.95, 0.70, 0.88, 0.66, 0.79):
        timed_turns(_turns(*[(0.46, slowed)] * MAX_TURNS), level)
    assert abs(level.ms - 0.459) < 1e-9
    for k in range(2 * SHIFT_CANDIDATES):
        pairs = [(0.46, 0.459)] if k % 4 == 3 else [(0.46, 0.83)] * MAX_TURNS
        timed_turns(_turns(*pairs), level)
    assert abs(level.ms - 0.459) < 1e-3


def _wait_until(cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_the_lane_gives_its_turn_to_the_candidate_that_started_first():
    queue, order, inside = TurnQueue(), [], []
    queue.acquire()  # a turn in progress: everyone below waits

    def candidate(since: float) -> None:
        with queue.turn(since):
            inside.append(since)
            assert len(inside) == 1, "two turns at once"
            order.append(since)
            time.sleep(0.002)
            inside.pop()

    threads = []
    for since in (3.0, 1.0, 4.0, 2.0):  # arriving in this order
        t = threading.Thread(target=candidate, args=(since,))
        t.start()
        threads.append(t)
        _wait_until(lambda: len(queue._waiting) == len(threads))
    queue.release()
    for t in threads:
        t.join(10)
    assert order == [1.0, 2.0, 3.0, 4.0]


def test_a_plain_turn_waits_as_of_now_and_a_failed_turn_frees_the_lane():
    queue, order = TurnQueue(), []
    queue.acquire()
    late = threading.Thread(target=lambda: (queue.acquire(), order.append("now"), queue.release()))
    late.start()
    _wait_until(lambda: len(queue._waiting) == 1)
    early = threading.Thread(target=lambda: (queue.acquire(0.0), order.append("started earlier"), queue.release()))
    early.start()
    _wait_until(lambda: len(queue._waiting) == 2)
    queue.release()
    late.join(10)
    early.join(10)
    assert order == ["started earlier", "now"]
    with pytest.raises(RuntimeError):
        with queue.turn(5.0):
            raise RuntimeError("the candidate's process died in its turn")
    with queue:  # the lane is free again
        pass

