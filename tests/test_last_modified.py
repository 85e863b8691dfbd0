"""Last-Modified before the first fetch (last_modified.py) and what the freshness
estimate makes of it (scoring/freshness.py, "Before the first fetch")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scrapy.http import Headers

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.last_modified import (
    CLOCK_TABLE,
    MIN_AGE_SECONDS,
    TABLE,
    LastModifiedTally,
    keep,
    modified_age,
    prior_ages,
    seconds_per_cycle,
)
from scrapy_recrawl.scoring.freshness import (
    MIN_EVENT_AGE,
    RATE_GRID,
    estimate_freshness,
    modified_loglik,
)

DAY = 86400.0


def headers(date: str | None, modified: str | None) -> Headers:
    h = Headers()
    if date is not None:
        h[b"Date"] = date
    if modified is not None:
        h[b"Last-Modified"] = modified
    return h


def test_the_age_is_read_on_the_servers_own_clock():
    h = headers("Thu, 01 Jan 2026 12:00:00 GMT", "Wed, 31 Dec 2025 00:00:00 GMT")
    assert modified_age(h) == 1.5 * DAY


@pytest.mark.parametrize(
    "date, modified",
    [
        (None, "Wed, 31 Dec 2025 00:00:00 GMT"),  # no Date: no clock to read it on
        ("Thu, 01 Jan 2026 12:00:00 GMT", None),
        ("Thu, 01 Jan 2026 12:00:00 GMT", "yesterday"),  # unreadable
        ("Thu, 01 Jan 2026 12:00:00 GMT", "Fri, 02 Jan 2026 00:00:00 GMT"),  # in the future
        ("Thu, 01 Jan 2026 12:00:00 GMT", "Thu, 01 Jan 2026 12:00:00 GMT"),  # render time
        ("Thu, 01 Jan 2026 12:00:00 GMT", "Thu, 01 Jan 2026 11:59:30 GMT"),
    ],
)
def test_a_date_that_says_nothing_is_not_kept(date, modified):
    assert modified_age(headers(date, modified)) is None


def test_the_render_time_bound():
    h = headers("Thu, 01 Jan 2026 12:00:00 GMT", "Thu, 01 Jan 2026 11:58:00 GMT")
    assert modified_age(h) == 120.0 >= MIN_AGE_SECONDS


def test_seconds_per_cycle_is_the_servers_clock_between_cycles():
    samples = [(1, 1000.0), (2, 1000.0 + DAY), (4, 1000.0 + 3 * DAY)]
    assert seconds_per_cycle(samples, up_to=4) == DAY
    assert seconds_per_cycle(samples, up_to=2) == DAY
    assert seconds_per_cycle(samples, up_to=1) is None  # one cycle: no slope yet
    assert seconds_per_cycle([(1, 5.0), (2, 5.0)], up_to=2) is None  # a stopped clock


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteHistoryStore(tmp_path / "h.sqlite3")
    else:
        s = RedisHistoryStore(request.getfixturevalue("redis_db").url, key="t:history")
    with s:
        yield s


def test_ages_in_cycles_of_each_hosts_clock_on_both_backends(store):
    """Two hosts, one whose cycle is a day of its clock and one whose cycle is an hour;
    ages are kept at first fetches only, and read in each host's cycles."""
    tally = LastModifiedTally()
    a, b = "http://a.example/p", "http://b.example/q"
    day0 = "Thu, 01 Jan 2026 12:00:00 GMT"
    tally.fetched(1, a, 1, headers(day0, "Mon, 29 Dec 2025 12:00:00 GMT"), first=True)
    tally.fetched(2, b, 1, headers(day0, "Thu, 01 Jan 2026 06:00:00 GMT"), first=True)
    tally.fetched(3, a, 1, headers(day0, None), first=True)  # no Last-Modified
    assert keep(store, tally) == 2
    # one cycle of each clock: no seconds per cycle yet, so nothing is known in cycles
    assert np.isnan(prior_ages(store, np.array([1, 2, 3]), [a, b, a], 1)).all()
    tally.fetched(1, a, 2, headers("Fri, 02 Jan 2026 12:00:00 GMT", None), first=False)
    tally.fetched(2, b, 2, headers("Thu, 01 Jan 2026 13:00:00 GMT", day0), first=False)
    keep(store, tally)
    ages = prior_ages(store, np.array([1, 2, 3]), [a, b, a], 2)
    assert ages[0] == pytest.approx(3.0)  # three days, a day a cycle
    assert ages[1] == pytest.approx(6.0)  # six hours, an hour a cycle
    assert math.isnan(ages[2])
    # the later fetch did not replace the first fetch's age
    assert len(dict(store.side_items(TABLE))) == 2
    assert len(dict(store.side_items(CLOCK_TABLE))) == 2
    # a page made after the crawl began (an article of day 1, first fetched on day 3)
    # carries its creation date, no change: not read; an older page found then is
    tally.fetched(4, a + "/new", 4, headers("Sun, 04 Jan 2026 12:00:00 GMT",
                                             "Fri, 02 Jan 2026 00:00:00 GMT"), first=True)  # fmt: skip
    tally.fetched(5, a + "/old", 4, headers("Sun, 04 Jan 2026 12:00:00 GMT",
                                             "Wed, 31 Dec 2025 12:00:00 GMT"), first=True)  # fmt: skip
    keep(store, tally)
    late = prior_ages(store, np.array([4, 5]), [a + "/new", a + "/old"], 4)
    assert math.isnan(late[0])
    assert late[1] == pytest.approx(4.0)


def test_the_likelihood_of_a_last_modified_age():
    ll = modified_loglik(np.array([4.0, 0.5, np.nan]))
    lam = RATE_GRID
    with np.errstate(divide="ignore"):
        assert np.allclose(ll[0][1:], np.log(lam[1:]) - 4.0 * lam[1:])
    assert ll[0][0] == -np.inf  # it changed: not a page that never does
    assert np.allclose(ll[1], -0.5 * lam)  # under MIN_EVENT_AGE: no change since, only
    assert 0.5 < MIN_EVENT_AGE
    assert np.all(ll[2] == 0.0)
    # its maximum is the classic estimator's 1/a
    assert RATE_GRID[np.argmax(ll[0])] == pytest.approx(0.25, rel=0.2)


def test_last_modified_ages_let_the_estimate_see_slow_rates():
    """400 pages, fetched twice a cycle apart and then left alone for 20 cycles (the
    budget went elsewhere), at rates from never to one change in 3 cycles. Without the
    header, one unchanged cycle cannot tell "never" from "every 30 cycles"; with it
    (half the pages send it, as on a shop with validators on some sections), the
    estimate of the share still current comes within a few points of the truth."""
    rng = np.random.default_rng(7)
    pages = 400
    rate = np.where(
        rng.random(pages) < 0.4, 0.0, np.exp(rng.uniform(np.log(0.01), np.log(0.3), pages))
    )
    cycle, age = 22, 20  # the end of cycle 22; each page last fetched in cycle 2
    first = np.ones(pages, dtype=np.int64)
    last = np.full(pages, 2, dtype=np.int64)
    changed_between = rng.random(pages) < -np.expm1(-rate)
    n = np.ones(pages, dtype=np.int64)
    X = changed_between.astype(np.int64)
    fresh = rng.random(pages) < np.exp(-rate * age)
    truth = fresh.mean()
    # the age at the first fetch: time back to the last change (the page's listing, for
    # one that never changes), a Poisson process's backward recurrence time
    with np.errstate(divide="ignore"):
        back = np.where(rate > 0, rng.exponential(1.0 / np.maximum(rate, 1e-12)), np.inf)
    listed = rng.uniform(30, 700, pages)
    pre = np.minimum(back, listed)
    pre[rng.random(pages) < 0.5] = np.nan  # half the pages send no Last-Modified
    without = estimate_freshness(n, X, first, last, cycle, interval=False).share
    with_lm = estimate_freshness(n, X, first, last, cycle, interval=False, prior_age=pre).share
    assert abs(with_lm - truth) < 0.05, (with_lm, truth)
    assert abs(with_lm - truth) < abs(without - truth) / 2, (with_lm, without, truth)
    # a function of the fitted URLs' positions gives the same as the array
    by_call = estimate_freshness(
        n, X, first, last, cycle, interval=False, prior_age=lambda pos: pre[pos]
    ).share
    assert by_call == pytest.approx(with_lm)
