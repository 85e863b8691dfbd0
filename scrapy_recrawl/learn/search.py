"""The search: folds, one seed's generations, the final pick, the worker pool.

Santos et al. 2013 Listing 1.1 / 2015 Listing 1: ramped half-and-half, tournaments,
crossover and mutations (:mod:`~scrapy_recrawl.learn.gp`), the ``keep_best`` across
generations, then Best / Sum-sigma / Avg-sigma (or 1se) on the validation pages.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scrapy_recrawl.core.groups import GROUP_COLUMN, history_groups
from scrapy_recrawl.core.simulate import ReplayResult, SelectFn, simulate
from scrapy_recrawl.learn import gp
from scrapy_recrawl.learn.gp import Tree
from scrapy_recrawl.scoring import Scorer, TerminalRegistry

from .config import EvolveConfig
from .population import PopulationReplay
from .progress import Progress


@dataclass(frozen=True)
class Rows:
    """Some pages of a history (the training, validation or a test fold) with their
    ``group`` column: the pooled priors' groups (scoring/pooled.py), each page's host or
    directory (learn/histories.py ``History.groups``). Every replay of a run is made from
    one (:meth:`simulate`, :func:`_replay`), so a page's group follows it into every fold.
    """

    changes: np.ndarray
    groups: np.ndarray

    @classmethod
    def of(cls, changes: np.ndarray, groups: np.ndarray | None = None) -> Rows:
        """All of ``changes`` with ``groups`` (None: every page in one group)."""
        c = np.asarray(changes)
        g = history_groups(None, c.shape[0]) if groups is None else np.asarray(groups)
        if g.shape != c.shape[:1]:
            raise ValueError(f"groups must hold one code per page ({c.shape[0]}), got {g.shape}")
        return cls(c, g)

    def take(self, pages: np.ndarray) -> Rows:
        """The rows ``pages`` (indices), their groups with them."""
        return Rows(self.changes[pages], self.groups[pages])

    def until(self, cycles: int) -> Rows:
        """The first ``cycles`` cycles of every row."""
        return Rows(self.changes[:, :cycles], self.groups)

    def simulate(
        self,
        policy: Scorer | str | SelectFn,
        *,
        window: int = 0,
        related: dict[str, Any] | None = None,
        **kw: Any,
    ) -> ReplayResult:
        """:func:`~scrapy_recrawl.core.simulate.simulate` of these rows with their groups;
        with a ``window`` or ``related`` (a scorer using ``C*`` / ``D*`` / ``Q``),
        :func:`~scrapy_recrawl.content.replay.simulate_content` (simulate plus them)."""
        if window or related is not None:
            from scrapy_recrawl.content.replay import simulate_content

            assert isinstance(policy, (Scorer, str))
            return simulate_content(
                self.changes,
                policy,
                window=max(1, window),
                group_column=self.groups,
                **kw,
                **(related or {}),
            )
        return simulate(self.changes, policy, groups=self.groups, **kw)


def split_folds(pages: int, folds: int, seed: int) -> list[np.ndarray]:
    """Pages shuffled (seeded) into ``folds`` near-equal folds of sorted indices."""
    order = np.random.default_rng(seed).permutation(pages)
    return [np.sort(part) for part in np.array_split(order, folds)]


def fold_roles(folds: int) -> tuple[list[int], list[int], int]:
    """(training folds, validation folds, test fold): fold 0 tests, the rest split in halves."""
    rest = list(range(1, folds))
    half = len(rest) // 2
    return rest[:half], rest[half:], 0


@dataclass
class Candidate:
    """One of the best individuals of a seed's run."""

    tree: Tree
    train: float
    seed: int
    generation: int
    validation: float = float("nan")
    #: the fitness per validation cycle (the ``1se`` final selection compares them)
    validation_cycles: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def expression(self) -> str:
        return gp.to_expression(self.tree)


class FitnessCache:
    """Fitness on one page set by tree (the canonical expression), with counts."""

    def __init__(self, replay: PopulationReplay, fitness: str) -> None:
        self.replay = replay
        self.fitness = fitness
        self.values: dict[Tree, float] = {}
        self.lookups = 0
        self.evaluated = 0
        self.seconds = 0.0

    def __call__(self, trees: Sequence[Tree]) -> list[float]:
        self.lookups += len(trees)
        todo = gp.unique(t for t in trees if t not in self.values)
        if todo:
            t0 = time.perf_counter()
            values = self.replay.evaluate(todo).of(self.fitness)
            self.seconds += time.perf_counter() - t0
            self.evaluated += len(todo)
            self.values.update(zip(todo, (float(v) for v in values), strict=True))
        return [self.values[t] for t in trees]


def _rank_key(tree: Tree, fit: float) -> tuple:
    # deterministic order: fitter first, then smaller, then by text
    return (-fit, gp.size(tree), gp.to_expression(tree))


def run_seed(
    cache: FitnessCache,
    config: EvolveConfig,
    terminals: Sequence[str],
    seed: int,
    progress: Progress | None = None,
    seed_index: int = 0,
) -> list[Candidate]:
    """One GP run (Listing 1, lines 5-13); returns the ``keep_best`` fittest, best first,
    then the seeded presets (``seed_presets``) that are not among them."""
    rng = random.Random(seed)
    seeded = gp.preset_trees(terminals)[: config.population] if config.seed_presets else []
    population = seeded + gp.ramped_half_and_half(
        rng,
        config.population - len(seeded),
        terminals,
        min_depth=min(config.init_min_depth, config.max_depth),
        max_depth=min(config.init_max_depth, config.max_depth),
    )
    kept: dict[Tree, Candidate] = {}
    n_repro = int(round(config.reproduction * config.population))
    seeds_kept: list[Candidate] = []
    for generation in range(config.generations):
        fitness = cache(population)
        if generation == 0:
            # the presets the run started from stay candidates of the final pick
            seeds_kept = [Candidate(t, f, seed, 0) for t, f in zip(seeded, fitness, strict=False)]
        for tree, fit in zip(population, fitness, strict=True):
            if tree not in kept:
                kept[tree] = Candidate(tree, fit, seed, generation)
        best = sorted(kept.values(), key=lambda c: _rank_key(c.tree, c.train))[: config.keep_best]
        kept = {c.tree: c for c in best}
        if progress is not None:
            progress(
                seed_index,
                generation,
                config.generations,
                config.seeds,
                best[0].train,
                cache.evaluated / max(1, cache.lookups),
            )
        if generation == config.generations - 1:
            break
        nxt: list[Tree] = [best[i % len(best)].tree for i in range(n_repro)]
        while len(nxt) < config.population:
            if rng.random() < config.crossover:
                a = gp.tournament(rng, population, fitness, config.tournament)
                b = gp.tournament(rng, population, fitness, config.tournament)
                child = gp.crossover(
                    rng,
                    a,
                    b,
                    max_depth=config.max_depth,
                    max_crossover_depth=config.crossover_depth,
                )
                if child is None:
                    child = a
            else:
                child = gp.tournament(rng, population, fitness, config.tournament)
            if rng.random() < config.replacement_mutation:
                child = gp.replacement_mutation(rng, child, terminals, max_depth=config.max_depth)
            if rng.random() < config.swap_mutation:
                child = gp.swap_mutation(rng, child, max_depth=config.max_depth)
            nxt.append(child)
        population = nxt
    best = sorted(kept.values(), key=lambda c: _rank_key(c.tree, c.train))
    return best + [c for c in seeds_kept if c.tree not in kept]


def select_final(candidates: Sequence[Candidate], method: str) -> Candidate:
    """Listing 1 line 17: ``best`` (validation), ``sum`` / ``avg`` (Sum-sigma / Avg-sigma).

    ``1se`` (not in the papers) is the one-standard-error rule with parsimony
    (Breiman et al.'s rule for CART, the usual guard against the "winner's curse"
    of picking the maximum of many noisy validation scores): the smallest tree
    whose validation fitness is within one standard error of the best one's,
    the error of the paired per-cycle difference between the two
    (``validation_cycles``; without them, ``best``). Among equally small ones,
    the better validated.
    """

    def sigma(c: Candidate) -> float:
        return float(np.std([c.train, c.validation]))

    if method == "best":
        key = lambda c: (c.validation, c.train)  # noqa: E731
    elif method == "sum":
        key = lambda c: (c.train + c.validation - sigma(c), c.validation)  # noqa: E731
    elif method == "avg":
        key = lambda c: ((c.train + c.validation) / 2.0 - sigma(c), c.validation)  # noqa: E731
    elif method == "1se":
        key = lambda c: (c.validation, c.train)  # noqa: E731
    else:
        raise ValueError(f"--selection={method!r}: expected best, sum, avg or 1se")
    # a constant scores every URL alike: not a scorer (RECRAWL_SCORER needs a terminal)
    usable = [c for c in candidates if gp.terminals_used(c.tree)]
    if not usable:
        raise ValueError("every kept individual is a constant: evolve longer or with more seeds")
    # max over a deterministic order: on a full tie the simpler, then the earlier
    ordered = sorted(usable, key=lambda c: (gp.size(c.tree), c.expression))
    top = max(ordered, key=key)
    if method != "1se" or top.validation_cycles is None:
        return top
    close = []
    for c in ordered:
        if c.validation_cycles is None:
            continue
        d = np.asarray(top.validation_cycles) - np.asarray(c.validation_cycles)
        se = float(np.std(d, ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
        if float(d.mean()) <= se:
            close.append(c)
    return min(close, key=lambda c: (gp.size(c.tree), -c.validation, c.expression))


_WORKER: dict[str, Any] = {}


def _replay(
    rows: Rows,
    config: EvolveConfig,
    terminals: Sequence[str],
    registry: TerminalRegistry | None = None,
) -> PopulationReplay:
    """The batched replay of ``rows`` (their groups as the ``group`` column)."""
    return PopulationReplay(
        rows.changes,
        k=config.budget,
        warmup=config.warmup,
        prior=config.prior,
        window=gp.window_of(terminals),
        related=config.related,
        registry=registry,
        columns={GROUP_COLUMN: rows.groups},
    )


def _init_worker(
    train: Rows,
    config: EvolveConfig,
    terminals: Sequence[str],
    quiet: bool,
    registry: TerminalRegistry | None = None,
) -> None:
    replay = _replay(train, config, terminals, registry)
    _WORKER.update(
        cache=FitnessCache(replay, config.fitness),
        config=config,
        terminals=tuple(terminals),
        quiet=quiet,
    )


def _seed_job(args: tuple[int, int]) -> tuple[list[Candidate], dict[str, float], list[float]]:
    """One seed in a worker process: its best, its counts, and its best training fitness
    per generation (the parent draws the progress: a worker writes nothing)."""
    index, seed = args
    w = _WORKER
    curve: list[float] = []
    cache: FitnessCache = w["cache"]
    t0, c0 = time.perf_counter(), time.process_time()
    lookups, evaluated = cache.lookups, cache.evaluated
    best = run_seed(cache, w["config"], w["terminals"], seed, _recorder(curve), index)
    return (
        best,
        {
            "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0,
            "lookups": cache.lookups - lookups,
            "evaluated": cache.evaluated - evaluated,
        },
        curve,
    )


def _recorder(curve: list[float], then: Progress | None = None) -> Progress:
    """A progress callback keeping each generation's best training fitness in ``curve``."""

    def record(seed: int, gen: int, gens: int, seeds: int, best: float, share: float) -> None:
        curve.append(best)
        if then is not None:
            then(seed, gen, gens, seeds, best, share)

    return record
