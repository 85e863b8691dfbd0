"""What is known before a GP4C run: is the history big enough, and what will it cost.

**Big enough** (:func:`size_warnings`). The run is judged on a fold of the pages
(fold 0 tests, :func:`~scrapy_recrawl.learn.search.split_folds`); a fold's
ChangeRate is a share of its downloads, whose standard error is up to
``0.5 / sqrt(downloads)``. To tell two scorers 0.05 of ChangeRate apart that
error must be 0.05 or less: at least :data:`MIN_DOWNLOADS` (100) budgeted
downloads per fold. A fold must also hold changes to find (at least
:data:`MIN_CHANGES`, 30, after the warm-up, in its fewest-changes fold) and the
run needs cycles after the warm-up to rank in (:data:`MIN_CYCLES`, 5). Each
shortfall is one warning naming what is too small and what would be enough.

**Cost** (:func:`dry_run`). One generation's worth of fresh individuals
(``population`` random trees) is replayed on this history's training pages and
timed; the GP replays at most ``population x generations x seeds`` of them, fewer
as the fitness cache finds repeats (its hit rate is not known before the run).
Then the ``keep_best`` of each seed are replayed on the validation pages (timed
at the same cost per individual), and every preset on the test fold and on each
held-out fold (one preset's replay on the test fold is timed, and counted once
per preset and fold). The sum is the estimate: an upper bound of the work, on a
machine as busy as it is while timing.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scrapy_recrawl.core.simulate import resolve_k
from scrapy_recrawl.learn import gp
from scrapy_recrawl.scoring import TerminalRegistry

from .config import BASELINES, EvolveConfig, replayable_presets
from .search import Rows, _replay, fold_roles, split_folds

#: budgeted downloads per fold for a ChangeRate standard error of 0.05 at most
MIN_DOWNLOADS = 100
#: changes after the warm-up in the fold with the fewest
MIN_CHANGES = 30
#: cycles after the warm-up
MIN_CYCLES = 5


def size_warnings(changes: np.ndarray, config: EvolveConfig) -> list[str]:
    """Why this history is too small for ``config``: one sentence per shortfall."""
    c = np.asarray(changes)
    pages, cycles = c.shape
    budgeted = cycles - config.warmup
    folds = split_folds(pages, config.folds, config.seed)
    smallest = min(len(f) for f in folds)
    out = []
    if budgeted < MIN_CYCLES:
        out.append(
            f"only {budgeted} cycle(s) after the warm-up of {config.warmup}: at least "
            f"{MIN_CYCLES} are needed to rank scorers (a history of "
            f"{config.warmup + MIN_CYCLES} cycles, or a shorter --warmup)"
        )
    k = resolve_k(config.budget, smallest)
    downloads = k * max(0, budgeted)
    if downloads < MIN_DOWNLOADS:
        need = f"at least {MIN_DOWNLOADS}"
        if config.budget < 1:  # a share: more pages give more downloads per cycle
            fold_pages = math.ceil(MIN_DOWNLOADS / max(1, budgeted) / config.budget)
            need += f" (about {fold_pages * config.folds} pages at this budget and length"
        else:
            need += f" (about {config.warmup + math.ceil(MIN_DOWNLOADS / max(1, k))} cycles"
        need += ", or a larger --budget)"
        out.append(
            f"{pages} pages in {config.folds} folds: the smallest fold has {smallest} pages, "
            f"k = {k} per cycle over {max(0, budgeted)} cycles: {downloads} downloads to "
            f"measure it on (ChangeRate's standard error up to "
            f"{0.5 / math.sqrt(max(1, downloads)):.2f}); {need}"
        )
    found = min(int(c[f, config.warmup :].sum()) for f in folds)
    if found < MIN_CHANGES:
        out.append(
            f"only {found} change(s) after the warm-up in the fold with the fewest: at least "
            f"{MIN_CHANGES} per fold are needed (more pages, more cycles or fewer --folds)"
        )
    return out


@dataclass
class DryRun:
    """What a run would do and how long it should take."""

    pages: int
    cycles: int
    folds: dict[str, int]
    seeds: int
    population: int
    generations: int
    evaluations: int
    seconds_per_evaluation: float
    jobs: int
    #: the replays after the GP: validation of the kept, presets on the held-out folds
    final_seconds: float = 0.0

    @property
    def seconds(self) -> float:
        """The run's time if every individual were new: seeds over ``jobs``, then the
        validation and the presets' replays."""
        rounds = math.ceil(self.seeds / self.jobs)
        gp_time = self.seconds_per_evaluation * self.population * self.generations * rounds
        return gp_time + self.final_seconds

    def text(self) -> str:
        f = self.folds
        return "\n".join(
            [
                f"history: {self.pages} pages x {self.cycles} cycles",
                f"folds: {f['folds']} ({f['train']} training pages, {f['validation']} "
                f"validation, {f['test']} test)",
                f"GP: {self.seeds} seed(s) x {self.generations} generations x "
                f"{self.population} individuals = at most {self.evaluations} replays "
                f"({self.jobs} process(es))",
                f"time: about {_duration(self.seconds)} at most (one generation of "
                f"{self.population} new individuals timed on the training pages: "
                f"{self.seconds_per_evaluation * 1000:.2f} ms each; then "
                f"{_duration(self.final_seconds)} of validation and preset replays; the "
                "fitness cache makes the run shorter)",
            ]
        )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def dry_run(
    changes: np.ndarray,
    config: EvolveConfig,
    *,
    content: bool = False,
    baselines: Sequence[str] = BASELINES,
    groups: np.ndarray | None = None,
    registry: TerminalRegistry | None = None,
) -> DryRun:
    """Time one generation of fresh individuals on the training pages and one preset on
    the test fold (nothing is kept); ``groups`` and ``registry`` as
    :func:`~scrapy_recrawl.learn.evolve.evolve`'s."""
    c = np.asarray(changes)
    rows = Rows.of(c, groups)
    terminals = gp.terminal_set(config.terminals, content=content, registry=registry)
    folds = split_folds(c.shape[0], config.folds, config.seed)
    train_f, valid_f, test_f = fold_roles(config.folds)
    train = rows.take(np.sort(np.concatenate([folds[i] for i in train_f])))
    trees = gp.ramped_half_and_half(
        random.Random(config.seed),
        config.population,
        terminals,
        min_depth=min(config.init_min_depth, config.max_depth),
        max_depth=min(config.init_max_depth, config.max_depth),
    )
    replay = _replay(train, config, terminals, registry)
    fresh = gp.unique(trees)  # the time per individual is over those replayed
    t0 = time.perf_counter()
    replay.evaluate(fresh)
    per = (time.perf_counter() - t0) / max(1, len(fresh))
    t0 = time.perf_counter()
    rows.take(folds[test_f]).simulate(
        "aad+", warmup=config.warmup, k=config.budget, prior=config.prior
    )
    preset = time.perf_counter() - t0
    held_out = 1 + len(valid_f)  # the test fold, then each held-out fold on its own
    final = per * config.keep_best * config.seeds + preset * len(baselines) * (1 + held_out)
    if config.preset_guard:  # the pick and every preset on the validation folds (guard.py)
        final += preset * (1 + len(replayable_presets(registry))) * len(valid_f)
    return DryRun(
        pages=int(c.shape[0]),
        cycles=int(c.shape[1]),
        folds={
            "folds": config.folds,
            "train": int(train.changes.shape[0]),
            "validation": int(sum(len(folds[i]) for i in valid_f)),
            "test": int(len(folds[test_f])),
        },
        seeds=config.seeds,
        population=config.population,
        generations=config.generations,
        evaluations=config.seeds * config.generations * config.population,
        seconds_per_evaluation=per,
        jobs=max(1, min(config.jobs, config.seeds)),
        final_seconds=final,
    )
