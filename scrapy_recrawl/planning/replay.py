"""Replay the WebFountain planner over change histories, beside the scorers.

The setting, the state and the metrics are those of
:func:`scrapy_recrawl.core.simulate.simulate` (GP4C's replay): a change
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

from collections.abc import Mapping
from typing import Any

import numpy as np

from scrapy_recrawl.core.simulate import ReplayResult, SelectFn, simulate

from .model import Weights
from .webfountain import WebFountainPlanner

__all__ = ["SelectFn", "replay_plan", "simulate_policy"]


def simulate_policy(
    changes: np.ndarray,
    select: SelectFn,
    name: str,
    *,
    warmup: int = 2,
    k: int | float = 0.05,
    cycle_hours: float = 24.0,
) -> ReplayResult:
    """The simulator's replay with the per-cycle choice given as ``select``."""
    return simulate(changes, select, warmup=warmup, k=k, cycle_hours=cycle_hours, name=name)


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

    Same ``warmup`` and ``k`` as :func:`~scrapy_recrawl.core.simulate.simulate`,
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
