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

import math
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..blas import one_blas_thread

__all__ = [
    "PAPER_LIFETIME_CDF",
    "STRATEGIES",
    "Plan",
    "PlanError",
    "PlannedSelection",
    "WebFountainPlanner",
    "Weights",
    "paper_instance",
    "solve_plan",
    "strategy_weights",
]

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


# --------------------------------------------------------------------------------------
# the solver


class _Reduced:
    """The model with the obsolescence balance (2) used to eliminate ``y``.

    Given ``x`` and ``b``, (2) gives ``y`` period by period, uniquely, so the
    solver works on ``u = (x, b, n, z)`` (``2TB + 2T`` variables) with a
    nonlinear objective ``f(x, b) + sum_t newwt_t n_t`` and only *linear*
    constraints, (1) and (3)-(6), all of them sparse: the kind of problem
    MINOS (the paper's solver) is built for. ``y >= 0`` holds by itself
    under (5). Gradient and exact Hessian come from one forward pass of (2)
    per call, vectorised over buckets: bucket ``i``'s ``y`` depends on its own
    ``x_i`` and ``b_i`` only, so the Hessian is ``B`` blocks of ``2T x 2T``.
    Everything is in scaled units (pages / ``scale``).
    """

    def __init__(
        self,
        b0: np.ndarray,
        y0: np.ndarray,
        n0: float,
        a: np.ndarray,
        budget: np.ndarray,
        c: np.ndarray,
        d: np.ndarray,
        oldnwt: np.ndarray,
        newnwt: np.ndarray,
        nconst: float,
        w: Weights,
        scale: float,
    ) -> None:
        T, B = a.shape
        self.T, self.B = T, B
        self.b0, self.y0, self.n0 = b0 / scale, y0 / scale, n0 / scale
        self.a = a
        self.C = budget / scale
        self.c, self.d = c, d
        self.oldnwt, self.newnwt = oldnwt, newnwt
        self.nconst = nconst / scale
        self.p = b0 / b0.sum()
        self.w_old, self.w_new = w.old, w.new
        TB = T * B
        self.ix, self.ib, self.in_, self.iz = 0, TB, 2 * TB, 2 * TB + T
        self.size = 2 * TB + 2 * T
        self.f_scale = 1.0
        self._cache: tuple[bytes, bool, Any] | None = None
        # Hessian sparsity, fixed: per bucket the (x_i, b_i) block, 2T x 2T
        tb = np.arange(T)[None, :] * B + np.arange(B)[:, None]  # (B, T)
        loc = np.concatenate([self.ix + tb, self.ib + tb], axis=1)  # (B, 2T)
        self.h_rows = np.repeat(loc[:, :, None], 2 * T, axis=2).ravel()
        self.h_cols = np.repeat(loc[:, None, :], 2 * T, axis=1).ravel()

    def split(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        T, B, TB = self.T, self.B, self.T * self.B
        return (
            u[self.ix : self.ix + TB].reshape(T, B),
            u[self.ib : self.ib + TB].reshape(T, B),
            u[self.in_ : self.in_ + T],
            u[self.iz : self.iz + T],
        )

    def propagate(self, x: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``y``, ``b``, ``n`` from the decisions ``x``, ``z`` by (2), (4), (3)."""
        T, B = self.T, self.B
        y = np.empty((T, B))
        b = np.empty((T, B))
        n = np.empty(T)
        bp, yp, npv = self.b0, self.y0, self.n0
        for t in range(T):
            a = self.a[t]
            y[t] = (1.0 - x[t] / bp) * ((1.0 - a) * yp + a * bp)
            b[t] = bp + self.p * z[t]
            n[t] = npv + (self.oldnwt[t] * x[t]).sum() + (self.newnwt[t] - 1.0) * z[t] + self.nconst
            bp, yp, npv = b[t], y[t], n[t]
        return y, b, n

    def _forward(self, u: np.ndarray, hessian: bool) -> Any:
        key = u.tobytes()
        if self._cache is not None and self._cache[0] == key and (self._cache[1] or not hessian):
            return self._cache[2]
        x, b, n, _ = self.split(u)
        T, B = self.T, self.B
        K = 2 * T
        G = np.zeros((B, K))  # d y_t / d(local inputs x_i., b_i.)
        H = np.zeros((B, K, K)) if hessian else None
        g_tot = np.zeros((B, K))
        h_tot = np.zeros((B, K, K)) if hessian else None
        yp = self.y0.copy()
        f = float(self.w_new @ n)
        for t in range(T):
            a = self.a[t]
            xt = x[t]
            bp = self.b0 if t == 0 else b[t - 1]
            jb = T + t - 1  # local index of b_t-1 (t >= 1)
            one_a = 1.0 - a
            F = one_a * yp + a * bp - xt * one_a * yp / bp - a * xt
            F_x = -one_a * yp / bp - a
            F_y = one_a * (1.0 - xt / bp)
            G_new = F_y[:, None] * G
            G_new[:, t] += F_x
            if t >= 1:
                G_new[:, jb] += a + xt * one_a * yp / bp**2  # F_b
            if hessian:
                assert H is not None and h_tot is not None
                H_new = F_y[:, None, None] * H
                # v_x = e_t, v_y = G (previous), v_b = e_jb
                F_xy = -one_a / bp
                H_new[:, t, :] += F_xy[:, None] * G
                H_new[:, :, t] += F_xy[:, None] * G
                if t >= 1:
                    F_xb = one_a * yp / bp**2
                    F_yb = one_a * xt / bp**2
                    F_bb = -2.0 * one_a * xt * yp / bp**3
                    H_new[:, t, jb] += F_xb
                    H_new[:, jb, t] += F_xb
                    H_new[:, jb, :] += F_yb[:, None] * G
                    H_new[:, :, jb] += F_yb[:, None] * G
                    H_new[:, jb, jb] += F_bb
                H = H_new
            G = G_new
            wt = self.w_old[t]
            if wt.any():
                g_tot += wt[:, None] * G
                f += float(wt @ F)
                if hessian:
                    h_tot += wt[:, None, None] * H  # type: ignore[operator]
            yp = F
        grad = np.zeros(self.size)
        grad[self.ix : self.ix + T * B] = g_tot[:, :T].T.ravel()
        grad[self.ib : self.ib + T * B] = g_tot[:, T:].T.ravel()
        grad[self.in_ : self.in_ + T] = self.w_new
        out = (f, grad, h_tot)
        self._cache = (key, hessian, out)
        return out

    def fun(self, u: np.ndarray) -> float:
        return self._forward(u, False)[0] / self.f_scale

    def grad(self, u: np.ndarray) -> np.ndarray:
        return self._forward(u, False)[1] / self.f_scale

    def hess(self, u: np.ndarray) -> Any:
        from scipy.sparse import coo_matrix

        h = self._forward(u, True)[2]
        return coo_matrix(
            (h.ravel() / self.f_scale, (self.h_rows, self.h_cols)), shape=(self.size, self.size)
        ).tocsr()

    def warm_start(self) -> np.ndarray:
        """A feasible start: the uniform plan, period by period.

        Each period's budget is split over old and waiting new pages in
        proportion to their numbers, the old share over buckets by size
        (every bucket crawled at the same rate), capped by (5) and (6); the
        states follow by (3) and (4).
        """
        T, B = self.T, self.B
        x = np.zeros((T, B))
        z = np.zeros(T)
        bp, npv = self.b0.copy(), self.n0
        for t in range(T):
            old = float(bp.sum())
            new_frac = npv / (npv + old) if npv > 0 else 0.0
            z[t] = min(npv, new_frac * self.C[t] / self.d[t])
            share = bp / old
            left = max(self.C[t] - self.d[t] * z[t], 0.0)
            x[t] = np.minimum(left / float((self.c[t] * share).sum()) * share, bp)
            npv = (
                npv
                + float((self.oldnwt[t] * x[t]).sum())
                + (self.newnwt[t] - 1.0) * z[t]
                + self.nconst
            )
            bp = bp + self.p * z[t]
        # a hair inside the inequalities, so the interior-point method starts strictly feasible
        x *= 1.0 - 1e-6
        z *= 1.0 - 1e-6
        _, b, n = self.propagate(x, z)
        return np.concatenate([x.ravel(), b.ravel(), n, z])

    def linear(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """(1), (3), (4), (5) for t >= 2 and (6) for t >= 2 as ``lo <= A u <= hi``."""
        from scipy.sparse import coo_matrix

        T, B = self.T, self.B
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        los: list[np.ndarray] = []
        his: list[np.ndarray] = []
        r = 0
        tt, ii = np.meshgrid(np.arange(T), np.arange(B), indexing="ij")
        tt, ii = tt.ravel(), ii.ravel()
        later = tt >= 1
        cell = tt * B + ii
        prev = (tt - 1) * B + ii

        def add(rr: Any, cc: Any, vv: Any) -> None:
            rows.append(np.asarray(rr))
            cols.append(np.asarray(cc))
            vals.append(np.broadcast_to(np.asarray(vv, dtype=float), np.shape(rr)))

        # (1) sum_i c_ti x_ti + d_t z_t <= C_t
        add(r + tt, self.ix + cell, self.c.ravel())
        add(r + np.arange(T), self.iz + np.arange(T), self.d)
        los.append(np.full(T, -np.inf))
        his.append(self.C)
        r += T
        # (3) n_t - n_t-1 - sum_i oldnwt x_t - (newnwt - 1) z_t = nconst (+ n_0 when t = 1)
        add(r + np.arange(T), self.in_ + np.arange(T), 1.0)
        add(r + np.arange(1, T), self.in_ + np.arange(T - 1), -1.0)
        add(r + tt, self.ix + cell, -self.oldnwt.ravel())
        add(r + np.arange(T), self.iz + np.arange(T), -(self.newnwt - 1.0))
        rhs = np.full(T, self.nconst)
        rhs[0] += self.n0
        los.append(rhs)
        his.append(rhs)
        r += T
        # (4) b_t - b_t-1 - p z_t = 0 (+ b_0 when t = 1)
        add(r + cell, self.ib + cell, 1.0)
        add(r + cell[later], self.ib + prev[later], -1.0)
        add(r + cell, self.iz + tt, -self.p[ii])
        rhs4 = np.zeros((T, B))
        rhs4[0] = self.b0
        los.append(rhs4.ravel())
        his.append(rhs4.ravel())
        r += T * B
        # (5) x_t - b_t-1 <= 0, t >= 2 (t = 1 is the bound x_1 <= b_0)
        m5 = int(later.sum())
        add(r + np.arange(m5), self.ix + cell[later], 1.0)
        add(r + np.arange(m5), self.ib + prev[later], -1.0)
        los.append(np.full(m5, -np.inf))
        his.append(np.zeros(m5))
        r += m5
        # (6) z_t - n_t-1 <= 0, t >= 2 (t = 1 is the bound z_1 <= n_0)
        add(r + np.arange(T - 1), self.iz + np.arange(1, T), 1.0)
        add(r + np.arange(T - 1), self.in_ + np.arange(T - 1), -1.0)
        los.append(np.full(T - 1, -np.inf))
        his.append(np.zeros(T - 1))
        r += T - 1
        A = coo_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(r, self.size),
        ).tocsr()
        return A, np.concatenate(los), np.concatenate(his)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.zeros(self.size)
        hi = np.full(self.size, np.inf)
        hi[self.ix : self.ix + self.B] = self.b0  # (5) at t = 1
        hi[self.iz] = self.n0  # (6) at t = 1
        return lo, hi


@contextmanager
def _symmetric_ordering() -> Iterator[None]:
    """Factorise trust-constr's augmented systems with a symmetric fill-reducing order.

    ``trust-constr`` projects onto the constraints' null space by LU of the
    symmetric augmented system ``[[I, A'], [A, 0]]`` through
    ``scipy.sparse.linalg.factorized``, whose default column order (COLAMD)
    ignores the symmetry: at the paper's size it fills 3.5M entries and takes
    about 1 s per factorisation, against 0.29M and 0.1 s with minimum degree
    on ``A' + A``. The same LU, only ordered better, for the duration of the
    solve (the module attribute is restored afterwards).
    """
    import scipy.sparse.linalg as sla

    original = sla.factorized

    def factorized(A: Any) -> Any:
        from scipy.sparse import csc_array

        return sla.splu(csc_array(A), permc_spec="MMD_AT_PLUS_A").solve

    sla.factorized = factorized
    try:
        yield
    finally:
        sla.factorized = original


def _per_period(value: Any, T: int, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    try:
        arr = np.broadcast_to(arr, (T,)).astype(float)
    except ValueError:
        raise PlanError(
            f"{name}: expected a number or {T} per-period values, got shape {arr.shape}"
        ) from None
    if not np.isfinite(arr).all():
        raise PlanError(f"{name}: values must be finite")
    return arr


def _per_cell(value: Any, T: int, B: int, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 1 and arr.shape[0] == B and B != T:
        arr = arr[None, :]
    elif arr.ndim == 2 and arr.shape == (B, T) and B != T:
        arr = arr.T  # [bucket, period] accepted too
    try:
        arr = np.broadcast_to(arr, (T, B)).astype(float)
    except ValueError:
        raise PlanError(
            f"{name}: expected a number, {B} per-bucket values or a ({T}, {B}) "
            f"[period, bucket] array, got shape {np.shape(value)}"
        ) from None
    if not np.isfinite(arr).all():
        raise PlanError(f"{name}: values must be finite")
    return arr


def solve_plan(
    bucket_sizes: Any,
    change_rates: Any,
    periods: int,
    budget: Any,
    *,
    obsolete: Any = None,
    new_pages: float = 0.0,
    new_arrivals: float = 0.0,
    old_new_prob: Any = 0.0,
    new_new_prob: Any = 0.0,
    old_cost: Any = 1.0,
    new_cost: Any = 1.0,
    weights: str | Weights | Mapping[str, Any] = "strategy1",
    max_seconds: float = 120.0,
    max_iterations: int = 3000,
    tolerance: float = 1e-7,
    verbose: int = 0,
) -> Plan:
    """Solve the WebFountain model; returns the :class:`Plan`.

    ``bucket_sizes`` ``b_i0`` (pages now, every one > 0), ``change_rates``
    ``a_it`` (share of a bucket that changes during one period, in [0, 1]:
    per bucket, or ``[period, bucket]``), ``periods`` ``T``, ``budget``
    ``C_t`` (per period; in pages when the costs are 1). ``obsolete``
    ``y_i0`` defaults to the steady state of crawling every page once per
    ``periods`` (``b_i0 (1 - mean_k (1 - a_i)^k)``, ``k = 1..T``).
    ``new_pages`` is ``n_0``, ``new_arrivals`` ``nconst``; ``old_new_prob``
    and ``new_new_prob`` are oldnwt/newnwt; ``old_cost``/``new_cost`` are
    c/d. ``weights`` is a name in :data:`STRATEGIES`, :class:`Weights` or a
    mapping ``{"old": ..., "new": ...}``.

    The solver stops at ``tolerance`` (optimality and constraint violation of
    the scaled problem), ``max_iterations`` or ``max_seconds``; the plan
    says which (``status``), and is the last iterate either way.
    Raises :class:`PlanError` on inputs that make no plan.
    """
    try:
        from scipy.optimize import Bounds, LinearConstraint, minimize
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the WebFountain planner needs scipy: pip install 'scrapy-recrawl[planning]'"
        ) from exc

    if isinstance(periods, bool) or not isinstance(periods, (int, np.integer)) or periods < 1:
        raise PlanError(f"periods={periods!r}: expected a whole number of periods >= 1")
    T = int(periods)
    b0 = np.asarray(bucket_sizes, dtype=float).ravel()
    B = b0.shape[0]
    if B == 0:
        raise PlanError("no buckets: there are no known pages to plan for")
    if B > 256:
        raise PlanError(f"{B} buckets: the model keeps one byte per page, at most 256 buckets")
    if not np.isfinite(b0).all() or (b0 < 0).any():
        raise PlanError("bucket_sizes must be finite and >= 0")
    empty = np.flatnonzero(b0 <= 0)
    if empty.size:
        raise PlanError(
            f"bucket(s) {empty[:10].tolist()}{'...' if empty.size > 10 else ''} are empty "
            "(b_i0 = 0): constraint (2) divides by the bucket size; drop empty buckets "
            "before planning (planning.buckets.bucket_stats does)"
        )
    a = _per_cell(change_rates, T, B, "change_rates")
    if (a < 0).any() or (a > 1).any():
        raise PlanError(
            "change_rates: a_it is the share of a bucket changing in one period, in [0, 1]"
        )
    C = _per_period(budget, T, "budget")
    if (C <= 0).any():
        bad = np.flatnonzero(C <= 0)
        raise PlanError(
            f"budget is {C[bad[0]]:g} in period {int(bad[0]) + 1}: nothing can be crawled; "
            "a plan needs a budget > 0 in every period"
        )
    c = _per_cell(old_cost, T, B, "old_cost")
    d = _per_period(new_cost, T, "new_cost")
    if (c <= 0).any() or (d <= 0).any():
        raise PlanError("old_cost and new_cost must be > 0 (seconds per page)")
    oldnwt = _per_cell(old_new_prob, T, B, "old_new_prob")
    newnwt = _per_period(new_new_prob, T, "new_new_prob")
    if (oldnwt < 0).any() or (newnwt < 0).any():
        raise PlanError("old_new_prob and new_new_prob must be >= 0")
    n0 = float(new_pages)
    nconst = float(new_arrivals)
    if not (math.isfinite(n0) and n0 >= 0 and math.isfinite(nconst) and nconst >= 0):
        raise PlanError("new_pages and new_arrivals must be finite and >= 0")
    if obsolete is None:
        k = np.arange(1, T + 1)[:, None]
        y0 = b0 * (1.0 - ((1.0 - a[0])[None, :] ** k).mean(axis=0))
    else:
        y0 = np.asarray(obsolete, dtype=float).ravel()
        if (
            y0.shape != (B,)
            or not np.isfinite(y0).all()
            or (y0 < 0).any()
            or (y0 > b0 * (1 + 1e-9)).any()
        ):
            raise PlanError(f"obsolete: expected {B} values with 0 <= y_i0 <= b_i0")
        y0 = np.minimum(y0, b0)
    w = _as_weights(weights, T, B)

    scale = float(b0.mean())
    model = _Reduced(b0, y0, n0, a, C, c, d, oldnwt, newnwt, nconst, w, scale)
    u0 = model.warm_start()
    # objective normalisation: the warm start's objective becomes ~1
    model.f_scale = max(abs(model.fun(u0)), 1e-12)
    A, lo, hi = model.linear()
    blo, bhi = model.bounds()
    started = time.perf_counter()
    stopped = {"time": False}

    def callback(intermediate_result: Any) -> bool:
        if time.perf_counter() - started > max_seconds:
            stopped["time"] = True
            return True
        return False

    with warnings.catch_warnings(), _symmetric_ordering(), one_blas_thread():
        # "delta_grad == 0.0": only raised by quasi-Newton updates, which are not used
        warnings.simplefilter("ignore", UserWarning)
        res = minimize(
            model.fun,
            u0,
            jac=model.grad,
            hess=model.hess,
            method="trust-constr",
            bounds=Bounds(blo, bhi),
            constraints=[LinearConstraint(A, lo, hi)],
            callback=callback,
            options={
                "maxiter": max_iterations,
                "gtol": tolerance,
                "xtol": tolerance * 1e-2,
                "barrier_tol": tolerance,
                "verbose": verbose,
                "sparse_jacobian": True,
            },
        )
    seconds = time.perf_counter() - started
    u = np.clip(res.x, blo, bhi)
    # the states follow from the decisions exactly: (2)-(4) hold to rounding
    xs, _, _, zs = model.split(u)
    ys, bs, ns = model.propagate(xs, zs)
    xs, zs, ys, bs, ns = (np.array(v) * scale for v in (xs, zs, ys, bs, ns))
    status = "time limit" if stopped["time"] else str(res.message)
    success = bool(res.status in (1, 2)) and not stopped["time"]
    objective = float((w.old * ys).sum() + (w.new * ns).sum())
    return Plan(
        x=xs,
        y=ys,
        b=bs,
        n=ns,
        z=zs,
        objective=objective,
        strategy=w.name,
        success=success,
        status=status,
        seconds=seconds,
        iterations=int(getattr(res, "nit", 0)),
        b0=b0,
        y0=y0,
        n0=n0,
        change=a,
        budget=C,
        old_cost=c,
        new_cost=d,
        old_new=oldnwt,
        new_new=newnwt,
        arrivals=nconst,
        weights=w,
    )


# --------------------------------------------------------------------------------------
# the paper's synthetic set-up

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


# --------------------------------------------------------------------------------------
# the adaptive policy: plan, follow the quotas, re-plan


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
        from .buckets import assign_buckets, bucket_stats, select_by_quotas

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
            assignment = assign_buckets(columns, cycle, self.n_buckets, prior=self.prior)
            self.edges = assignment.edges
            stats = bucket_stats(assignment, last, cycle, mask=known)
            try:
                self.plan = solve_plan(
                    stats.sizes,
                    stats.change_share(1.0),
                    self.periods,
                    float(k),
                    obsolete=stats.obsolete,
                    new_pages=float(new_waiting),
                    new_arrivals=self.new_arrivals,
                    weights=self.strategy,
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
