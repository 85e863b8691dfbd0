"""Freshness-optimal policies: the per-URL rate, importance, and the optimal revisit rates.

Terminals (:data:`POLICY_TERMINALS`, registered after the core ones by
:mod:`scrapy_recrawl.scoring.registry`):

* ``lam``: each URL's Poisson change rate in changes per *cycle*;
* ``tc``: cycles since the last observed change;
* ``burst``: the extra change hazard a recent change leaves, summed over the cycles
  since the last visit (``tau`` = RECRAWL_BURST_TAU: :func:`burst_terminal`);
* ``w``: the URL's importance (the optional column ``importance``, 1.0 where absent);
* ``nutch_interval``: Apache Nutch's adaptive fetch interval from ``n`` and ``X``, with
  the crawl's RECRAWL_NUTCH_* (its registry's: :func:`nutch_terminal`);
* ``chogm_f``: the visits per cycle that maximise the average freshness of the
  collection under the cycle's budget (Cho & Garcia-Molina, TODS 2003);
* ``lc_f``: the crawls per cycle that minimise the importance-weighted harmonic
  staleness under the same budget (Kolobov, Peres, Lu & Horvitz, NeurIPS 2019), for
  pages whose changes are seen only by polling them.

The last two solve one problem over every candidate of the cycle at once, so they
need the cycle's recrawl budget ``k`` (pages per cycle). The cycle core puts it in
the columns under :data:`~scrapy_recrawl.scoring.terminals.BUDGET`
(``core/selection.py``: :func:`~scrapy_recrawl.core.selection.with_budget`, which
both the live selection and the replay of ``core/simulate.py`` call); without it
they raise a ValueError that says so.

**Solving for the multiplier.** Both optima have the form
``r_i = min(1, m_i * phi(z_i + theta))`` (at most one visit per cycle: a cycle
fetches a URL once), with ``phi`` decreasing and one Lagrange multiplier
``exp(theta)`` chosen so that ``sum r_i = k``. The sum is evaluated on a histogram
of ``z`` (:data:`BINS` bins, each with its count, mean ``z`` and mean ``m``: one
O(N) pass), so each step of the root search costs O(BINS), not O(N); then every
URL's rate is its own ``m`` times ``phi`` interpolated between its bin's edges
(``phi`` itself where it bends too sharply: near chogm's cut-off). With at most
:data:`BINS` URLs each is its own bin (exact). Within a bin the cap at one visit
uses the bin's mean ``m`` during the search: exact when ``w`` is constant (``m`` is
then a function of ``z``). Measured against an exact search over every URL
(tests/test_policies.py): within 1e-3 of each rate, the same pages at 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..settings import RecrawlSettingError, get
from .terminals import BUDGET, Terminal

__all__ = [
    "BINS",
    "BURST_TAU",
    "NUTCH_DEFAULTS",
    "POLICY_TERMINALS",
    "burst_tau",
    "burst_terminal",
    "chogm_rates",
    "freshness_marginal",
    "lambdacrawl_rates",
    "nutch_interval",
    "nutch_parameters",
    "nutch_terminal",
]

#: Histogram bins of the multiplier search (above this many URLs).
BINS = 1024

_Getter = Callable[[str], np.ndarray]


def _column(state: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    col = state.get(name) if hasattr(state, "get") else None
    return None if col is None else np.asarray(col, dtype=np.float64)


def _nan_like(state: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.full(np.shape(state["n"]), np.nan)


# ----------------------------------------------------------------- the rate lam


def _lam(
    state: Mapping[str, np.ndarray], _c: int, _now: object, _a: float, _b: float, get: _Getter
) -> np.ndarray:
    """Changes per cycle: ``CGp / s``, ``s`` the URL's mean interval between visits.

    ``CGp = -log(1 - (X + a)/(n + b))`` is the rate per *access interval*: Cho &
    Garcia-Molina's estimator (TODS 2003) assumes a page accessed at a regular
    interval ``I`` and estimates ``lambda * I`` from the share of accesses that saw a
    change, here smoothed by the prior so that a page never seen changing keeps a
    rate above 0. A crawl's intervals are neither regular nor one cycle (a page
    fetched every tenth cycle that changed at 9 of 10 visits changes about every
    4.3 cycles, not every 0.43), so the rate per access is divided by the mean
    interval ``s = (last_visit_cycle - first_cycle)/n`` to give changes per cycle,
    the unit of the budget ``k``. ``n = 0`` (no observation): ``s = 1``, the
    prior's rate.
    """
    first = _column(state, "first_cycle")
    if first is None:
        return _nan_like(state)
    return get("CGp") / visit_spacing(get("n"), state["last_visit_cycle"], first)


def visit_spacing(
    n: np.ndarray, last_visit_cycle: np.ndarray, first_cycle: np.ndarray
) -> np.ndarray:
    """Each URL's mean interval between visits in cycles, ``(last_visit_cycle -
    first_cycle)/n``; 1 where nothing was observed yet (``n = 0``). The one definition:
    ``lam`` and the crawl's freshness estimate (cycle_summary.py) both use it."""
    n = np.asarray(n, dtype=np.float64)
    span = np.asarray(last_visit_cycle, dtype=np.float64) - np.asarray(first_cycle)
    spacing = np.ones_like(n)
    ok = (n > 0) & (span > 0)
    np.divide(span, n, out=spacing, where=ok)
    return spacing


def _tc(state: Mapping[str, np.ndarray], cycle: int, *_: object) -> np.ndarray:
    last = _column(state, "last_change_cycle")
    first = _column(state, "first_cycle")
    if last is None or first is None:
        return _nan_like(state)
    since = np.where(last >= 0, last, first)
    return float(cycle) - since


#: RECRAWL_BURST_TAU's default: the decay of a change's aftershocks, in cycles (picked on
#: the first halves of the shared histories, bench/gap_study.py: 2 days).
BURST_TAU = 2.0


def burst_tau(settings: Any) -> float:
    """RECRAWL_BURST_TAU, checked (RecrawlSettingError naming it)."""
    v = get(settings, "RECRAWL_BURST_TAU")
    return float(v)


def burst_terminal(tau: float | None = None) -> Terminal:
    """The ``burst`` terminal with this decay ``tau`` in cycles (None: :data:`BURST_TAU`).

    Pages that have just changed are likely to change again soon (a release, an edit
    war, a bot's run): model the hazard ``s`` cycles after the last observed change as
    ``lam (1 + beta exp(-s/tau))``. Its part beyond the Poisson rate, summed over the
    cycles since the last visit (``s`` from ``a = tc - t`` to ``tc``), is
    ``beta lam tau (exp(-a/tau) - exp(-tc/tau))``: ``burst`` is that integral for
    ``beta lam = 1``, so ``CGp*(t + beta*burst)`` is the whole expected number of
    changes (the ``burst`` preset, beta = 4). 0 for a page never seen to change.
    """
    tau = BURST_TAU if tau is None else float(tau)
    if not tau > 0:
        raise ValueError(f"burst: tau must be > 0, got {tau!r}")

    def compute(
        state: Mapping[str, np.ndarray], _c: int, _now: object, _a: float, _b: float, get: _Getter
    ) -> np.ndarray:
        last = _column(state, "last_change_cycle")
        if last is None:
            return _nan_like(state)
        t, tc = get("t"), get("tc")
        with np.errstate(over="ignore", invalid="ignore"):
            out = tau * (np.exp(-(tc - t) / tau) - np.exp(-tc / tau))
        return np.where(last >= 0, out, 0.0)

    return Terminal(
        "burst",
        "a recent change's extra hazard over the cycles since the last visit: "
        "`tau*(exp(-(tc - t)/tau) - exp(-tc/tau))`, 0 if no change was seen "
        "(RECRAWL_BURST_TAU: tau)",
        compute,
    )


def _w(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    col = _column(state, "importance")
    if col is None:
        return np.ones(np.shape(state["n"]))
    return np.where(np.isnan(col), 1.0, col)


# ------------------------------------------------------- Nutch's adaptive interval

#: Nutch's AdaptiveFetchSchedule defaults in cycles of one day (docs/scorers.md):
#: RECRAWL_NUTCH_INTERVAL, _MIN_INTERVAL, _MAX_INTERVAL, _INC_RATE, _DEC_RATE
NUTCH_DEFAULTS: dict[str, float] = {
    "interval": 30.0,
    "min_interval": 1.0,
    "max_interval": 365.0,
    "inc_rate": 0.4,
    "dec_rate": 0.2,
}


def nutch_parameters(settings: Any) -> dict[str, float]:
    """RECRAWL_NUTCH_*, each checked (RecrawlSettingError naming it), as
    :func:`nutch_interval`'s keyword arguments."""
    p = {
        "interval": get(settings, "RECRAWL_NUTCH_INTERVAL"),
        "min_interval": get(settings, "RECRAWL_NUTCH_MIN_INTERVAL"),
        "max_interval": get(settings, "RECRAWL_NUTCH_MAX_INTERVAL"),
        "inc_rate": get(settings, "RECRAWL_NUTCH_INC_RATE"),
        "dec_rate": get(settings, "RECRAWL_NUTCH_DEC_RATE"),
    }
    if p["min_interval"] > p["max_interval"]:
        raise RecrawlSettingError(
            f"RECRAWL_NUTCH_MIN_INTERVAL={p['min_interval']!r}: expected at most "
            f"RECRAWL_NUTCH_MAX_INTERVAL={p['max_interval']!r}"
        )
    return {k: float(v) for k, v in p.items()}


def nutch_interval(
    n: np.ndarray,
    X: np.ndarray,
    interval: float = 30.0,
    min_interval: float = 1.0,
    max_interval: float = 365.0,
    inc_rate: float = 0.4,
    dec_rate: float = 0.2,
) -> np.ndarray:
    """Nutch's AdaptiveFetchSchedule interval (cycles) after ``n`` observations with
    ``X`` changes: ``interval (1 + inc)^(n - X) (1 - dec)^X``, clamped.

    Nutch scales the interval by ``1 - dec_rate`` after a fetch that found the page
    modified, by ``1 + inc_rate`` after one that did not (the first fetch, with nothing
    to compare, leaves it), and clamps it to ``[min_interval, max_interval]``. The
    products commute, so while no bound is hit the interval is this function of what
    every store keeps, whatever the order of the changes; here it is clamped once, at
    the end, where Nutch clamps at every step (docs/scorers.md says where they part).
    Through the logs: no ``inf * 0`` on long histories."""
    up = math.log1p(inc_rate)
    down = -math.log1p(-dec_rate)
    nf = np.asarray(n, dtype=np.float64)
    xf = np.asarray(X, dtype=np.float64)
    out = nf * up
    out -= xf * (up + down)  # up (n - X) - down X
    out += math.log(interval)
    np.clip(out, math.log(min_interval), math.log(max_interval), out=out)
    return np.exp(out, out=out)


def nutch_terminal(params: Mapping[str, float] | None = None) -> Terminal:
    """The ``nutch_interval`` terminal with these RECRAWL_NUTCH_* numbers (None: Nutch's
    defaults); a crawl's registry holds the one of its settings (scoring/registry.py)."""
    p = {**NUTCH_DEFAULTS, **(params or {})}

    def compute(
        _s: object, _c: int, _now: object, _a: float, _b: float, term: _Getter
    ) -> np.ndarray:
        return nutch_interval(term("n"), term("X"), **p)

    return Terminal(
        "nutch_interval",
        "Nutch's adaptive interval (cycles): `30*1.4^(n - X)*0.8^X` clamped to [1, 365] "
        "(RECRAWL_NUTCH_* set the numbers)",
        compute,
    )


def _weights(state: Mapping[str, np.ndarray], get: _Getter) -> np.ndarray | None:
    """``w``, or None when no URL has an importance (all 1: the unweighted problem)."""
    return get("w") if "importance" in state else None


def _budget(state: Mapping[str, np.ndarray], name: str) -> float:
    if BUDGET not in state:
        raise ValueError(
            f"the {name!r} terminal needs the cycle's recrawl budget: it is given within a "
            "cycle (core/selection.py with_budget, used by the crawl and core/simulate.py), "
            "not outside one"
        )
    k = float(np.asarray(state[BUDGET]))
    if not k >= 0:
        raise ValueError(f"the {name!r} terminal: the cycle's budget {k!r} is not >= 0")
    return k


# ------------------------------------------------------- the multiplier search


def _solve(
    z: np.ndarray,
    m: np.ndarray,
    k: float,
    phi: Callable[[np.ndarray], np.ndarray],
    exact_from: float = math.inf,
) -> np.ndarray:
    """``r = min(1, m * phi(z + theta))`` with ``sum r = k`` (``phi`` decreasing, 0 at
    +inf); rows with ``m <= 0`` or an infinite ``z`` get 0, NaN rows NaN. Above
    :data:`BINS` rows, ``phi`` is interpolated between bin edges, except where
    ``z + theta > exact_from`` (where ``phi`` bends too sharply for that)."""
    out = np.zeros(z.shape)
    live = np.isfinite(z)
    live &= m > 0  # False for NaN too
    every = bool(live.all())  # the usual case: no copy of the rows
    if not every:
        out[np.isnan(z) | np.isnan(m)] = np.nan
    zl, ml = (z, m) if every else (z[live], m[live])
    if zl.size == 0 or k <= 0:
        return out
    if k >= zl.size:  # the budget covers a visit of every page every cycle
        out[live] = 1.0
        return out
    idx: np.ndarray | None = None
    if zl.size <= BINS:
        zb, mb, cb = zl, ml, np.ones(zl.size)
    else:
        lo, hi = float(zl.min()), float(zl.max())
        scale = (BINS - 1) / (hi - lo) if hi > lo else 0.0
        pos = zl - lo
        pos *= scale
        idx = pos.astype(np.intp)
        pos -= idx  # where each URL sits between its bin's edges
        cb = np.bincount(idx, minlength=BINS).astype(np.float64)
        zb = np.bincount(idx, zl, minlength=BINS)
        mb = np.bincount(idx, ml, minlength=BINS)
        keep = cb > 0
        cb = cb[keep]
        zb = zb[keep] / cb
        mb = mb[keep] / cb

    def excess(theta: float) -> float:
        return float(cb @ np.minimum(1.0, mb * phi(zb + theta))) - k

    # bracket the root: excess decreases with theta
    a = -float(zb.min())
    step = 1.0
    fa = excess(a)
    while fa < 0:
        a -= step
        step *= 2.0
        fa = excess(a)
    b, step = a + 1.0, 1.0
    fb = excess(b)
    while fb > 0:
        b += step
        step *= 2.0
        fb = excess(b)
    # Illinois regula falsi: a smooth monotone sum, a handful of steps
    side = 0
    for _ in range(200):
        c = (a * fb - b * fa) / (fb - fa) if fb != fa else 0.5 * (a + b)
        fc = excess(c)
        if abs(fc) <= 1e-10 * k or abs(b - a) <= 1e-13 * max(1.0, abs(c)):
            a = b = c
            break
        if (fc > 0) == (fa > 0):
            a, fa = c, fc
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = c, fc
            if side == 1:
                fa *= 0.5
            side = 1
    theta = 0.5 * (a + b)
    if idx is None:
        out[live] = np.minimum(1.0, ml * phi(zl + theta))
        return out
    # phi at the BINS + 1 bin edges, then a linear step per URL: a small table, read
    # from cache, instead of phi (logs, exps, a table lookup) for every URL
    edges = phi(lo + np.arange(BINS + 1) / scale + theta) if scale else phi(np.full(2, lo + theta))
    left = edges[idx]
    rate = edges[idx + 1]
    rate -= left
    rate *= pos
    rate += left
    if exact_from - theta < hi:  # some URLs past exact_from
        sharp = np.flatnonzero(zl > exact_from - theta)
        rate[sharp] = phi(zl[sharp] + theta)
    rate *= ml
    np.minimum(rate, 1.0, out=rate)
    if every:
        return rate
    out[live] = rate
    return out


# ------------------------------------------------- Cho & Garcia-Molina (freshness)


def freshness_marginal(x: np.ndarray) -> np.ndarray:
    """``g(x) = 1 - (1 + x) e^-x``: ``lam`` times the marginal freshness
    ``dF/df`` of a page visited ``f`` times per unit time, ``x = lam/f``
    (``F = (f/lam)(1 - e^(-lam/f))``); increasing from 0 to 1."""
    x = np.asarray(x, dtype=np.float64)
    small = x < 1e-2
    series = x * x * (0.5 - x * (1.0 / 3.0 - x * (0.125 - x / 30.0)))
    direct = -np.expm1(-x) - x * np.exp(-x)
    return np.where(small, series, direct)


def log_marginal(x: np.ndarray) -> np.ndarray:
    """``log g(x)``, accurate at both ends (the series for small ``x``, ``log1p`` of
    ``-(1 + x) e^-x`` for large ``x``)."""
    x = np.asarray(x, dtype=np.float64)
    big = x >= 1.0
    out = np.empty_like(x)
    out[~big] = np.log(freshness_marginal(x[~big]))
    out[big] = np.log1p(-(1.0 + x[big]) * np.exp(-x[big]))
    return out


def _u(s: np.ndarray) -> np.ndarray:
    """``u = s - log(-s)`` of ``s = log g(x) < 0``: increasing, and ``log x`` is close to
    linear in it at both ends (``s ~ 2 log x - log 2`` for small ``x``; ``-log(-s) ~
    x - log(1 + x)`` for large ``x``), so one uniform grid in ``u`` serves all ``x``."""
    return s - np.log(-s)


#: the table's range of x: below it g(x) = x^2/2 to double precision; above it
#: f = lam/x is below 2% of lam and g(x) is 1 within 1e-24
_X_MIN, _X_MAX = 1e-30, 60.0


@functools.cache
def _inverse_table(size: int = 1 << 16) -> tuple[float, float, np.ndarray]:
    """``log x`` on a uniform grid of ``u`` (:func:`_u`), built once from a dense
    table: a URL's inverse is then an index and a linear step, no search (a binary
    search per URL in a table this fine costs ~100 ns each in cache misses).

    Built at the first ``chogm_f`` scoring, not at import: its ~60 ms (800,000 points)
    would otherwise be paid by every process that imports the scoring package (every
    crawl, every command), whether or not its scorer names ``chogm_f``."""
    dense = np.concatenate(
        [np.geomspace(_X_MIN, 1.0, 400_000), np.linspace(1.0, _X_MAX, 400_000)[1:]]
    )
    u = _u(log_marginal(dense))
    grid = np.linspace(u[0], u[-1], size)
    return float(grid[0]), float(grid[1] - grid[0]), np.interp(grid, u, np.log(dense))


_LOG2 = math.log(2.0)


@functools.cache
def _s_min() -> float:
    """``log g(x)`` at the table's low end (below it: the series)."""
    return float(log_marginal(np.array([_X_MIN]))[0])


def _chogm_phi(s: np.ndarray) -> np.ndarray:
    """``1/x`` where ``g(x) = e^s`` (so ``f = lam * phi``); 0 where ``e^s >= 1``."""
    u0, du, log_x_of_u = _inverse_table()
    neg = np.minimum(s, -1e-300)  # s >= 0: no visit (zeroed below)
    pos = _u(neg)
    pos -= u0
    pos /= du
    np.clip(pos, 0.0, log_x_of_u.size - 1.000001, out=pos)  # past the table: its ends
    at = pos.astype(np.intp)
    pos -= at
    lo = log_x_of_u[at]
    log_x = log_x_of_u[at + 1]
    log_x -= lo
    log_x *= pos
    log_x += lo
    tiny = s < _s_min()  # below the table: g(x) = x^2/2
    if tiny.any():
        log_x = np.where(tiny, 0.5 * (s + _LOG2), log_x)
    out = np.exp(np.negative(log_x, out=log_x), out=log_x)
    out[s >= 0.0] = 0.0
    return out


def chogm_rates(lam: np.ndarray, k: float, w: np.ndarray | None = None) -> np.ndarray:
    """Visits per cycle ``f_i`` maximising ``sum w_i F(lam_i, f_i)`` with
    ``sum f_i = k``, ``0 <= f_i <= 1`` (Cho & Garcia-Molina, TODS 2003, sec. 4).

    KKT: ``(w_i/lam_i) g(lam_i/f_i) = mu`` for every page visited, so
    ``f_i = lam_i / g^-1(mu lam_i / w_i)``; a page with ``mu lam_i / w_i >= 1``
    (changing too fast for its weight: even its first visit gains less than ``mu``)
    gets ``f_i = 0``. ``w`` None: every page weighs 1 (the paper's case).
    """
    lam = np.asarray(lam, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(lam)  # log(lam/w): -inf (lam = 0) and +inf (w = 0) get 0
        if w is not None:
            z -= np.log(np.asarray(w, dtype=np.float64))
    # phi = 1/x bends sharply as g(x) -> 1 (s -> 0): exact there (x > ~1.3)
    return _solve(z, lam, k, _chogm_phi, exact_from=-1.0)


def _chogm_f(
    state: Mapping[str, np.ndarray], _c: int, _now: object, _a: float, _b: float, get: _Getter
) -> np.ndarray:
    return chogm_rates(get("lam"), _budget(state, "chogm_f"), _weights(state, get))


# ------------------------------------------ Kolobov et al. (harmonic, polling)


def _lc_phi(s: np.ndarray) -> np.ndarray:
    """``h(e^-s)`` with ``h(c) = (sqrt(1 + 4c) - 1)/2``, written ``2c/(sqrt(1 + 4c) + 1)``
    (no cancellation for small ``c``)."""
    c = np.exp(-s)
    den = np.sqrt(1.0 + 4.0 * c)
    den += 1.0
    return 2.0 * c / den


def lambdacrawl_rates(lam: np.ndarray, k: float, w: np.ndarray | None = None) -> np.ndarray:
    """Crawls per cycle ``rho_i`` minimising ``sum w_i ln(1 + lam_i/rho_i)`` with
    ``sum rho_i = k``, ``0 <= rho_i <= 1`` (Kolobov, Peres, Lu & Horvitz, NeurIPS 2019,
    sources with incomplete change observations).

    ``w_i ln(1 + lam_i/rho_i)`` is the expected harmonic staleness penalty
    (``H(N) = 1 + 1/2 + ... + 1/N`` for ``N`` changes missed) of a page changing at
    ``lam_i`` polled at ``rho_i``. KKT: ``w_i lam_i / (rho_i (rho_i + lam_i)) = nu``,
    so ``rho_i = (sqrt(lam_i^2 + 4 w_i lam_i / nu) - lam_i)/2``: every page with
    ``lam_i w_i > 0`` gets a visit (no page is given up on, unlike freshness).
    """
    lam = np.asarray(lam, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        # rho = lam * h(w / (nu lam)): z = log(lam/w), theta = log(nu)
        z = np.log(lam)
        if w is not None:
            z -= np.log(np.asarray(w, dtype=np.float64))
    return _solve(z, lam, k, _lc_phi)


def _lc_f(
    state: Mapping[str, np.ndarray], _c: int, _now: object, _a: float, _b: float, get: _Getter
) -> np.ndarray:
    return lambdacrawl_rates(get("lam"), _budget(state, "lc_f"), _weights(state, get))


#: The policies' terminals, registered after the core's (scoring/registry.py). Not
#: among CORE_TERMINALS: ``chogm_f`` and ``lc_f`` solve one problem over all the
#: candidates, so they are never scored block by block (core/selection.py).
POLICY_TERMINALS: tuple[Terminal, ...] = (
    Terminal(
        "lam",
        "changes per cycle: `CGp` over the mean interval between visits "
        "`(last_visit_cycle - first_cycle)/n` (the prior's rate when `n = 0`)",
        _lam,
        uses_prior=True,
    ),
    Terminal("tc", "cycles since the last observed change (since the first visit if none)", _tc),
    burst_terminal(),
    Terminal("w", "the URL's importance: the `importance` column, 1.0 where absent", _w),
    nutch_terminal(),
    Terminal(
        "chogm_f",
        "visits per cycle maximising mean freshness under the cycle's budget, from `lam` and "
        "`w` (Cho & Garcia-Molina 2003); 0: changes too fast to keep",
        _chogm_f,
        uses_prior=True,
        needs_budget=True,
    ),
    Terminal(
        "lc_f",
        "crawls per cycle minimising `w`-weighted harmonic staleness under the cycle's "
        "budget, for polled pages (Kolobov et al. 2019)",
        _lc_f,
        uses_prior=True,
        needs_budget=True,
    ),
)
