"""One runtime per crawler (scrapy_recrawl/runtime.py): each crawler's components share
one store, one scorer, one set of plug-ins and one of each tally; two crawlers in one
process share nothing; and no module of the package keeps per-crawl state in a
module-level registry."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from scrapy_recrawl.cycle_summary import tally_for_crawler
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.hubs import hubs_for_crawler
from scrapy_recrawl.last_modified import tally_for_crawler as last_modified_tally
from scrapy_recrawl.plugins import scorer_for_crawler
from scrapy_recrawl.runtime import (
    CrawlerRuntime,
    before_close,
    release_store,
    store_for_crawler,
)
from scrapy_recrawl.scope import off_reason

from .helpers import REPO, LocalSite, Page

PACKAGE = REPO / "scrapy_recrawl"
SCRIPT = Path(__file__).with_name("two_spiders_script.py")


# -- no module-level registry ------------------------------------------------------


def registries(source: str) -> list[str]:
    """The module-level registries of per-crawl state in ``source``: a weak-keyed (or
    weak-valued) dictionary anywhere in it, and a module-level name subscripted, or
    read with get/pop/setdefault, by ``id(...)``."""
    tree = ast.parse(source)
    found: list[str] = []
    module_names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        module_names.update(t.id for t in targets if isinstance(t, ast.Name))

    def is_id_call(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"
        )

    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in ("WeakKeyDictionary", "WeakValueDictionary"):
            found.append(f"line {node.lineno}: {name}")
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_names
            and is_id_call(node.slice)
        ):
            found.append(f"line {node.lineno}: {node.value.id}[id(...)]")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in module_names
            and node.args
            and is_id_call(node.args[0])
        ):
            found.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}(id(...))")
    return sorted(set(found), key=lambda hit: int(hit.split()[1].rstrip(":")))


def test_the_registry_check_finds_the_registries_it_is_for():
    """What the package had before the runtime (issue 30): each is found."""
    before = """
import weakref
_STORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CHECKED: dict = {}
def check(settings):
    ref, failure = _CHECKED[id(settings)]
    _CHECKED.pop(id(settings), None)
    def local():
        cache = {}
        return cache[id(settings)]  # a local cache: not a module's
"""
    assert registries(before) == [
        "line 3: WeakKeyDictionary",
        "line 6: _CHECKED[id(...)]",
        "line 7: _CHECKED.pop(id(...))",
    ]


def test_no_module_keeps_per_crawl_state_in_a_registry():
    """Per-crawl state lives on the crawler's runtime (or the object Scrapy built), never
    in a module global keyed by crawler or settings."""
    found = {
        str(path.relative_to(REPO)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if (hits := registries(path.read_text(encoding="utf-8")))
    }
    assert found == {}


# -- one runtime per crawler, in process -----------------------------------------


class Alpha(scrapy.Spider):
    name = "alpha"


class Beta(scrapy.Spider):
    name = "beta"


def crawler_for(spidercls, tmp_path, **settings):
    crawler = get_crawler(
        spidercls, {"RECRAWL_STORE": str(tmp_path / "%(spider)s.sqlite3"), **settings}
    )
    crawler.spider = spidercls()  # a crawl (scope.off_reason), not `scrapy shell`
    return crawler


def test_each_crawler_has_one_runtime_and_its_own_parts(tmp_path):
    a = crawler_for(Alpha, tmp_path, RECRAWL_SCORER="aad+")
    b = crawler_for(Beta, tmp_path, RECRAWL_SCORER="nutch")
    assert CrawlerRuntime.of(a) is CrawlerRuntime.of(a) is CrawlerRuntime.from_crawler(a)
    assert CrawlerRuntime.of(a) is not CrawlerRuntime.of(b)
    for get in (tally_for_crawler, hubs_for_crawler, last_modified_tally, scorer_for_crawler):
        assert get(a) is get(a)
        assert get(a) is not get(b)
    assert (scorer_for_crawler(a).name, scorer_for_crawler(b).name) == ("aad+", "nutch")
    assert tally_for_crawler(a).stats is a.stats and tally_for_crawler(b).stats is b.stats
    # the off switch, decided once per crawler: a's by the first to ask
    assert off_reason(a) is None
    b.spider = None
    b.crawling = False
    assert off_reason(b, building_engine=True) == "scrapy shell"
    assert off_reason(a, building_engine=True) is None  # decided: not asked again


def test_each_crawler_has_its_own_store_closed_on_its_own(tmp_path):
    a = crawler_for(Alpha, tmp_path)
    b = crawler_for(Beta, tmp_path)
    store_a, store_b = store_for_crawler(a), store_for_crawler(b)
    assert store_for_crawler(a) is store_a and store_a is not store_b
    assert (store_a.owner(), store_b.owner()) == ("alpha", "beta")
    said: list[str] = []
    before_close(a, lambda: said.append("a") or 0)
    before_close(b, lambda: said.append("b") or 0)
    store_a.record(Visit(b"fp-a", "https://a.example/", 1.0, 200))
    release_store(a)  # as the recrawl scheduler's close() does
    assert said == ["a"]  # b's hook waits for b's store
    release_store(a)  # closed once
    assert said == ["a"]
    assert len(store_b) == 0  # b's store still open, and empty: a's visit is a's
    again = store_for_crawler(a)  # asked for after its release: opened anew
    assert again is not store_a and len(again) == 1
    release_store(a)
    release_store(b)
    assert said == ["a", "b"]


# -- two spiders run by one CrawlerProcess -----------------------------------------


@pytest.mark.slow
def test_two_spiders_in_one_process_share_nothing(tmp_path):
    """Two spiders, two settings (scorer, plug-ins), one CrawlerProcess: each crawler's
    runtime holds its own store, scorer, plug-ins and tallies, its tally counts its own
    visits, and each store holds its own spider's pages only."""
    with LocalSite() as site:
        for path in ("/a0", "/a1", "/a2", "/b0", "/b1"):
            site.pages[path] = Page(f"<html><body><p>{path}</p></body></html>".encode())
        args = {"site": site.url, "store": str(tmp_path / "%(spider)s.sqlite3")}
        out = subprocess.run(
            [sys.executable, str(SCRIPT), json.dumps(args)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120,
        )
    assert out.returncode == 0, out.stderr[-4000:]
    held = json.loads(out.stdout)
    alpha, beta = held["alpha"], held["beta"]
    assert alpha["runtime"] != beta["runtime"]
    assert alpha["runtime_crawler_is_this"] and beta["runtime_crawler_is_this"]
    for part in alpha["parts"]:
        assert alpha["parts"][part] != beta["parts"][part], part
    assert (alpha["scorer"], beta["scorer"]) == ("aad+", "nutch")
    assert (alpha["plugins"], beta["plugins"]) == ([], ["ShortestUrlsFirst"])
    assert alpha["tally_stats_are_this_crawlers"] and beta["tally_stats_are_this_crawlers"]
    assert (alpha["items"], beta["items"]) == (3, 2)
    assert (alpha["fetched"], beta["fetched"]) == (3, 2)  # each tally its own visits
    assert not alpha["refused"] and not beta["refused"]
    assert alpha["off"] is None and beta["off"] is None
    for name, paths in (("alpha", ["/a0", "/a1", "/a2"]), ("beta", ["/b0", "/b1"])):
        with SqliteHistoryStore(str(tmp_path / f"{name}.sqlite3")) as store:
            assert store.owner() == name
            assert sorted(store.urls(store.arrays().ids)) == [site.url + p for p in paths]
