"""Solving the WebFountain optimisation: the reduced problem, per-period/per-cell inputs, scipy.

:func:`solve_plan` builds the paper's nonlinear program over ``T`` periods and
``B`` buckets, reduces it by symmetry and solves it (scipy, the ``planning`` extra).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..blas import one_blas_thread
from .model import Plan, PlanError, Weights, _as_weights


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
        grid_t, grid_i = np.meshgrid(np.arange(T), np.arange(B), indexing="ij")
        tt, ii = grid_t.ravel(), grid_i.ravel()
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
