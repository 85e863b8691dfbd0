"""Progress of a GP4C run: one bar over every seed's generations, with its ETA.

A terminal sees one ``rich`` progress bar (seeds x generations, the best fitness
so far, elapsed time and ETA), redrawn in place. A log or CI job (stderr not a
terminal) sees at most :data:`MILESTONES` lines, one each time the run passes a
quarter of its generations, each with the same figures: a 250-generation run
leaves four lines in a log, not 250.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

#: (seed index, generation, generations, seeds, best fitness, share of lookups replayed)
Progress = Callable[[int, int, int, int, float, float], None]

#: the shares of the run at which a log (not a terminal) gets a line
MILESTONES = (0.25, 0.5, 0.75, 1.0)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


class RunProgress:
    """The progress of one run of ``total`` generations (all seeds together).

    Use it as a context manager; :meth:`step` is the :data:`Progress` callback of
    :func:`scrapy_recrawl.learn.search.run_seed`, :meth:`advance` moves the bar by
    whole seeds (the parallel run hears of a seed when it ends).
    """

    def __init__(self, stream: TextIO, total: int, *, terminal: bool | None = None) -> None:
        from rich.console import Console

        self.total = max(1, total)
        self.console = Console(file=stream, force_terminal=terminal, highlight=False)
        self.stream = stream
        self.done = 0
        self.best = float("-inf")
        self._next_milestone = 0
        self._t0 = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None

    @property
    def live(self) -> bool:
        """A bar redrawn in place (a terminal), rather than milestone lines."""
        return bool(self.console.is_terminal)

    def __enter__(self) -> RunProgress:
        self._t0 = time.perf_counter()
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("evolving"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("generations  best {task.fields[best]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._bar.start()
            self._task = self._bar.add_task("evolve", total=self.total, best="-")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def step(self, seed: int, gen: int, gens: int, seeds: int, best: float, share: float) -> None:
        self.advance(1, best)

    def advance(self, generations: int, best: float) -> None:
        self.done = min(self.total, self.done + generations)
        self.best = max(self.best, best)
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, best=f"{self.best:.4f}")
            return
        share = self.done / self.total
        line = ""
        while self._next_milestone < len(MILESTONES) and share >= MILESTONES[self._next_milestone]:
            self._next_milestone += 1
            line = self.line()
        if line:  # several quarters passed at once (a parallel seed): one line
            self.stream.write(line + "\n")
            self.stream.flush()

    def line(self) -> str:
        elapsed = time.perf_counter() - self._t0
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        return (
            f"evolving: {self.done}/{self.total} generations ({self.done / self.total:.0%}), "
            f"best {self.best:.4f}, {_clock(elapsed)} elapsed, ETA {_clock(eta) if eta == eta else '?'}"
        )
