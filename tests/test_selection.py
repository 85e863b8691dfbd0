"""Budget split, monitoring sample and the scored top-k, without a crawl."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.core.budget import Budget, cycle_budget
from scrapy_recrawl.core.selection import monitor_mask, select_recrawls
from scrapy_recrawl.scoring import Scorer

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
