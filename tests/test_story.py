"""One URL's story (insight/story.py) for a scorer that solves for a whole cycle: the
budget terminals (``chogm_f``, ``lc_f``) get the last planned cycle's budget, as the
crawl hands its cycle's (core/selection.py with_budget)."""

from __future__ import annotations

import numpy as np
import pytest
from scrapy.settings import Settings

from scrapy_recrawl.core.selection import with_budget
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.cycle_log import CyclePlan, save_plan
from scrapy_recrawl.insight.log import VisitLog
from scrapy_recrawl.insight.story import find_url, story
from scrapy_recrawl.scoring import Scorer

URLS = 8
CYCLES = 6


def _crawl(path, budgets) -> None:
    """Eight URLs over six cycles, URL u changing at a visit when ``c % (u + 1) == 0``
    (u = 0 every cycle, u = 7 never in six); one plan per cycle with ``budgets[c]``."""
    with SqliteHistoryStore(str(path)) as store:
        for c in range(1, CYCLES + 1):
            store.advance_cycle()
            for u in range(URLS):
                changed = None if c == 1 else c % (u + 1) == 0
                store.record(Visit(f"fp{u}".encode(), f"http://h/{u}", 100.0 * c + u, 200, changed))
            save_plan(store, CyclePlan(store.cycle, 0.0, budgets[c - 1], "chogm", URLS, None, 0))


def _story(path, url, scorer="chogm"):
    with SqliteHistoryStore(str(path)) as store:
        url_id, rec = find_url(store, url)
        settings = Settings({"RECRAWL_SCORER": scorer, "RECRAWL_MONITOR_SHARE": 0})
        s = story(store, VisitLog(store.visit_log([url_id])), url, url_id, rec, settings)
        arrays = store.arrays()
        arrays.cycle = store.cycle + 1
        row = int(np.flatnonzero(arrays.ids == url_id)[0])
    return s, arrays, row


def _crawls_score(arrays, row, budget, scorer="chogm"):
    """The score the crawl's select_recrawls computes with that budget (every URL a
    candidate: no monitoring sample, none gone)."""
    cols = with_budget(arrays.columns, budget)
    return float(Scorer.from_spec(scorer).score_state(cols, arrays.cycle)[row])


@pytest.mark.parametrize("scorer", ["chogm", "lambdacrawl"])
def test_the_story_scores_a_budget_scorer_with_the_last_plans_budget(tmp_path, scorer):
    path = tmp_path / "h.sqlite3"
    _crawl(path, [0, 0, 3, 3, 3, 2])  # two warm-ups (no budget), then 3, 3, 3, 2
    s, arrays, row = _story(path, "http://h/2", scorer)
    assert s.score is not None, s.notes
    assert s.score == pytest.approx(_crawls_score(arrays, row, 2, scorer))
    assert "scored with the recrawl budget of the last planned cycle (2 pages)" in " ".join(s.notes)
    assert not any("plug-in" in n for n in s.notes)
    assert s.rank_now is not None and 1 <= s.rank_now <= URLS


def test_the_budget_is_the_plans_and_decides_the_score(tmp_path):
    # chogm_f solves for the budget: with another budget in the plan, another score
    scores = {}
    for budget in (1, 6):
        path = tmp_path / f"b{budget}.sqlite3"
        _crawl(path, [0, 0, budget, budget, budget, budget])
        s, arrays, row = _story(path, "http://h/1")
        assert s.score == pytest.approx(_crawls_score(arrays, row, budget))
        scores[budget] = s.score
    assert scores[1] != pytest.approx(scores[6])


def test_without_a_planned_budget_the_story_says_so(tmp_path):
    path = tmp_path / "warm.sqlite3"
    _crawl(path, [0] * CYCLES)  # warm-ups only: no cycle had a budget
    s, _, _ = _story(path, "http://h/3")
    assert s.score is None
    text = " ".join(s.notes)
    assert "needs a cycle's recrawl budget" in text and "plug-in" not in text
    # a scorer without budget terminals is scored as before
    s, arrays, row = _story(path, "http://h/3", "aad+")
    assert s.score == pytest.approx(
        float(Scorer.from_spec("aad+").score_state(arrays.columns, arrays.cycle)[row])
    )
