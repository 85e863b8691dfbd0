"""Replay a scorer over change matrices with the content terminals (``C*``, ``D*``, ``Q``).

:func:`scrapy_recrawl.learn.simulate.simulate` keeps only the store's columns,
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

from collections.abc import Sequence

import numpy as np

from scrapy_recrawl.learn.simulate import ReplayResult, _record_fetch, new_state, resolve_k
from scrapy_recrawl.scoring import Scorer, compute_terminals

from . import window as win
from .related import DEFAULT_CANDIDATES, DEFAULT_K, DEFAULT_MAX_LAG, RelatedIndex


def _series(obs: np.ndarray) -> np.ndarray:
    """Observed series with the gaps filled by each page's observed mean (no information)."""
    seen = ~np.isnan(obs)
    count = seen.sum(axis=1, keepdims=True)
    mean = np.where(count > 0, np.nansum(obs, axis=1, keepdims=True) / np.maximum(count, 1), 0.0)
    return np.where(seen, obs, mean)


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
) -> ReplayResult:
    """:func:`~scrapy_recrawl.learn.simulate.simulate` with ``C*``, ``D*`` and ``Q`` kept."""
    c = np.asarray(changes)
    pages, cycles = c.shape
    if not 1 <= warmup <= cycles:
        raise ValueError(f"warmup={warmup!r}: expected 1..{cycles}")
    win.check_window(window)
    budget = resolve_k(k, pages)
    scorer = (
        policy if isinstance(policy, Scorer) else Scorer.from_spec(policy, prior=prior, seed=seed)
    )
    needed = scorer.terminals_needed
    wants_q = "Q" in needed
    by_cycle = np.ascontiguousarray(c.T != 0)
    seconds = float(cycle_hours) * 3600.0
    state = new_state(pages)
    cwin = win.empty_window(pages, window)
    obs = np.full((pages, cycles), np.nan, dtype=np.float32)
    stale = np.zeros(pages, dtype=bool)
    for cyc in range(warmup):
        stale |= by_cycle[cyc]
        _record_fetch(state, slice(None), stale.copy(), cyc, cyc * seconds, first=cyc == 0)
        if cyc > 0:
            win.push(cwin, slice(None), stale.astype(np.float64))
            obs[:, cyc] = stale
        stale[:] = False

    index: RelatedIndex | None = None
    dirty = np.zeros(pages, dtype=bool)
    evaluated = cycles - warmup
    change_rate, ndcg, freshness = np.zeros(evaluated), np.zeros(evaluated), np.zeros(evaluated)
    changed_fetched = np.zeros(evaluated, dtype=np.int64)
    discount = 1.0 / np.log2(np.arange(2, budget + 2, dtype=np.float64))
    ideal = np.concatenate(([0.0], np.cumsum(discount)))
    for j, cyc in enumerate(range(warmup, cycles)):
        stale |= by_cycle[cyc]
        now = cyc * seconds
        cols = dict(state)
        cols.update(win.columns(cwin))
        if wants_q:
            lo = max(0, cyc - history)
            if index is None:
                index = RelatedIndex.build(
                    _series(obs[:, lo:cyc]),
                    k=experts,
                    max_lag=min(max_lag, max(1, cyc - lo - 1)),
                    groups=groups,
                    max_candidates=max_candidates,
                )
            elif (cyc - warmup) % refresh_every == 0 and dirty.any():
                index.refresh(_series(obs[:, lo:cyc]), np.flatnonzero(dirty))
                dirty[:] = False
            cols["Q"] = index.q(obs[:, lo:cyc])
        terms = compute_terminals(cols, cyc, now, prior=scorer.prior, needed=needed)
        idx = scorer.top_k(terms, budget)
        hit = stale[idx]
        n_stale = int(np.count_nonzero(stale))
        found = int(np.count_nonzero(hit))
        changed_fetched[j] = found
        change_rate[j] = found / budget
        best = ideal[min(budget, n_stale)]
        ndcg[j] = float(discount[: idx.size] @ hit) / best if best > 0 else 1.0
        _record_fetch(state, idx, hit, cyc, now)
        win.push(cwin, idx, hit.astype(np.float64))
        obs[idx, cyc] = hit
        dirty[idx] = True
        stale[idx] = False
        freshness[j] = 1.0 - (n_stale - found) / pages
    name = scorer.name if scorer.name != "expression" else str(scorer)
    return ReplayResult(
        policy=name,
        pages=pages,
        k=budget,
        warmup=warmup,
        change_rate=change_rate,
        ndcg=ndcg,
        freshness=freshness,
        changed_fetched=changed_fetched,
        state=state,
    )
