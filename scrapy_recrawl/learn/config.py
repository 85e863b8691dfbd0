"""What a GP4C run is asked to do: its parameters, their checks, the fitness and selection names.

The defaults are the papers' (Santos et al. 2015 sec. 5.2); ``recrawl-evolve``'s
options and the benchmarks build an :class:`EvolveConfig` and :meth:`EvolveConfig.check` it
before anything runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrapy_recrawl.core.simulate import (
    ORACLE,
)
from scrapy_recrawl.scoring import (
    DEFAULT_PRIOR,
    PAPER_PRESETS,
    SMOOTHED_PRESETS,
)

FITNESS = ("changerate", "ndcg", "freshness")


SELECTION = ("best", "sum", "avg", "1se")


#: Every preset the winner is compared with on the test fold, then the oracle.
BASELINES: tuple[str, ...] = (*PAPER_PRESETS, *SMOOTHED_PRESETS, ORACLE)


@dataclass
class EvolveConfig:
    """GP4C's parameters; the defaults are the papers' (Santos et al. 2015 sec. 5.2)."""

    population: int = 300
    generations: int = 50
    seeds: int = 5
    tournament: int = 2
    max_depth: int = 10
    crossover_depth: int = 9
    keep_best: int = 50
    terminals: str = "all"
    fitness: str = "changerate"
    selection: str = "best"
    budget: float = 0.05
    warmup: int = 2
    folds: int = 5
    seed: int = 0
    crossover: float = 0.90
    reproduction: float = 0.15
    replacement_mutation: float = 0.05
    swap_mutation: float = 0.05
    init_min_depth: int = 2
    init_max_depth: int = 6
    prior: tuple[float, float] = DEFAULT_PRIOR
    jobs: int = 1
    #: put the presets (gp.PRESET_TREES over the terminal set) in every seed's
    #: initial population (``--seed-presets``; see the module docstring)
    seed_presets: bool = False
    #: the Q replay's related-page parameters (``RELATED_PARAMETERS``; empty: the
    #: defaults of simulate_content, i.e. of the RECRAWL_EXPERTS* settings)
    related: dict[str, Any] = field(default_factory=dict)

    def check(self, cycles: int | None = None, pages: int | None = None) -> None:
        """Raise ValueError naming the option for any value GP4C cannot run with."""

        def need(ok: bool, option: str, value: object, what: str) -> None:
            if not ok:
                raise ValueError(f"--{option}={value!r}: expected {what}")

        need(self.population >= 2, "population", self.population, "an integer >= 2")
        need(self.generations >= 1, "generations", self.generations, "an integer >= 1")
        need(self.seeds >= 1, "seeds", self.seeds, "an integer >= 1")
        need(
            1 <= self.tournament <= self.population,
            "tournament",
            self.tournament,
            f"an integer in 1..{self.population} (the population)",
        )
        need(self.max_depth >= 1, "max-depth", self.max_depth, "an integer >= 1")
        need(
            0 <= self.crossover_depth <= self.max_depth,
            "crossover-depth",
            self.crossover_depth,
            f"an integer in 0..{self.max_depth} (--max-depth)",
        )
        need(self.keep_best >= 1, "keep-best", self.keep_best, "an integer >= 1")
        need(self.fitness in FITNESS, "fitness", self.fitness, " or ".join(FITNESS))
        need(self.selection in SELECTION, "selection", self.selection, " or ".join(SELECTION))
        need(self.folds >= 3, "folds", self.folds, "an integer >= 3 (test, training, validation)")
        need(self.jobs >= 1, "jobs", self.jobs, "an integer >= 1")
        b = self.budget
        need(
            not isinstance(b, bool)
            and isinstance(b, (int, float))
            and ((float(b).is_integer() and b >= 1) or 0 < b < 1),
            "budget",
            b,
            "a share of the pages in (0, 1) or a page count >= 1",
        )
        if cycles is not None:
            need(
                1 <= self.warmup < cycles,
                "warmup",
                self.warmup,
                f"an integer in 1..{cycles - 1} (the history has {cycles} cycles)",
            )
        else:
            need(self.warmup >= 1, "warmup", self.warmup, "an integer >= 1")
        if pages is not None and pages < self.folds:
            raise ValueError(
                f"--folds={self.folds}: the history has only {pages} page(s), fewer than the folds"
            )
        for name in ("crossover", "reproduction", "replacement_mutation", "swap_mutation"):
            v = getattr(self, name)
            need(0.0 <= v <= 1.0, name.replace("_", "-"), v, "a probability in [0, 1]")


#: The related-page parameters of simulate_content (content/replay.py) that the Q
#: replay takes: ``experts`` (RECRAWL_EXPERTS), ``max_lag`` (RECRAWL_EXPERTS_LAG),
#: ``max_candidates`` (RECRAWL_EXPERTS_CANDIDATES), ``history``
#: (RECRAWL_EXPERTS_HISTORY), ``refresh_every`` and ``groups`` (host of each page).
RELATED_PARAMETERS = ("experts", "max_lag", "max_candidates", "history", "refresh_every", "groups")


def related_parameters(related: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """simulate_content's defaults of :data:`RELATED_PARAMETERS`, updated with ``related``."""
    from scrapy_recrawl.content.replay import simulate_content

    sig = inspect.signature(simulate_content).parameters
    out = {name: sig[name].default for name in RELATED_PARAMETERS}
    if related:
        unknown = set(related) - set(out)
        if unknown:
            raise ValueError(
                f"unknown related-page parameter(s) {sorted(unknown)}; known: {sorted(out)}"
            )
        out.update(related)
    return out
