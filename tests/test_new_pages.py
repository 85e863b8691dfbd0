"""New pages (issue 26, item 4): the new URLs' share never rounds to zero while a backlog
waits and grows towards it, bounded so the recrawls keep the rest (core/budget.py:
new_pages, the one rule of the crawl's plan and the replay); with a budget of B pages and
at most B/2 new pages a cycle, each is fetched in the cycle it is found or the next."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.core.budget import Budget, cycle_budget, new_pages
from scrapy_recrawl.core.cycle import CycleConfig, plan_cycle
from scrapy_recrawl.core.simulate import simulate
from scrapy_recrawl.scoring import Scorer
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import history_arrays


def test_the_share_never_rounds_to_zero_while_a_backlog_waits():
    assert new_pages(2, 0.2, 0) == 0  # nothing waits: 20% of 2 pages rounds to 0
    assert new_pages(2, 0.2, 1) == 1  # a backlog: at least one page
    assert new_pages(1, 0.2, 5) == 1
    assert new_pages(100, 0.2, 0) == 20  # RECRAWL_NEW_SHARE as it was
    assert new_pages(100, 0.0, 50) == 0  # no share asked for: none


def test_the_share_grows_with_the_backlog_up_to_the_bound():
    # the backlog plus the base share (this cycle's finds), at most half the budget
    assert [new_pages(6, 0.2, b) for b in range(6)] == [1, 2, 3, 3, 3, 3]
    assert new_pages(100, 0.2, 5) == 25
    assert new_pages(100, 0.2, 1000) == 50  # the recrawls keep half
    assert new_pages(100, 0.2, 1000, max_share=0.3) == 30
    assert new_pages(100, 0.6, 1000) == 60  # a share above the bound is the user's
    assert new_pages(100, 0.2, 1000, max_share=0.0) == 20  # no growth
    assert new_pages(100, 0.2, 1000, max_share=1.0) == 100
    assert cycle_budget(6, 0.2, 40, warmup=False, backlog=3) == Budget(6, 3)
    assert cycle_budget(6, 0.2, 40, warmup=True, backlog=3) == Budget(None, None)


def test_the_setting_is_a_share():
    assert CycleConfig.from_settings({}).new_share_max == 0.5
    assert CycleConfig.from_settings({"RECRAWL_NEW_SHARE_MAX": "0.25"}).new_share_max == 0.25
    with pytest.raises(RecrawlSettingError, match="RECRAWL_NEW_SHARE_MAX"):
        CycleConfig.from_settings({"RECRAWL_NEW_SHARE_MAX": 2})


def test_a_cycle_with_a_backlog_queues_fewer_recrawls():
    size = 40
    arrays = history_arrays(np.full(size, 3), np.zeros(size, dtype=int), last=[9] * size, cycle=10)
    config = CycleConfig(budget=6, warmup_cycles=0)
    scorer = Scorer.from_spec("aad+")
    quiet = plan_cycle(arrays, config, scorer, pending_new=0)
    # nothing waits: the share (1) is lent to the recrawls
    assert quiet.budget == Budget(6, 1) and len(quiet.selection.ids) == 6
    again = history_arrays(np.full(size, 3), np.zeros(size, dtype=int), last=[9] * size, cycle=10)
    busy = plan_cycle(again, config, scorer, pending_new=4)
    assert busy.budget == Budget(6, 3) and busy.backlog == 4 and busy.new_quota == 4
    assert len(busy.selection.ids) == 3  # the recrawls keep half


def _growing_site(old: int, per_cycle: int, cycles: int, seed: int = 0):
    """``old`` pages from the start, ``per_cycle`` new ones appearing each cycle after the
    warm-up; each page changes on a day with its own chance."""
    rng = np.random.default_rng(seed)
    born = np.concatenate(
        [np.zeros(old, dtype=np.int64), np.repeat(np.arange(2, cycles), per_cycle)]
    )
    chance = rng.uniform(0.02, 0.5, born.size)
    changes = (rng.random((born.size, cycles)) < chance[:, None]).astype(np.uint8)
    return changes, born


@pytest.mark.parametrize(("budget", "per_cycle"), [(6, 2), (6, 3), (2, 1), (10, 5), (7, 3)])
def test_new_pages_are_fetched_within_two_cycles_of_appearing(budget, per_cycle):
    changes, born = _growing_site(40, per_cycle, 20)
    run = simulate(changes, "aad+", k=budget, born=born)
    appeared = (born >= 2) & (born < 19)  # those of the last cycle may wait for the next
    assert (run.new_latency[appeared] >= 0).all()  # every one fetched
    assert run.new_latency[appeared].max() <= 1, run.new_latency[appeared]
    assert run.backlog.max() <= per_cycle
    # the budget is spent, and the recrawls keep their part (at least half of it)
    assert (run.fetched + run.fetched_new == budget).all()
    assert (run.fetched >= budget - max(1, budget // 2)).all(), run.fetched


def test_without_growth_the_backlog_grows_and_pages_wait():
    """The same site with the share held at RECRAWL_NEW_SHARE (the rule before issue 26):
    one new page a cycle for two arrivals, so the backlog grows by one a cycle."""
    changes, born = _growing_site(40, 2, 20)
    run = simulate(changes, "aad+", k=6, born=born, new_share_max=0.0)
    assert run.backlog[-1] >= 15 and run.new_latency[born >= 2].max() >= 8


def test_a_large_backlog_drains_at_the_bound_and_the_recrawls_keep_the_rest():
    changes, born = _growing_site(20, 0, 12)
    born[:10] = 0
    born[10:] = 2  # ten pages found at once, after the warm-up
    run = simulate(changes, "aad+", k=4, born=born)
    # 4 pages a cycle: the base share (1) in the cycle they are found, then 2 a cycle
    assert run.fetched_new.tolist()[:6] == [1, 2, 2, 2, 2, 1]
    assert (run.fetched[:6] == 4 - run.fetched_new[:6]).all()


def test_the_replay_of_a_fixed_site_is_unchanged_by_the_rule():
    changes, born = _growing_site(60, 0, 12)
    fixed = simulate(changes, "aad+", k=6)
    grown = simulate(changes, "aad+", k=6, born=np.zeros(60, dtype=np.int64))
    np.testing.assert_array_equal(fixed.changed_fetched, grown.changed_fetched)
    np.testing.assert_array_equal(fixed.fetched, grown.fetched)
