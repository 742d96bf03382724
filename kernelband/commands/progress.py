"""A one-line progress display on a terminal, fed by the same events editors get."""

from __future__ import annotations

from typing import Optional, TextIO

from ..events import Baseline, Candidate, Event, Finished, Log, Progress, Started


class ProgressBar:
    def __init__(self, stream: TextIO, total: Optional[int], width: int = 24) -> None:
        self.stream = stream
        self.total = total
        self.width = width
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.best = 1.0

    def _line(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def __call__(self, ev: Event) -> None:
        p = ev.payload
        if isinstance(p, Started):
            self._line(f"optimizing {p.kernel} ({p.search}, {p.generator} generator)", final=True)
        elif isinstance(p, Baseline):
            clock = "CPU interpreter" if p.clock == "cpu-interpreter" else "GPU"
            ms = f"{p.time_ms:.4g} ms" if p.time_ms is not None else "measured"
            self._line(f"original: {ms} ({clock})" + (f"; {p.message}" if p.message else ""), final=True)
        elif isinstance(p, Candidate):
            # ratios against the original timed the same way (warm); CPU ones are labelled as such
            cpu = " cpu" if p.speed_claim is False else ""
            sp = f"{p.speedup:.2f}x{cpu}" if p.speedup else p.status
            if not self.tty:
                self._line(f"  #{p.index:>3} {p.strategy or '-':<13} {sp:<10} {p.description or p.message}"[:160])
        elif isinstance(p, Progress):
            self.best = p.best_speedup or self.best
            if self.tty:
                frac = min(p.done / p.total, 1.0) if p.total else 0.0
                bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
                cpu = " (CPU time)" if p.speed_claim is False else ""
                self._line(f"[{bar}] {p.done}/{p.total or '?'}  best {self.best:.2f}x{cpu}  ({p.message})")
        elif isinstance(p, Log):
            self._line(p.message, final=True)
        elif isinstance(p, Finished) and self.tty:
            self._line("", final=False)
