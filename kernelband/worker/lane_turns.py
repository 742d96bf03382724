"""The reference lane as a control of each timing turn.

In a candidate's timing turn the original is sampled beside it (``judge_candidate``), and
its median there should sit at its usual level. A turn where it does not was disturbed
(the GPU's clocks, work of another program on it, memory another process gave back): the
ratio of such a turn measures the disturbance as much as the candidate. Seen on an H200
(softmax_out, 1 GiB of outputs): in one turn the original ran 0.837 ms against its 0.459 ms
baseline and the candidate 0.648 ms; the search ranked the candidate 1.29x, the paired
re-measurement found 1.001x. A disturbed turn is taken again, at most ``MAX_TURNS`` in
all, and the least disturbed one counts; where even that one is disturbed, the original's
samples count at their level (a candidate that slows the original's samples, in every
turn, gains nothing: it is compared with the original as it usually runs).

Nothing here decides a verdict: a speedup is still only the paired re-measurement's. The
level moves only with undisturbed turns, or with five candidates in a row whose turns sit
off it alike (``LaneLevel``): what such a run of candidates could move is the search's
ranking, never a claim.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

DRIFT = 0.15  # the original's median this far off its level: the turn was disturbed
MAX_TURNS = 3
RECENT_TURNS = 9  # the level is the median of the original's last turns (the baseline's first)
SHIFT_CANDIDATES = 5  # this many in a row whose best turn was off the level, all alike: the level moves


@dataclass(frozen=True)
class Turn:
    """One exclusive timing turn: the candidate's and the original's samples (ms)."""

    candidate_ms: list[float]
    original_ms: list[float]
    clock: str

    @property
    def original_median(self) -> float:
        return statistics.median(self.original_ms)


class LaneLevel:
    """The original's usual median in timing turns, from the turns that were not disturbed
    (a disturbed one recorded would let a candidate that slows the original move the
    level). Where the original runs otherwise beside candidates than alone (its caches,
    the clocks), every turn sits off the baseline by about the same: ``SHIFT_CANDIDATES``
    candidates in a row whose best turns agree within a third of the drift move the level
    there, rather than every later candidate taking three turns."""

    def __init__(self, baseline_ms: float) -> None:
        self._recent: deque[float] = deque([baseline_ms], maxlen=RECENT_TURNS)
        self._off: deque[float] = deque(maxlen=SHIFT_CANDIDATES)  # the last best turns off the level, in a row
        self._lock = threading.Lock()  # candidates' threads record their turns concurrently

    @property
    def ms(self) -> float:
        with self._lock:
            return statistics.median(self._recent)

    def off(self, turn: Turn) -> float:
        """How far the turn's original median is from the level, as a fraction of it."""
        level = self.ms
        return abs(turn.original_median / level - 1.0) if level > 0 else 0.0

    def disturbed(self, turn: Turn) -> bool:
        return self.off(turn) > DRIFT

    def record(self, turn: Turn) -> None:
        with self._lock:
            self._recent.append(turn.original_median)
            self._off.clear()

    def record_off(self, turn: Turn) -> None:
        """A candidate's best turn was still off the level."""
        with self._lock:
            self._off.append(turn.original_median)
            if len(self._off) < SHIFT_CANDIDATES:
                return
            centre = statistics.median(self._off)
            if centre > 0 and all(abs(ms / centre - 1.0) <= DRIFT / 3 for ms in self._off):
                self._recent.clear()
                self._recent.extend(self._off)
                self._off.clear()


def timed_turns(
    take: Callable[[], Turn], level: Optional[LaneLevel], settled: Callable[[Turn], bool] = lambda turn: False
) -> tuple[Turn, int]:
    """(the turn that counts, how many were taken): turns until one is not disturbed, or
    ``settled`` says more cannot change the outcome (a candidate far slower), at most
    ``MAX_TURNS``; without a level (the interpreter, no baseline) one turn. Every turn
    holds a sample of the original (each round takes one)."""
    turns = [take()]
    if level is None:
        return turns[0], 1
    while len(turns) < MAX_TURNS and not settled(turns[-1]) and level.disturbed(turns[-1]):
        turns.append(take())
    best = min(turns, key=level.off)
    if level.disturbed(best):
        level.record_off(best)
        return at_level(best, level), len(turns)
    level.record(best)
    return best, len(turns)


def at_level(turn: Turn, level: LaneLevel) -> Turn:
    """The turn with the original's samples scaled to the level (their spread kept)."""
    scale = level.ms / turn.original_median if turn.original_median > 0 else 1.0
    return Turn(turn.candidate_ms, [ms * scale for ms in turn.original_ms], turn.clock)


class TurnQueue:
    """The lane's turns, one at a time, to the waiting caller that started first (its
    ``since``; a plain ``with`` waits as of now). A plain lock wakes any waiter: the first
    candidate of a wave waited about a second behind two later ones' turns on an H200
    (add_scale, benchmarks/results/eval_speed/h200_8379740_probe), and the first verdict
    the user sees with it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._waiting: list[tuple[float, int]] = []  # a heap of (since, arrival)
        self._arrivals = itertools.count()

    def acquire(self, since: Optional[float] = None) -> None:
        with self._cond:
            ticket = (time.perf_counter() if since is None else since, next(self._arrivals))
            heapq.heappush(self._waiting, ticket)
            while self._held or self._waiting[0] != ticket:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._held = True

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()

    @contextlib.contextmanager
    def turn(self, since: Optional[float] = None) -> Iterator[None]:
        self.acquire(since)
        try:
            yield
        finally:
            self.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
