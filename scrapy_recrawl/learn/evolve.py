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

import copy
import inspect
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import numpy as np

from scrapy_recrawl.content import window as win
from scrapy_recrawl.core.simulate import (
    ORACLE,
    ReplayResult,
    _record_fetch,
    new_state,
    resolve_k,
    simulate,
)
from scrapy_recrawl.history.state import observe
from scrapy_recrawl.learn import gp
from scrapy_recrawl.learn.gp import Tree
from scrapy_recrawl.scoring import (
    DEFAULT_PRIOR,
    PAPER_PRESETS,
    SMOOTHED_PRESETS,
    Scorer,
    compute_terminals,
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


# --------------------------------------------------------------------------- the replay


def top_k_by_index(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best scores, best first, ties to the lower index; NaN/inf rank last.

    :func:`top_k_indices`' contract with its tie-breaking pinned down: the
    URL order is (score descending, index ascending). The replay's selection
    (:func:`top_k_by_class`) gives exactly this; see :class:`IndexTieScorer`.
    """
    s = np.asarray(scores, dtype=np.float64)
    s = np.where(np.isfinite(s), s, -np.inf)
    k = max(0, min(int(k), s.shape[0]))
    return np.lexsort((np.arange(s.shape[0]), -s))[:k]


def top_k_by_class(class_scores: np.ndarray, page_class: np.ndarray, k: int) -> np.ndarray:
    """:func:`top_k_by_index` of ``class_scores[page_class]``, without scoring every page.

    The URLs of a class share a score, so the cut falls inside the classes
    scoring exactly ``v``, the k-th best score: every URL above ``v`` is taken,
    then the lowest-index URLs at ``v``. Cost: one pass over the URLs, instead of
    a selection over a score vector that is mostly ties (where numpy's
    introselect is at its slowest).
    """
    cs = class_scores
    if not np.isfinite(cs).all():
        cs = np.where(np.isfinite(cs), cs, -np.inf)
    pages = page_class.shape[0]
    k = max(0, min(int(k), pages))
    counts = np.bincount(page_class, minlength=cs.shape[0])
    present = np.flatnonzero(counts)
    # the k-th best score: any order of equal scores gives the same value
    order = present[np.argsort(-cs[present])]
    cum = np.cumsum(counts[order])
    cut = int(np.searchsorted(cum, k))  # first class reaching k URLs
    if cut >= order.shape[0]:
        chosen = np.arange(pages)
    else:
        v = cs[order[cut]]
        # 2: above the cut, 1: at the cut, 0: below; chosen stays in index order
        code = (cs > v).view(np.int8) * np.int8(2) + (cs == v).view(np.int8)
        page_code = code[page_class]
        candidates = np.flatnonzero(page_code)
        at_cut = page_code[candidates] == 1
        room = k - (candidates.shape[0] - int(np.count_nonzero(at_cut)))
        keep = ~at_cut
        keep[at_cut] = np.arange(int(np.count_nonzero(at_cut))) < room
        chosen = candidates[keep]
    return chosen[np.argsort(-cs[page_class[chosen]], kind="stable")][:k]


class IndexTieScorer(Scorer):
    """Wraps a scorer so that its top-k breaks ties by index (:func:`top_k_by_index`).

    ``simulate(changes, IndexTieScorer(s))`` is what :class:`PopulationReplay`
    computes for ``s`` (tests check the two agree exactly).
    """

    def __init__(self, inner: Scorer) -> None:
        self.inner = inner
        self.name = inner.name
        self.expression = inner.expression
        self.terminals_needed = inner.terminals_needed or frozenset({"n"})
        self.prior = inner.prior
        self.metadata = dict(inner.metadata)

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.inner.score(terminals)

    def top_k(self, terminals: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        return top_k_by_index(self.score(terminals), k)


class TreeScorer(Scorer):
    """A scorer that evaluates a GP tree directly (:func:`gp.evaluate`)."""

    def __init__(self, tree: Tree, prior: tuple[float, float] | None = None) -> None:
        self.tree = tree
        self.name = "tree"
        self.expression = gp.to_expression(tree)
        self.terminals_needed = gp.terminals_used(tree) or frozenset({"n"})
        self.prior = prior
        self.metadata = {}

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        return gp.evaluate(self.tree, terminals)


_STATE_COLUMNS = ("n", "X", "sad", "aad_sum", "gad", "last_visit_cycle", "last_visit_time")
#: Paper 004's window as class-table columns ``cw1..cwl`` (newest first). A missing
#: observation is stored as -1 rather than NaN, so that equal windows merge into
#: one class (np.unique never merges NaN rows); the terminals C_i / D_i read NaN.
_WINDOW_MISSING = -1.0


def _window_columns(window: int) -> tuple[str, ...]:
    return tuple(f"cw{i}" for i in range(1, window + 1))


def _window_terms(table: Mapping[str, np.ndarray], window: int) -> dict[str, np.ndarray]:
    """The ``C1..Cl`` / ``D1..Dl`` columns of the class table (as content/window.py makes them)."""
    cw = np.stack([table[c] for c in _window_columns(window)], axis=1)
    return win.columns(np.where(cw == _WINDOW_MISSING, np.nan, cw))


@dataclass
class PopulationFitness:
    """Mean metrics of each individual of a batch (rows in the order given)."""

    change_rate: np.ndarray
    ndcg: np.ndarray
    freshness: np.ndarray
    #: the per-cycle values behind the means: {"changerate"|"ndcg"|"freshness": [tree, cycle]}
    per_cycle: dict[str, np.ndarray] | None = None

    def of(self, fitness: str) -> np.ndarray:
        return {"changerate": self.change_rate, "ndcg": self.ndcg, "freshness": self.freshness}[
            fitness
        ]


class _Group:
    """Per-cycle values shared by the individuals of one state group."""

    __slots__ = (
        "_cum",
        "_sub",
        "_url",
        "counts",
        "memo",
        "page_class",
        "present",
        "q",
        "size",
        "terms",
        "url_memo",
    )

    def __init__(self, page_class: np.ndarray, size: int, terms: Mapping[str, np.ndarray]):
        self.page_class = page_class
        self.size = size
        self.terms = terms
        self.counts = np.bincount(page_class, minlength=size)
        self.present = np.flatnonzero(self.counts)
        self.memo: dict[int, Any] = {}
        self._sub: dict[str, np.ndarray] = {}
        self._cum = self.counts[self.present]
        #: the group's Q column this cycle (groups with Q individuals only)
        self.q: np.ndarray | None = None
        self.url_memo: dict[int, Any] = {}
        self._url: dict[str, np.ndarray] = {}

    def per_url(self, used: Sequence[str]) -> dict[str, np.ndarray]:
        """The terminals of every URL (class values gathered), ``Q`` included: for Q trees."""
        for name in used:
            if name not in self._url:
                self._url[name] = self.q if name == "Q" else self.terms[name][self.page_class]
        return self._url

    def sub(self, used: Sequence[str]) -> dict[str, np.ndarray]:
        """The terminals of the classes present (gathered once per group and name)."""
        for name in used:
            if name not in self._sub:
                self._sub[name] = self.terms[name][self.present]
        return self._sub

    def cum_of(self, order: np.ndarray) -> np.ndarray:
        return np.cumsum(self._cum[order])


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


def _q_column(state: Any, cycle: int) -> np.ndarray:
    """``Q`` of every URL for ``cycle`` from a content replay state, as a float64 terminal."""
    q = state.columns(cycle)["Q"]
    return compute_terminals({"n": q, "Q": q}, cycle, needed=("Q",))["Q"]


class PopulationReplay:
    """:func:`simulate` for many trees at once over the same ``changes``.

    Same warm-up, same top-k selection, same updates, same metrics: the
    numbers equal ``simulate(changes, scorer)`` for a scorer that scores
    with :func:`gp.evaluate` (tests check it). What is shared: the warm-up (run
    once), and the per-URL state as a table of *classes* (URLs in the same
    state); every individual's URLs point into one table, so terminals and the
    values of common subtrees are computed once per cycle for all of them.

    ``window`` > 0 also keeps paper 004's window of the last ``window`` change
    observations as state columns (the terminals ``C1..Cl`` and ``D1..Dl``,
    ``D_i = max(C_1..C_i)`` on change matrices); the numbers then equal
    :func:`~scrapy_recrawl.content.replay.simulate_content` with the same
    ``window`` (tests check it). 0 (the default) keeps none: a tree using
    ``C*`` / ``D*`` is refused, and the class table merges more URLs.

    **Q** (paper 004's related pages) depends on what the *other* pages were
    seen doing, so it is no column of a URL's state: two URLs in one class can
    have different experts. Each group that has an individual using ``Q``
    keeps its own observation log and related-page index, the very object
    :func:`~scrapy_recrawl.content.replay.simulate_content` keeps
    (``content.replay._ContentState``: same build at the end of the warm-up,
    same refresh every ``refresh_every`` cycles, same ``Q``), copied only when
    a group splits (groups never merge, so at most one copy per individual per
    batch). Q trees are evaluated per URL (their class-level subterminals
    gathered per URL, ``Q`` added) and select with :func:`top_k_by_index`;
    they still share the group's state and, when they pick the same URLs, one
    selection. Trees without ``Q`` keep the class-level path and cost what
    they cost without it. ``related`` sets the index
    (``experts``, ``max_lag``, ``max_candidates``, ``history``,
    ``refresh_every``, ``groups``: simulate_content's parameters, same
    defaults, i.e. ``RECRAWL_EXPERTS``, ``RECRAWL_EXPERTS_LAG``,
    ``RECRAWL_EXPERTS_CANDIDATES``, ``RECRAWL_EXPERTS_HISTORY``); the numbers
    then equal ``simulate_content(changes, scorer, **related)`` (tests check it).
    """

    def __init__(
        self,
        changes: np.ndarray,
        *,
        k: int | float = 0.05,
        warmup: int = 2,
        prior: tuple[float, float] | None = None,
        cycle_hours: float = 24.0,
        window: int = 0,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        c = np.asarray(changes)
        self.related = related_parameters(related)
        self.window = 0 if window == 0 else win.check_window(window)
        self.columns = _STATE_COLUMNS + _window_columns(self.window)
        if c.ndim != 2 or c.shape[0] == 0:
            raise ValueError(f"changes must be a non-empty [page, cycle] matrix, got {c.shape}")
        self.pages, self.cycles = c.shape
        if not 1 <= warmup <= self.cycles:
            raise ValueError(f"warmup={warmup!r}: expected 1..{self.cycles}")
        self.k = resolve_k(k, self.pages)
        self.warmup = warmup
        self.prior = prior
        self.seconds = float(cycle_hours) * 3600.0
        self.by_cycle = np.ascontiguousarray(c.T != 0)
        # the warm-up, exactly as simulate() runs it
        state = new_state(self.pages)
        cwin = win.empty_window(self.pages, max(1, self.window))
        stale = np.zeros(self.pages, dtype=bool)
        #: what the warm-up fetches saw (the Q groups' observation log starts with it)
        self._warmup_hits: list[np.ndarray] = []
        for cyc in range(warmup):
            stale |= self.by_cycle[cyc]
            self._warmup_hits.append(stale.copy())
            _record_fetch(state, slice(None), stale.copy(), cyc, cyc * self.seconds, first=cyc == 0)
            if cyc > 0:  # as simulate_content: the first fetch is not an observation
                win.push(cwin, slice(None), stale.astype(np.float64))
            stale[:] = False
        cols = {col: state[col] for col in _STATE_COLUMNS}
        for i, name in enumerate(_window_columns(self.window)):
            cols[name] = np.where(np.isnan(cwin[:, i]), _WINDOW_MISSING, cwin[:, i])
        table, self.page_class = self._classes(cols, names=self.columns)
        self.table = table
        self.discount = 1.0 / np.log2(np.arange(2, self.k + 2, dtype=np.float64))
        self.ideal = np.concatenate(([0.0], np.cumsum(self.discount)))
        self.interner = gp.Interner()
        #: compact the class table when it grows past this (and 4x its live classes)
        self.compact_above = 8192
        self.compactions = 0
        #: (group, cycle) pairs replayed: the per-URL work actually done
        self.groups_seen = 0
        #: Q states copied when a group with Q individuals split
        self.q_copies = 0

    def _q_state(self) -> Any:
        """The Q state (observation log, related-page index) after the warm-up, as
        simulate_content builds it."""
        from scrapy_recrawl.content.replay import _ContentState

        r = self.related
        st = _ContentState(
            self.pages,
            self.cycles,
            self.warmup,
            window=1,  # the C window is the class table's; this one is unused
            wants_q=True,
            experts=r["experts"],
            max_lag=r["max_lag"],
            groups=r["groups"],
            max_candidates=r["max_candidates"],
            history=r["history"],
            refresh_every=r["refresh_every"],
        )
        for cyc, hit in enumerate(self._warmup_hits):
            st.fetched(slice(None), hit.copy(), cyc)
        return st

    @staticmethod
    def _classes(
        columns: dict[str, np.ndarray],
        ids: np.ndarray | None = None,
        names: Sequence[str] = _STATE_COLUMNS,
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Rows with equal state merged: (class table, class of each row / of ``ids``)."""
        stacked = np.stack([np.asarray(columns[c], dtype=np.float64) for c in names], 1)
        # float64 holds the int columns exactly (counts and cycles far below 2^53)
        _, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
        table = {c: np.ascontiguousarray(columns[c][first]) for c in names}
        inverse = inverse.reshape(-1)
        return table, inverse if ids is None else inverse[ids]

    def evaluate(self, trees: Sequence[Tree]) -> PopulationFitness:
        """Replay every tree; mean ChangeRate, NDCG and freshness of each.

        Individuals that have fetched the same URLs so far are in the same
        state: they form a *group* with one copy of the per-URL arrays, share
        the terminal and subtree values, and, when their scores rank the
        classes alike, share the top-k selection too (equivalent expressions
        stay together for the whole replay).
        """
        g = len(trees)
        pages, k = self.pages, self.k
        evaluated = self.cycles - self.warmup
        cr = np.zeros((g, evaluated))
        nd = np.zeros((g, evaluated))
        fr = np.zeros((g, evaluated))
        if g == 0:
            return PopulationFitness(cr.mean(1), nd.mean(1), fr.mean(1))
        roots = [self.interner.intern(t) for t in trees]
        used = [tuple(sorted(gp.terminals_used(t))) for t in trees]
        uses_q = np.array(["Q" in u for u in used], dtype=bool)
        needed = frozenset().union(*used) - {"Q"}
        # one Q state per group that has an individual using Q (group 0: everyone)
        q_states: dict[int, Any] = {0: self._q_state()} if uses_q.any() else {}
        wants_window = any(n[0] in "CD" and n[1:].isdigit() for n in needed)
        if wants_window and not self.window:
            raise ValueError(
                "the C1..C5 / D1..D5 terminals need PopulationReplay(..., window=l) (l >= 1)"
            )
        table = {c: v.copy() for c, v in self.table.items()}
        group_of = np.zeros(g, dtype=np.intp)
        page_class = self.page_class[None, :].copy()  # [group, URL]
        stale = np.zeros((1, pages), dtype=bool)  # [group, URL]
        live_after_compaction = len(table["n"])
        discount = self.discount
        for j, cyc in enumerate(range(self.warmup, self.cycles)):
            stale |= self.by_cycle[cyc]
            now = cyc * self.seconds
            size = len(table["n"])
            cols = table
            if wants_window:
                cols = {**table, **_window_terms(table, self.window)}
            terms = compute_terminals(cols, cyc, now, prior=self.prior, needed=needed)
            groups: dict[int, _Group] = {}
            chosen: dict[tuple, int] = {}
            sel_group: list[int] = []  # distinct selections of this cycle: group, URLs
            sel_idx: list[np.ndarray] = []
            sel_of = np.empty(g, dtype=np.intp)
            with np.errstate(all="ignore"):
                for i, root in enumerate(roots):
                    gid = int(group_of[i])
                    grp = groups.get(gid)
                    if grp is None:
                        grp = groups[gid] = _Group(page_class[gid], size, terms)
                        if gid in q_states:  # once per cycle and Q group, as simulate_content
                            grp.q = _q_column(q_states[gid], cyc)
                    if uses_q[i]:
                        sel_of[i] = self._select_per_url(
                            root, used[i], grp, gid, chosen, sel_group, sel_idx
                        )
                    else:
                        sel_of[i] = self._select(
                            root, used[i], grp, gid, chosen, sel_group, sel_idx
                        )
            s_group = np.array(sel_group, dtype=np.intp)
            s_idx = np.stack(sel_idx)
            hit = stale[s_group[:, None], s_idx]
            n_stale = np.count_nonzero(stale, axis=1)[s_group]
            found = np.count_nonzero(hit, axis=1)
            best = self.ideal[np.minimum(k, n_stale)]
            s_nd = np.array(
                [
                    float(discount[:k] @ hit[s]) / best[s] if best[s] > 0 else 1.0
                    for s in range(s_group.shape[0])
                ]
            )
            cr[:, j] = (found / k)[sel_of]
            nd[:, j] = s_nd[sel_of]
            fr[:, j] = (1.0 - (n_stale - found) / pages)[sel_of]
            # next groups: (group, URLs fetched); one representative selection each
            next_of: dict[tuple[int, bytes], int] = {}
            reps: list[int] = []
            next_of_sel = np.empty(s_group.shape[0], dtype=np.intp)
            for sid in range(s_group.shape[0]):
                key = (int(s_group[sid]), np.sort(s_idx[sid]).tobytes())
                new_gid = next_of.get(key)
                if new_gid is None:
                    new_gid = next_of[key] = len(reps)
                    reps.append(sid)
                next_of_sel[sid] = new_gid
            group_of = next_of_sel[sel_of]
            rep = np.array(reps)
            if q_states:
                q_states = self._next_q_states(
                    q_states, group_of, uses_q, s_group, rep, s_idx, hit, cyc
                )
            r_idx = s_idx[rep]
            r_rows = np.arange(rep.shape[0])[:, None]
            r_old_group = s_group[rep]
            page_class = page_class[r_old_group]
            stale = stale[r_old_group]
            r_hit = hit[rep]
            # the fetched URLs move to new classes: (old class, changed) -> new state
            old = page_class[r_rows, r_idx]
            keys, inverse = np.unique(old * 2 + r_hit, return_inverse=True)
            src = keys // 2
            changed = (keys % 2).astype(bool)
            new = observe(
                table["n"][src],
                table["X"][src],
                table["sad"][src],
                table["aad_sum"][src],
                table["gad"][src],
                changed,
            )
            for col, values in zip(("n", "X", "sad", "aad_sum", "gad"), new, strict=True):
                table[col] = np.concatenate((table[col], values))
            table["last_visit_cycle"] = np.concatenate(
                (table["last_visit_cycle"], np.full(len(keys), cyc, dtype=np.int64))
            )
            table["last_visit_time"] = np.concatenate(
                (table["last_visit_time"], np.full(len(keys), now))
            )
            # the window shifts by one: the new observation first (win.push per class)
            names = _window_columns(self.window)
            for newer, older in zip(names[::-1][:-1], names[::-1][1:], strict=True):
                table[newer] = np.concatenate((table[newer], table[older][src]))
            if names:
                table[names[0]] = np.concatenate((table[names[0]], changed.astype(np.float64)))
            page_class[r_rows, r_idx] = size + inverse.reshape(r_idx.shape)
            stale[r_rows, r_idx] = False
            self.groups_seen += rep.shape[0]
            if len(table["n"]) > max(self.compact_above, 4 * live_after_compaction):
                table, page_class = self._compact(table, page_class)
                self.compactions += 1
                live_after_compaction = len(table["n"])
        return PopulationFitness(
            np.array([r.mean() for r in cr]),
            np.array([r.mean() for r in nd]),
            np.array([r.mean() for r in fr]),
            per_cycle={"changerate": cr, "ndcg": nd, "freshness": fr},
        )

    def _select(
        self,
        root: int,
        used: tuple[str, ...],
        grp: _Group,
        gid: int,
        chosen_cache: dict[tuple, int],
        sel_group: list[int],
        sel_idx: list[np.ndarray],
    ) -> int:
        """:func:`top_k_by_class` for one individual of a group (classes its URLs are in).

        Returns the id of its selection in ``sel_idx`` / ``sel_group``. The
        selection depends only on how the scores *rank* the classes down to the
        cut (with ties), so individuals of the group that rank them alike share
        one (and their metrics are computed once).
        """
        k = self.k
        m = grp.present.shape[0]
        cs = np.asarray(self.interner.evaluate(root, grp.sub(used), grp.memo), dtype=np.float64)
        if cs.shape != (m,):
            cs = np.broadcast_to(cs, (m,))
        if not np.isfinite(cs).all():
            cs = np.where(np.isfinite(cs), cs, -np.inf)
        neg = -cs
        order = np.argsort(neg, kind="stable")
        ranked = neg[order]
        cut = int(np.searchsorted(grp.cum_of(order), k))
        end = m if cut >= m else int(np.searchsorted(ranked, ranked[cut], side="right"))
        key = (gid, order[:end].tobytes(), (np.diff(ranked[:end]) != 0).tobytes())
        found = chosen_cache.get(key)
        if found is not None:
            return found
        page_class, size = grp.page_class, grp.size
        full = np.empty(size)
        full[grp.present] = cs
        if cut >= m:
            chosen = np.arange(page_class.shape[0])
        else:
            v = cs[order[cut]]
            code = np.zeros(size, dtype=np.int8)
            code[grp.present] = (cs > v).view(np.int8) * np.int8(2) + (cs == v).view(np.int8)
            page_code = code[page_class]
            above = np.flatnonzero(page_code == 2)
            tied = np.flatnonzero(page_code == 1)[: k - above.shape[0]]
            chosen = np.sort(np.concatenate((above, tied)))
        chosen = chosen[np.argsort(-full[page_class[chosen]], kind="stable")][:k]
        return _remember(key, chosen, gid, chosen_cache, sel_group, sel_idx)

    def _select_per_url(
        self,
        root: int,
        used: tuple[str, ...],
        grp: _Group,
        gid: int,
        chosen_cache: dict[tuple, int],
        sel_group: list[int],
        sel_idx: list[np.ndarray],
    ) -> int:
        """The selection of a tree using ``Q``: scored per URL, :func:`top_k_by_index`."""
        pages = grp.page_class.shape[0]
        scores = np.asarray(
            self.interner.evaluate(root, grp.per_url(used), grp.url_memo), dtype=np.float64
        )
        if scores.shape != (pages,):
            scores = np.broadcast_to(scores, (pages,))
        idx = top_k_by_index(scores, self.k)
        key = (gid, b"url", idx.tobytes())
        found = chosen_cache.get(key)
        if found is not None:
            return found
        return _remember(key, idx, gid, chosen_cache, sel_group, sel_idx)

    def _next_q_states(
        self,
        q_states: dict[int, Any],
        group_of: np.ndarray,
        uses_q: np.ndarray,
        s_group: np.ndarray,
        rep: np.ndarray,
        s_idx: np.ndarray,
        hit: np.ndarray,
        cyc: int,
    ) -> dict[int, Any]:
        """The Q states of the next groups: the parent's (copied if it split), plus this fetch."""
        wanted = set(np.unique(group_of[uses_q]).tolist())
        children: dict[int, list[int]] = {}
        for new_gid, sid in enumerate(rep.tolist()):
            if new_gid in wanted:
                children.setdefault(int(s_group[sid]), []).append(new_gid)
        out: dict[int, Any] = {}
        for parent, kids in children.items():
            st = q_states[parent]
            # copies first: the parent's state is still the one before this fetch
            for new_gid in kids[1:]:
                out[new_gid] = copy.deepcopy(st)
                self.q_copies += 1
            out[kids[0]] = st
        for new_gid, st in out.items():
            sid = int(rep[new_gid])
            st.fetched(s_idx[sid], hit[sid].copy(), cyc)
        return out

    def _compact(
        self, table: dict[str, np.ndarray], page_class: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Drop classes no URL is in any more, and merge classes with equal state."""
        live = np.flatnonzero(np.bincount(page_class.ravel(), minlength=len(table["n"])))
        merged, live_class = self._classes(
            {c: v[live] for c, v in table.items()}, names=self.columns
        )
        remap = np.zeros(len(table["n"]), dtype=np.int64)
        remap[live] = live_class
        return merged, remap[page_class]


# --------------------------------------------------------------------------- folds


def _remember(
    key: tuple,
    chosen: np.ndarray,
    gid: int,
    chosen_cache: dict[tuple, int],
    sel_group: list[int],
    sel_idx: list[np.ndarray],
) -> int:
    """Keep a selection (the URLs a group's individual fetches) once; its id."""
    sel_idx.append(chosen)
    sel_group.append(gid)
    chosen_cache[key] = len(sel_idx) - 1
    return chosen_cache[key]


def split_folds(pages: int, folds: int, seed: int) -> list[np.ndarray]:
    """Pages shuffled (seeded) into ``folds`` near-equal folds of sorted indices."""
    order = np.random.default_rng(seed).permutation(pages)
    return [np.sort(part) for part in np.array_split(order, folds)]


def fold_roles(folds: int) -> tuple[list[int], list[int], int]:
    """(training folds, validation folds, test fold): fold 0 tests, the rest split in halves."""
    rest = list(range(1, folds))
    half = len(rest) // 2
    return rest[:half], rest[half:], 0


# --------------------------------------------------------------------------- the GP run


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


Progress = Callable[[int, int, int, int, float, float], None]


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


# --------------------------------------------------------------------------- one seed per process

_WORKER: dict[str, Any] = {}


def _replay(
    changes: np.ndarray, config: EvolveConfig, terminals: Sequence[str]
) -> PopulationReplay:
    return PopulationReplay(
        changes,
        k=config.budget,
        warmup=config.warmup,
        prior=config.prior,
        window=gp.window_of(terminals),
        related=config.related,
    )


def _init_worker(
    train: np.ndarray, config: EvolveConfig, terminals: Sequence[str], quiet: bool
) -> None:
    replay = _replay(train, config, terminals)
    _WORKER.update(
        cache=FitnessCache(replay, config.fitness),
        config=config,
        terminals=tuple(terminals),
        quiet=quiet,
    )


def _seed_job(args: tuple[int, int]) -> tuple[list[Candidate], dict[str, float]]:
    index, seed = args
    w = _WORKER
    progress = None if w["quiet"] else stderr_progress(sys.stderr)
    cache: FitnessCache = w["cache"]
    t0, c0 = time.perf_counter(), time.process_time()
    lookups, evaluated = cache.lookups, cache.evaluated
    best = run_seed(cache, w["config"], w["terminals"], seed, progress, index)
    return best, {
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        "lookups": cache.lookups - lookups,
        "evaluated": cache.evaluated - evaluated,
    }


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


# --------------------------------------------------------------------------- evolve


@dataclass
class EvolveResult:
    """What ``recrawl-evolve`` prints and saves."""

    winner: Candidate
    candidates: list[Candidate]
    test: dict[str, ReplayResult]
    config: EvolveConfig
    terminals: tuple[str, ...]
    pages: dict[str, int]
    seconds: float
    stats: dict[str, float] = field(default_factory=dict)
    source: str = ""

    @property
    def expression(self) -> str:
        return self.winner.expression

    def rows(self) -> list[tuple[str, str, float, float, float, float]]:
        """(label, expression, ChangeRate, NDCG, freshness, ChangeRate/oracle) on the test fold."""
        orc = self.test[ORACLE].mean_change_rate
        out = []
        for label, r in self.test.items():
            expr = "(clairvoyant)" if label == ORACLE else r.policy
            if label == "winner":
                expr = self.expression
            elif label in _PRESET_TEXT:
                expr = _PRESET_TEXT[label]
            share = r.mean_change_rate / orc if orc > 0 else float("nan")
            out.append((label, expr, r.mean_change_rate, r.mean_ndcg, r.mean_freshness, share))
        return out

    def table(self) -> str:
        lines = [
            f"test fold: {self.pages['test']} pages x {self.test['winner'].change_rate.size} "
            f"budgeted cycles, k = {self.test['winner'].k} per cycle",
            "",
            "| scorer | expression | ChangeRate | NDCG | freshness | ChangeRate / oracle |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for label, expr, cr, nd, fr, share in self.rows():
            if len(expr) > 60:
                expr = expr[:57] + "..."
            lines.append(f"| {label} | `{expr}` | {cr:.4f} | {nd:.4f} | {fr:.4f} | {share:.3f} |")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        w = self.winner
        return {
            "expression": self.expression,
            "prior": list(self.config.prior),
            "fitness": self.config.fitness,
            "selection": self.config.selection,
            "train_fitness": w.train,
            "validation_fitness": w.validation,
            "seed": w.seed,
            "generation": w.generation,
            "test": {
                label: {"change_rate": cr, "ndcg": nd, "freshness": fr, "change_rate_vs_oracle": s}
                for label, _e, cr, nd, fr, s in self.rows()
            },
            # paper 004's parameters the expression needs at crawl time: RECRAWL_WINDOW
            # must be at least the largest i of its C_i / D_i (checked on loading)
            "window": gp.window_of(self.terminals),
            "terminals_used": sorted(gp.terminals_used(w.tree)),
            **(
                {"related": _related_json(self.config.related)}
                if gp.uses_related(self.terminals)
                else {}
            ),
            "parameters": {
                **{k: v for k, v in asdict(self.config).items() if k != "related"},
                "terminal_names": list(self.terminals),
            },
            "history": {"source": self.source, **self.pages},
            "seconds": self.seconds,
            "stats": self.stats,
        }


def _related_json(related: Mapping[str, Any]) -> dict[str, Any]:
    """The Q replay's related-page parameters, named as the RECRAWL_* settings they mirror."""
    r = related_parameters(related)
    groups = r["groups"]
    return {
        "RECRAWL_EXPERTS": r["experts"],
        "RECRAWL_EXPERTS_LAG": r["max_lag"],
        "RECRAWL_EXPERTS_CANDIDATES": r["max_candidates"],
        "RECRAWL_EXPERTS_HISTORY": r["history"],
        "refresh_every": r["refresh_every"],
        "groups": None if groups is None else "per page (hosts / site folders)",
    }


from scrapy_recrawl.scoring import PRESETS as _PRESETS  # noqa: E402

_PRESET_TEXT = {
    name: (p.expression if p.expression is not None else "random") for name, p in _PRESETS.items()
}


def evolve(
    changes: np.ndarray,
    config: EvolveConfig,
    *,
    content: bool = False,
    progress: bool = True,
    stream: TextIO | None = None,
    source: str = "",
    baselines: Sequence[str] = BASELINES,
) -> EvolveResult:
    """GP4C on ``changes[page, cycle]``: evolve, select, and report on the test fold."""
    c = np.asarray(changes)
    if c.ndim != 2:
        raise ValueError(f"changes must be a 2-d [page, cycle] matrix, got shape {c.shape}")
    config.check(cycles=c.shape[1], pages=c.shape[0])
    terminals = gp.terminal_set(config.terminals, content=content)
    stream = sys.stderr if stream is None else stream
    t0 = time.perf_counter()
    folds = split_folds(c.shape[0], config.folds, config.seed)
    train_f, valid_f, test_f = fold_roles(config.folds)
    train = c[np.sort(np.concatenate([folds[i] for i in train_f]))]
    valid = c[np.sort(np.concatenate([folds[i] for i in valid_f]))]
    test = c[folds[test_f]]
    seeds = [int(s) for s in np.random.SeedSequence(config.seed).generate_state(config.seeds)]
    jobs = max(1, min(config.jobs, config.seeds))
    candidates: list[Candidate] = []
    lookups = evaluated = 0
    cpu0 = time.process_time()
    worker_cpu = 0.0
    if jobs == 1:
        _init_worker(train, config, terminals, not progress)
        _WORKER["quiet"] = not progress
        show = stderr_progress(stream) if progress else None
        cache: FitnessCache = _WORKER["cache"]
        for i, s in enumerate(seeds):
            candidates.extend(run_seed(cache, config, terminals, s, show, i))
        lookups, evaluated = cache.lookups, cache.evaluated
        _WORKER.clear()
    else:
        with ProcessPoolExecutor(
            jobs, initializer=_init_worker, initargs=(train, config, terminals, not progress)
        ) as ex:
            for best, st in ex.map(_seed_job, list(enumerate(seeds))):
                candidates.extend(best)
                lookups += int(st["lookups"])
                evaluated += int(st["evaluated"])
                worker_cpu += st["cpu_seconds"]
    # validation (Listing 1, lines 14-16), one replay for all seeds' best
    window = gp.window_of(terminals)
    vreplay = _replay(valid, config, terminals)
    trees = gp.unique(cand.tree for cand in candidates)
    vres = vreplay.evaluate(trees)
    vfit = dict(zip(trees, vres.of(config.fitness), strict=True))
    assert vres.per_cycle is not None
    vcyc = dict(zip(trees, vres.per_cycle[config.fitness], strict=True))
    for cand in candidates:
        cand.validation = float(vfit[cand.tree])
        cand.validation_cycles = vcyc[cand.tree]
    winner = select_final(candidates, config.selection)
    # the test fold, with simulate() and the scorer the printed expression makes
    test_results: dict[str, ReplayResult] = {}
    kw = {"warmup": config.warmup, "k": config.budget, "seed": config.seed, "prior": config.prior}
    scorer = Scorer.from_spec(winner.expression, prior=config.prior, seed=config.seed)
    winner_terms = gp.terminals_used(winner.tree)
    if gp.window_of(winner_terms) or gp.uses_related(winner_terms):
        # simulate() has no window / Q columns; simulate_content is simulate plus them
        from scrapy_recrawl.content.replay import simulate_content

        test_results["winner"] = simulate_content(
            test, scorer, window=max(1, window), **kw, **related_parameters(config.related)
        )
    else:
        test_results["winner"] = simulate(test, scorer, **kw)
    for name in baselines:
        test_results[name] = simulate(test, name, **kw)
    return EvolveResult(
        winner=winner,
        candidates=candidates,
        test=test_results,
        config=config,
        terminals=tuple(terminals),
        pages={
            "pages": int(c.shape[0]),
            "cycles": int(c.shape[1]),
            "train": int(train.shape[0]),
            "validation": int(valid.shape[0]),
            "test": int(test.shape[0]),
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
    )


def save_json(result: EvolveResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result.to_json(), fh, indent=2, default=_json_default)
        fh.write("\n")


def _json_default(o: object) -> object:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def plot(result: EvolveResult, path: str, labels: Sequence[str] | None = None) -> None:
    """Per-cycle ChangeRate of the winner and the baselines on the test fold (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(
            "--plot needs matplotlib: pip install matplotlib (or scrapy-recrawl[plot])"
        ) from None
    labels = list(result.test) if labels is None else list(labels)
    fig, ax = plt.subplots(figsize=(10, 5.5))
    ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
    for label in labels:
        r = result.test[label]
        x = np.arange(r.warmup, r.warmup + r.change_rate.size)
        style = {"linewidth": 2.5} if label in ("winner", ORACLE) else {"linewidth": 1.0}
        ax.plot(x, r.change_rate, label=label, **style)
    ax.set_xlabel("cycle")
    ax.set_ylabel("ChangeRate (test fold)")
    ax.set_title(f"recrawl-evolve: {math.floor(result.pages['test'])} test pages")
    ax.legend(ncol=3, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def default_jobs() -> int:
    return max(1, min(5, os.cpu_count() or 1))
