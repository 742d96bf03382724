"""Work the session process does while it would otherwise wait for the judge to start and
prepare the original: the generator is built and the original analysed, and the search's
slow imports (scikit-learn, for the clustering) load, each in a background thread. On a
GPU machine that work took 1-2.5 s between the baseline and the first candidate
(benchmarks/results/eval_speed/, the startup table)."""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Callable, Optional

from .model import Variant

if TYPE_CHECKING:  # built in the thread below; its modules are not loaded before then
    from .generators.base import Generator

# imported by the search after the first candidates return (search/cluster.kmeans)
SEARCH_IMPORTS = ("sklearn.cluster", "threadpoolctl")


def warm_imports(names: tuple[str, ...] = SEARCH_IMPORTS) -> threading.Thread:
    """Import ``names`` in a daemon thread; a missing one is reported later, where it is
    needed (deps.require), not here."""

    def run() -> None:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the import that needs it says what is wrong
                pass

    thread = threading.Thread(target=run, daemon=True, name="kernelband-warm-imports")
    thread.start()
    return thread


class GeneratorWarmup:
    """The session's generator, built in a background thread, which then analyses the
    original (a generator with a ``warm(variant, kernel)`` method). ``result()`` returns it,
    or raises what building it raised."""

    def __init__(self, make: Callable[[], Generator], original: Variant, kernel: str) -> None:
        self._make = make
        self._original = original
        self._kernel = kernel
        self._generator: Optional[Generator] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="kernelband-warm-generator")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._generator = self._make()
        except BaseException as e:  # noqa: BLE001 - re-raised by result(), in the session's thread
            self._error = e
            return
        warm = getattr(self._generator, "warm", None)
        if callable(warm):
            try:
                warm(self._original, self._kernel)
            except Exception:  # noqa: BLE001 - the search's own call reports it
                pass

    def result(self) -> Generator:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._generator is not None  # _run sets one or the error
        return self._generator
