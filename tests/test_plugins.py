"""Plug-ins: loaded by path from the settings, and one from outside the package."""

from __future__ import annotations

from collections import Counter

import pytest
from scrapy.settings import Settings

from scrapy_recrawl.plugins import check_plugins, plugin_classes
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import LocalSite, Page, run_crawl


def test_the_builtin_papers_are_listed_and_off_by_default():
    names = [c.__name__ for c in plugin_classes(Settings())]
    assert names == ["BasketsPlugin", "ContentPlugin", "WebFountainPlugin"]
    assert check_plugins(Settings(), frozenset({"t", "X"})) == []


def test_a_scorer_terminal_turns_its_plugin_on():
    on = check_plugins(Settings(), frozenset({"Q", "t"}))
    assert [c.__name__ for c in on] == ["ContentPlugin"]


def test_a_plugin_switched_off_with_none_is_not_loaded():
    s = Settings({"RECRAWL_PLUGINS": {"scrapy_recrawl.content.plugin.ContentPlugin": None}})
    assert "ContentPlugin" not in [c.__name__ for c in plugin_classes(s)]


def test_a_bad_plugin_path_names_the_setting():
    s = Settings({"RECRAWL_PLUGINS": {"no.such.Plugin": 10}})
    with pytest.raises(RecrawlSettingError, match=r"RECRAWL_PLUGINS.*no\.such\.Plugin"):
        plugin_classes(s)


def test_two_selectors_are_refused():
    s = Settings(
        {
            "RECRAWL_PLANNER": "webfountain",
            "SHORTEST_URLS_FIRST": True,
            "RECRAWL_PLUGINS": {"tests.third_party_plugin.ShortestUrlsFirst": 500},
        }
    )
    with pytest.raises(RecrawlSettingError, match="two plug-ins"):
        check_plugins(s, frozenset())


@pytest.mark.slow
def test_a_third_party_selector_picks_the_recrawls(tmp_path):
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_PLUGINS": {"tests.third_party_plugin.ShortestUrlsFirst": 500},
        "SHORTEST_URLS_FIRST": True,
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 4,
        "RECRAWL_NEW_SHARE": 0.0,
    }
    with LocalSite() as site:
        paths = ["/a", "/bb", "/ccc", "/dddd", "/eeeee", "/ffffff", "/ggggggg"]
        links = "".join(f'<a href="{p}">{p}</a>' for p in paths)
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for p in paths:
            site.pages[p] = Page(f"<html><body><p>{p} text</p></body></html>".encode())
        run_crawl([site.url + "/"], settings, tmp_path, follow=True)  # warm-up: all
        site.log.clear()
        run_crawl([site.url + "/zzz-new"], settings, tmp_path, follow=True)
        fetched = Counter(e["path"] for e in site.log)
    # the budget of 4 went to the four shortest known URLs, "/" among them
    assert {"/", "/a", "/bb", "/ccc"} <= set(fetched)
    assert not {"/eeeee", "/ffffff", "/ggggggg"} & set(fetched)
