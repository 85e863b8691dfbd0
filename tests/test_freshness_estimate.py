"""The freshness estimate (scoring/freshness.py) on synthetic Poisson pages whose truth is
known: rates drawn from a skewed mix, a warm-up that fetches everything, then a budget
spent by a scorer that chooses from what it saw (so the observed pages are not a random
sample), and the true share of current copies at each cycle's end to compare with."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.scoring.freshness import (
    RATE_GRID,
    estimate_freshness,
    interval_loglik,
    posterior_rate,
    unchanged_probability,
)

CYCLES = 15


def site(pages: int, seed: int) -> np.ndarray:
    """Per-page change rates per cycle: 45% never, 25% slow, 20% moderate, 10% fast."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(4, size=pages, p=[0.45, 0.25, 0.2, 0.1])
    rate = np.zeros(pages)
    rate[kind == 1] = rng.uniform(0.005, 0.03, (kind == 1).sum())
    rate[kind == 2] = rng.uniform(0.05, 0.3, (kind == 2).sum())
    rate[kind == 3] = rng.uniform(0.5, 2.5, (kind == 3).sum())
    return rate


def crawl(rate: np.ndarray, seed: int, budget: int, monitor: float = 0.0, scorer: str = "cg"):
    """Cycles 1-2 fetch every page, then ``budget`` pages a cycle by the scorer (plus a
    fixed random ``monitor`` share every cycle). Yields, at each cycle's end, the
    columns (n, X, first, last) and the true freshness of the known pages."""
    rng = np.random.default_rng(seed + 1)
    pages = rate.size
    changes = rng.poisson(rate[:, None], size=(pages, CYCLES + 1))  # changes in cycle c
    count = np.cumsum(changes, axis=1)  # changes up to cycle c (when it is crawled)
    n = np.zeros(pages, dtype=np.int64)
    X = np.zeros(pages, dtype=np.int64)
    first = np.full(pages, -1, dtype=np.int64)
    last = np.full(pages, -1, dtype=np.int64)
    held = np.zeros(pages, dtype=np.int64)  # the change count the copy was fetched at
    sample = rng.random(pages) < monitor
    for c in range(1, CYCLES + 1):
        if c <= 2:
            fetch = np.ones(pages, dtype=bool)
        else:
            t = c - last
            if scorer == "cg":
                score = -np.log((n - X + 0.5) / (n + 0.5)) * t
            else:  # age
                score = t.astype(float)
            score[sample] = -np.inf
            fetch = np.zeros(pages, dtype=bool)
            fetch[np.argsort(-score, kind="stable")[:budget]] = True
            fetch |= sample
        seen = fetch & (last >= 0)
        changed = count[:, c] != held
        n[seen] += 1
        X[seen & changed] += 1
        first[fetch & (first < 0)] = c
        last[fetch] = c
        held[fetch] = count[fetch, c]
        truth = float(np.mean(held[last >= 0] == count[last >= 0, c]))
        yield c, n.copy(), X.copy(), first.copy(), last.copy(), truth


def errors(rate, seed, budget, **kw):
    out = []
    for c, n, X, first, last, truth in crawl(rate, seed, budget, **kw):
        est = estimate_freshness(n, X, first, last, c, interval=False)
        out.append((c, truth, est.share))
    return out


@pytest.mark.parametrize("scorer", ["cg", "age"])
def test_the_estimate_tracks_the_true_freshness_of_a_selective_crawl(scorer):
    rate = site(1500, seed=3)
    rows = errors(rate, 3, budget=75, scorer=scorer)
    err = [abs(e - t) for c, t, e in rows if c >= 3]
    assert max(err) <= 0.05, rows
    assert np.mean(err) <= 0.03, rows
    # the truth moves: a figure stuck at one value would not pass
    assert rows[2][1] - rows[-1][1] > 0.05


def test_the_old_estimator_fails_the_same_check():
    """Today's figure (CG rate of the observed pages over their mean interval) misses by
    far on the same crawl: the check above can fail."""
    rate = site(1500, seed=3)
    worst = 0.0
    for c, n, X, first, last, truth in crawl(rate, 3, 75):
        seen = n > 0
        if c < 3 or not seen.any():
            continue
        interval = np.maximum((last - first) / np.maximum(n, 1), 1.0)
        cg = -np.log((n - X + 0.5) / (n + 0.5))
        old = float(np.exp(-(cg / interval) * (c + 1 - last))[seen].mean())
        worst = max(worst, abs(old - truth))
    assert worst > 0.05


def test_censored_observations_give_the_poisson_rate_not_the_share_changed():
    # 400 pages of rate 1 a cycle, each seen 30 times a cycle apart: ~63% of the visits
    # see a change (X/n = 1 - e^-1), the rate is 1
    rng = np.random.default_rng(0)
    n = np.full(400, 30)
    X = rng.binomial(30, 1 - np.exp(-1.0), 400)
    rate = posterior_rate(n, X, np.ones(400, dtype=np.int64), np.full(400, 31))
    assert np.mean(X / n) == pytest.approx(0.632, abs=0.03)
    assert np.mean(rate) == pytest.approx(1.0, rel=0.1)
    # unequal spacing: seen every 3 cycles (30 observations over 90 cycles), same rate
    X3 = rng.binomial(30, 1 - np.exp(-3.0), 400)
    rate3 = posterior_rate(n, X3, np.ones(400, dtype=np.int64), np.full(400, 91))
    assert np.mean(rate3) == pytest.approx(1.0, rel=0.15)


def test_the_likelihood_of_a_change_rules_out_a_page_that_never_changes():
    ll = interval_loglik(np.array([3, 3]), np.array([0, 1]), np.array([2.0, 2.0]))
    assert ll[0, 0] == 0.0 and ll[1, 0] == -np.inf  # rate 0: certain no-change
    lam = RATE_GRID[5]
    assert ll[1, 5] == pytest.approx(-lam * 4 + np.log(1 - np.exp(-lam * 2)))


def test_pages_fetched_once_count_with_their_hosts_prior():
    # host 0: 200 pages seen unchanged over 10 cycles; host 1: 200 seen changed at every
    # one of 10 visits. One page of each host fetched once, 5 cycles before the end.
    n = np.r_[np.full(200, 10), np.full(200, 10), 0, 0]
    X = np.r_[np.zeros(200), np.full(200, 10), 0, 0].astype(np.int64)
    first = np.r_[np.full(400, 1), 6, 6]
    last = np.r_[np.full(400, 11), 6, 6]
    group = np.r_[np.zeros(200), np.ones(200), 0, 1].astype(np.int64)
    p = unchanged_probability(n, X, first, last, 11, group=group)
    assert p[-2] > 0.9  # a quiet host's page stays current
    assert p[-1] < 0.05  # a busy host's page is stale after 5 cycles
    est = estimate_freshness(n, X, first, last, 11, group=group)
    assert est.pages == 402 and est.observed == 400
    assert est.share == pytest.approx(np.mean(p))


def test_known_pages_only():
    n, X = np.array([2, 2, 0]), np.array([0, 0, 0])
    first, last = np.array([1, 1, -1]), np.array([3, 3, -1])
    est = estimate_freshness(n, X, first, last, 3, known=np.array([True, False, True]))
    assert est.pages == 1  # one gone, one never fetched
    assert np.isnan(estimate_freshness(n, X, first, last, 3, known=np.zeros(3, bool)).share)


def test_the_interval_covers_the_truth_and_a_monitoring_sample_narrows_it():
    rate = site(1500, seed=5)
    plain, monitored, covered = [], [], 0
    for kw, widths in (({}, plain), ({"monitor": 0.1}, monitored)):
        for c, n, X, first, last, truth in crawl(rate, 5, 75, **kw):
            if c < 6:
                continue
            est = estimate_freshness(n, X, first, last, c)
            assert est.low <= est.share <= est.high
            widths.append(est.high - est.low)
            covered += est.low - 0.01 <= truth <= est.high + 0.01
    assert covered >= 0.8 * (len(plain) + len(monitored))
    assert np.mean(monitored) < np.mean(plain)


def test_the_tilted_fit_is_the_tilted_em_step():
    """The profile's tilted fits run in one product and one segment sum per step
    (issue 29: the report fits an estimate per cycle); they are the plain step: each
    row's posterior, reweighed by ``exp(tilt * P(current))``, renormalised, times its
    count, summed per group, then the pooled and smoothed update."""
    from scrapy_recrawl.scoring.freshness import GROUP_URLS, _Rows, _smooth

    rows = _Rows(*_history(11))
    start = rows.fit(None, 30)
    for tilt in (-3.0, 0.7, 4.0):
        prior = start.copy()
        sizes = np.bincount(rows.group, weights=rows.counts, minlength=rows.groups)
        for _ in range(12):
            post = rows.lik * prior[rows.group]
            post /= post.sum(axis=1, keepdims=True)
            post *= np.exp(tilt * rows.fresh)
            post /= post.sum(axis=1, keepdims=True)
            per_group = np.zeros_like(prior)
            np.add.at(per_group, rows.group, post * rows.counts[:, None])
            overall = per_group.sum(axis=0) / per_group.sum()
            prior = (per_group + GROUP_URLS * overall) / (sizes[:, None] + GROUP_URLS)
            prior = _smooth(prior)
        np.testing.assert_allclose(rows.fit(start, 12, tilt=tilt), prior, rtol=1e-10, atol=1e-15)


def _history(seed: int, size: int = 3000, with_ages: bool = False):
    rng = np.random.default_rng(seed)
    n = rng.integers(0, 12, size)
    X = rng.binomial(n, rng.uniform(0, 1, size))
    span = n * rng.integers(1, 4, size)
    age = rng.integers(0, 6, size)
    group = rng.integers(0, 9, size)
    group[group == 4] = 5  # a code without a row
    pre = np.where(rng.random(size) < 0.4, rng.exponential(1.5, size), np.nan)
    return (group, n, X, span, age) + ((pre,) if with_ages else ())


def test_the_compiled_fit_is_the_plain_em_step():
    """The fit's step is one compiled pass over the rows (_em.pyx; issue 29: the report
    fits an estimate per cycle); its priors are those of the plain numpy step,
    posterior() summed per group then pooled and smoothed, to the last digits (the
    order of the float operations differs), untilted and tilted, without ages, with
    them, and with groups making pages (their dates read as creations)."""
    from scrapy_recrawl.scoring.freshness import GROUP_URLS, _Rows, _smooth

    for with_ages, creating in ((False, False), (True, False), (True, True)):
        making = np.isin(np.arange(9), [1, 5]) if creating else None
        rows, fitted = (_Rows(*_history(5, with_ages=with_ages), making) for _ in range(2))
        assert rows.creating.any() == creating
        sizes = np.bincount(rows.group, weights=rows.counts, minlength=rows.groups)

        def update(prior, sums, rows=rows, sizes=sizes):
            per_group = np.zeros_like(prior)
            per_group[rows.present] = sums
            overall = per_group.sum(axis=0)
            overall /= max(overall.sum(), 1e-300)
            out = (per_group + GROUP_URLS * overall[None, :]) / (sizes[:, None] + GROUP_URLS)
            return _smooth(np.maximum(out, 0.0))

        prior = np.full((rows.groups, RATE_GRID.size), 1.0 / RATE_GRID.size)
        for _ in range(25):
            post, _m = rows.posterior(prior)
            prior = update(prior, np.add.reduceat(post * rows.counts[:, None], rows.starts))
        np.testing.assert_allclose(fitted.fit(None, 25), prior, rtol=1e-9, atol=1e-300)
        start = prior
        for tilt in (-3.0, 0.7, 4.0):
            lik = rows.lik.T * np.exp(tilt * rows.fresh.T)
            prior = start.copy()
            for _ in range(10):
                own = np.repeat(prior[rows.present].T, rows.lengths, axis=1)
                weight = rows.counts / np.maximum(np.einsum("kr,kr->r", lik, own), 1e-300)
                sums = np.add.reduceat(lik * weight, rows.starts, axis=1).T
                prior = update(prior, sums * prior[rows.present])
            np.testing.assert_allclose(rows.fit(start, 10, tilt=tilt), prior, rtol=1e-9)


def test_the_compiled_step_sums_each_groups_posteriors():
    """_em.em_sums against its plain statement: each row's posterior (likelihood times
    its group's prior, normalised) times its count, summed per group; with a weight
    per row, the same weighed; shapes that disagree are refused."""
    from scrapy_recrawl.scoring._em import em_sums

    rng = np.random.default_rng(3)
    lengths = np.array([4, 1, 0, 7], dtype=np.intp)
    group = np.repeat(np.arange(4), lengths)
    lik = rng.random((group.size, 65))
    lik[2] = 0.0  # a row no rate explains: its marginal is floored, not divided by 0
    prior = rng.dirichlet(np.ones(65), 4)
    counts = rng.integers(1, 5, group.size).astype(np.float64)
    sums = np.empty((4, 65))
    em_sums(lik, prior, lengths, counts, sums)
    post = lik * prior[group]
    post /= np.maximum(post.sum(axis=1, keepdims=True), 1e-300)
    want = np.zeros((4, 65))
    np.add.at(want, group, post * counts[:, None])
    np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-300)
    with pytest.raises(ValueError, match="lengths"):
        em_sums(lik, prior, lengths + 1, counts, sums)
    with pytest.raises(ValueError, match="disagree"):
        em_sums(lik, prior, lengths, counts[:-1], sums)


def test_a_group_making_pages_reads_its_dates_as_creations():
    """In the groups seen making pages a dated row's likelihood is its intervals' times
    ``exp(-lambda a)`` (no change since the date); in the others a date from
    MIN_EVENT_AGE on is a change, ``lambda exp(-lambda a)``, which rules out rate 0."""
    from scrapy_recrawl.scoring.freshness import MIN_EVENT_AGE, _Rows

    history = _history(6, with_ages=True)
    making = np.isin(np.arange(9), [1, 5])
    rows = _Rows(*history, making)
    plain = _Rows(*history)
    events = rows.dated & (rows.pre >= MIN_EVENT_AGE)
    for r in np.flatnonzero(events):
        want = rows.base[r] - RATE_GRID * rows.pre[r]
        if not making[rows.group[r]]:
            with np.errstate(divide="ignore"):
                want = want + np.log(RATE_GRID)
        with np.errstate(divide="ignore"):
            got = np.log(rows.lik[r]) + rows.top[r, 0]
        np.testing.assert_allclose(got[1:], want[1:], rtol=1e-9, atol=1e-9)
        # rate 0 stays possible where the date is a creation and no interval saw a change
        never = bool(making[rows.group[r]]) and np.isfinite(rows.base[r, 0])
        assert (rows.lik[r, 0] > 0.0) == never
    outside = ~making[rows.group]
    np.testing.assert_array_equal(rows.lik[outside], plain.lik[outside])
    assert events[~outside].any() and events[outside].any()
    assert (rows.lik[events & ~outside, 0] > 0.0).any()


def test_the_rows_without_ages_are_the_rows_built_without_them():
    """The estimate fits the prior to the rows with the Last-Modified ages and reads each
    page's belief from the rows without them: the second are merged from the first (one
    pass over the pages, not two) and are what building them from the pages gives."""
    from scrapy_recrawl.scoring.freshness import _Rows

    history = _history(8, with_ages=True)
    with_ages = _Rows(*history)
    merged, direct = with_ages.without_ages(), _Rows(*history[:5])
    assert with_ages.lik.shape[0] > direct.lik.shape[0]
    for name in ("inverse", "counts", "group", "starts", "present", "lengths", "lik", "fresh"):
        assert np.array_equal(getattr(merged, name), getattr(direct, name)), name
    assert merged.groups == direct.groups and merged.pages == direct.pages
