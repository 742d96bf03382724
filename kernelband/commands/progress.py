"""A one-line progress display on a terminal, fed by the same events editors get."""
from __future__ import annotations

from typing import Optional, TextIO

from ..events import Event


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
        d = ev.data
        if ev.type == "started":
            self._line(f"optimizing {d['kernel']} ({d['search']}, {d['generator']} generator)", final=True)
        elif ev.type == "baseline":
            clock = "CPU interpreter" if d.get("clock") == "cpu-interpreter" else "GPU"
            self._line(f"original: {d['time_ms']:.4g} ms ({clock})" + (f"; {d['message']}" if d.get("message") else ""),
                       final=True)
        elif ev.type == "candidate":
            # ratios against the original timed the same way (warm); CPU ones are labelled as such
            cpu = " cpu" if d.get("speed_claim") is False else ""
            sp = f"{d['speedup']:.2f}x{cpu}" if d.get("speedup") else d["status"]
            if not self.tty:
                self._line(f"  #{d['index']:>3} {d.get('strategy') or '-':<13} {sp:<10} {d.get('description') or d.get('message', '')}"[:160])
        elif ev.type == "progress":
            self.best = d.get("best_speedup") or self.best
            if self.tty:
                done, total = d["done"], d.get("total")
                frac = min(done / total, 1.0) if total else 0.0
                bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
                cpu = " (CPU time)" if d.get("speed_claim") is False else ""
                self._line(f"[{bar}] {done}/{total or '?'}  best {self.best:.2f}x{cpu}  ({d.get('message', '')})")
        elif ev.type == "log":
            self._line(d.get("message", ""), final=True)
        elif ev.type == "result" and self.tty:
            self._line("", final=False)
