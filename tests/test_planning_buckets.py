"""Change-rate buckets: estimates, log-spaced edges, one byte per URL, quota picking."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.planning import (
    MAX_BUCKETS,
    assign_buckets,
    bucket_stats,
    change_rates,
    select_by_quotas,
)


def cols(n, X, last, first=None):
    c = {
        "n": np.asarray(n, dtype=np.int64),
        "X": np.asarray(X, dtype=np.int64),
        "last_visit_cycle": np.asarray(last, dtype=np.int64),
    }
    if first is not None:
        c["first_cycle"] = np.asarray(first, dtype=np.int64)
    return c


def test_rate_grows_with_changes_seen_and_shrinks_with_spacing():
    r = change_rates(cols([10, 10, 10, 0], [0, 5, 10, 0], [10, 10, 10, 0]), 10, prior=(0.5, 2.0))
    assert r[0] < r[1] < r[2]
    # unobserved: the prior alone, p = 0.5 / 2
    assert r[3] == pytest.approx(-np.log(0.75))
    # the same 5 changes in 10 visits, one visit every 1 vs every 3 cycles
    dense = change_rates(cols([10], [5], [10], [0]), 10, prior=(0.5, 2.0))
    sparse = change_rates(cols([10], [5], [30], [0]), 30, prior=(0.5, 2.0))
    assert sparse[0] == pytest.approx(dense[0] / 3)
    assert dense[0] == pytest.approx(-np.log1p(-5.5 / 12))


def test_assign_buckets_one_byte_log_spaced_and_monotone():
    rng = np.random.default_rng(0)
    n = rng.integers(0, 50, 5000)
    X = rng.binomial(n, rng.uniform(0, 1, n.size))
    a = assign_buckets(cols(n, X, np.full(n.size, 60), np.zeros(n.size)), 60, 64)
    assert a.bucket.dtype == np.uint8
    assert a.edges.shape == (65,) and a.rate.shape == (64,)
    np.testing.assert_allclose(np.diff(np.log(a.edges)), np.diff(np.log(a.edges))[0])
    order = np.argsort(a.url_rate, kind="stable")
    assert (np.diff(a.bucket[order].astype(int)) >= 0).all()
    assert a.bucket[np.argmin(a.url_rate)] == 0 and a.bucket[np.argmax(a.url_rate)] == 63
    full = a.sizes() > 0
    lo, hi = a.edges[:-1][full], a.edges[1:][full]
    assert ((a.rate[full] >= lo * (1 - 1e-12)) & (a.rate[full] <= hi * (1 + 1e-12))).all()
    assert a.sizes().sum() == n.size


def test_bucket_limits_and_edges_reuse():
    c = cols([3, 4], [1, 4], [5, 5])
    assert assign_buckets(c, 5, MAX_BUCKETS).bucket.max() <= 255
    for bad in (0, 257, 2.5, True):
        with pytest.raises(ValueError, match="n_buckets"):
            assign_buckets(c, 5, bad)
    first = assign_buckets(c, 5, 8)
    again = assign_buckets(cols([30, 4], [1, 4], [5, 5]), 5, edges=first.edges)
    np.testing.assert_array_equal(again.edges, first.edges)
    assert again.bucket[0] <= first.bucket[0]
    one = assign_buckets(cols([5], [2], [5]), 5, 4)  # a single rate still gets edges around it
    assert one.bucket.dtype == np.uint8 and one.n_buckets == 4


def test_bucket_stats_drops_empty_buckets_and_counts_stale_copies():
    c = cols([10, 10, 10, 10], [0, 0, 10, 10], [9, 5, 9, 0])
    a = assign_buckets(c, 10, 16, prior=(0.5, 2.0))
    s = bucket_stats(a, c["last_visit_cycle"], 10)
    assert s.sizes.sum() == 4 and (s.sizes > 0).all()
    assert len(s.buckets) == 2
    assert (s.obsolete <= s.sizes).all() and (s.obsolete > 0).all()
    # the fast bucket's copy fetched 10 cycles ago is nearly surely stale
    fast = np.argmax(s.rate)
    assert s.obsolete[fast] > 1.5
    share = s.change_share(1.0)
    assert ((share > 0) & (share < 1)).all()
    masked = bucket_stats(a, c["last_visit_cycle"], 10, mask=np.array([1, 1, 0, 0], bool))
    assert masked.sizes.sum() == 2


def test_select_by_quotas_oldest_visited_first_inside_each_bucket():
    bucket = np.array([0, 0, 0, 1, 1, 2, 2, 2], dtype=np.uint8)
    last = np.array([5, 1, 3, 4, 4, 9, 0, 2])
    got = select_by_quotas(bucket, last, np.array([2, 1, 0]))
    assert got.tolist() == [1, 2, 3]  # bucket 0: visits 1, 3; bucket 1: tie -> lower index
    cand = np.ones(8, bool)
    cand[1] = False
    assert select_by_quotas(bucket, last, np.array([2, 0, 3]), cand).tolist() == [2, 0, 6, 7, 5]
    # a quota larger than the bucket takes the whole bucket
    assert select_by_quotas(bucket, last, np.array([0, 9, 0])).tolist() == [3, 4]
    assert select_by_quotas(bucket, last, np.array([0, 0, 0])).size == 0


def test_the_rate_is_the_lam_terminal_to_the_last_bit():
    """One formula: change_rates is the scorers' lam (CGp / mean spacing), and CGp itself
    without first_cycle; the numbers are those of the module docstring's formula."""
    from scrapy_recrawl.scoring import compute_terminals

    rng = np.random.default_rng(4)
    n = rng.integers(0, 40, 500)
    X = rng.integers(0, 41, 500) % (n + 1)
    first = rng.integers(0, 30, 500)
    last = first + rng.integers(0, 90, 500)
    c = cols(n, X, last, first)
    a, b = 0.7, 3.0
    r = change_rates(c, 120, prior=(a, b))
    assert np.array_equal(r, compute_terminals(c, 120, prior=(a, b), needed=("lam",))["lam"])
    p = (X + a) / (n + b)
    s = np.where((n > 0) & (last > first), (last - first) / np.maximum(n, 1), 1.0)
    assert np.allclose(r, -np.log1p(-p) / s, rtol=1e-14, atol=0)
    flat = change_rates(cols(n, X, last), 120, prior=(a, b))
    assert np.allclose(flat, -np.log1p(-p), rtol=1e-14, atol=0)
    assert np.isfinite(flat).all()
