"""Plug-ins: loaded by path from the settings, two from outside the package (a selector,
and a terminal of its own), and the check of what a plug-in declares (scrapy_recrawl.api)."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from scrapy.settings import Settings

from scrapy_recrawl.api import API_VERSION, Plugin, declared, plugin_problems
from scrapy_recrawl.content.plugin import ContentPlugin
from scrapy_recrawl.content.store import CONTENT_TERMINALS, ContentSettings
from scrapy_recrawl.core.plugins import warn_problems
from scrapy_recrawl.history.base import HistoryStore, Visit
from scrapy_recrawl.plugin_terminals import (
    default_registry,
    registry_from_settings,
    scorer_from_settings,
)
from scrapy_recrawl.plugins import check_plugins, plugin_classes
from scrapy_recrawl.scoring import Terminal
from scrapy_recrawl.settings import RecrawlSettingError
from scrapy_recrawl.testing import assert_plugin, make_sqlite_store

from .helpers import LocalSite, Page, run_crawl
from .third_party_plugin import ShortestUrlsFirst, UrlDepth

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


# ------------------------------------------- declared capabilities, checked at load


class _Declared(Plugin):
    """A correct plug-in: a column provider and a visit hook, with a helper method."""

    api_version = "1"
    capabilities = frozenset({"columns", "visit_hook"})

    def columns(self, arrays, now):
        return {}

    def visited(self, visit, record, *extra):  # more it may take is fine
        pass

    def helper_of_its_own(self):  # a helper of another name: fine
        pass


class _Misspelled(Plugin):
    api_version = "1"
    capabilities = frozenset({"columns"})

    def colums(self, arrays, now):
        return {}


class _Missing(Plugin):
    api_version = "1"
    capabilities = frozenset({"probes"})

    def cap(self, budget_total):
        return None

    def has_due(self):
        return False

    def pop_due(self):
        return None

    def dispatched(self, fingerprint, url_id):
        pass


class _WrongSignature(_Declared):
    def columns(self, arrays):  # the crawl calls columns(arrays, now)
        return {}


class _WrongVersion(_Declared):
    api_version = "2"


def _one_line(cls):
    found = plugin_problems(cls)
    assert len(found) == 1, found
    assert "\n" not in found[0] and f"{cls.__module__}.{cls.__qualname__}" in found[0]
    return found[0]


def test_a_correct_plugin_and_the_builtin_papers_have_no_problem():
    assert plugin_problems(_Declared) == []
    assert_plugin(_Declared)  # the test kit's check is the same
    for cls in [*plugin_classes(Settings()), UrlDepth, ShortestUrlsFirst]:
        assert plugin_problems(cls) == [], cls


def test_a_misspelled_method_is_one_line_naming_it():
    line = _one_line(_Misspelled)
    assert "columns(arrays, now) of the 'columns' capability" in line
    assert "colums()" in line and "misspelling" in line
    # not declared, a near miss is still one line: the crawl would never call it
    undeclared = type("_Undeclared", (_Misspelled,), {"capabilities": frozenset()})
    assert "colums() looks like a misspelling of columns()" in _one_line(undeclared)


def test_a_missing_method_is_one_line_naming_it():
    line = _one_line(_Missing)
    assert "lacks next_due_time() of the 'probes' capability" in line
    with pytest.raises(AssertionError, match="next_due_time"):
        assert_plugin(_Missing)


def test_a_wrong_signature_is_one_line_naming_it():
    line = _one_line(_WrongSignature)
    assert "columns() of the 'columns' capability has the signature" in line
    assert "the crawl calls columns(arrays, now)" in line
    instance_enabled = type(
        "_InstanceEnabled", (_Declared,), {"enabled": lambda self, settings, needed: True}
    )
    assert "enabled() is not a classmethod" in _one_line(instance_enabled)


def test_an_api_version_the_package_does_not_speak_is_one_line():
    line = _one_line(_WrongVersion)
    assert "targets plug-in API version '2'" in line and f"{API_VERSION!r}" in line
    unversioned = type("_Unversioned", (_Declared,), {"api_version": None})
    assert "declares no api_version" in _one_line(unversioned)


def test_declarations_that_cannot_be_right_are_one_line_each():
    unknown = type("_Unknown", (_Declared,), {"capabilities": ("columns", "visit_hooks")})
    assert "unknown capability 'visit_hooks' (did you mean 'visit_hook'?)" in _one_line(unknown)
    a_string = type("_AString", (_Declared,), {"capabilities": "columns"})
    assert "must be a collection of names" in _one_line(a_string)
    # every method of a capability but no declaration: the crawl would not call it
    silent = type("_Silent", (_Declared,), {"capabilities": frozenset({"columns"})})
    assert "has visited() but does not declare 'visit_hook'" in _one_line(silent)
    # no declaration at all: the line says what to declare for the methods it has
    undeclared = type("_NoDeclaration", (_Declared,), {"capabilities": None})
    assert (
        "declares no capabilities (it has the methods of 'columns', 'visit_hook', never "
        "called without capabilities = frozenset({'columns', 'visit_hook'}))"
    ) in _one_line(undeclared)
    # selects and the selector declaration say one thing
    selects = type("_Selects", (_Declared,), {"selects": True})
    assert "selects = True but 'selector' is not in its capabilities" in _one_line(selects)


def test_the_problems_are_logged_one_line_each_at_start_up(caplog):
    with caplog.at_level("WARNING", logger="scrapy_recrawl.plugins"):
        found = warn_problems([_Declared, _Misspelled, _Missing, _Missing, _WrongVersion])
    assert len(found) == 3  # a class listed twice is said once
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"recrawl: {line}" for line in found]
    assert [r.levelname for r in caplog.records] == ["WARNING"] * 3


def test_the_crawl_calls_only_what_a_plugin_declares(tmp_path):
    """``declared`` replaces the undocumented ``keeps_bags`` switch: the content
    plug-in declares "bag_keeper", and an instance that keeps no bag in this crawl
    (no chi-squared rule, no D* terminal) narrows its declaration."""
    store = make_sqlite_store(tmp_path)
    try:
        settings = Settings({"RECRAWL_CHANGE_TEST": "chi2"})
        chi2 = ContentPlugin(store, ContentSettings.from_settings(settings), frozenset())
        assert declared(chi2, "bag_keeper") and declared(chi2, "columns")
        plain = ContentPlugin(store, ContentSettings.from_settings(Settings()), frozenset({"Q"}))
        assert not declared(plain, "bag_keeper") and declared(plain, "columns")
        assert declared(ContentPlugin, "bag_keeper")  # the class declares what it may offer
        d1 = ContentPlugin(store, ContentSettings.from_settings(Settings()), frozenset({"D1"}))
        assert declared(d1, "bag_keeper")
    finally:
        store.close()
    assert not declared(object(), "columns")
    with pytest.raises(ValueError, match="unknown plug-in capability 'column'"):
        declared(ContentPlugin, "column")


def test_the_public_api_names_what_a_plugin_author_uses():
    import scrapy_recrawl.api as api

    assert api.API_VERSION in api.API_VERSIONS
    assert set(api.PLUGIN_CAPABILITIES) == {
        "columns",
        "selector",
        "probes",
        "bag_keeper",
        "visit_hook",
    }
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert api.HistoryStore is HistoryStore and api.Visit is Visit


def test_a_listed_plugin_with_a_misspelled_method_is_said_once_at_start_up(caplog):
    from scrapy_recrawl.startup import check_settings

    settings = Settings({"RECRAWL_PLUGINS": {f"{__name__}._Misspelled": 500}})
    with caplog.at_level("WARNING", logger="scrapy_recrawl"):
        for _ in range(3):  # the add-on, the middleware, the scheduler
            check_settings(settings)
    said = [r.getMessage() for r in caplog.records if "_Misspelled" in r.getMessage()]
    assert said == [f"recrawl: {_one_line(_Misspelled)}"]
    assert "colums()" in said[0]


@pytest.mark.slow
def test_a_third_party_visit_hook_sees_every_recorded_visit_and_its_change(tmp_path):
    """The example package's ChangeStreak (examples/plugin, installed by `make test`):
    its hook counts the visits in a row that saw a page changed."""
    example = pytest.importorskip("recrawl_example_plugin", reason="pip install -e examples/plugin")
    from scrapy_recrawl.history import SqliteHistoryStore

    from .helpers import REPO

    # the crawl's process imports the package from where this one found it
    where = os.pathsep.join([str(REPO), os.path.dirname(os.path.dirname(example.__file__))])

    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_PLUGINS": {"recrawl_example_plugin.ChangeStreak": 500},
        "RECRAWL_SCORER": "streak + t",  # uses its terminal: the plug-in is on
        "RECRAWL_WARMUP_CYCLES": 5,  # every known URL recrawled each time
    }
    with LocalSite() as site:
        site.pages["/still"] = Page(b"<html><body><p>the same text each time</p></body></html>")
        for version in range(3):
            words = " ".join(f"w{version}x{i}" for i in range(60))
            site.pages["/moving"] = Page(f"<html><body><p>{words}</p></body></html>".encode())
            run_crawl(
                [site.url + "/moving", site.url + "/still"],
                settings,
                tmp_path,
                env={"PYTHONPATH": where},
            )
        url = site.url
    store = SqliteHistoryStore(tmp_path / "history.sqlite3", read_only=True)
    store.open()
    try:
        arrays = store.arrays()
        ids = dict(zip(store.urls(arrays.ids), arrays.ids.tolist(), strict=True))
        kept = {k: int.from_bytes(v, "big") for k, v in store.side_items("change_streak")}
    finally:
        store.close()
    # /moving: first fetch (no observation), then changed twice; /still: never changed
    assert kept == {ids[url + "/moving"]: 2}
