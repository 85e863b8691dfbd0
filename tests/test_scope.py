"""What enters the history (scrapy_recrawl.scope) and the once-per-cycle rule of a
frontier (frontier/base.py: first_fetch), without a crawl; tests/test_project.py and
tests/test_once_per_cycle.py crawl them for real."""

from __future__ import annotations

from types import SimpleNamespace

import scrapy
from scrapy.http import HtmlResponse, Request
from scrapy.http.request import NO_CALLBACK
from scrapy.spiders import SitemapSpider
from scrapy.utils.request import RequestFingerprinter

from scrapy_recrawl.core.meta import META_ID
from scrapy_recrawl.frontier.local import LocalFrontier, is_new
from scrapy_recrawl.scope import not_a_page, off_reason


class Maps(SitemapSpider):
    name = "maps"
    sitemap_urls = ["https://example.com/sitemap.xml"]


class Pages(scrapy.Spider):
    name = "pages"


def test_only_the_spiders_pages_are_pages():
    url = "https://example.com/a"
    page = Request(url)
    assert not_a_page(page) is None and is_new(page)
    maps = Maps()
    cases = {
        "method": [Request(url, method="HEAD"), Request(url, method="POST")],
        "dont_recrawl": [Request(url, meta={"dont_recrawl": True})],
        "no_callback": [Request(url + "/robots.txt", callback=NO_CALLBACK)],
        "sitemap": [Request(maps.sitemap_urls[0], callback=maps._parse_sitemap)],
    }
    for why, requests in cases.items():
        for request in requests:
            assert not_a_page(request) == why, request
            assert not is_new(request)  # never budgeted, never kept to recrawl
    # a sitemap spider's pages are pages; another spider's method of that name is too
    assert not_a_page(Request(url, callback=maps.parse)) is None
    cached = HtmlResponse(url, body=b"<html></html>", flags=["cached"], request=page)
    assert not_a_page(page, cached) == "cached"
    assert not_a_page(page, HtmlResponse(url, body=b"<html></html>", request=page)) is None


class _Crawler:  # what off_reason() reads of a crawler (its runtime is kept on it, as on one)
    def __init__(self, spidercls, spider=None, crawling=True):
        self.spidercls, self.spider, self.crawling = spidercls, spider, crawling


def _crawler(spidercls, *, spider=None, crawling=True):
    return _Crawler(spidercls, spider, crawling)


def test_scrapys_commands_that_look_at_one_url_are_recognised():
    for command in ("fetch", "parse", "check", "view", "bench"):

        class Looked(scrapy.Spider):
            name = "looked"

        async def start(self):
            yield Request("https://example.com/")

        start.__module__ = f"scrapy.commands.{command}"  # as the command defines it
        Looked.start = start
        assert off_reason(_crawler(Looked)) == f"scrapy {command}"
    # scrapy shell: the engine (and so the middleware) is built before any spider
    assert off_reason(_crawler(Pages, crawling=False), building_engine=True) == "scrapy shell"
    # a crawl, or a scheduler opened outside one (Scrapy's own tests): on
    assert off_reason(_crawler(Pages, spider=Pages())) is None
    assert off_reason(_crawler(Pages, crawling=False)) is None


def _frontier() -> LocalFrontier:
    # what first_fetch() uses of its scheduler (frontier/base.py: SchedulerHost)
    host = SimpleNamespace(
        recrawl_queue=list,
        fingerprint=RequestFingerprinter().fingerprint,
        dropped=lambda request: None,
        inc_stat=lambda *a, **k: None,
    )
    return LocalFrontier(host)  # type: ignore[arg-type]


def test_each_url_once_per_cycle_with_two_exceptions_asked_for_explicitly():
    url = "https://example.com/a"
    f = _frontier()
    assert f.first_fetch(Request(url))  # a link, a new URL
    assert not f.first_fetch(Request(url))
    assert not f.first_fetch(Request(url, dont_filter=True))  # a start URL, after the link
    assert not f.first_fetch(Request(url, meta={META_ID: 1}))  # a recrawl
    assert f.first_fetch(Request(url, meta={"retry_times": 1}))  # the same fetch, retried
    assert f.first_fetch(Request(url, method="HEAD"))  # not a page: not counted
    # the spider's own dont_filter duplicates go out, as Scrapy sends them
    f = _frontier()
    assert all(f.first_fetch(Request(url, dont_filter=True)) for _ in range(3))
    redirected = Request(url, dont_filter=True, meta={"redirect_urls": ["https://e.com/x"]})
    assert f.first_fetch(redirected)  # their redirects too (RedirectMiddleware keeps it)
    assert not f.first_fetch(Request(url))  # but nothing else after them
    # a probe: not after a fetch since it came due; yes after a fetch before that
    f = _frontier()
    assert f.first_fetch(Request(url, meta={META_ID: 1}))
    fetched_at = f.fetched[RequestFingerprinter().fingerprint(Request(url))][0]
    assert not f.first_fetch(Request(url), due=fetched_at - 1)
    assert f.first_fetch(Request(url), due=fetched_at + 1)
    assert not f.first_fetch(Request(url, dont_filter=True))
