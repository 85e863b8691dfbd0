"""Budget split, monitoring sample and the scored top-k, without a crawl."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.core.budget import Budget, cycle_budget
from scrapy_recrawl.core.selection import monitor_mask, select_recrawls
from scrapy_recrawl.scoring import PRESETS, Scorer
from scrapy_recrawl.scoring.presets import POLICY_PRESETS

from .helpers import history_arrays as arrays


def test_budget_int_share_warmup_and_new_share():
    assert cycle_budget(100, 0.2, 5000, warmup=False) == Budget(100, 20)
    assert cycle_budget(0.05, 0.2, 2000, warmup=False) == Budget(100, 20)
    assert cycle_budget(0.05, 0.2, 0, warmup=False) == Budget(1, 0)  # never zero
    assert cycle_budget(0.05, 0.2, 2000, warmup=True) == Budget(None, None)
    assert Budget(100, 20).recrawl == 80


def test_top_k_by_score_skips_gone_and_excluded():
    # t*X with cycle 10: scores 9*2, 5*4, 1*9, 8*8 (gone), 2*2
    a = arrays(n=[5, 5, 9, 9, 3], X=[2, 4, 9, 8, 2], last=[1, 5, 9, 2, 8], gone=[0, 0, 0, 1, 0])
    sel = select_recrawls(a, Scorer.from_spec("t*X"), 3, now=0.0)
    assert sel.ids.tolist() == [2, 1, 3] and sel.scores.tolist() == [20, 18, 9]
    assert sel.scored == 4
    sel = select_recrawls(a, Scorer.from_spec("t*X"), 3, now=0.0, exclude=np.array([2]))
    assert 2 not in sel.ids.tolist() and 4 not in sel.ids.tolist()
    assert len(select_recrawls(a, Scorer.from_spec("t*X"), None, now=0.0).ids) == 4


def test_monitoring_sample_is_fixed_and_comes_first_outside_k():
    ids = np.arange(1, 100_001)
    m = monitor_mask(ids, 0.02, seed=7)
    assert 0.018 < m.mean() < 0.022
    assert (monitor_mask(ids[:5000], 0.02, seed=7) == m[:5000]).all()  # depends on the id alone
    assert not (monitor_mask(ids, 0.02, seed=8) == m).all()
    a = arrays(n=[1] * 1000, X=[0] * 1000, last=[9] * 1000)
    sel = select_recrawls(a, Scorer.from_spec("age"), 10, now=0.0, monitor_share=0.1, seed=1)
    assert sel.monitored == int(monitor_mask(a.ids, 0.1, 1).sum()) > 50
    assert len(sel.ids) == sel.monitored + 10
    assert np.isinf(sel.scores[: sel.monitored]).all()


def test_per_domain_cap():
    a = arrays(n=[1] * 6, X=[1] * 6, last=[0, 1, 2, 3, 4, 5])  # age order: ids 1..6
    urls = {
        1: "https://a.com/1",
        2: "https://a.com/2",
        3: "https://a.com/3",
        4: "https://b.com/4",
        5: "https://b.com/5",
        6: "https://c.com/6",
    }
    sel = select_recrawls(
        a,
        Scorer.from_spec("age"),
        4,
        now=0.0,
        max_per_domain=1,
        urls_of=lambda ids: [urls[int(i)] for i in ids],
    )
    assert sel.ids.tolist() == [1, 4, 6]


@pytest.mark.parametrize("k", [0, 1, 5])
def test_k_larger_or_zero(k):
    a = arrays(n=[1, 2], X=[1, 1], last=[1, 2])
    assert len(select_recrawls(a, Scorer.from_spec("gp4c"), k, now=0.0).ids) == min(k, 2)


def _capped_reference(scores, k, cap, hosts):
    """The per-host cap by its definition: walk every score best first (distinct scores)."""
    picked, per_host = [], {}
    for i in np.argsort(-scores, kind="stable"):
        if per_host.get(hosts[i], 0) < cap:
            per_host[hosts[i]] = per_host.get(hosts[i], 0) + 1
            picked.append(int(i))
            if len(picked) == k:
                break
    return picked


@pytest.mark.parametrize(
    ("size", "n_hosts", "k", "cap"),
    [(5000, 40, 300, 3), (20000, 2000, 1000, 2), (3000, 5, 2000, 100), (50000, 300, 2500, 5)],
)
def test_per_domain_cap_walks_only_as_far_as_needed(size, n_hosts, k, cap):
    # distinct scores (a t*X of distinct ages); skewed hosts: the cap binds for the big ones,
    # and in (3000, 5, 2000, 100) the hosts run out before k (500 picks in all)
    rng = np.random.default_rng(size)
    last = rng.permutation(size)
    a = arrays(n=[1] * size, X=[1] * size, last=last, cycle=size + 1)
    hosts = [f"h{int(h)}.example.org" for h in n_hosts * rng.random(size) ** 3]
    urls = {i + 1: f"https://{hosts[i]}/page/{i}" for i in range(size)}
    asked = []

    def urls_of(ids):
        asked.append(len(ids))
        return [urls[int(i)] for i in ids]

    sel = select_recrawls(
        a, Scorer.from_spec("age"), k, now=0.0, max_per_domain=cap, urls_of=urls_of
    )
    expected = _capped_reference(size + 1 - last.astype(float), k, cap, hosts)
    assert sel.ids.tolist() == [i + 1 for i in expected]
    if len(expected) == k and k < size // 4:
        assert sum(asked) < 3 * k  # not every URL's host was looked up


def test_per_domain_cap_with_ties_keeps_the_cap_and_the_budget():
    rng = np.random.default_rng(3)
    size = 30000
    a = arrays(n=[1] * size, X=[1] * size, last=rng.integers(0, 4, size))  # 4 distinct ages
    urls = {i + 1: f"http://h{int(h)}.net/{i}" for i, h in enumerate(rng.integers(0, 500, size))}
    sel = select_recrawls(
        a,
        Scorer.from_spec("age"),
        1500,
        now=0.0,
        max_per_domain=4,
        urls_of=lambda ids: [urls[int(i)] for i in ids],
    )
    hosts = [urls[int(i)].split("/")[2] for i in sel.ids]
    assert len(sel.ids) == 1500 and len(set(sel.ids.tolist())) == 1500
    assert max(hosts.count(h) for h in set(hosts)) <= 4
    assert (np.diff(sel.scores) <= 0).all()  # best first


def test_hosts_of_is_host_of():
    from scrapy_recrawl.core.selection import host_of, hosts_of

    urls = [
        "https://Example.COM/a",
        "https://example.com:8443/a?b#c",
        "http://user:pw@Host.org:80/x",
        "https://[::1]:8080/",
        "HTTPS://UPPER.example/",
        "https://example.com",
        "https://example.com?q=1",
        "https://example.com#frag",
        "ftp://files.example.net/pub",
        "//scheme-relative.example/x",
        "mailto:someone@example.com",
        " https://leading.space/",
        "https://tab\t.example/",
        "ht\ttps://tab.in.scheme/",
        "no scheme at all",
        "",
        "1http://digit.first/",
    ]
    assert hosts_of(urls) == [host_of(u) for u in urls]


def test_per_domain_cap_with_no_recrawl_budget_picks_nothing():
    # k = 0 (a cycle whose budget all goes to new URLs): the capped walk used to take
    # every candidate up to the cap instead of none
    a = arrays(n=[1] * 4, X=[1] * 4, last=[0, 1, 2, 3])
    sel = select_recrawls(
        a,
        Scorer.from_spec("age"),
        0,
        now=0.0,
        max_per_domain=2,
        urls_of=lambda ids: [f"https://a.com/{int(i)}" for i in ids],
    )
    assert sel.ids.tolist() == []


def _random_state(size, rng):
    n = rng.integers(0, 80, size)
    n[:50] = 0  # nothing observed yet: the protected divisions' zeros
    x = rng.binomial(n, rng.beta(0.3, 5.0, size))
    nan_or = lambda v: np.where(rng.random(size) < 0.2, np.nan, v)  # noqa: E731
    return arrays(
        n=n,
        X=x,
        last=rng.integers(-1, 40, size),
        gone=rng.random(size) < 0.05,
        cycle=41,
        sad=(rng.random(size) < 0.3).astype(float),
        aad_sum=x * (n + 1) / 2 * rng.random(size),
        gad=rng.random(size),
        last_visit_time=nan_or(1.7e9 - rng.random(size) * 1e7),
        D=nan_or(rng.integers(0, 64, size).astype(float)),
        A=nan_or(rng.integers(0, 9, size).astype(float)),
        R=nan_or(rng.integers(0, 9, size).astype(float)),
        M=nan_or(rng.integers(0, 9, size).astype(float)),
    )


@pytest.mark.parametrize(
    "spec",
    [
        # the policies' terminals are not the core's: scored whole (test below); the
        # pooled presets read every URL of a group: scored whole (tests/test_pooled.py)
        *[
            n
            for n in PRESETS
            if n not in ("rand", "basket", "experts", "aad+h", "nad+h", *POLICY_PRESETS)
        ],
        "log(1 + t) * (X + 0.5)/(n + 1) + exp(-GAD*t) * AAD - sqrt(hours)/(CG + 10) + SAD",
        "D * A / (R + M) + CGp * NADp - GADp",
        "t",
        "3",
    ],
)
def test_block_scoring_is_bit_for_bit_the_whole_vector(spec, monkeypatch):
    from scrapy_recrawl.core import selection

    rng = np.random.default_rng(len(spec))
    a = _random_state(12_345, rng)
    scorer = Scorer.from_spec(spec)
    assert selection._blockwise(scorer)
    live = np.flatnonzero(~a.columns["gone"])
    whole = scorer.score_state({c: v[live] for c, v in a.columns.items()}, a.cycle, 1.7e9)
    monkeypatch.setattr(selection, "SCORE_BLOCK", 1000)  # 12 blocks and a short one
    for rows in (live, np.arange(len(a.ids))):
        blocks = selection._score(scorer, a.columns, rows, len(a.ids), a.cycle, 1.7e9)
        every = scorer.score_state(a.columns, a.cycle, 1.7e9) if len(rows) == len(a.ids) else whole
        assert blocks.dtype == np.float64
        assert np.array_equal(blocks.view(np.int64), every.view(np.int64))  # NaNs included


def test_rand_and_plugin_terminals_are_scored_whole():
    from scrapy_recrawl.core import selection

    assert not selection._blockwise(Scorer.from_spec("rand"))
    assert not selection._blockwise(Scorer.from_spec("chogm"))  # one multiplier per cycle
    assert not selection._blockwise(Scorer.from_spec("lambdacrawl"))
    assert not selection._blockwise(Scorer.from_spec("nutch"))
    from scrapy_recrawl.plugin_terminals import default_registry

    basket = Scorer.from_spec("basket", registry=default_registry())
    assert not selection._blockwise(basket)  # `due`: the baskets plug-in's
