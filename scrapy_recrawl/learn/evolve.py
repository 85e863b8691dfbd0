"""GP4C's learning process: folds, seeds, generations, final selection, report.

Santos et al. 2013 Listing 1.1 / 2015 Listing 1 and sec. 4.2-5.2. Pages are
split into ``folds`` (5): one is the test fold, the others are shared equally
between training (2) and validation (2). For each of ``seeds`` (5) random
seeds a population of ``population`` (300) ramped half-and-half trees evolves
for ``generations`` (50); every individual's fitness is the mean ChangeRate,
NDCG or freshness of replaying it as the scheduler's score function over the
training pages (:mod:`scrapy_recrawl.core.simulate`: warm-up ``warmup``
cycles, then top ``budget`` per cycle). The ``keep_best`` (50) fittest
individuals across all generations are kept; after the last generation they
are replayed on the validation pages and one is picked (``best``: the best
validation fitness; ``sum`` / ``avg``: the highest Sum-sigma / Avg-sigma of
the training and validation fitness; ``1se``, not in the papers: the smallest
tree within one standard error of the best validation fitness, see
:func:`select_final`). The winner and every preset are then
replayed on the test pages with :func:`~scrapy_recrawl.core.simulate.simulate`
itself, scoring with ``Scorer.from_spec(<printed expression>)``: the numbers
reported are what ``RECRAWL_SCORER`` would do.

**Validation by time** (``validation="time"``, ``--validation time``; not in the
papers). The training replays only the cycles before ``config.time_split`` (the last
``validation_cycles`` held out); the validation pages are replayed over the whole
history and scored on the held-out cycles only, so the final pick is made on the
future of the training window, on pages it has not seen either.

**The preset guard** (``preset_guard``, on by default; learn/guard.py). The final
pick and every preset that needs only the store's columns are replayed on the same
validation data with the same fitness; when no learned scorer beats the best preset
there, the run returns that preset (``EvolveResult.returned_preset``), and the test
fold's ``winner`` row is the preset's. The best preset is the one best on every page
but the test fold's over every cycle (a preset fits nothing: all that data is fair).

**Seeding with the presets** (``seed_presets``, ``--seed-presets``; off by
default: the papers' purely random start). Every
seed's initial population starts with the presets that can be written over
the terminal set (:func:`gp.preset_trees`: ``cg`` ... ``gad``, ``age``,
``gp4c``, ``cg_raw``, ``cg+`` ... ``gad+``, and ``experts`` when ``Q`` is a
terminal; 13 of 300 individuals with ``all``), the rest ramped half-and-half
as usual. Seeding a GP with known solutions is standard practice, and it
fits what recrawl-evolve is for: its winner is reported against these very
presets, and without them in the population a run has to rediscover the
shape ``1 - exp(-rate*t)`` from random trees before it can improve on it
(on the example site's history a small unseeded run ended 3 points of
ChangeRate below ``aad+``). The presets the run started from also stay
candidates of the final pick beside the ``keep_best``, so that pick on the
validation pages is a choice between the presets and what the GP made of
them: an evolved expression wins only where it validates better.
Tournaments of size 2 keep the selection pressure low, so 13 seeds do not
take over the population in a few generations. Seeding adds no replay: the
seeds are individuals of the first generation like the others. Why it is not
the default: at the papers' size (300 x 50) the unseeded GP did as well or
better on the test folds (docs/benchmarks.md); seeding helps small searches.

**Genetic operations.** The papers' rates (crossover 90%, reproduction 15%,
replacement and swap mutation 5% each) sum to 115%: they are applied as in
the lil-gp style process GP4C adapts (da Costa Carvalho et al. 2012). Each new
generation is made of

* ``reproduction`` (15%) of the population: copies of the fittest individuals
  kept so far (the ``keep_best`` across all generations, best first; the
  papers: "copied to the next generation, chosen among the best individuals");
* the other 85%: with probability ``crossover`` (90%) a child of two parents
  chosen by tournaments of size ``tournament`` (2) in the current generation
  (parents deeper than ``max_crossover_depth`` are not crossed: the tournament
  winner is copied instead), otherwise a copy of a tournament winner;
* each of those 85% then undergoes, independently, a replacement mutation with
  probability 5% and a swap mutation with probability 5%.

**Speed.** Fitness is cached by tree (the canonical expression) for the whole
run, across generations and seeds. The individuals of a generation that are
not in the cache are replayed *together* by :class:`PopulationReplay`: pages
in the same state (the estimator state and the last visit) are one *class*,
terminals and subtrees are computed once per class and cycle for the whole
population, and only the per-page steps (top-k, the stale bits) touch every
page. It runs simulate.py's building blocks (warm-up, ``observe``,
``compute_terminals``, ``top_k_indices``' selection, the metric formulas), so
it gives simulate's numbers exactly (tests/test_evolve.py checks it).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TextIO

import numpy as np

from scrapy_recrawl.core.simulate import (
    ORACLE,
    ReplayResult,
)
from scrapy_recrawl.learn import gp
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import (
    Scorer,
    TerminalRegistry,
)

from .config import EvolveConfig, related_parameters, replayable_presets
from .fitness import replay_fitness
from .guard import guard
from .noise import held_out_spread
from .progress import RunProgress
from .report import EvolveResult
from .search import (
    _WORKER,
    Candidate,
    FitnessCache,
    Rows,
    _init_worker,
    _recorder,
    _replay,
    _seed_job,
    fold_roles,
    run_seed,
    select_final,
    split_folds,
)


def evolve(
    changes: np.ndarray,
    config: EvolveConfig,
    *,
    content: bool = False,
    progress: bool = True,
    stream: TextIO | None = None,
    source: str = "",
    baselines: Sequence[str] | None = None,
    registry: TerminalRegistry | None = None,
    groups: np.ndarray | None = None,
) -> EvolveResult:
    """GP4C on ``changes[page, cycle]``: evolve, select, guard, and report on the test fold.

    ``baselines``: the presets compared on the test fold (and the held-out folds), then
    the oracle; None: every preset the replay can run (:func:`replayable_presets`).
    ``registry``: the terminals the GP may draw (None: the default registry's).
    ``groups``: the pages' ``group`` column for the pooled priors (``History.groups``;
    None: one group); every replay of the run (training, validation, guard, test fold,
    held-out spread) gets its pages' groups (:class:`~scrapy_recrawl.learn.search.Rows`).
    """
    c = np.asarray(changes)
    if c.ndim != 2:
        raise ValueError(f"changes must be a 2-d [page, cycle] matrix, got shape {c.shape}")
    config.check(cycles=c.shape[1], pages=c.shape[0])
    terminals = gp.terminal_set(config.terminals, content=content, registry=registry)
    presets = replayable_presets(registry)
    if baselines is None:
        baselines = (*presets, ORACLE)
    stream = sys.stderr if stream is None else stream
    t0 = time.perf_counter()
    rows = Rows.of(c, groups)
    folds = split_folds(c.shape[0], config.folds, config.seed)
    train_f, valid_f, test_f = fold_roles(config.folds)
    train = rows.take(np.sort(np.concatenate([folds[i] for i in train_f])))
    valid = rows.take(np.sort(np.concatenate([folds[i] for i in valid_f])))
    test = rows.take(folds[test_f])
    # time validation: the training replays only the cycles before the split; the
    # validation pages are replayed over the whole history and measured after it
    vstart = 0
    if config.validation == "time":
        split = config.time_split(c.shape[1])
        train = train.until(split)
        vstart = split - config.warmup
    seeds = [int(s) for s in np.random.SeedSequence(config.seed).generate_state(config.seeds)]
    jobs = max(1, min(config.jobs, config.seeds))
    candidates: list[Candidate] = []
    lookups = evaluated = 0
    cpu0 = time.process_time()
    worker_cpu = 0.0
    curves: dict[int, list[float]] = {}
    bar = RunProgress(stream, config.seeds * config.generations) if progress else None
    with bar if bar is not None else contextlib.nullcontext():
        if jobs == 1:
            _init_worker(train, config, terminals, not progress, registry)
            _WORKER["quiet"] = not progress
            cache: FitnessCache = _WORKER["cache"]
            for i, s in enumerate(seeds):
                curves[i] = []
                show = _recorder(curves[i], bar.step if bar is not None else None)
                candidates.extend(run_seed(cache, config, terminals, s, show, i))
            lookups, evaluated = cache.lookups, cache.evaluated
            _WORKER.clear()
        else:
            results: dict[int, list[Candidate]] = {}
            with ProcessPoolExecutor(
                jobs,
                initializer=_init_worker,
                initargs=(train, config, terminals, not progress, registry),
            ) as ex:
                futures = {ex.submit(_seed_job, job): job[0] for job in enumerate(seeds)}
                # the bar moves by whole seeds: a worker's generations are not heard of
                for fut in as_completed(futures):
                    best, st, curve = fut.result()
                    i = futures[fut]
                    results[i], curves[i] = best, curve
                    lookups += int(st["lookups"])
                    evaluated += int(st["evaluated"])
                    worker_cpu += st["cpu_seconds"]
                    if bar is not None:
                        bar.advance(config.generations, max(curve, default=float("-inf")))
            for i in sorted(results):  # the seeds' order, whichever finished first
                candidates.extend(results[i])
    # validation (Listing 1, lines 14-16), one replay for all seeds' best
    window = gp.window_of(terminals)
    vreplay = _replay(valid, config, terminals, registry)
    trees = gp.unique(cand.tree for cand in candidates)
    vres = vreplay.evaluate(trees)
    vcycles = vres.cycles_of(config.fitness, vstart)
    vfit = dict(zip(trees, vcycles.mean(1), strict=True))
    vcyc = dict(zip(trees, vcycles, strict=True))
    for cand in candidates:
        cand.validation = float(vfit[cand.tree])
        cand.validation_cycles = vcyc[cand.tree]
    winner = select_final(candidates, config.selection)
    # the test fold, with simulate() and the scorer the printed expression makes
    test_results: dict[str, ReplayResult] = {}
    kw: dict[str, Any] = {
        "warmup": config.warmup,
        "k": config.budget,
        "seed": config.seed,
        "prior": config.prior,
    }

    def replay(part: Rows, expression: str, uses: frozenset[str]) -> ReplayResult:
        scorer = Scorer.from_spec(
            expression,
            prior=config.prior,
            seed=config.seed,
            registry=default_registry() if registry is None else registry,
        )
        if gp.window_of(uses) or gp.uses_related(uses):
            # simulate() has no window / Q columns; simulate_content is simulate plus them
            return part.simulate(
                scorer, window=window, related=related_parameters(config.related), **kw
            )
        return part.simulate(scorer, **kw)

    winner_terms = gp.terminals_used(winner.tree)
    checked = None
    if config.preset_guard:
        # the pick against every preset, on the validation data (learn/guard.py)
        learned = replay_fitness(
            config.fitness, replay(valid, winner.expression, winner_terms), vstart
        )
        checked = guard(
            valid,
            winner.expression,
            presets,
            config.fitness,
            start=vstart,
            simulate_kw=kw,
            learned=learned,
            # the presets fit nothing: ranked on every page but the test fold's, every cycle
            ranking=rows.take(np.sort(np.concatenate([folds[i] for i in (*train_f, *valid_f)]))),
        )
    if checked is not None and checked.returned_preset is not None:
        test_results["winner"] = test.simulate(checked.returned_preset, **kw)
    else:
        test_results["winner"] = replay(test, winner.expression, winner_terms)
    for name in baselines:
        test_results[name] = test.simulate(name, **kw)
    # the spread over seeds and held-out folds (validation folds and the test fold)
    noise = held_out_spread(
        [rows.take(folds[i]) for i in (*valid_f, test_f)],
        config,
        terminals,
        candidates,
        baselines,
        registry,
    )
    return EvolveResult(
        winner=winner,
        candidates=candidates,
        test=test_results,
        config=config,
        terminals=tuple(terminals),
        pages={
            "pages": int(c.shape[0]),
            "cycles": int(c.shape[1]),
            "train": int(train.changes.shape[0]),
            "validation": int(valid.changes.shape[0]),
            "test": int(test.changes.shape[0]),
        },
        seconds=time.perf_counter() - t0,
        stats={
            "fitness_lookups": lookups,
            "fitness_replays": evaluated,
            "cache_hit_rate": 1.0 - evaluated / lookups if lookups else 0.0,
            # CPU time of this process and of the seed workers: robust to a busy machine
            "cpu_seconds": time.process_time() - cpu0 + worker_cpu,
        },
        source=source,
        curves=[curves[i] for i in sorted(curves)],
        noise=noise,
        guard=checked,
    )
