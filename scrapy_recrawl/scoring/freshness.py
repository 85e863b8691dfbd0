"""The estimated freshness of the known pages: the one definition behind the crawl's
``recrawl/freshness_estimate`` (cycle_summary.py), ``recrawl-report``'s per-cycle
figure (insight/cycles.py) and recrawl-plan's stale pages now (planning/).

**What it estimates.** At the end of cycle ``c`` (its fetches done), the share of the
known pages (fetched at least once, not gone) whose kept copy is still current.

**The model** (docs/freshness.md). Page ``i`` changes as a Poisson process of rate
``lambda_i`` changes per *cycle* (the clock: one cycle is one period of the crawl,
one simulated day in the demo; a page visited in cycle ``c'`` has age ``c - c'`` at
the end of cycle ``c``). Its history is ``n`` change observations over the span from
its first visit to its last, ``X`` of which saw a change. An observation over an
interval of ``s`` cycles is interval-censored: "changed" means at least one change,
probability ``1 - exp(-lambda s)``; "unchanged" means none, ``exp(-lambda s)``. The
store keeps O(1) numbers per URL, not each interval, so the intervals are taken as
equal, ``s = span / n`` (scoring/policies.py ``visit_spacing``, as the ``lam``
terminal): the likelihood is ``exp(-lambda (n - X) s) (1 - exp(-lambda s))^X``, exact
when ``X = 0`` (its maximum is Cho & Garcia-Molina's ``-log(1 - X/n) / s``).

**Before the first fetch** (Last-Modified). A page whose server says when it last
changed (``Last-Modified``, read against the same server's ``Date``) tells, at its
first fetch, that it changed ``a`` cycles before it and not since: the backward
recurrence time of its process, likelihood ``lambda exp(-lambda a)`` (Cho &
Garcia-Molina 2003, "Estimating frequency of change": the estimator with the last
modification date), a segment of the process disjoint from the intervals after the
first fetch, so the two multiply. A date under one cycle old is taken as "no change
in ``a``" only (``exp(-lambda a)``): a page found the day it was created carries its
creation date, which is no change (:data:`MIN_EVENT_AGE`; ``last_modified.py``
records the ages). **The ages shape the host's prior, not a page's own belief.** A
date may be the page's creation, not a change: a page that never changed since it
was made reads as one change in its lifetime, and its own belief would rule out "never
changes" on that alone (measured: on the demo site, whose pages that never change
were made 1-400 days before the crawl, the estimate went 0.03-0.05 high that way).
Across a host's pages the ages carry what one short interval per page cannot: the
shape of the slow rates (on the reference shop, without them, the estimate ran up to
0.12 high). So the prior is fitted to the histories with their ages, and each page's
posterior is that prior times its own intervals.

**On a host that makes pages, a date is the page's creation.** There, most dates
are when an article was published, and read as changes they say every page changes
every few days: on the reference news site the estimate fell to 0.30 while 0.94 of
the copies were current. From one date per page, "made then" and "changed then"
cannot be told apart; what both readings share is that the page did not change
between its date and its first fetch. So in the groups seen making pages (a page
first fetched with a date from after the crawl's start, ``last_modified.SINCE_START``)
a date says only that: likelihood ``exp(-lambda a)``, no change event, and the rates
come from the intervals of the pages revisited. Elsewhere every date from
:data:`MIN_EVENT_AGE` on is a change (the classic estimator; the reference shop and
the demo make no pages). An earlier reading, a creation hazard ``eta`` per group
fitted with the prior (the date the later of the page's creation and its last
change, ``(lambda + eta) exp(-(lambda + eta) a)``), depended on how the fit split
``lambda + eta``, which one date per page does not tell: over eight crawls of the
reference news site its error ran from 0.02 to 0.21, against 0.02-0.065 for this
reading (docs/freshness.md).

**The prior** (empirical Bayes): the rates of the pages of one group (a host) are
drawn from one distribution on a fixed grid of rates (:data:`RATE_GRID`, 0 included:
pages that never change), fitted to all the group's histories at once by EM (the
nonparametric maximum likelihood of a mixture, smoothed over neighbouring rates at
each step: EMS, Silverman et al. 1990, so it does not overfit), each group's pulled towards the
distribution of all groups as if ``GROUP_URLS`` more pages of it were in the group
(the pooled priors' rule, scoring/pooled.py). A page's posterior over the grid is the
prior times its likelihood; a page fetched once (``n = 0``) has the prior itself. Its
chance of being unchanged at age ``a`` is the posterior mean of ``exp(-lambda a)``;
the estimate is the mean of that over the known pages. Which pages the scorer chose
to revisit depends only on what was observed, so the likelihood stays valid under
any scorer (the choice is ignorable).

**The interval** (90%). Two parts, added in quadrature: the chance that pages of those
probabilities are fresh (a sum of Bernoulli variables) and what the data cannot tell
about the prior (a profile likelihood: the lowest and highest estimate of priors
whose log-likelihood is within ``chi2(1, 0.90)/2`` of the best one, found by tilting
the EM towards fresher or staler). Pages observed often narrow it; a monitoring
sample (RECRAWL_MONITOR_SHARE: a fixed random sample of pages fetched every cycle)
gives the prior unselected observations and narrows it most.

The EM's step is compiled (``_em.pyx``: one pass per step over the rows' likelihood);
the rest is vector operations over the distinct ``(group, n, X, span, age)`` rows only, so the
cost grows with the variety of histories, not with the URLs; above :data:`SAMPLE`
known pages, over a fixed uniform sample of them (the same pages for the crawl and the
report: both order URLs by id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._em import em_sums

#: the rates (changes per cycle) a page may have: 0 (never changes), then from one
#: change in 2,000 cycles to 10 a cycle, log-spaced (a grid's step is 16% of a rate)
RATE_GRID = np.concatenate([[0.0], np.geomspace(5e-4, 10.0, 64)])
#: at most this many known pages (a fixed uniform sample) are fitted and averaged: the
#: sample's error (0.008, 90%) is in the interval; at 1M URLs, every sampled page a
#: history of its own (the worst case), 2.6 s on a loaded 2-core machine
SAMPLE = 10_000
#: pseudo-pages of all groups' distribution in each group's prior (scoring/pooled.py's)
GROUP_URLS = 10.0
#: the EMS smoothing of the prior's fit: a neighbour's share of each grid weight
SMOOTH = 0.25
#: EM iterations of the prior's fit (warm starts for the interval's tilted fits)
FIT_ITERATIONS = 200
TILT_ITERATIONS = 40
#: half of chi2(1) at 0.90: a profile likelihood's 90% interval; z of a 90% interval
PROFILE_DROP = 1.3528
#: the strongest tilt the profile tries (a posterior weighed up to e^8 towards one end)
MAX_TILT = 8.0
Z90 = 1.6449
#: a Last-Modified at least this many cycles before the first fetch counts as a change
#: then (module docstring); a younger one only as "no change since"
MIN_EVENT_AGE = 1.0

#: per URL, its Last-Modified age at its first fetch in cycles (NaN: none known): an
#: array aligned with the URLs, or a function of the positions of the URLs fitted
#: (the estimate reads only its sample's: a store lookup need not read them all)
PriorAge = np.ndarray | Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class FreshnessEstimate:
    """The estimated freshness of the known pages at the end of ``cycle``."""

    cycle: int
    share: float  # the estimate (nan when no page is known)
    low: float  # its 90% interval
    high: float
    pages: int  # the known pages it is over (fetched at least once, not gone)
    observed: int  # of which have at least one change observation

    @property
    def stale(self) -> float:
        """The expected number of stale copies among the known pages."""
        return (1.0 - self.share) * self.pages if self.pages else 0.0


def interval_loglik(n: np.ndarray, X: np.ndarray, spacing: np.ndarray) -> np.ndarray:
    """``[rows, grid]``: the log-likelihood of each history ``(n, X, spacing)`` at each
    rate of :data:`RATE_GRID` (module docstring; 0 where ``n = 0``)."""
    n = np.asarray(n, dtype=np.float64)[:, None]
    X = np.asarray(X, dtype=np.float64)[:, None]
    s = np.asarray(spacing, dtype=np.float64)[:, None]
    lam_s = RATE_GRID[None, :] * s
    out = -(n - X) * lam_s
    with np.errstate(divide="ignore"):
        changed = np.log(-np.expm1(-lam_s))  # -inf at rate 0: a change rules it out
    some = np.broadcast_to(X > 0, out.shape)
    term = np.multiply(X, changed, out=np.zeros_like(out), where=some)
    out += term
    return out


def modified_loglik(prior_age: np.ndarray, change: np.ndarray | bool = True) -> np.ndarray:
    """``[rows, grid]``: the log-likelihood of each page's Last-Modified age at its first
    fetch (cycles; NaN: none) at each rate of :data:`RATE_GRID` (module docstring):
    ``log(lambda) - lambda a`` where the date is a change (``change``, per row or one for
    all) from :data:`MIN_EVENT_AGE` on, ``-lambda a`` where it is not (a creation, or
    younger than that: no change since), 0 without one."""
    a = np.asarray(prior_age, dtype=np.float64)[:, None]
    known = np.isfinite(a) & (a >= 0.0)
    a = np.where(known, a, 0.0)
    out = -RATE_GRID[None, :] * a
    event = known & (a >= MIN_EVENT_AGE) & np.reshape(np.asarray(change, dtype=bool), (-1, 1))
    with np.errstate(divide="ignore"):
        log_rate = np.log(RATE_GRID)[None, :]  # -inf at rate 0: it changed, so not never
    return out + np.where(event, log_rate, 0.0)


class _Rows:
    """The distinct histories and what every fit reads of them."""

    #: each row's likelihood over the grid, scaled by ``exp(top)`` (:meth:`_likelihood`)
    lik: np.ndarray
    top: np.ndarray

    def __init__(
        self,
        group: np.ndarray,
        n: np.ndarray,
        X: np.ndarray,
        span: np.ndarray,
        age: np.ndarray,
        prior_age: np.ndarray | None = None,
        creating: np.ndarray | None = None,
    ) -> None:
        """``creating``: per group code, whether it is seen making pages (its dates are
        creations: module docstring)."""
        self._creating = creating
        if prior_age is None:
            prior_age = np.full(np.shape(n), np.nan)
        # to an eighth of a cycle: the rows stay few, the likelihood moves by < 1/8 rate
        prior_age = np.round(np.asarray(prior_age, dtype=np.float64) * 8.0) / 8.0
        prior_age = np.where(np.isfinite(prior_age), prior_age, -1.0)  # -1: none
        key = np.stack([group, n, X, span, age, prior_age], axis=1).astype(np.float64)
        rows, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        self._build(rows, inverse.ravel(), counts.astype(np.float64))

    def without_ages(self) -> _Rows:
        """The same histories without their Last-Modified ages (each page's own belief:
        module docstring), from these distinct rows rather than the pages again: the
        rows, their order (sorted, as ``np.unique`` sorts) and counts that building
        them without ages gives."""
        key = self._key.copy()
        key[:, 5] = -1.0
        rows, inverse = np.unique(key, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        out = _Rows.__new__(_Rows)
        out._creating = self._creating
        out._build(rows, inverse[self.inverse], np.bincount(inverse, weights=self.counts))
        return out

    def _build(self, rows: np.ndarray, inverse: np.ndarray, counts: np.ndarray) -> None:
        """From the distinct ``(group, n, X, span, age, prior age)`` rows (sorted), each
        page's row and each row's pages."""
        self._key = rows
        self.inverse = inverse
        self.counts = counts
        self.group = rows[:, 0].astype(np.intp)
        self.starts = np.flatnonzero(np.r_[True, self.group[1:] != self.group[:-1]])
        self.starts = self.starts[self.starts < self.group.size]  # none when no row
        self.present = self.group[self.starts]  # the groups with a row, in row order
        self.lengths = np.diff(np.r_[self.starts, self.group.size])  # rows per present group
        self.groups = int(self.group.max()) + 1 if rows.size else 1
        n_r, X_r, span_r, age_r = rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4]
        spacing = np.ones_like(n_r)
        np.divide(span_r, n_r, out=spacing, where=(n_r > 0) & (span_r > 0))
        self.pre = np.where(rows[:, 5] >= 0.0, rows[:, 5], np.nan)
        self.dated = np.isfinite(self.pre)
        #: the groups seen making pages, whose dates are creations (module docstring)
        self.creating = np.zeros(self.groups, dtype=bool)
        if self._creating is not None:
            known = np.asarray(self._creating, dtype=bool)[: self.groups]
            self.creating[: known.size] = known
        self.base = interval_loglik(n_r, X_r, spacing)
        self.fresh = np.exp(-RATE_GRID[None, :] * np.maximum(age_r, 0.0)[:, None])
        self.pages = float(self.counts.sum())
        self._likelihood()

    def _likelihood(self) -> None:
        """Each row's likelihood over the grid: its intervals', times its date's where
        it has one (a change, or in a group making pages a creation)."""
        ll = self.base
        if self.dated.any():
            ll = ll + modified_loglik(self.pre, ~self.creating[self.group])
        self.top = ll.max(axis=1, keepdims=True)
        self.lik = np.exp(ll - self.top)  # scaled per row: the posterior is unchanged

    def own_prior(self, prior: np.ndarray) -> np.ndarray:
        """``prior[self.group]``: each row's group's prior (rows are sorted by group: a
        repeat, cheaper than a gather)."""
        return np.repeat(prior[self.present], self.lengths, axis=0)

    def posterior(self, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's posterior over the grid and its marginal likelihood (scaled)."""
        joint = self.lik * self.own_prior(prior)
        marginal = joint.sum(axis=1)
        joint /= np.maximum(marginal, 1e-300)[:, None]
        return joint, marginal

    def loglik(self, prior: np.ndarray) -> float:
        marginal = (self.lik * self.own_prior(prior)).sum(axis=1)
        return float((self.counts * (np.log(np.maximum(marginal, 1e-300)) + self.top[:, 0])).sum())

    def fit(self, start: np.ndarray | None, iterations: int, tilt: float = 0.0) -> np.ndarray:
        """The groups' priors ``[groups, grid]`` by EM from ``start``; ``tilt`` != 0
        weighs each page's posterior by ``exp(tilt * P(current))`` in the update: a
        family of priors leaning fresher (> 0) or staler (< 0), searched by the profile
        (its 16 fits of :data:`TILT_ITERATIONS` steps, most of an estimate's cost).

        A step's update per group is the sum of its rows' posteriors times their
        counts, ``lik * prior / marginal * count``, in one compiled pass over the rows
        (``_em.em_sums``; issue 29: the report fits one estimate per cycle), with the
        tilt's weights (the same at every step) folded into the likelihood once, then
        the pooled and smoothed update (:meth:`_update`). The numpy step's figures but
        for the order of the float operations (tests/test_freshness_estimate.py)."""
        K = RATE_GRID.size
        prior = np.full((self.groups, K), 1.0 / K) if start is None else start.copy()
        sizes = np.bincount(self.group, weights=self.counts, minlength=self.groups)
        denom = sizes[:, None] + GROUP_URLS
        lik = self.lik * np.exp(tilt * self.fresh) if tilt else self.lik
        sums = np.empty((self.present.size, K))
        for _ in range(iterations):
            own = np.ascontiguousarray(prior[self.present])
            em_sums(lik, own, self.lengths, self.counts, sums)
            prior = self._update(prior, sums, denom)
        return prior

    def _update(self, prior: np.ndarray, sums: np.ndarray, denom: np.ndarray) -> np.ndarray:
        """The EMS step from each present group's summed posteriors (``sums``, in the
        order of :attr:`starts`): pooled towards all groups' distribution, smoothed;
        ``denom``: each group's pages plus :data:`GROUP_URLS`, ``[groups, 1]``."""
        if self.present.size == prior.shape[0]:
            per_group = sums  # every group present, in order: nothing to place
        else:
            per_group = np.zeros_like(prior)
            per_group[self.present] = sums
        overall = per_group.sum(axis=0)
        overall /= max(overall.sum(), 1e-300)
        out = per_group + GROUP_URLS * overall[None, :]
        out /= denom
        return _smooth(np.maximum(out, 0.0, out=out), in_place=True)

    def page_freshness(self, prior: np.ndarray) -> np.ndarray:
        post, _m = self.posterior(prior)
        return (post * self.fresh).sum(axis=1)

    def share(self, prior: np.ndarray) -> float:
        return float((self.page_freshness(prior) * self.counts).sum() / self.pages)


def _smooth(prior: np.ndarray, in_place: bool = False) -> np.ndarray:
    """The EMS step (Silverman et al. 1990): each positive rate's weight averaged with
    its grid neighbours' (:data:`SMOOTH` each side; rate 0 kept apart), so the fitted
    prior does not overfit spikes the data cannot tell apart. ``in_place``: into
    ``prior`` itself (a fit's own array)."""
    pos = prior[:, 1:]
    padded = np.concatenate([pos[:, :1], pos, pos[:, -1:]], axis=1)
    out = prior if in_place else prior.copy()
    out[:, 1:] = SMOOTH * (padded[:, :-2] + padded[:, 2:]) + (1.0 - 2.0 * SMOOTH) * pos
    out /= out.sum(axis=1, keepdims=True)
    return out


def _profile_end(
    rows: _Rows, fit_rows: _Rows, prior: np.ndarray, best: float, sign: float
) -> float:
    """The lowest (``sign`` -1) or highest (+1) estimate of the priors within
    :data:`PROFILE_DROP` of the best log-likelihood (of ``fit_rows``, what the prior
    is fitted to): bisection on the tilt."""
    lo, hi = 0.0, MAX_TILT
    end = rows.share(prior)
    start = prior
    for _ in range(8):
        mid = (lo + hi) / 2.0
        tilted = fit_rows.fit(start, TILT_ITERATIONS, tilt=sign * mid)
        if best - fit_rows.loglik(tilted) <= PROFILE_DROP:
            lo, end, start = mid, rows.share(tilted), tilted
        else:
            hi = mid
    return end


def _fitted(
    n: np.ndarray,
    X: np.ndarray,
    first_cycle: np.ndarray,
    last_visit_cycle: np.ndarray,
    cycle: int,
    known: np.ndarray | None,
    group: np.ndarray | None,
    sample: bool = True,
    prior_age: PriorAge | None = None,
) -> tuple[np.ndarray, _Rows, np.ndarray, _Rows] | None:
    """The mask of the known URLs fitted (``sample``: at most :data:`SAMPLE` of them),
    their distinct rows, the fitted priors and the rows the priors were fitted to
    (with the Last-Modified ages; the first without: module docstring) (None: none
    known)."""
    last = np.asarray(last_visit_cycle, dtype=np.int64)
    mask = last >= 0
    if known is not None:
        mask &= np.asarray(known, dtype=bool)
    pages = int(np.count_nonzero(mask))
    if not pages:
        return None
    if sample and pages > SAMPLE:  # a fixed uniform sample of the known pages (module docstring)
        keep = np.flatnonzero(mask)
        pick = np.random.default_rng(0).choice(pages, SAMPLE, replace=False)
        mask = np.zeros_like(mask)
        mask[keep[np.sort(pick)]] = True
    if group is None:
        g = np.zeros(int(np.count_nonzero(mask)), dtype=np.int64)
    else:
        _, g = np.unique(np.asarray(group)[mask], return_inverse=True)  # dense codes
    span = last[mask] - np.asarray(first_cycle, dtype=np.int64)[mask]
    if prior_age is None:
        pre = None
    elif callable(prior_age):
        pre = np.asarray(prior_age(np.flatnonzero(mask)), dtype=np.float64)
    else:
        pre = np.asarray(prior_age, dtype=np.float64)[mask]
    history = (
        g.ravel(),
        np.asarray(n, dtype=np.int64)[mask],
        np.asarray(X, dtype=np.int64)[mask],
        np.maximum(span, 0),
        cycle - last[mask],
    )
    if pre is None or not np.isfinite(pre).any():
        rows = fit_rows = _Rows(*history)
    else:  # the pages' distinct rows once: with the ages, then merged without them
        # the groups seen making pages since the crawl began: their dates are creations
        creating = np.zeros(int(history[0].max(initial=0)) + 1, dtype=bool)
        creating[np.unique(history[0][np.isneginf(pre)])] = True
        fit_rows = _Rows(*history, pre, creating)
        rows = fit_rows.without_ages()
    return mask, rows, fit_rows.fit(None, FIT_ITERATIONS), fit_rows


def estimate_freshness(
    n: np.ndarray,
    X: np.ndarray,
    first_cycle: np.ndarray,
    last_visit_cycle: np.ndarray,
    cycle: int,
    *,
    known: np.ndarray | None = None,
    group: np.ndarray | None = None,
    interval: bool = True,
    prior_age: PriorAge | None = None,
) -> FreshnessEstimate:
    """The freshness of the known pages at the end of ``cycle`` (module docstring).

    Per URL: ``n`` change observations, ``X`` changes among them, its first recorded
    cycle and its last good fetch's (-1: never fetched). ``known``: which URLs may count
    (those fetched always, ``last_visit_cycle >= 0``; the caller leaves out the gone
    ones); ``group``: each URL's group (a host's code; default: one group).
    ``interval=False`` skips the profile (the interval is the Bernoulli part only);
    ``prior_age``: each URL's Last-Modified age at its first fetch (:data:`PriorAge`)."""
    fitted = _fitted(n, X, first_cycle, last_visit_cycle, cycle, known, group, True, prior_age)
    if fitted is None:
        nan = float("nan")
        return FreshnessEstimate(int(cycle), nan, nan, nan, 0, 0)
    mask, rows, prior, fit_rows = fitted
    pages = int(
        np.count_nonzero(np.asarray(last_visit_cycle) >= 0)
        if known is None
        else np.count_nonzero((np.asarray(last_visit_cycle) >= 0) & np.asarray(known))
    )
    f = np.clip(rows.page_freshness(prior), 0.0, 1.0)
    share = float((f * rows.counts).sum() / rows.pages)
    bernoulli = Z90 * float(np.sqrt((f * (1.0 - f) * rows.counts).sum())) / rows.pages
    low = high = share
    if interval:
        best = fit_rows.loglik(prior)
        low = min(share, _profile_end(rows, fit_rows, prior, best, -1.0))
        high = max(share, _profile_end(rows, fit_rows, prior, best, 1.0))
    return FreshnessEstimate(
        cycle=int(cycle),
        share=share,
        low=max(0.0, share - float(np.hypot(share - low, bernoulli))),
        high=min(1.0, share + float(np.hypot(high - share, bernoulli))),
        pages=pages,
        observed=int(round(np.count_nonzero(np.asarray(n)[mask] > 0) * pages / rows.pages)),
    )


def unchanged_probability(
    n: np.ndarray,
    X: np.ndarray,
    first_cycle: np.ndarray,
    last_visit_cycle: np.ndarray,
    cycle: int,
    *,
    known: np.ndarray | None = None,
    group: np.ndarray | None = None,
    prior_age: PriorAge | None = None,
) -> np.ndarray:
    """Per URL, the chance its copy is current at the end of ``cycle``: the terms the
    estimate averages (NaN for URLs not known). recrawl-plan's stale pages are one
    minus it."""
    out = np.full(np.shape(last_visit_cycle), np.nan)
    fitted = _fitted(n, X, first_cycle, last_visit_cycle, cycle, known, group, False, prior_age)
    if fitted is not None:
        mask, rows, prior, _fit_rows = fitted
        out[mask] = rows.page_freshness(prior)[rows.inverse]
    return out


def posterior_rate(
    n: np.ndarray,
    X: np.ndarray,
    first_cycle: np.ndarray,
    last_visit_cycle: np.ndarray,
    *,
    known: np.ndarray | None = None,
    group: np.ndarray | None = None,
    prior_age: PriorAge | None = None,
) -> np.ndarray:
    """Per URL, its expected change rate (changes per cycle) under the same model: the
    posterior mean over :data:`RATE_GRID` (NaN for URLs not known)."""
    last = np.asarray(last_visit_cycle, dtype=np.int64)
    out = np.full(last.shape, np.nan)
    cycle = int(last.max(initial=0))
    fitted = _fitted(n, X, first_cycle, last, cycle, known, group, False, prior_age)
    if fitted is not None:
        mask, rows, prior, _fit_rows = fitted
        post, _m = rows.posterior(prior)
        out[mask] = (post @ RATE_GRID)[rows.inverse]
    return out
