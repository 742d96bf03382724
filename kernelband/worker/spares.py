"""Spare variant processes: forked, sandboxed and holding a CUDA context before a
candidate needs one.

Before a candidate's module is even imported, its process makes its CUDA context: a
median 0.6-1.2 s a candidate with eight lanes on one H200 (``vp.cuda_context``,
benchmarks/results/eval_speed/h200_5777734), on the path of every verdict. A spare makes
it while it waits: the judge keeps as many spares as it has lanes once the original's
reference job has run, a new candidate job takes one (``VariantJob.adopt``), and another
is started in its place.

A spare has run nothing of any module: it is a child of the fork server, in a sandbox
and a directory of its own, blocked on reading its job; it takes one job, ever, and is
closed unused when the task changes or the judge ends. It is made exactly as a
candidate's job process is (the same environment, the same private cache), so taking one
changes nothing that job can see or reach.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Optional

from ..trace import mark
from .jobs import VariantJob

EARLY_CUDA_ENV = "KERNELBAND_EARLY_CUDA"  # "1" in a spare's environment on a GPU: make the context first
SPARES_ENV = "KERNELBAND_SPARES"  # a number overrides how many spares are kept (0: none)
REFILL_GAP_S = 1.0  # about one CUDA context's making on one H200: replacements are made one by one


# what one spare holds on the GPU: its CUDA context and torch's (about half a GiB on an
# H200); spares take at most an eighth of the free memory, so that several judges on one
# GPU (optimize-all, the red-team suites) leave room for the work itself
CONTEXT_BYTES = 600 << 20


def wanted(on_gpu: bool, lanes: int, free_bytes: int = 0) -> int:
    """How many spares to keep: one a lane on a GPU, as many as an eighth of its free
    memory holds; none under the interpreter (there is no context to make there), unless
    ``KERNELBAND_SPARES`` says how many (the tests)."""
    override = os.environ.get(SPARES_ENV, "")
    if override.isdigit():
        return int(override)
    return min(lanes, free_bytes // (8 * CONTEXT_BYTES)) if on_gpu else 0


class Spares:
    """The judge's spares for one task's candidate jobs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: list[VariantJob] = []
        self._make: Optional[Callable[[], VariantJob]] = None
        self._count = 0
        self._wanted = threading.Event()  # a spare was taken: the refiller makes another
        self._refiller: Optional[threading.Thread] = None

    def keep(self, count: int, make: Callable[[], VariantJob]) -> None:
        """From now on keep ``count`` spares, each made (and spawned) by ``make``; those of
        an earlier task are closed. The first ``count`` start at once, in the background
        (the first candidates take them); each taken one is replaced by ``_refill_loop``."""
        self.close()
        with self._lock:
            self._make, self._count = make, count
        for _ in range(count):
            threading.Thread(target=self._add_one, daemon=True, name="kernelband-spare").start()
        if count and self._refiller is None:
            self._refiller = threading.Thread(target=self._refill_loop, daemon=True, name="kernelband-spares")
            self._refiller.start()

    def take(self, fits: Callable[[VariantJob], bool]) -> Optional[VariantJob]:
        """A live spare that ``fits`` the job to come (else None: the job spawns its own),
        and another started in its place. Spares that no longer fit are closed.

        The choice is made under the lock: the first wave's candidates ask at once, one
        thread each, and a take that emptied the list while it looked sent the others to
        fresh processes beside idle spares (5 of the first 8 in a session on one H200)."""
        stale: list[VariantJob] = []
        taken: Optional[VariantJob] = None
        with self._lock:
            kept: list[VariantJob] = []
            for spare in self._ready:
                if not (spare.proc is not None and spare.proc.poll() is None and fits(spare)):
                    stale.append(spare)
                elif taken is None:
                    taken = spare
                else:
                    kept.append(spare)
            self._ready = kept
        for spare in stale:
            spare.close()
        if taken is not None:
            self._wanted.set()
        return taken

    def _refill_loop(self) -> None:
        """Taken spares replaced one at a time, ``REFILL_GAP_S`` apart: eight contexts made at
        once beside the first candidates and the original's derivation slowed all of them
        (the derivation 3 s -> 10 s on one H200)."""
        while True:
            self._wanted.wait()
            self._wanted.clear()
            while True:
                with self._lock:
                    short = self._make is not None and len(self._ready) < self._count
                if not short:
                    break
                self._add_one()
                time.sleep(REFILL_GAP_S)

    def _add_one(self) -> None:
        with self._lock:
            make, wanted_now = self._make, self._count - len(self._ready)
        if make is None or wanted_now <= 0:
            return
        try:
            spare = make()
        except Exception as e:  # noqa: BLE001 - a head start only: jobs spawn their own
            mark("spare.failed", error=f"{type(e).__name__}: {e}"[:200])
            return
        with self._lock:
            if self._make is make and len(self._ready) < self._count:
                self._ready.append(spare)
                mark("spare.ready", job=spare.nonce[:8])
                return
        spare.close()  # the task changed, or enough are kept, while it started

    def close(self) -> None:
        """Close every spare and keep none."""
        with self._lock:
            ready, self._ready, self._make, self._count = self._ready, [], None, 0
        for spare in ready:
            spare.close()
