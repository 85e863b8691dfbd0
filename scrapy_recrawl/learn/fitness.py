"""The pieces of batched fitness: tree scorers, index-ordered top-k, shared terminal groups.

What :class:`~scrapy_recrawl.learn.population.PopulationReplay` uses to replay many
trees at once with the numbers :func:`scrapy_recrawl.core.simulate.simulate` would give.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scrapy_recrawl.content import window as win
from scrapy_recrawl.core.simulate import ReplayResult
from scrapy_recrawl.learn import gp
from scrapy_recrawl.learn.gp import Tree
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import Scorer, TerminalRegistry

from .config import combine


def top_k_by_index(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best scores, best first, ties to the lower index; NaN/inf rank last.

    :func:`top_k_indices`' contract with its tie-breaking pinned down: the
    URL order is (score descending, index ascending). The replay's selection
    (:func:`top_k_by_class`) gives exactly this; see :class:`IndexTieScorer`.
    """
    s = np.asarray(scores, dtype=np.float64)
    s = np.where(np.isfinite(s), s, -np.inf)
    n = s.shape[0]
    k = max(0, min(int(k), n))
    if k == 0 or 2 * k >= n:
        return np.lexsort((np.arange(n), -s))[:k]
    # the k-th best value, then everything above it and the lowest indices at it: one
    # pass (the per-URL trees run this per cycle, where a full sort was most of the cost)
    v = np.partition(s, n - k)[n - k]
    above = np.flatnonzero(s > v)
    chosen = np.concatenate((above, np.flatnonzero(s == v)[: k - above.shape[0]]))
    return chosen[np.lexsort((chosen, -s[chosen]))]


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
        self.registry = inner.registry

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.inner.score(terminals)

    def top_k(self, terminals: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        return top_k_by_index(self.score(terminals), k)


class TreeScorer(Scorer):
    """A scorer that evaluates a GP tree directly (:func:`gp.evaluate`), its terminals
    computed with ``registry`` (None: the core's and the built-in plug-ins')."""

    def __init__(
        self,
        tree: Tree,
        prior: tuple[float, float] | None = None,
        registry: TerminalRegistry | None = None,
    ) -> None:
        self.tree = tree
        self.registry = default_registry() if registry is None else registry
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
        """Each individual's fitness ``fitness`` (a metric or a mix: config.fitness_weights)."""
        return np.asarray(
            combine(
                fitness,
                {"changerate": self.change_rate, "ndcg": self.ndcg, "freshness": self.freshness},
            )
        )

    def cycles_of(self, fitness: str, start: int = 0) -> np.ndarray:
        """``[individual, cycle]``: the fitness per budgeted cycle, from the ``start``-th on."""
        assert self.per_cycle is not None
        return np.asarray(combine(fitness, {m: v[:, start:] for m, v in self.per_cycle.items()}))


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
        "url_terms",
        "_url_only",
    )

    def __init__(
        self,
        page_class: np.ndarray,
        size: int,
        terms: Mapping[str, np.ndarray],
        url_terms: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None,
    ):
        self.page_class = page_class
        #: computes the terminals known only per URL (PopulationReplay._url_terms)
        self.url_terms = url_terms
        self._url_only: dict[str, np.ndarray] | None = None
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
        """The terminals of every URL (class values gathered; ``Q`` and the terminals known
        only per URL added): for the trees that use any of those."""
        for name in used:
            if name not in self._url:
                if name == "Q":
                    col = self.q
                elif name in self.terms:
                    col = self.terms[name][self.page_class]
                else:
                    if self._url_only is None:
                        assert self.url_terms is not None, f"{name} is no per-URL terminal"
                        self._url_only = self.url_terms(self.page_class)
                    col = self._url_only[name]
                assert col is not None, "Q asked for before the Q column was set"
                self._url[name] = col
        return self._url

    def sub(self, used: Sequence[str]) -> dict[str, np.ndarray]:
        """The terminals of the classes present (gathered once per group and name)."""
        for name in used:
            if name not in self._sub:
                self._sub[name] = self.terms[name][self.present]
        return self._sub

    def cum_of(self, order: np.ndarray) -> np.ndarray:
        return np.cumsum(self._cum[order])


def replay_fitness(fitness: str, result: ReplayResult, start: int = 0) -> float:
    """The fitness ``fitness`` (a metric or a mix) of one replay, over its budgeted cycles
    from the ``start``-th on (0: all, as the means of :class:`ReplayResult`)."""
    return float(
        combine(
            fitness,
            {
                "changerate": float(result.change_rate[start:].mean()),
                "ndcg": float(result.ndcg[start:].mean()),
                "freshness": float(result.freshness[start:].mean()),
            },
        )
    )
