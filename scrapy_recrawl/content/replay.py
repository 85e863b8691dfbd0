"""Replay a scorer over change matrices with the content terminals (``C*``, ``D*``, ``Q``).

:func:`scrapy_recrawl.core.simulate.simulate` keeps only the store's columns,
so the content terminals are NaN there. :func:`simulate_content` is the same
replay (same warm-up, budget, selection, metrics; it reuses simulate's
building blocks and gives simulate's numbers for scorers that use none of the
new terminals: tests check it) that also keeps, per page:

* the window of its last ``window`` change observations (``C1..Cl``; ``D_i``
  degenerate to ``max(C_1..C_i)``: the matrices have no content);
* what each fetch observed, per cycle (1/0, NaN when not fetched), from which
  a :class:`~scrapy_recrawl.content.related.RelatedIndex` is built at the end
  of the warm-up and refreshed every ``refresh_every`` cycles for the pages
  fetched since (the live upkeep), over the last ``history`` cycles; ``Q``
  is read from it each cycle.

Only what the crawler observed is used: no page's future, no unfetched change.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from scrapy_recrawl.core.simulate import ReplayResult, simulate
from scrapy_recrawl.scoring import Scorer, TerminalRegistry, core_registry

from . import window as win
from .related import DEFAULT_CANDIDATES, DEFAULT_K, DEFAULT_MAX_LAG, RelatedIndex


def _series(obs: np.ndarray) -> np.ndarray:
    """Observed series with the gaps filled by each page's observed mean (no information)."""
    seen = ~np.isnan(obs)
    count = seen.sum(axis=1, keepdims=True)
    mean = np.where(count > 0, np.nansum(obs, axis=1, keepdims=True) / np.maximum(count, 1), 0.0)
    return np.where(seen, obs, mean)


class ContentState:
    """The C* window, the observation log and the related-page index of a replay."""

    def __init__(
        self,
        pages: int,
        cycles: int,
        warmup: int,
        *,
        window: int,
        wants_q: bool,
        experts: int,
        max_lag: int,
        groups: Sequence[object] | np.ndarray | None,
        max_candidates: int,
        history: int,
        refresh_every: int,
    ) -> None:
        self.window = win.empty_window(pages, window)
        self.obs = np.full((pages, cycles), np.nan, dtype=np.float32)
        self.dirty = np.zeros(pages, dtype=bool)
        self.index: RelatedIndex | None = None
        self.warmup, self.wants_q = warmup, wants_q
        self.experts, self.max_lag, self.groups = experts, max_lag, groups
        self.max_candidates, self.history, self.refresh_every = (
            max_candidates,
            history,
            refresh_every,
        )

    def columns(self, cycle: int) -> dict[str, np.ndarray]:
        cols = dict(win.columns(self.window))
        if self.wants_q:
            lo = max(0, cycle - self.history)
            seen = self.obs[:, lo:cycle]
            if self.index is None:
                self.index = RelatedIndex.build(
                    _series(seen),
                    k=self.experts,
                    max_lag=min(self.max_lag, max(1, cycle - lo - 1)),
                    groups=self.groups,
                    max_candidates=self.max_candidates,
                )
            elif (cycle - self.warmup) % self.refresh_every == 0 and self.dirty.any():
                self.index.refresh(_series(seen), np.flatnonzero(self.dirty))
                self.dirty[:] = False
            cols["Q"] = self.index.q(seen)
        return cols

    def fetched(self, idx: np.ndarray | slice, hit: np.ndarray, cycle: int) -> None:
        if cycle == 0:
            return  # a first fetch is no change observation
        win.push(self.window, idx, hit.astype(np.float64))
        self.obs[idx, cycle] = hit
        if cycle >= self.warmup:
            self.dirty[idx] = True


@functools.lru_cache(maxsize=1)
def replay_registry() -> TerminalRegistry:
    """The terminals a policy named by a string may use here: the core's and this
    package's plug-in's (``C*``, ``D*``, ``Q``: the columns this replay keeps), as a crawl
    with the plug-in listed has them. Shared (cached): treat it as read-only."""
    from .plugin import ContentPlugin

    registry = core_registry().copy()
    registry.register_plugin(
        f"{ContentPlugin.__module__}.{ContentPlugin.__qualname__}", ContentPlugin.terminals
    )
    return registry


def simulate_content(
    changes: np.ndarray,
    policy: Scorer | str,
    *,
    warmup: int = 2,
    k: int | float = 0.05,
    seed: int = 0,
    prior: tuple[float, float] | None = None,
    window: int = win.DEFAULT_WINDOW,
    experts: int = DEFAULT_K,
    max_lag: int = DEFAULT_MAX_LAG,
    groups: Sequence[object] | np.ndarray | None = None,
    max_candidates: int = DEFAULT_CANDIDATES,
    history: int = 60,
    refresh_every: int = 7,
    cycle_hours: float = 24.0,
    group_column: np.ndarray | None = None,
) -> ReplayResult:
    """:func:`~scrapy_recrawl.core.simulate.simulate` with ``C*``, ``D*`` and ``Q`` kept.

    ``groups`` are the related-page index's groups (candidates never cross them);
    ``group_column`` is simulate's ``groups=``: the pooled priors' ``group`` column."""
    c = np.asarray(changes)
    win.check_window(window)
    scorer = (
        policy
        if isinstance(policy, Scorer)
        else Scorer.from_spec(policy, prior=prior, seed=seed, registry=replay_registry())
    )
    extension = ContentState(
        c.shape[0],
        c.shape[1],
        warmup,
        window=window,
        wants_q="Q" in scorer.terminals_needed,
        experts=experts,
        max_lag=max_lag,
        groups=groups,
        max_candidates=max_candidates,
        history=history,
        refresh_every=refresh_every,
    )
    return simulate(
        c,
        scorer,
        warmup=warmup,
        k=k,
        cycle_hours=cycle_hours,
        extension=extension,
        groups=group_column,
    )
