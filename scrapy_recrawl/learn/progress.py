"""Progress of a GP4C run, as a callback: one line per generation and seed on stderr."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

Progress = Callable[[int, int, int, int, float, float], None]


def stderr_progress(stream: TextIO) -> Progress:
    """A text progress bar, one line per generation and seed (no dependency)."""

    def show(seed: int, gen: int, gens: int, seeds: int, best: float, new_share: float) -> None:
        width = 30
        done = int(width * (gen + 1) / gens)
        bar = "#" * done + "." * (width - done)
        stream.write(
            f"seed {seed + 1}/{seeds} [{bar}] generation {gen + 1}/{gens} "
            f"best {best:.4f} (evaluated {new_share:.0%} of lookups)\n"
        )
        stream.flush()

    return show
