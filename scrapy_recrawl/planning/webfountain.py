"""The WebFountain crawl-plan model (Edwards, McCurley & Tomlin 2001, sec. 4).

Pages are grouped into ``B`` change-rate buckets (:mod:`.buckets`). Over a
crawler cycle of ``T`` equal time periods the model decides, for every
period ``t`` and bucket ``i``, how many known pages to recrawl (``x_it``) and
how many never-crawled pages to fetch (``z_t``), so that the weighted number
of obsolete pages is least. Variables, for ``t = 1..T`` and ``i = 1..B``:

=========  ==============================================================
``b_it``   pages in bucket ``i`` at the end of period ``t``
``x_it``   pages of bucket ``i`` crawled in period ``t``
``y_it``   obsolete pages of bucket ``i`` at the end of period ``t``
``n_t``    new (never crawled) pages waiting at the end of period ``t``
``z_t``    new pages crawled in period ``t``
=========  ==============================================================

Data: ``b_i0``, ``y_i0``, ``n_0`` (the state now), ``a_it`` (share of bucket
``i`` that changes during period ``t``), the budget ``C_t`` (seconds, or
pages when the costs are 1), the costs ``c_it`` and ``d_t`` of crawling an
old and a new page, ``oldnwt_it`` / ``newnwt_t`` (new pages discovered per
old / new page crawled), ``nconst`` (new pages arriving per period from
elsewhere), ``p_i`` (the share of crawled new pages that join bucket ``i``,
proportional to ``b_i0``) and the objective weights ``oldwt_it``,
``newwt_t``::

    minimise   sum_t sum_i oldwt_it y_it + sum_t newwt_t n_t
    (1)  C_t >= sum_i c_it x_it + d_t z_t
    (2)  y_it = (1 - x_it / b_i,t-1) ((1 - a_it) y_i,t-1 + a_it b_i,t-1)
    (3)  n_t  = n_t-1 + sum_i oldnwt_it x_it + (newnwt_t - 1) z_t + nconst
    (4)  b_it = b_i,t-1 + p_i z_t
    (5)  x_it <= b_i,t-1
    (6)  z_t  <= n_t-1
         b, x, y, n, z >= 0

(2) is the paper's Figure 2: crawling ``x`` of ``b`` pages picks obsolete
and current pages alike, and a change in the same period is caught by the
crawl. It is bilinear in ``(x, y)`` and has ``x / b`` in it, so the model is
a nonlinear programme (and not a convex one).

**Solving.** Like the paper's runs (MINOS, after presolve), the solver
first uses the equality (2) to eliminate ``y``: given ``x`` and ``b`` it
fixes ``y`` period by period. What is left has ``2TB + 2T`` variables
``(x, b, n, z)``, a nonlinear objective and only linear, sparse constraints
(1), (3)-(6): MINOS's kind of problem. It is solved with scipy's
``trust-constr`` (interior point, projected CG) with the exact gradient and
the exact sparse Hessian (``B`` blocks of ``2T x 2T``, from one forward pass
of (2)), starting from a feasible warm start: the uniform plan (every
bucket crawled in proportion to its size). The reported plan recomputes
``y``, ``b``, ``n`` from the solved ``x``, ``z`` with (2)-(4), so those hold
to rounding and (1), (5), (6) within the solver's tolerance;
:meth:`Plan.violations` checks all six. Page counts are scaled to ``O(1)``
inside the solver; :class:`Plan` reports pages. The model is not convex: the
plan is a local optimum that beats its warm start.

The three objective settings of the paper's section 5.1 are named
:data:`STRATEGIES`. The extracted text of the paper in ``shared/papers``
lost the list that defines their weights; what is kept here is read off the
rest of section 5 (Table 3's objective values against its end-of-cycle
obsolete counts, and the behaviour each strategy is said to have):

* ``strategy1``: every period weighs the same (``oldwt = newwt = 1``): the
  obsolete pages summed over the cycle. Table 3's objective (32.6e7) is about
  ``T = 14`` times its end-of-cycle obsolete count (3.1e7).
* ``strategy2``: only the end of the cycle counts (weights 1 in period ``T``,
  0 before). Table 3's objective (1.72e7) is about the end-of-cycle count
  (1.61e7) plus the waiting new pages.
* ``strategy3``: the compromise: the weights double from one period to the
  next, ``2^(t - T)`` (1 in the last period, 1/2 in the one before, ...).
  The paper says Strategy 3 crawls every page at least once with the
  fastest share more often, and is "forced to reduce" its obsolete pages in
  the last few periods (sec. 5.3); a weight that grows towards the end of
  the cycle is what does that, and doubling is the mildest such weight that
  crawls every bucket on the synthetic set-up (docs/planning.md).

Any other weights can be given as :class:`Weights`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .model import (
    Plan,
    PlanError,
    Weights,
    strategy_weights,
)
from .solver import solve_plan

__all__ = ["PlannedSelection", "WebFountainPlanner", "current_buckets", "solve_from_buckets"]


def current_buckets(
    columns: Mapping[str, np.ndarray],
    cycle: int,
    n_buckets: int,
    known: np.ndarray,
    *,
    prior: tuple[float, float] | None = None,
    stale: np.ndarray | None = None,
) -> tuple[Any, Any]:
    """The store's URLs in change-rate buckets now, and the non-empty buckets' sizes, rates
    and expected obsolete copies over the ``known`` rows (live, fetched before): what the
    plan is solved from, by the crawl and by ``recrawl-plan`` (``stale``: each URL's
    chance of being stale now, else its bucket's rate and its age say it)."""
    from .buckets import assign_buckets, bucket_stats

    assignment = assign_buckets(columns, cycle, n_buckets, prior=prior)
    last = np.asarray(columns["last_visit_cycle"])
    return assignment, bucket_stats(assignment, last, cycle, mask=known, stale=stale)


def solve_from_buckets(
    stats: Any,
    periods: int,
    k: int,
    *,
    strategy: str | Weights | Mapping[str, Any] = "strategy1",
    new_waiting: int = 0,
    new_arrivals: float = 0.0,
    max_seconds: float = 60.0,
) -> Plan:
    """The plan for the next ``periods`` cycles of ``k`` pages from :func:`current_buckets`'
    statistics (one period is one cycle; PlanError when it cannot be solved)."""
    return solve_plan(
        stats.sizes,
        stats.change_share(1.0),
        periods,
        float(k),
        obsolete=stats.obsolete,
        new_pages=float(new_waiting),
        new_arrivals=new_arrivals,
        weights=strategy,
        max_seconds=max_seconds,
    )


@dataclass
class PlannedSelection:
    """One cycle's choice: row indices into the columns (best first) and the new-URL quota."""

    indices: np.ndarray
    scores: np.ndarray
    new_quota: int
    period: int
    replanned: bool


class WebFountainPlanner:
    """Plan mode: each cycle's budget follows the plan's per-bucket quotas.

    Every ``plan_every`` cycles (and whenever the plan has run out of
    periods) the URLs are re-bucketed from their latest ``n``, ``X`` and
    visit spacing and the model is solved again for ``periods`` cycles from
    the bucket statistics as they are now (the paper's adaptive loop). In
    between, URLs are re-bucketed every cycle against the plan's edges, so
    what a bucket means stays put. Inside a bucket the oldest-visited URLs
    go first. Budget the quotas leave (rounding, buckets that ran dry) goes
    to the URLs likeliest to be stale by their bucket's rate.

    One model period is one crawl cycle; the budget is in pages (costs 1).
    """

    def __init__(
        self,
        strategy: str | Weights | Mapping[str, Any] = "strategy1",
        *,
        periods: int = 14,
        plan_every: int = 7,
        n_buckets: int = 64,
        prior: tuple[float, float] | None = None,
        new_arrivals: float = 0.0,
        max_seconds: float = 60.0,
    ) -> None:
        if isinstance(strategy, str):
            strategy_weights(strategy, 1, 1)  # unknown names fail now, not at the first plan
        if isinstance(periods, bool) or not isinstance(periods, int) or periods < 1:
            raise PlanError(f"periods={periods!r}: expected a whole number >= 1")
        if isinstance(plan_every, bool) or not isinstance(plan_every, int) or plan_every < 1:
            raise PlanError(f"plan_every={plan_every!r}: expected a whole number of cycles >= 1")
        from .buckets import _check_n_buckets

        self.strategy = strategy
        self.periods = periods
        self.plan_every = plan_every
        self.n_buckets = _check_n_buckets(n_buckets)
        self.prior = prior
        self.new_arrivals = float(new_arrivals)
        self.max_seconds = float(max_seconds)
        self.plan: Plan | None = None
        self.plan_cycle = 0
        self.plan_buckets: np.ndarray = np.zeros(0, dtype=np.int64)  # plan column -> bucket
        self.edges: np.ndarray | None = None
        self.plans_solved = 0
        self.solve_seconds = 0.0
        self.last_error: str | None = None

    def _due(self, cycle: int) -> bool:
        if self.plan is None:
            return True
        period = cycle - self.plan_cycle
        return period >= self.plan_every or period >= self.plan.periods or period < 0

    def select(
        self,
        columns: Mapping[str, np.ndarray],
        cycle: int,
        k: int,
        *,
        candidates: np.ndarray | None = None,
        new_waiting: int = 0,
    ) -> PlannedSelection:
        """Pick this cycle's recrawls (row indices of ``columns``) and the new-URL quota.

        ``columns`` are the store's columns (``n``, ``X``, ``last_visit_cycle``,
        optionally ``first_cycle``); ``candidates`` masks the rows that may be
        fetched (live, not in flight); ``new_waiting`` is the frontier's size.
        """
        from .buckets import assign_buckets, select_by_quotas

        last = np.asarray(columns["last_visit_cycle"])
        known = last >= 0
        if candidates is not None:
            known &= np.asarray(candidates, dtype=bool)
        k = int(k)
        if k <= 0:
            return PlannedSelection(np.zeros(0, np.int64), np.zeros(0), 0, 0, False)
        if not known.any():
            # nothing known yet: the whole budget goes to discovery
            return PlannedSelection(
                np.zeros(0, np.int64), np.zeros(0), min(k, new_waiting), 0, False
            )
        replanned = False
        if self._due(cycle):
            assignment, stats = current_buckets(
                columns, cycle, self.n_buckets, known, prior=self.prior
            )
            self.edges = assignment.edges
            try:
                self.plan = solve_from_buckets(
                    stats,
                    self.periods,
                    k,
                    strategy=self.strategy,
                    new_waiting=new_waiting,
                    new_arrivals=self.new_arrivals,
                    max_seconds=self.max_seconds,
                )
                self.last_error = None
            except PlanError as exc:
                self.plan = None
                self.last_error = str(exc)
            self.plan_buckets = stats.buckets
            self.plan_cycle = cycle
            self.plans_solved += 1
            if self.plan is not None:
                self.solve_seconds += self.plan.seconds
            replanned = True
        else:
            assignment = assign_buckets(columns, cycle, prior=self.prior, edges=self.edges)
        period = cycle - self.plan_cycle
        B = assignment.n_buckets
        age = np.maximum(cycle - last.astype(np.float64), 0.0)
        belief = -np.expm1(-assignment.rate[assignment.bucket] * age)  # P(stale now)
        quotas = np.zeros(B, dtype=np.int64)
        new_quota = 0
        if self.plan is not None:
            new_quota = min(self.plan.new_quota(period), int(new_waiting), k)
            avail = np.bincount(assignment.bucket[known], minlength=B)
            want = self.plan.quotas(period, total=None)
            quotas[self.plan_buckets] = want
            quotas = np.minimum(quotas, avail)
            # never more than the budget, whatever rounding did
            over = int(quotas.sum()) + new_quota - k
            if over > 0:
                for j in np.argsort(assignment.rate)[::1]:  # trim the slowest buckets first
                    cut = min(over, int(quotas[j]))
                    quotas[j] -= cut
                    over -= cut
                    if over == 0:
                        break
        picked = select_by_quotas(assignment.bucket, last, quotas, known)
        left = k - new_quota - picked.size
        if left > 0:
            rest = known.copy()
            rest[picked] = False
            pool = np.flatnonzero(rest)
            if pool.size:
                extra = pool[np.argsort(-belief[pool], kind="stable")[:left]]
                picked = np.concatenate([picked, extra])
        order = np.argsort(-belief[picked], kind="stable")
        picked = picked[order]
        return PlannedSelection(
            indices=picked.astype(np.int64),
            scores=belief[picked],
            new_quota=int(new_quota),
            period=int(period),
            replanned=replanned,
        )

    # -- persistence: one `scrapy crawl` per cycle keeps the plan between runs

    def state(self) -> dict[str, Any]:
        """What the next run needs to go on with the current plan (JSON-friendly)."""
        if self.plan is None or self.edges is None:
            return {"plan_cycle": self.plan_cycle, "plan": None}
        p = self.plan
        return {
            "plan_cycle": self.plan_cycle,
            "edges": self.edges.tolist(),
            "plan_buckets": self.plan_buckets.tolist(),
            "plan": {
                "x": p.x.tolist(),
                "z": p.z.tolist(),
                "b": p.b.tolist(),
                "b0": p.b0.tolist(),
                "strategy": p.strategy,
                "objective": p.objective,
            },
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Go on with a plan saved by :meth:`state` (y, n are not kept: quotas need x, z, b)."""
        saved = state.get("plan")
        if not saved:
            return
        x = np.asarray(saved["x"], dtype=float)
        T, B = x.shape
        self.plan = Plan(
            x=x,
            y=np.zeros((T, B)),
            b=np.asarray(saved["b"], dtype=float),
            n=np.zeros(T),
            z=np.asarray(saved["z"], dtype=float),
            objective=float(saved.get("objective", float("nan"))),
            strategy=str(saved.get("strategy", "")),
            success=True,
            status="restored",
            seconds=0.0,
            iterations=0,
            b0=np.asarray(saved["b0"], dtype=float),
            y0=np.zeros(B),
        )
        self.edges = np.asarray(state["edges"], dtype=float)
        self.plan_buckets = np.asarray(state["plan_buckets"], dtype=np.int64)
        self.plan_cycle = int(state["plan_cycle"])
