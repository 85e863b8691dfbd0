"""The report's plot (matplotlib, the ``plot`` extra): per cycle, the changes found,
the pages fetched and the estimated freshness, for the scorer in use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .cycles import CycleRow


def figure(rows: Sequence[CycleRow], title: str) -> Any:
    """Two panels sharing the cycle axis: fetched and changed (pages), freshness (share)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cycles = [r.cycle for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    top.plot(cycles, [r.fetched for r in rows], marker="o", label="fetched")
    top.plot(cycles, [r.changed for r in rows], marker="s", label="changes found")
    top.set_ylabel("pages")
    top.legend(loc="best")
    top.grid(alpha=0.3)
    top.set_title(title)
    fresh = [float("nan") if r.freshness is None else r.freshness for r in rows]
    bottom.plot(cycles, fresh, marker="^", color="tab:green", label="estimated freshness")
    low = [float("nan") if r.freshness_low is None else r.freshness_low for r in rows]
    high = [float("nan") if r.freshness_high is None else r.freshness_high for r in rows]
    bottom.fill_between(cycles, low, high, color="tab:green", alpha=0.2, label="90% interval")
    bottom.set_ylabel("estimated freshness (share)")
    bottom.set_ylim(0, 1.05)
    bottom.set_xlabel("cycle")
    bottom.legend(loc="best")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def save(rows: Sequence[CycleRow], title: str, path: str) -> None:
    import matplotlib.pyplot as plt

    fig = figure(rows, title)
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
