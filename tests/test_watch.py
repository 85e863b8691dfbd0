"""Watch only what matters: RECRAWL_WATCH_XPATHS / RECRAWL_WATCH_CSS and a request's
own watch list (meta): only the watched elements are compared; a page with none of them
is compared whole; editing the list re-signs the kept copy (no change). The rule on
bodies, then real crawls of a local site."""

from __future__ import annotations

import logging

import pytest

from scrapy_recrawl.change import ChangeDetector
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import LocalSite, Page, run_crawl

PRICE = '//p[@class="price"]'
MIDDLEWARE = {"DOWNLOADER_MIDDLEWARES": {"scrapy_recrawl.middleware.RecrawlMiddleware": 585}}


def product(price: str, news: str, *, with_price: bool = True, title: str = "Lamp") -> bytes:
    shown = f'<p class="price" data-sku="7">{price}</p>' if with_price else ""
    return (
        f"<html><head><title>{title}</title></head><body><header><p>{news}</p></header>"
        f'<main><h1 class="name">{title}</h1>{shown}<p>A lamp that lights.</p></main>'
        f"<footer>Rendered for you</footer></body></html>"
    ).encode()


def changed(d: ChangeDetector, a: bytes, b: bytes) -> bool:
    sig = [d.signature(x, "http://shop.test/p/1", "text/html") for x in (a, b)]
    return d.compare(*sig).changed


def test_only_the_watched_elements_are_compared():
    whole, watch = ChangeDetector(), ChangeDetector(watch_xpaths=[PRICE])
    before = product("$10", "Sale today")
    elsewhere = product("$10", "Sale tomorrow")
    inside = product("$12", "Sale today")
    assert changed(whole, before, elsewhere) and changed(whole, before, inside)
    assert not changed(watch, before, elsewhere)
    assert changed(watch, before, inside)
    result = watch.compare(
        *(watch.signature(x, "http://a/", "text/html") for x in (before, inside))
    )
    assert (result.added, result.removed, result.modified) == (0, 0, 1)


def test_what_is_inside_a_watched_element_and_its_tag_path_are_kept():
    watch = ChangeDetector(watch_xpaths=["//main"], ignore_xpaths=['//p[@class="price"]'])
    root = watch.tree(product("$10", "news"), "http://a/", "text/html")
    from lxml import etree

    text = etree.tostring(root, encoding="unicode")
    # the ancestors are bare wrappers: the page's path to <main> stays, nothing else
    assert text.startswith("<html><body><main>") and "news" not in text and "footer" not in text
    assert "Lamp" in text and "$10" not in text  # ignored first, inside the watched one too


def test_an_attribute_or_text_xpath_watches_the_element_that_holds_it():
    for xpath in ("//p/@data-sku", '//p[@class="price"]/text()'):
        d = ChangeDetector(watch_xpaths=[xpath])
        assert not changed(d, product("$10", "a"), product("$10", "b"))
        assert changed(d, product("$10", "a"), product("$11", "a"))


def test_css_selectors_are_translated_and_combined_with_xpaths():
    d = ChangeDetector.from_settings(
        {"RECRAWL_WATCH_CSS": ["p.price"], "RECRAWL_WATCH_XPATHS": ["//h1"]}
    )
    assert len(d.watch_xpaths) == 2
    assert not changed(d, product("$10", "a"), product("$10", "b"))
    assert changed(d, product("$10", "a"), product("$11", "a"))
    assert changed(d, product("$10", "a"), product("$10", "a", title="Big lamp"))
    with pytest.raises(RecrawlSettingError, match="RECRAWL_WATCH_CSS: bad CSS selector"):
        ChangeDetector.from_settings({"RECRAWL_WATCH_CSS": ["p..price"]})
    with pytest.raises(RecrawlSettingError, match="RECRAWL_WATCH_XPATHS: bad XPath"):
        ChangeDetector.from_settings({"RECRAWL_WATCH_XPATHS": ["//p["]})


def test_a_page_without_a_watched_element_is_compared_whole():
    d = ChangeDetector(watch_xpaths=[PRICE])
    a, b = (product("$10", n, with_price=False) for n in ("old news", "new news"))
    assert changed(d, a, b)  # no price on either: the whole page
    assert not changed(d, a, a)
    # the price disappearing (or appearing) is a change of what is watched
    assert changed(d, product("$10", "x"), product("$10", "x", with_price=False))


def test_without_a_watch_list_signatures_are_those_of_before():
    """The rules hash (kept in every signature) of a detector without a watch list is the
    release's: no stored signature is signed again by this feature."""
    assert ChangeDetector().rules == 1612634390898477786
    assert ChangeDetector(ignore_xpaths=["//footer"]).rules == 6099479145437002059
    assert ChangeDetector(watch_xpaths=[]).rules == ChangeDetector().rules
    watch = ChangeDetector(watch_xpaths=[PRICE])
    assert watch.rules != ChangeDetector().rules
    assert not ChangeDetector().same_rules(watch.signature(product("$1", "a"), "http://a/", None))


def test_a_requests_own_watch_list(caplog):
    d = ChangeDetector()
    assert d.for_request({}) is d
    mine = d.for_request({"recrawl_watch_xpaths": [PRICE]})
    assert (
        mine.watch_xpaths == (PRICE,) and d.for_request({"recrawl_watch_xpaths": [PRICE]}) is mine
    )
    assert not changed(mine, product("$10", "a"), product("$10", "b"))
    css = d.for_request({"recrawl_watch_css": "p.price"})
    assert not changed(css, product("$10", "a"), product("$10", "b"))
    # a request's [] watches the whole page even where the settings watch a part
    w = ChangeDetector(watch_xpaths=[PRICE])
    assert w.for_request({"recrawl_watch_xpaths": []}).watch_xpaths == ()
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert d.for_request({"recrawl_watch_xpaths": ["//p["]}) is d
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "meta['recrawl_watch_xpaths']: bad XPath '//p['" in lines[0]


# -- real crawls ---------------------------------------------------------------------------


def _changed(result: dict) -> dict[str, bool | None]:
    return {
        i["url"].rsplit("/", 1)[1]: None if i["recrawl"] is None else i["recrawl"]["changed"]
        for i in result["items"]
        if i["flags"] != ["recrawl:new"]
    }


def test_a_crawl_compares_only_the_watched_element(tmp_path):
    """A change outside the watched element is no change, inside it is; then the watch
    list edited (to the whole <main>) is no change either: the kept copy is signed again."""
    with LocalSite() as site:
        site.pages["/p/1"] = Page(product("$10", "Sale today"))
        site.pages["/p/2"] = Page(product("$20", "Sale today"))
        urls = [site.url + "/p/1", site.url + "/p/2"]
        settings = {
            **MIDDLEWARE,
            "RECRAWL_STORE": str(tmp_path / "h.sqlite3"),
            "RECRAWL_WATCH_XPATHS": [PRICE],
            "RECRAWL_LEARN_BOILERPLATE": False,
        }
        run_crawl(urls, settings, tmp_path)
        site.pages["/p/1"] = Page(product("$10", "Sale tomorrow"))  # outside
        site.pages["/p/2"] = Page(product("$25", "Sale today"))  # inside
        assert _changed(run_crawl(urls, settings, tmp_path)) == {"1": False, "2": True}
        site.pages["/p/1"] = Page(product("$10", "Sale next week"))
        edited = {**settings, "RECRAWL_WATCH_XPATHS": ["//main"]}
        result = run_crawl(urls, edited, tmp_path)
        assert _changed(result) == {"1": False, "2": False}
        assert result["stats"]["recrawl/resigned"] == 2


@pytest.mark.slow
def test_a_crawl_with_a_watch_list_in_the_requests_meta(tmp_path):
    with LocalSite() as site:
        site.pages["/p/1"] = Page(product("$10", "Sale today"))
        urls = [site.url + "/p/1"]
        settings = {**MIDDLEWARE, "RECRAWL_STORE": str(tmp_path / "h.sqlite3")}
        meta = {"recrawl_watch_css": ["p.price"]}
        run_crawl(urls, settings, tmp_path, meta=meta)
        site.pages["/p/1"] = Page(product("$10", "Sale tomorrow"))
        assert _changed(run_crawl(urls, settings, tmp_path, meta=meta)) == {"1": False}
        site.pages["/p/1"] = Page(product("$11", "Sale tomorrow"))
        assert _changed(run_crawl(urls, settings, tmp_path, meta=meta)) == {"1": True}
        # the same page without the request's list: the whole page, from the kept copy
        site.pages["/p/1"] = Page(product("$11", "Sale next week"))
        result = run_crawl(urls, settings, tmp_path)
        assert result["stats"]["recrawl/resigned"] == 1
        assert _changed(result) == {"1": True}
