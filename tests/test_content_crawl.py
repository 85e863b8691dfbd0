"""Paper 004 in real crawls (subprocesses) of a local site: the chi-squared
significant-change rule (``RECRAWL_CHANGE_TEST = "chi2"``) and a scorer over
the window and experts terminals (``C1``, ``D1``, ``Q``)."""

from __future__ import annotations

import pytest

from scrapy_recrawl.history import SqliteHistoryStore

from .helpers import LocalSite, Page, run_crawl
from .test_scheduler import index, page_items, settings_for

pytestmark = [pytest.mark.slow, pytest.mark.planning]  # RECRAWL_CHANGE_TEST = "chi2": scipy

PAGES = 10
#: pages rewritten each version (other words entirely): significant changes
BIG = frozenset({0, 1, 2})
#: pages with one word edited each version: the body differs, but not significantly
TRIVIAL = frozenset({3, 4, 5})


def wordy(i: int, version: int) -> Page:
    """A page of ~300 words. BIG pages draw all their words from a vocabulary
    that depends on the version; TRIVIAL pages change one word per version; the
    others never change."""
    topic = f"v{version}" if i in BIG else "base"
    words = [f"{topic}w{(j * 7 + i) % 40} {topic}x{j % 9}" for j in range(150)]
    if i in TRIVIAL:
        words[17] = f"edit{version}"
    text = " ".join(words)
    return Page(f"<html><body><h1>Page {i}</h1><p>{text}</p></body></html>".encode())


def publish(site: LocalSite, version: int) -> None:
    for i in range(PAGES):
        site.pages[f"/p{i}"] = wordy(i, version if i in BIG | TRIVIAL else 0)


@pytest.fixture
def site():
    with LocalSite() as s:
        s.pages["/"] = index(PAGES)
        publish(s, 0)
        yield s


def _num(url: str) -> int:
    return int(url.rsplit("p", 1)[1])


def test_chi2_flags_rewrites_not_one_word_edits(site, tmp_path):
    # the budget covers every page, so each is observed every cycle
    settings = settings_for(tmp_path, RECRAWL_CHANGE_TEST="chi2", RECRAWL_BUDGET=PAGES + 1)
    start = [site.url + "/"]
    for version in range(3):  # cycle 1: first visits; cycles 2, 3: observations
        publish(site, version)
        result = run_crawl(start, settings, tmp_path, follow=True)
        items = {_num(i["url"]): i for i in page_items(result)}
        assert set(items) == set(range(PAGES)), sorted(items)
        if version == 0:
            continue
        changed = {n for n, i in items.items() if i["recrawl"]["changed"]}
        assert changed == set(BIG), (version, changed)
        # the trivial pages did change (the default rule would flag them): a distance > 0
        assert all(items[n]["recrawl"]["distance"] > 0 for n in TRIVIAL), items
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        log = store.visit_log()
        urls = store.urls(log["url_id"])
        flagged = {
            (_num(u), int(c))
            for u, c, ch in zip(urls, log["cycle"], log["changed"], strict=True)
            if "/p" in u and ch == 1
        }
        assert {n for n, _c in flagged} == set(BIG)
        assert len(flagged) == 2 * len(BIG)  # two observed cycles each
        # the bag table is kept beside the store (one row per HTML URL seen)
        rows = len(list(store.side_items("content_bags")))
        assert rows >= PAGES


def test_scorer_with_window_and_experts_terminals_respects_the_budget(site, tmp_path):
    budget = 4
    settings = settings_for(
        tmp_path,
        RECRAWL_CHANGE_TEST="chi2",
        RECRAWL_BUDGET=budget,
        RECRAWL_NEW_SHARE=0.0,
        RECRAWL_SCORER="C1 + D1 + Q + 0.01 * t",
        RECRAWL_EXPERTS=3,
    )
    start = [site.url + "/"]
    for version in range(5):  # cycles 1-2 warm-up, 3-5 budgeted
        publish(site, version)
        site.log.clear()
        result = run_crawl(start, settings, tmp_path, follow=True)
        cycle = result["stats"]["recrawl/cycle"]
        assert cycle == version + 1
        if cycle <= 2:
            assert len(page_items(result)) == PAGES
            continue
        assert "Traceback" not in result["log"], result["log"][-3000:]
        recrawled = [i for i in result["items"] if i["rank"] is not None]
        assert 1 <= len(recrawled) <= budget, recrawled
        fetched = [r["path"] for r in site.log]
        assert len(fetched) <= budget + 1, fetched  # + the start request
        if cycle >= 4:
            # the rewritten pages were seen changed (C1 = D1 = 1): they rank first
            pages = {_num(i["url"]) for i in recrawled if "/p" in i["url"]}
            assert pages & BIG, pages
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        log = store.visit_log()
        for cycle in (3, 4, 5):
            assert (log["cycle"] == cycle).sum() <= budget + 1
        # chi2 still decides the observations under this scorer: only rewrites count
        urls = store.urls(log["url_id"])
        changed = {_num(u) for u, ch in zip(urls, log["changed"], strict=True) if ch == 1}
        assert changed and changed <= set(BIG), changed
