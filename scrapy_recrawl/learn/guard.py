"""Never worse than the best preset: the final pick against every preset, on validation.

A GP run on a small or bursty history can end with a scorer that validates worse
than a preset the user could have typed. So, after the final selection
(learn/search.py: ``select_final``), the winner and every preset that needs only the
store's columns (:func:`~scrapy_recrawl.learn.config.replayable_presets`: PRESETS
iterated, so a preset added to scoring/presets.py is guarded against without a
change here) are replayed on the *same* validation data with the *same* fitness, each
by :func:`~scrapy_recrawl.core.simulate.simulate` with the scorer its printed
expression makes (what ``RECRAWL_SCORER`` would do: the comparison cannot favour the
batched replay's tie-breaking). When the best preset scores at least as well as the
winner there (a tie goes to the preset: it is simpler, and documented), the run
returns that preset's expression, and says so.

**Which preset is the best** is decided on more data than the validation's when the
run gives it (``ranking``: every page but the test fold's, every cycle): a preset
fits nothing to the history, so all of it is fair to rank them on, and the presets'
differences are small (a few thousandths of ChangeRate on most histories), so the
validation's slice of pages and cycles picks among them by chance more often than
the whole (measured on the shared histories' first halves against their second:
docs/benchmarks.md, "Self-training"). The learned scorer is then compared with that
preset on the validation data, the only data it did not train on.

``rand`` is left out: it is no formula a scorer file can hold, and a learned scorer
that loses to a random order would show in the report's table anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scrapy_recrawl.scoring import PRESETS

from .fitness import replay_fitness
from .search import Rows


@dataclass
class GuardResult:
    """The winner's and every guarded preset's fitness on the validation data."""

    fitness: str
    #: the learned pick's expression and its fitness on the validation data
    learned_expression: str
    learned: float
    #: preset name -> fitness on the same data, in PRESETS' order
    presets: dict[str, float]
    #: preset name -> fitness on the data the presets are ranked on (every page but the
    #: test fold's, every cycle); empty: ranked on the validation data
    ranking: dict[str, float] = field(default_factory=dict)

    @property
    def best_preset(self) -> str:
        by = self.ranking or self.presets
        # max() keeps the first of equal values: PRESETS' order decides a tie
        return max(by, key=lambda name: by[name])

    @property
    def returned_preset(self) -> str | None:
        """The preset the run returns instead of the learned scorer, or None."""
        if not self.presets:
            return None
        best = self.best_preset
        return best if self.presets[best] >= self.learned else None

    @property
    def expression(self) -> str:
        """What the run returns: the learned expression, or the preset's."""
        name = self.returned_preset
        if name is None:
            return self.learned_expression
        text = PRESETS[name].expression
        assert text is not None  # rand is never guarded against
        return text

    def line(self) -> str:
        """The report's one line about it."""
        name = self.returned_preset
        if not self.presets:
            return "no preset to compare with on the validation data"
        best = self.best_preset
        ranked = " (ranked on every page but the test fold's)" if self.ranking else ""
        if name is None:
            return (
                f"the learned scorer beats the best preset{ranked} on the validation data "
                f"({self.fitness}: {self.learned:.4f} against {self.presets[best]:.4f} for {best})"
            )
        return (
            f"no learned scorer beat the preset {name}{ranked} on the validation data "
            f"({self.fitness}: "
            f"{self.presets[name]:.4f} against {self.learned:.4f} for the learned "
            f"`{self.learned_expression}`): returning {name} (`{self.expression}`)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "fitness": self.fitness,
            "returned_preset": self.returned_preset,
            "best_preset": self.best_preset if self.presets else None,
            "learned_expression": self.learned_expression,
            "learned_validation": self.learned,
            "presets_validation": dict(self.presets),
            "presets_ranking": dict(self.ranking),
        }


def guard(
    valid: Rows,
    expression: str,
    presets: Sequence[str],
    fitness: str,
    *,
    start: int = 0,
    simulate_kw: dict[str, Any],
    learned: float | None = None,
    ranking: Rows | None = None,
) -> GuardResult:
    """Replay ``expression`` (unless its fitness ``learned`` is given) and each of
    ``presets`` (``rand`` skipped) on ``valid`` (the validation pages with their groups);
    the fitness over the budgeted cycles from the ``start``-th on (the held-out cycles of
    a time validation). ``ranking``: the pages (over all their cycles) the presets are
    ranked on to find the best (None: the validation data)."""
    if learned is None:
        learned = replay_fitness(fitness, valid.simulate(expression, **simulate_kw), start)
    names = [name for name in presets if PRESETS[name].expression is not None]
    scores = {
        name: replay_fitness(fitness, valid.simulate(name, **simulate_kw), start) for name in names
    }
    ranks = (
        {}
        if ranking is None
        else {
            name: replay_fitness(fitness, ranking.simulate(name, **simulate_kw)) for name in names
        }
    )
    return GuardResult(fitness, expression, learned, scores, ranks)
