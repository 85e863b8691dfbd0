"""The spider middleware's item watch (skip.py, item_watch.py) over a real SQLite store:
statuses as a callback yields, removed items at the output's end, records kept through
side storage, per-item skip, the async path, and a failed callback (the page keeps its
previous record, a held visit its text verdict)."""

from __future__ import annotations

import asyncio

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from scrapy_recrawl.held_observations import META_HELD, HeldObservations
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.item_change import ITEMS_TABLE
from scrapy_recrawl.item_watch import META_ITEMS
from scrapy_recrawl.skip import RecrawlSpiderMiddleware
from scrapy_recrawl.visit_recorder import META_ITEMS_PAGE


class Shop(Spider):
    name = "shop"


@pytest.fixture
def store(tmp_path):
    with SqliteHistoryStore(str(tmp_path / "h.sqlite3")) as s:
        yield s


def middleware(store, **settings):
    crawler = get_crawler(
        Shop, {"RECRAWL_ITEM_VALUES": True, "RECRAWL_ITEM_CHANGES": True, **settings}
    )
    crawler.spider = Shop()
    mw = RecrawlSpiderMiddleware(crawler)
    assert mw.watch is not None
    mw.watch._store = store  # the crawl's open store, as store_for_crawler gives it
    return mw


def response(page_id: int = 7, held=None) -> HtmlResponse:
    meta = {META_ITEMS_PAGE: page_id}
    if held is not None:
        meta[META_HELD] = held
    request = Request("http://shop.test/list", meta=meta)
    return HtmlResponse(request.url, body=b"<html></html>", request=request)


def run(mw, resp, items):
    return list(mw.process_spider_output(resp, iter(items)))


def test_statuses_removed_and_the_record_kept(store):
    mw = middleware(store, RECRAWL_ITEM_KEY=["sku"])
    first = response()
    out = run(mw, first, [{"sku": "a", "price": 1}, {"sku": "b", "price": 2}])
    assert len(out) == 2 and [c.status for c in first.meta[META_ITEMS].changes] == ["new", "new"]
    assert first.meta[META_ITEMS].page_changed is None  # nothing to compare with yet
    mw.watch.flush()
    assert store.side_get(ITEMS_TABLE, [7])[0] is not None
    second = response()
    b = {"sku": "b", "price": 3}
    c = {"sku": "c", "price": 4}
    run(mw, second, [b, c, Request("http://shop.test/next")])
    changes = second.meta[META_ITEMS]
    assert changes.complete and changes.page_changed is True
    assert changes.status(b).status == "changed" and changes.status(b).old == {"price": 2}
    assert changes.status(c).status == "new"
    assert [(r.status, r.old["sku"]) for r in changes.removed] == [("removed", "a")]
    assert b == {"sku": "b", "price": 3}  # the user's item is untouched


def test_per_item_skip_keeps_new_and_changed_only(store):
    mw = middleware(store, RECRAWL_CHANGE_SIGNAL="items", RECRAWL_SKIP_UNCHANGED="items")
    run(mw, response(), [{"n": 1}, {"n": 2}])
    out = run(mw, response(), [{"n": 1}, {"n": 5}, {"n": 3}, Request("http://shop.test/x")])
    assert out[0] == {"n": 5} and out[1] == {"n": 3} and isinstance(out[2], Request)
    assert mw.stats.get_value("recrawl/skipped_items") == 1


def test_async_output_and_a_held_visit_gets_the_items_verdict(store):
    mw = middleware(store, RECRAWL_CHANGE_SIGNAL="items")
    recorded = []
    held = HeldObservations(lambda obs, changed: recorded.append(changed), bound=10, max_age=60)
    visit = Visit(
        fingerprint=b"f" * 8, url="http://shop.test/list", time=0.0, status=200, changed=True
    )

    async def items(values):
        for v in values:
            yield {"price": v}

    async def drain(resp, values):
        return [o async for o in mw.process_spider_output_async(resp, items(values))]

    asyncio.run(drain(response(held=held.hold("r1", visit)), [1, 2]))
    assert recorded == [None]  # the page's first items: no verdict, the text's stands
    asyncio.run(drain(response(held=held.hold("r2", visit)), [1, 2]))
    assert recorded[-1] is False  # the text said changed; the items did not change
    asyncio.run(drain(response(held=held.hold("r3", visit)), [1, 9]))
    assert recorded[-1] is True


def test_a_failed_callback_keeps_the_previous_record_and_the_text_verdict(store):
    mw = middleware(store)
    recorded = []
    held = HeldObservations(lambda obs, changed: recorded.append(changed), bound=10, max_age=60)
    visit = Visit(
        fingerprint=b"f" * 8, url="http://shop.test/list", time=0.0, status=200, changed=True
    )
    run(mw, response(), [{"price": 1}])

    def broken():
        yield {"price": 2}
        raise ValueError("the callback failed")

    with pytest.raises(ValueError):
        run(mw, response(held=held.hold("r", visit)), broken())
    assert recorded == [None]
    third = response()
    run(mw, third, [{"price": 1}])
    assert third.meta[META_ITEMS].page_changed is False  # compared with the kept record


def test_a_response_the_crawl_did_not_record_passes_untouched(store):
    mw = middleware(store, RECRAWL_CHANGE_SIGNAL="items", RECRAWL_SKIP_UNCHANGED="items")
    request = Request("http://shop.test/other")
    resp = HtmlResponse(request.url, body=b"", request=request)
    assert run(mw, resp, [{"n": 1}]) == [{"n": 1}]
    assert META_ITEMS not in resp.meta


def test_the_change_feed_setting_reads_as_feeds():
    from scrapy_recrawl.change_feed import feeds_of
    from scrapy_recrawl.settings import RecrawlSettingError

    assert feeds_of("file:///tmp/c.jsonl") == {"file:///tmp/c.jsonl": {"format": "jsonlines"}}
    assert feeds_of({"s3://b/c.csv": {"format": "csv"}}) == {"s3://b/c.csv": {"format": "csv"}}
    with pytest.raises(RecrawlSettingError, match="RECRAWL_CHANGE_FEED"):
        feeds_of({"file:///tmp/c.jsonl": "jsonlines"})


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("nosuch://x/c.jsonl", "no feed storage for 'nosuch'"),
        ({"file:///tmp/c.x": {"format": "yaml"}}, "no feed exporter for the format 'yaml'"),
    ],
)
def test_a_feed_scrapy_cannot_write_is_refused_at_start_up(value, words):
    from scrapy.settings import Settings

    from scrapy_recrawl.settings import RecrawlSettingError
    from scrapy_recrawl.startup import check_settings

    with pytest.raises(RecrawlSettingError, match=words):
        check_settings(Settings({"RECRAWL_CHANGE_FEED": value}))
    check_settings(Settings({"RECRAWL_CHANGE_FEED": "/tmp/changes.jsonl"}))  # a path: a file


def test_a_request_made_with_the_pages_meta_is_not_taken_for_that_page(tmp_path):
    """``Request(url, meta=response.meta)`` (Scrapy's usual way to pass data along)
    copies the page's one-download keys (its URL id, its held visit). A response the
    crawl does not record (a POST here; a cached or dont_recrawl one alike) must not be
    compared as that page, nor replace its record: the page's next visit, the same,
    would be judged changed against the other request's items."""
    from scrapy import signals

    from scrapy_recrawl.middleware import RecrawlMiddleware

    crawler = get_crawler(
        Shop,
        {
            "RECRAWL_STORE": str(tmp_path / "h.sqlite3"),
            "RECRAWL_CHANGE_SIGNAL": "items",
            "RECRAWL_LEARN_BOILERPLATE": False,
        },
    )
    crawler.spider = Shop.from_crawler(crawler)
    down = RecrawlMiddleware.from_crawler(crawler)
    crawler.signals.send_catch_log(signals.spider_opened, spider=crawler.spider)
    down.store.claim("shop")
    mw = RecrawlSpiderMiddleware(crawler)
    assert mw.watch is not None
    mw.watch._store = down.store

    def page(request: Request, items: list) -> HtmlResponse:
        body = b"<html><body><p>the same page, every visit</p></body></html>"
        resp = HtmlResponse(request.url, body=body, request=request)
        assert down.process_response(request, resp) is resp
        run(mw, resp, items)
        return resp

    first = page(Request("http://shop.test/p"), [{"sku": "a", "price": 1}])
    other = Request("http://shop.test/search", method="POST", meta=first.meta)
    searched = page(other, [{"sku": "zz", "price": 9}])
    assert searched.meta[META_ITEMS] is first.meta[META_ITEMS]  # the copy, not a watch
    again = page(Request("http://shop.test/p"), [{"sku": "a", "price": 1}])
    assert again.meta[META_ITEMS].page_changed is False


def test_a_spiders_item_key_given_as_one_string_reads_as_the_setting_does(store):
    """``recrawl_item_key = "sku"`` (one field, as ``-s RECRAWL_ITEM_KEY=sku`` reads):
    the key is the sku, not the fields "s", "k", "u" (every item keyed by position)."""
    mw = middleware(store)
    mw.crawler.spider.recrawl_item_key = "sku"
    run(mw, response(), [{"sku": "a", "price": 1}, {"sku": "b", "price": 2}])
    again = response()
    run(mw, again, [{"sku": "b", "price": 2}, {"sku": "a", "price": 1}])  # reordered
    assert again.meta[META_ITEMS].page_changed is False
