"""The WebFountain crawl-plan model (Edwards, McCurley & Tomlin 2001): its data and its weights.

The named weight strategies of the paper's section 5.1, a solved :class:`Plan`
(per-period, per-bucket quotas and new-page fetches), quota rounding, and the
paper's own instance (its lifetime CDF) for the reproduction tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The named weight presets of the paper's section 5.1.
STRATEGIES: dict[str, str] = {
    "strategy1": "every period weighs 1: obsolete pages summed over the cycle",
    "strategy2": "only the last period weighs: obsolete pages at the end of the cycle",
    "strategy3": "compromise: weights doubling each period, 2^(t - T)",
}


class PlanError(ValueError):
    """The model's inputs make no plan (the message says which input and why)."""


@dataclass(frozen=True)
class Weights:
    """Objective weights: ``old[t, i]`` = oldwt_it, ``new[t]`` = newwt_t (``t`` from 0)."""

    old: np.ndarray
    new: np.ndarray
    name: str = "custom"


def strategy_weights(strategy: str, periods: int, buckets: int) -> Weights:
    """The weights of a named strategy (:data:`STRATEGIES`) for ``periods x buckets``."""
    key = strategy.strip().lower().replace(" ", "").replace("_", "")
    T, B = periods, buckets
    per_period = np.zeros(T)
    if key == "strategy1":
        per_period[:] = 1.0
    elif key == "strategy2":
        per_period[-1] = 1.0
    elif key == "strategy3":
        per_period[:] = 2.0 ** (np.arange(1, T + 1) - T)
    else:
        raise PlanError(
            f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)} "
            "or custom Weights"
        )
    return Weights(old=np.repeat(per_period[:, None], B, axis=1), new=per_period.copy(), name=key)


def _as_weights(weights: str | Weights | Mapping[str, Any], T: int, B: int) -> Weights:
    if isinstance(weights, str):
        return strategy_weights(weights, T, B)
    if isinstance(weights, Mapping):
        weights = Weights(
            old=np.asarray(weights["old"], dtype=float),
            new=np.asarray(weights.get("new", 0.0), dtype=float),
            name=str(weights.get("name", "custom")),
        )
    old = np.asarray(weights.old, dtype=float)
    if old.ndim == 1:  # one weight per period, every bucket alike
        old = old[:, None]
    try:
        old = np.broadcast_to(old, (T, B)).astype(float)
        new = np.broadcast_to(np.asarray(weights.new, dtype=float), (T,)).astype(float)
    except ValueError:
        raise PlanError(
            f"weights: old must broadcast to (periods, buckets) = ({T}, {B}) "
            f"and new to ({T},); got {np.shape(weights.old)} and {np.shape(weights.new)}"
        ) from None
    if (
        not (np.isfinite(old).all() and np.isfinite(new).all())
        or (old < 0).any()
        or (new < 0).any()
    ):
        raise PlanError("weights must be finite and >= 0")
    if old.sum() + new.sum() <= 0:
        raise PlanError("weights are all 0: every plan would be optimal")
    return Weights(old=old, new=new, name=weights.name)


@dataclass
class Plan:
    """A solved crawl plan. Arrays are indexed ``[period, bucket]``, periods from 0.

    ``x[t, i]``, ``y[t, i]``, ``b[t, i]`` are x_i,t+1, y_i,t+1, b_i,t+1 of the
    paper; ``n[t]``, ``z[t]`` likewise. The inputs are kept so the plan can be
    checked against the constraints (:meth:`violations`).
    """

    x: np.ndarray
    y: np.ndarray
    b: np.ndarray
    n: np.ndarray
    z: np.ndarray
    objective: float
    strategy: str
    success: bool
    status: str
    seconds: float
    iterations: int
    #: inputs, for the constraint check and the report
    b0: np.ndarray = field(repr=False)
    y0: np.ndarray = field(repr=False)
    n0: float = field(repr=False, default=0.0)
    change: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    budget: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    old_cost: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    new_cost: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    old_new: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    new_new: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    arrivals: float = field(repr=False, default=0.0)
    weights: Weights | None = field(repr=False, default=None)

    @property
    def periods(self) -> int:
        return int(self.x.shape[0])

    @property
    def buckets(self) -> int:
        return int(self.x.shape[1])

    @property
    def obsolete_old(self) -> np.ndarray:
        """Obsolete known pages at the end of each period (sum over buckets of y)."""
        return self.y.sum(axis=1)

    @property
    def obsolete(self) -> np.ndarray:
        """Predicted obsolete pages at the end of each period: ``sum_i y_it + n_t``.

        The new pages nobody has crawled yet count as obsolete (paper, sec. 4);
        this is the quantity of the paper's Figure 4.
        """
        return self.y.sum(axis=1) + self.n

    @property
    def total_pages(self) -> float:
        """Pages in the repository at the end of the cycle (``sum_i b_iT``), Table 3."""
        return float(self.b[-1].sum())

    def crawls_per_page(self) -> np.ndarray:
        """Crawls per page of each bucket over the cycle (the paper's Figure 3).

        ``sum_t x_it / mean_t b_i,t-1``: 1 means every page once per cycle.
        """
        prev = np.vstack([self.b0[None, :], self.b[:-1]])
        return self.x.sum(axis=0) / np.maximum(prev.mean(axis=0), 1e-300)

    def quotas(self, period: int, total: int | None = None) -> np.ndarray:
        """Whole pages to recrawl from each bucket in ``period`` (0-based).

        ``x[period]`` rounded by largest remainders so the quotas add up to
        ``round(sum x)`` (or to ``total`` if given), never above a bucket's
        size ``b_i,t-1``.
        """
        if not 0 <= period < self.periods:
            raise IndexError(f"period {period} outside the plan's 0..{self.periods - 1}")
        cap = np.floor(self.b0 if period == 0 else self.b[period - 1] + 1e-9).astype(np.int64)
        return round_quotas(self.x[period], cap, total)

    def new_quota(self, period: int) -> int:
        """Whole new pages to fetch in ``period`` (0-based): ``round(z_t)``."""
        if not 0 <= period < self.periods:
            raise IndexError(f"period {period} outside the plan's 0..{self.periods - 1}")
        return int(max(0, math.floor(self.z[period] + 0.5)))

    def violations(self) -> dict[str, float]:
        """Largest violation of each constraint family (1)-(6) and of ``>= 0``, in pages.

        Equalities report ``|lhs - rhs|``, inequalities ``max(0, lhs - rhs)``.
        """
        T = self.periods
        bp = np.vstack([self.b0[None, :], self.b[:-1]])
        yp = np.vstack([self.y0[None, :], self.y[:-1]])
        n_prev = np.concatenate([[self.n0], self.n[:-1]])
        a = self.change
        used = (self.old_cost * self.x).sum(axis=1) + self.new_cost * self.z
        balance = (1.0 - self.x / bp) * ((1.0 - a) * yp + a * bp)
        p = self.b0 / self.b0.sum()
        n_next = (
            n_prev
            + (self.old_new * self.x).sum(axis=1)
            + (self.new_new - 1.0) * self.z
            + self.arrivals
        )
        everything = np.concatenate(
            [self.x.ravel(), self.y.ravel(), self.b.ravel(), self.n, self.z]
        )
        return {
            "(1) budget": float(np.max(used - self.budget, initial=0.0)),
            "(2) obsolescence": float(np.max(np.abs(self.y - balance), initial=0.0)),
            "(3) new pages": float(np.max(np.abs(self.n - n_next), initial=0.0)),
            "(4) bucket sizes": float(
                np.max(np.abs(self.b - bp - p[None, :] * self.z[:, None]), initial=0.0)
            ),
            "(5) x <= b": float(np.max(self.x - bp, initial=0.0)),
            "(6) z <= n": float(np.max(self.z - n_prev, initial=0.0)),
            ">= 0": float(np.max(-everything, initial=0.0)) if T else 0.0,
        }

    def table(self) -> list[dict[str, float]]:
        """One row per period: crawled old/new pages, obsolete old/new/total."""
        return [
            {
                "period": t + 1,
                "crawled_old": float(self.x[t].sum()),
                "crawled_new": float(self.z[t]),
                "obsolete_old": float(self.y[t].sum()),
                "new_waiting": float(self.n[t]),
                "obsolete": float(self.y[t].sum() + self.n[t]),
                "pages": float(self.b[t].sum()),
            }
            for t in range(self.periods)
        ]


def round_quotas(x: np.ndarray, cap: np.ndarray, total: int | None = None) -> np.ndarray:
    """Round non-negative reals to integers (largest remainder), each ``<= cap``.

    The integers add up to ``total`` (default ``round(sum x)``) unless the
    caps do not allow it (then every bucket is at its cap).
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, cap.astype(float))
    want = int(round(float(x.sum()))) if total is None else int(total)
    want = min(want, int(cap.sum()))
    q = np.minimum(np.floor(x + 1e-9).astype(np.int64), cap)
    short = want - int(q.sum())
    if short > 0:
        rem = x - q
        rem[q >= cap] = -1.0
        order = np.argsort(-rem, kind="stable")
        for i in order:
            if short == 0:
                break
            if q[i] < cap[i]:
                add = 1 if rem[i] > -1.0 else 0
                if add:
                    q[i] += 1
                    short -= 1
        # still short (totals above round(sum x)): fill buckets with room, largest x first
        if short > 0:
            for i in np.argsort(-x, kind="stable"):
                room = int(cap[i] - q[i])
                take = min(room, short)
                q[i] += take
                short -= take
                if short == 0:
                    break
    elif short < 0:
        for i in np.argsort(x - q, kind="stable"):  # smallest remainders give back first
            take = min(int(q[i]), -short)
            q[i] -= take
            short += take
            if short == 0:
                break
    return q


#: Table 2 of the paper (Brewington & Cybenko): cumulative share of pages by
#: mean lifetime in days.
PAPER_LIFETIME_CDF: tuple[tuple[float, float], ...] = (
    (0.0, 1.0),
    (0.12, 10.0),
    (0.40, 100.0),
    (1.00, 600.0),
)


def paper_instance(
    buckets: int = 255,
    periods: int = 14,
    pages: float = 500_000.0,
    budget_factor: float = 1.5,
) -> dict[str, Any]:
    """The paper's synthetic set-up (sec. 5, Version 1), scaled to ``pages``.

    Keyword arguments for :func:`solve_plan`. From the paper: 500M pages
    (scaled here to ``pages``; the model is linear in page counts), 255
    buckets of equal size, ``T = 14`` periods of one day, mean lifetimes
    spread as Table 2 (read log-linearly between its points; bucket 0 is the
    slowest), new pages arriving so the web doubles in about 400 days. Not
    stated in the paper and chosen here: a budget of ``budget_factor`` crawls
    per page per cycle, 1% of the pages waiting as new pages at the start,
    2% of old-page crawls finding a new page, and the starting obsolete pages
    of every bucket at the steady state of the uniform crawl
    (:func:`solve_plan`'s default).
    """
    B, T = int(buckets), int(periods)
    q = (np.arange(B) + 0.5) / B
    cdf, days = zip(*PAPER_LIFETIME_CDF, strict=True)
    lifetime = np.exp(np.interp(q, cdf, np.log(days)))[::-1]
    growth = 2.0 ** (1.0 / 400.0) - 1.0
    return {
        "bucket_sizes": np.full(B, pages / B),
        "change_rates": -np.expm1(-1.0 / lifetime),
        "periods": T,
        "budget": budget_factor * pages / T,
        "new_pages": 0.01 * pages,
        "new_arrivals": growth * pages,
        "old_new_prob": 0.02,
    }
