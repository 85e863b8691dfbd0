"""The change-streak plug-in: its declaration, its visit hook and column, its terminal."""

from __future__ import annotations

import numpy as np
from recrawl_example_plugin import ChangeStreak
from scrapy.settings import Settings

from scrapy_recrawl.api import HistoryStore, Visit
from scrapy_recrawl.scoring import Scorer
from scrapy_recrawl.testing import assert_plugin, fp

LISTED = {"RECRAWL_PLUGINS": {"recrawl_example_plugin.ChangeStreak": 500}}


def test_it_meets_what_it_declares() -> None:
    assert_plugin(ChangeStreak)  # the check the crawl makes when it loads the class


def _visit(
    store: HistoryStore, plugin: ChangeStreak, i: int, changed: bool | None, t: float
) -> None:
    """What the middleware does with a response: record it, then tell the hooks."""
    visit = Visit(fp(i), f"http://h/{i}", t, 200, changed=changed)
    plugin.visited(visit, store.record(visit))


def test_the_visit_hook_counts_changes_in_a_row(sqlite_store: HistoryStore) -> None:
    plugin = ChangeStreak(sqlite_store)
    for i in (1, 2, 3):
        _visit(sqlite_store, plugin, i, None, 0.0)  # first fetches: no observation
    for t, (a, b) in enumerate([(True, True), (True, False), (True, True)], start=1):
        sqlite_store.advance_cycle()
        _visit(sqlite_store, plugin, 1, a, float(t))
        _visit(sqlite_store, plugin, 2, b, float(t))
    _visit(sqlite_store, plugin, 3, None, 4.0)  # a failure says nothing either
    sqlite_store.flush()
    arrays = sqlite_store.arrays()
    columns = plugin.columns(arrays, now=5.0)
    by_url = dict(zip(sqlite_store.urls(arrays.ids), columns["change_streak"], strict=True))
    assert by_url == {"http://h/1": 3.0, "http://h/2": 1.0, "http://h/3": 0.0}


def test_the_terminal_parses_once_the_plugin_is_listed_and_ranks_by_the_column() -> None:
    scorer = Scorer.from_settings(Settings({"RECRAWL_SCORER": "streak", **LISTED}))
    assert scorer.terminals_needed == {"streak"}
    assert ChangeStreak.enabled(Settings(LISTED), scorer.terminals_needed)
    state = {"n": np.zeros(3), "change_streak": np.array([0.0, 4.0, 1.0])}
    np.testing.assert_array_equal(scorer.top_k_state(state, 5, 3), [1, 2, 0])
    del state["change_streak"]  # the plug-in off: NaN, which ranks last
    assert np.isnan(scorer.terminals(state, 5)["streak"]).all()
