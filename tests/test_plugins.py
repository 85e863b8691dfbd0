"""Plug-ins: loaded by path from the settings, and two from outside the package
(a selector, and a terminal of its own)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scrapy.settings import Settings

from scrapy_recrawl.content.plugin import ContentPlugin
from scrapy_recrawl.content.store import CONTENT_TERMINALS
from scrapy_recrawl.plugin_terminals import (
    default_registry,
    registry_from_settings,
    scorer_from_settings,
)
from scrapy_recrawl.plugins import check_plugins, plugin_classes
from scrapy_recrawl.scoring import Terminal
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import LocalSite, Page, run_crawl
from .third_party_plugin import UrlDepth

DEPTH = "tests.third_party_plugin.UrlDepth"


def test_the_builtin_papers_are_listed_and_off_by_default():
    names = [c.__name__ for c in plugin_classes(Settings())]
    assert names == ["BasketsPlugin", "ContentPlugin", "WebFountainPlugin", "EvidencePlugin"]
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


@pytest.mark.planning  # the webfountain planner is one of the two
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


# ------------------------------------------------- a third-party terminal (registry)


def test_the_builtin_plugins_declare_the_terminals_they_fill():
    assert {t.name for t in ContentPlugin.terminals} == CONTENT_TERMINALS
    reg = default_registry()
    assert reg.get("Q").provider == "scrapy_recrawl.content.plugin.ContentPlugin"
    assert reg.get("due").provider == "scrapy_recrawl.estimate.plugin.BasketsPlugin"
    assert reg.get("t").provider is None and "depth" not in reg


def test_a_third_party_terminal_parses_only_when_its_plugin_is_listed():
    listed = Settings({"RECRAWL_SCORER": "depth * t", "RECRAWL_PLUGINS": {DEPTH: 400}})
    scorer = scorer_from_settings(listed)
    assert scorer.terminals_needed == {"depth", "t"}
    assert scorer.registry.get("depth").provider == DEPTH
    # not listed (or switched off): the one-line "unknown name" refusal
    for settings in (
        {"RECRAWL_SCORER": "depth * t"},
        {"RECRAWL_SCORER": "depth * t", "RECRAWL_PLUGINS": {DEPTH: None}},
    ):
        with pytest.raises(RecrawlSettingError) as err:
            scorer_from_settings(Settings(settings))
        msg = str(err.value)
        assert msg.startswith("RECRAWL_SCORER='depth * t': unknown name 'depth' is not allowed")
        assert "\n" not in msg
    with pytest.raises(RecrawlSettingError, match="did you mean 'NAD'"):
        scorer_from_settings(Settings({"RECRAWL_SCORER": "NADx * t"}))
    # a typo of the plug-in's terminal is told the plug-in's name
    typo = Settings({"RECRAWL_SCORER": "detph * t", "RECRAWL_PLUGINS": {DEPTH: 400}})
    with pytest.raises(RecrawlSettingError, match=r"unknown name 'detph'.*did you mean 'depth'"):
        scorer_from_settings(typo)


def test_a_third_party_terminal_is_computed_turns_its_plugin_on_and_is_documented():
    listed = Settings({"RECRAWL_SCORER": "depth", "RECRAWL_PLUGINS": {DEPTH: 400}})
    scorer = scorer_from_settings(listed)
    state = {
        "n": np.zeros(3),
        "last_visit_cycle": np.zeros(3),
        "url_slashes": np.array([1.0, 3.0, 2.0]),
    }
    np.testing.assert_array_equal(scorer.top_k_state(state, 5, 3), [1, 2, 0])
    del state["url_slashes"]  # the column is the plug-in's: NaN without it
    assert np.isnan(scorer.terminals(state, 5)["depth"]).all()
    assert check_plugins(listed, scorer.terminals_needed) == [UrlDepth]
    assert check_plugins(listed, frozenset({"t"})) == []
    table = registry_from_settings(listed).markdown_table()
    assert (
        f"| `depth` | number of `/` in the URL's path (a third-party plug-in's) | `{DEPTH}` |"
        in table
    )


def test_a_used_terminal_whose_plugin_its_settings_keep_off_is_warned_about(caplog):
    off = Settings({"RECRAWL_PROBE": False})
    with caplog.at_level("WARNING", logger="scrapy_recrawl.plugins"):
        assert check_plugins(off, frozenset({"due", "t"})) == []
    assert "'due'" in caplog.text and "BasketsPlugin is off" in caplog.text
    caplog.clear()
    check_plugins(Settings(), frozenset({"due", "t"}))  # on: nothing to say
    assert "is off" not in caplog.text


class _Clash:
    terminals = (Terminal("t", "a second t", lambda st, *_: st["n"]),)


class _OldStyle:
    terminals = ("depth",)


@pytest.mark.parametrize(
    "plugin, message",
    [(_Clash, "terminal 't' is defined twice"), (_OldStyle, "expected .*Terminal objects")],
)
def test_a_plugin_terminal_must_be_a_new_terminal_object(plugin, message):
    settings = Settings({"RECRAWL_SCORER": "t", "RECRAWL_PLUGINS": {plugin: 400}})
    with pytest.raises(RecrawlSettingError, match=f"RECRAWL_PLUGINS.*{message}"):
        scorer_from_settings(settings)


@pytest.mark.slow
def test_a_third_party_terminal_ranks_a_crawl(tmp_path):
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_PLUGINS": {DEPTH: 400},
        "RECRAWL_SCORER": "depth",  # the deepest paths first
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 4,
        "RECRAWL_NEW_SHARE": 0.0,
    }
    with LocalSite() as site:
        paths = ["/a", "/p", "/x", "/a/b", "/p/q", "/a/b/c", "/a/b/c/d"]
        links = "".join(f'<a href="{p}">{p}</a>' for p in paths)
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for p in paths:
            site.pages[p] = Page(f"<html><body><p>{p} text</p></body></html>".encode())
        run_crawl([site.url + "/"], settings, tmp_path, follow=True)  # warm-up: all
        site.log.clear()
        run_crawl([site.url + "/zzz-new"], settings, tmp_path, follow=True)
        fetched = Counter(e["path"] for e in site.log)
    # the budget of 4 went to the four deepest known URLs (depth 4, 3, 2, 2)
    assert {"/a/b/c/d", "/a/b/c", "/a/b", "/p/q"} <= set(fetched)
    assert not {"/", "/a", "/p", "/x"} & set(fetched)
