"""Is the winner better than the presets beyond noise? The spread over seeds and folds.

One test fold gives one number per scorer; how much of a difference is noise it
does not say. So after the run every *held-out* fold (the validation folds and
the test fold: the pages no individual was trained on) is replayed on its own:

* the winner's spread is over seeds x held-out folds: each seed's own pick (the
  final selection among that seed's candidates) on each held-out fold, so it
  holds both the GP's luck and the pages' luck;
* each preset's spread is over the held-out folds (a preset has no seed).

**The rule.** Each spread is read as the interval mean ± one standard deviation
(``ddof=1``). The winner is *better beyond noise* than the best preset (the one
with the highest mean, the oracle excluded, and ``rand``: no formula a setting can
name) only when the intervals do not overlap: the winner's mean - sd is above the
preset's mean + sd. Otherwise ``recrawl-evolve`` warns "not better than <preset>
beyond noise" and recommends that preset (learn/recommend.py). The validation
folds chose among the candidates, which favours the winner there: the rule errs
towards crediting the winner, so a warning is worth heeding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scrapy_recrawl.core.simulate import ORACLE
from scrapy_recrawl.scoring import PRESETS, TerminalRegistry

from .config import EvolveConfig
from .fitness import replay_fitness
from .search import Candidate, Rows, _replay, select_final


@dataclass
class Spread:
    """One scorer's fitness over seeds and/or folds."""

    label: str
    values: np.ndarray
    over: str

    @property
    def mean(self) -> float:
        return float(self.values.mean())

    @property
    def sd(self) -> float:
        return float(self.values.std(ddof=1)) if self.values.size > 1 else 0.0

    def interval(self) -> tuple[float, float]:
        return self.mean - self.sd, self.mean + self.sd

    def text(self) -> str:
        return (
            f"{self.mean:.4f} ± {self.sd:.4f} ({self.values.min():.4f}..{self.values.max():.4f} "
            f"over {self.over})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "sd": self.sd,
            "min": float(self.values.min()),
            "max": float(self.values.max()),
            "n": int(self.values.size),
            "over": self.over,
        }


@dataclass
class NoiseReport:
    """The winner's and the presets' spread on the held-out folds, and the verdict."""

    fitness: str
    winner: Spread
    presets: list[Spread]

    @property
    def best_preset(self) -> Spread:
        """The highest mean among the presets a scorer setting can name (``rand``, no
        formula, only when it is the only one)."""
        named = [s for s in self.presets if _formula(s.label)] or self.presets
        return max(named, key=lambda s: s.mean)

    @property
    def better(self) -> bool:
        """The rule of the module docstring: the intervals do not overlap."""
        return self.winner.interval()[0] > self.best_preset.interval()[1]

    def warning(self) -> str | None:
        if self.better:
            return None
        b = self.best_preset
        how = (
            "it is below the preset's"
            if self.winner.interval()[1] < b.interval()[0]
            else "the intervals overlap"
        )
        return (
            f"the winner is not better than {b.label} beyond noise on the held-out folds "
            f"({self.fitness}: winner {self.winner.text()}; {b.label} {b.text()}; {how}): "
            f"use RECRAWL_SCORER = {b.label!r}, or learn on a longer history"
        )

    def rows(self) -> list[Spread]:
        """The winner, then the presets best first."""
        return [self.winner, *sorted(self.presets, key=lambda s: -s.mean)]

    def to_json(self) -> dict[str, Any]:
        return {
            "fitness": self.fitness,
            "better_than_best_preset": self.better,
            "best_preset": self.best_preset.label,
            "spread": {s.label: s.to_json() for s in self.rows()},
        }


def _formula(label: str) -> bool:
    preset = PRESETS.get(label)
    return preset is not None and preset.expression is not None


def held_out_spread(
    folds: Sequence[Rows],
    config: EvolveConfig,
    terminals: Sequence[str],
    candidates: Sequence[Candidate],
    baselines: Sequence[str],
    registry: TerminalRegistry | None = None,
) -> NoiseReport:
    """Replay each seed's pick and every preset on each held-out fold (``folds``: the
    rows, with their groups, of each validation fold and of the test fold)."""
    picks = []
    for seed in dict.fromkeys(c.seed for c in candidates):
        try:
            picks.append(select_final([c for c in candidates if c.seed == seed], config.selection))
        except ValueError:  # this seed kept only constants: it has no pick
            continue
    trees = [p.tree for p in picks]
    winner = np.array(
        [
            v
            for fold in folds
            for v in _replay(fold, config, terminals, registry).evaluate(trees).of(config.fitness)
        ]
    )
    kw: dict[str, Any] = {
        "warmup": config.warmup,
        "k": config.budget,
        "seed": config.seed,
        "prior": config.prior,
    }
    presets = [
        Spread(
            name,
            np.array([replay_fitness(config.fitness, fold.simulate(name, **kw)) for fold in folds]),
            f"{len(folds)} folds",
        )
        for name in baselines
        if name != ORACLE
    ]
    return NoiseReport(
        config.fitness,
        Spread("winner", winner, f"{len(picks)} seeds x {len(folds)} folds"),
        presets,
    )
