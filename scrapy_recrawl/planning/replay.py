"""Replay the WebFountain planner over change histories, beside the scorers.

The setting, the state and the metrics are those of
:func:`scrapy_recrawl.learn.simulate.simulate` (GP4C's replay): a change
matrix ``changes[page, cycle]``, a warm-up of ``warmup`` cycles fetching
every page, then ``k`` pages per cycle; ChangeRate, NDCG@k and freshness per
cycle. Only the choice of the ``k`` pages differs: instead of a scorer's
top-k it is :class:`~scrapy_recrawl.planning.webfountain.WebFountainPlanner`,
which re-buckets the pages from what the replay has observed so far and
re-solves the plan every ``plan_every`` cycles. The fetched list is ranked by
the planner's belief that a page is stale (its bucket's rate and its age),
which is what NDCG is computed on.

:func:`simulate_policy` is ``simulate`` with the per-cycle choice passed in
as a function; it reuses the simulator's own state and update rule
(``new_state``, ``_record_fetch``, ``resolve_k``, ``ReplayResult``), and a
test checks that it gives the simulator's numbers for a scorer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from scrapy_recrawl.learn.simulate import ReplayResult, _record_fetch, new_state, resolve_k

from .webfountain import WebFountainPlanner, Weights

__all__ = ["SelectFn", "replay_plan", "simulate_policy"]

#: ``select(state, cycle, k) -> row indices, best first``; ``state`` is the
#: simulator's per-page columns plus ``first_cycle``.
SelectFn = Callable[[Mapping[str, np.ndarray], int, int], np.ndarray]


def simulate_policy(
    changes: np.ndarray,
    select: SelectFn,
    name: str,
    *,
    warmup: int = 2,
    k: int | float = 0.05,
    cycle_hours: float = 24.0,
) -> ReplayResult:
    """The simulator's replay loop with the per-cycle choice given as ``select``."""
    c = np.asarray(changes)
    if c.ndim != 2:
        raise ValueError(f"changes must be a 2-d [page, cycle] matrix, got shape {c.shape}")
    pages, cycles = c.shape
    if pages == 0:
        raise ValueError("changes has no pages")
    if not 1 <= warmup <= cycles:
        raise ValueError(f"warmup={warmup!r}: expected 1..{cycles} (the number of cycles)")
    budget = resolve_k(k, pages)
    by_cycle = np.ascontiguousarray(c.T != 0)
    seconds = float(cycle_hours) * 3600.0
    state = new_state(pages)
    state["first_cycle"] = np.zeros(pages, dtype=np.int64)  # the warm-up fetches everyone at 0
    stale = np.zeros(pages, dtype=bool)
    everyone = slice(None)
    for cyc in range(warmup):
        stale |= by_cycle[cyc]
        _record_fetch(state, everyone, stale.copy(), cyc, cyc * seconds, first=cyc == 0)
        stale[:] = False

    evaluated = cycles - warmup
    change_rate = np.zeros(evaluated)
    ndcg = np.zeros(evaluated)
    freshness = np.zeros(evaluated)
    changed_fetched = np.zeros(evaluated, dtype=np.int64)
    discount = 1.0 / np.log2(np.arange(2, budget + 2, dtype=np.float64))
    ideal = np.concatenate(([0.0], np.cumsum(discount)))
    for j, cyc in enumerate(range(warmup, cycles)):
        stale |= by_cycle[cyc]
        idx = np.asarray(select(state, cyc, budget), dtype=np.int64)[:budget]
        hit = stale[idx]
        n_stale = int(np.count_nonzero(stale))
        found = int(np.count_nonzero(hit))
        changed_fetched[j] = found
        change_rate[j] = found / budget
        best = ideal[min(budget, n_stale)]
        ndcg[j] = float(discount[: idx.size] @ hit) / best if best > 0 else 1.0
        _record_fetch(state, idx, hit, cyc, cyc * seconds)
        stale[idx] = False
        freshness[j] = 1.0 - (n_stale - found) / pages
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


def replay_plan(
    changes: np.ndarray,
    strategy: str | Weights | Mapping[str, Any] = "strategy1",
    *,
    warmup: int = 2,
    k: int | float = 0.05,
    periods: int = 14,
    plan_every: int = 7,
    n_buckets: int = 64,
    prior: tuple[float, float] | None = None,
    max_seconds: float = 60.0,
) -> tuple[ReplayResult, WebFountainPlanner]:
    """Replay the planner policy over ``changes``; returns the metrics and the planner.

    Same ``warmup`` and ``k`` as :func:`~scrapy_recrawl.learn.simulate.simulate`,
    so the numbers compare with ``simulate(changes, "aad+")``. The planner
    (its plans, solve times, last error) is returned for inspection.
    """
    planner = WebFountainPlanner(
        strategy,
        periods=periods,
        plan_every=plan_every,
        n_buckets=n_buckets,
        prior=prior,
        max_seconds=max_seconds,
    )

    def select(state: Mapping[str, np.ndarray], cycle: int, budget: int) -> np.ndarray:
        return planner.select(state, cycle, budget).indices

    label = strategy if isinstance(strategy, str) else getattr(strategy, "name", "custom")
    result = simulate_policy(changes, select, f"plan:{label}", warmup=warmup, k=k)
    return result, planner
