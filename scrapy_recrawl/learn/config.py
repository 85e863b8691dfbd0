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
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import (
    DEFAULT_PRIOR,
    PAPER_PRESETS,
    PRESETS,
    SMOOTHED_PRESETS,
    Scorer,
    TerminalRegistry,
)

#: The metrics a fitness is made of (core/simulate.py's three).
FITNESS = ("changerate", "ndcg", "freshness")

#: How the training / validation split is made (``--validation``): ``pages``, the papers'
#: folds over pages; ``time``, the same page folds, but each individual is trained on the
#: earlier cycles of the history and validated on the later ones (module docstring of
#: learn/evolve.py).
VALIDATION = ("pages", "time")


def fitness_weights(spec: str) -> dict[str, float]:
    """``--fitness`` read: one metric of :data:`FITNESS` (``freshness``), or a weighted mix
    ``changerate:0.3,freshness:0.7`` (weights >= 0, not all 0; scaled to sum to 1).

    ChangeRate and freshness disagree (DESIGN.md: the papers' metric and what an
    index needs): a mix lets a user trade one for the other. Both are shares in
    [0, 1], but freshness moves less from one scorer to the next (most pages are
    fresh whatever is fetched), so a weight of 0.5 each leans towards ChangeRate.
    Raises ValueError naming ``--fitness``.
    """
    text = str(spec).strip().lower()
    expect = f"{' or '.join(FITNESS)}, or a weighted mix such as changerate:0.3,freshness:0.7"
    if text in FITNESS:
        return {text: 1.0}
    weights: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition(":")
        name = name.strip()
        try:
            w = float(value) if sep else float("nan")
        except ValueError:
            w = float("nan")
        if name not in FITNESS or not (w >= 0.0 and w != float("inf")) or name in weights:
            raise ValueError(f"--fitness={spec!r}: expected {expect}")
        weights[name] = w
    total = sum(weights.values())
    if not total > 0:
        raise ValueError(f"--fitness={spec!r}: expected {expect} (the weights are all 0)")
    return {name: w / total for name, w in weights.items() if w > 0}


def combine(spec: str, metrics: Mapping[str, Any]) -> Any:
    """The fitness ``spec`` (:func:`fitness_weights`) from ``metrics`` = {metric: values}
    (arrays or floats, the same shape each): the weighted sum."""
    out: Any = 0.0
    for name, w in fitness_weights(spec).items():
        out = out + w * metrics[name]
    return out


SELECTION = ("best", "sum", "avg", "1se")


#: The papers' presets and their smoothed variants, then the oracle (a fixed list, for
#: the callers that want exactly these; recrawl-evolve compares with every preset the
#: replay can run: :func:`replayable_presets`).
BASELINES: tuple[str, ...] = (*PAPER_PRESETS, *SMOOTHED_PRESETS, ORACLE)


def replayable_presets(registry: TerminalRegistry | None = None) -> tuple[str, ...]:
    """Every preset of scoring/presets.py that needs only the store's columns, in its order.

    PRESETS is iterated, so a preset added there is compared with (and guarded
    against) without a change here; left out are those reading a terminal a plug-in
    adds (``basket``'s ``due``, ``experts``' ``Q``), or one ``registry`` does not know:
    a change matrix has no columns for them. ``rand`` needs nothing and is in.
    """
    reg = default_registry() if registry is None else registry
    out = []
    for name in PRESETS:
        try:
            needed = Scorer.from_spec(name, registry=reg).terminals_needed
        except ValueError:  # a terminal this registry has not (no plug-in loaded for it)
            continue
        if not reg.providers(needed):
            out.append(name)
    return tuple(out)


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
    #: ``pages`` (the papers' folds) or ``time`` (also the later cycles held out)
    validation: str = "pages"
    #: with ``validation="time"``: the share of the cycles (the latest) held out for it
    validation_cycles: float = 1.0 / 3.0
    #: replay every preset that needs only the store's columns on the validation data
    #: and return the best one when no learned individual beats it there
    #: (``--no-preset-guard`` turns it off)
    preset_guard: bool = True
    #: the Q replay's related-page parameters (``RELATED_PARAMETERS``; empty: the
    #: defaults of simulate_content, i.e. of the RECRAWL_EXPERTS* settings)
    related: dict[str, Any] = field(default_factory=dict)

    def time_split(self, cycles: int) -> int:
        """With ``validation="time"``: the first cycle held out for validation (the
        training replays cycles before it; at least one cycle is held out)."""
        held = max(1, int(round(cycles * self.validation_cycles)))
        return cycles - held

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
        fitness_weights(self.fitness)  # its own message
        need(self.validation in VALIDATION, "validation", self.validation, " or ".join(VALIDATION))
        need(
            0.0 < self.validation_cycles < 1.0,
            "validation-cycles",
            self.validation_cycles,
            "a share of the cycles in (0, 1)",
        )
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
            if self.validation == "time":
                split = self.time_split(cycles)
                need(
                    split > self.warmup,
                    "validation-cycles",
                    self.validation_cycles,
                    f"a share leaving the training more than the {self.warmup} warm-up cycles "
                    f"(the history has {cycles} cycles; {cycles - split} held out)",
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
