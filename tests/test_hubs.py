"""Hubs (issue 26, item 4): pages whose refetches keep yielding new links are recognised
(core/hubs.py: new links per cycle, kept in side storage) and made due, so the pages
they link to are found; unit tests of the rule and a real crawl of a local shop."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scrapy_recrawl.core.cycle import CycleConfig, plan_cycle
from scrapy_recrawl.core.hubs import due_hubs, fold, hub_cap, is_hub
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.hubs import HubTally, keep, read
from scrapy_recrawl.scoring import Scorer

from .helpers import LocalSite, Page, history_arrays, run_crawl


def test_the_rate_is_new_links_per_cycle_weighted_to_the_latest_refetch():
    assert fold(None, 2, 1) == 2.0
    assert fold(None, 3, 3) == 1.0  # three links over three cycles
    assert fold(2.0, 0, 1) == 1.0  # a refetch with nothing new halves it
    rate = 2.0
    for _ in range(6):
        rate = fold(rate, 0, 1)
    assert not is_hub(rate)  # 2 / 64: no hub any more
    assert is_hub(fold(None, 1, 10))


def test_a_hub_is_due_when_it_is_expected_to_hold_a_new_link():
    rate = np.array([2.0, 0.5, 0.5, 0.1, 1.0])
    t = np.array([1, 1, 2, 5, 3])
    assert due_hubs(rate, t, 10).tolist() == [4, 0, 2]  # most expected first: 3, 2, 1
    assert due_hubs(rate, t, 4).tolist() == [4, 0]  # at most half the recrawls
    assert hub_cap(1) == 1 and hub_cap(0) == 0


def test_the_cycle_takes_due_hubs_first():
    size = 30
    arrays = history_arrays(
        np.full(size, 5), np.where(np.arange(size) < 10, 5, 0), last=[9] * size, cycle=10
    )
    arrays.columns["aad_sum"][:] = np.where(np.arange(size) < 10, 15.0, 0.0)
    scorer = Scorer.from_spec("aad+")
    config = CycleConfig(budget=4, warmup_cycles=0, new_share=0.0)
    plain = plan_cycle(arrays, config, scorer, pending_new=0)
    assert 25 not in plain.selection.ids  # a quiet page: the busy ones rank above it
    hubs = (np.array([25, 28]), np.array([1.5, 0.2]))  # id 25 due, id 28 not yet
    plan = plan_cycle(arrays, config, scorer, pending_new=0, hubs=hubs)
    assert plan.hubs_due == 1 and plan.selection.ids[0] == 25 and plan.selection.due == 1
    assert len(plan.selection.ids) == 4


def test_the_table_keeps_hubs_only(tmp_path):
    with SqliteHistoryStore(tmp_path / "h.sqlite3") as store:
        tally = HubTally()
        tally.refetched(7, 1)
        tally.found(7)
        tally.found(7)
        tally.refetched(8, 2)  # nothing new: no entry
        assert keep(store, tally) == 1
        ids, rates = read(store)
        assert ids.tolist() == [7] and rates.tolist() == [2.0]
        for _ in range(6):  # refetched with nothing new: dropped once below the floor
            tally.refetched(7, 1)
            keep(store, tally)
        assert read(store)[0].size == 0


@pytest.mark.slow
def test_a_category_page_that_lists_new_products_is_refetched_and_they_are_found(tmp_path):
    """A shop: the home page (the start URL) links ten busy pages (changed at every visit)
    and a category page, /c, which lists one new product a cycle. With a budget of 4 the
    scorer alone spends it on the busy pages; /c, a hub, is due each cycle, so each new
    product is fetched within two cycles of appearing."""
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_BUDGET": 4,
        "LOG_LEVEL": "INFO",
    }
    busy = [f"/live/{i}" for i in range(10)]
    home = "".join(f'<a href="{p}">{p}</a>' for p in [*busy, "/c"])
    appeared: dict[int, int] = {}
    fetched: dict[int, int] = {}
    hubs_due = []
    with LocalSite() as site:
        site.pages["/"] = Page(f"<html><body>{home}</body></html>".encode())
        for cycle in range(1, 9):
            for p in busy:
                site.pages[p] = Page(f"<html><body><p>{p} now {cycle}</p></body></html>".encode())
            appeared.setdefault(cycle, cycle)
            products = "".join(
                f'<li><a href="/p/{i}">product {i}</a></li>' for i in sorted(appeared)
            )
            site.pages["/c"] = Page(f"<html><body><ul>{products}</ul></body></html>".encode())
            for i in appeared:
                site.pages[f"/p/{i}"] = Page(
                    f"<html><body><p>Product {i}</p></body></html>".encode()
                )
            site.log.clear()
            result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
            for entry in site.log:
                m = re.fullmatch(r"/p/(\d+)", entry["path"])
                if m:
                    fetched.setdefault(int(m.group(1)), cycle)
            hubs_due.append(result["stats"].get("recrawl/hubs_due", 0))
    late = {i: fetched.get(i) for i in appeared if i < 8 and (fetched.get(i) or 99) - i > 1}
    assert not late, (late, hubs_due)
    assert all(h >= 1 for h in hubs_due[2:]), hubs_due  # /c due in every budgeted cycle
