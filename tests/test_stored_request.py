"""What of a request is stored for its recrawls (stored_request.py), what never is
(history/request_scrub.py), and store files readable by their owner only."""

from __future__ import annotations

import os
import stat

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.request_codec import decode_request, encode_stored
from scrapy_recrawl.history.request_scrub import scrub_request, without_credentials
from scrapy_recrawl.settings import RecrawlSettingError
from scrapy_recrawl.startup import check_settings
from scrapy_recrawl.stored_request import META_AS_MADE, StoredRequests


def _d(**kw):
    return {"url": "http://h/p", "method": "GET", "headers": {}, "meta": {}, **kw}


def test_credentials_and_cookies_are_never_stored():
    d = _d(
        headers={
            b"authorization": [b"Bearer t"],  # any case
            b"Proxy-Authorization": [b"Basic x"],
            "Cookie": ["a=1"],
            b"X-Mine": [b"kept"],
        },
        cookies={"session": "s"},
        meta={
            "http_user": "u",
            "http_pass": "p",
            "_auth_proxy": "http://proxy:1",
            "_scheme_proxy": True,
            "proxy": "http://user:pw@proxy.example:3128",
            "tag": "kept",
        },
    )
    out = scrub_request(d)
    assert out["headers"] == {b"X-Mine": [b"kept"]}
    assert "cookies" not in out
    assert out["meta"] == {"proxy": "http://proxy.example:3128", "tag": "kept"}
    assert d["headers"][b"authorization"] == [b"Bearer t"]  # the caller's dict untouched
    # the store's codec applies it to whatever it is handed
    assert decode_request(encode_stored(d)) == out


def test_the_lists_are_extended_by_settings():
    keeper = StoredRequests.from_settings(
        {"RECRAWL_UNSTORED_HEADERS": "X-Api-Key", "RECRAWL_UNSTORED_META": ["api_token"]}
    )
    request = Request("http://h/p", headers={"x-api-key": "k", "X-Mine": "m"})
    request.meta["api_token"] = "t"
    keeper.mark(request)
    d = keeper.stored(request.to_dict(), request, downloaded=True)
    assert d["headers"] == {b"X-Mine": [b"m"]} and d["meta"] == {}
    with pytest.raises(RecrawlSettingError, match="RECRAWL_UNSTORED_HEADERS"):
        check_settings({"RECRAWL_UNSTORED_HEADERS": [1]})


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("http://u:p@proxy:8080", "http://proxy:8080"),
        ("https://u@proxy", "https://proxy"),
        ("u:p@proxy:8080", "proxy:8080"),
        (b"http://u:p@proxy", b"http://proxy"),
        ("http://proxy:8080", "http://proxy:8080"),
        (None, None),
    ],
)
def test_a_proxy_url_loses_its_credentials(url, clean):
    assert without_credentials(url) == clean


def _downloaded(request: Request) -> None:
    """What Scrapy's downloader middlewares add to a request on its way out."""
    request.headers.setdefault(b"User-Agent", b"Scrapy/2")
    request.headers.setdefault(b"Authorization", b"Bearer default-headers")
    request.headers.setdefault(b"Cookie", b"session=jar")
    request.headers.setdefault(b"Accept", b"text/html")
    request.meta.setdefault("download_timeout", 180)
    request.meta["proxy"] = "http://proxy:1"
    request.meta["download_slot"] = "h"


def test_the_request_is_stored_as_it_left_the_scheduler():
    keeper = StoredRequests()
    request = Request(
        "http://h/p", headers={"X-Mine": "m", "Accept": "application/json"}, meta={"tag": "t"}
    )
    request.meta["download_timeout"] = 5  # the spider's own: kept
    keeper.mark(request)
    _downloaded(request)
    d = keeper.stored(request.to_dict(), request, downloaded=True)
    assert d["headers"] == {b"X-Mine": [b"m"], b"Accept": [b"application/json"]}
    assert d["meta"] == {"tag": "t", "download_timeout": 5}
    assert META_AS_MADE not in d["meta"]


def test_a_redirect_keeps_the_note_of_the_request_the_spider_made():
    keeper = StoredRequests()
    request = Request("http://h/old", headers={"X-Mine": "m"}, meta={"tag": "t"})
    keeper.mark(request)
    _downloaded(request)
    response = Response("http://h/old", status=301, headers={"Location": "/new"})
    middleware = RedirectMiddleware.from_crawler(get_crawler())
    redirected = middleware.process_response(request, response)
    assert isinstance(redirected, Request) and redirected.url == "http://h/new"
    keeper.mark(redirected)  # leaves the scheduler again: the first note stands
    _downloaded(redirected)
    d = keeper.stored(redirected.to_dict(), redirected, downloaded=True)
    assert d["url"] == "http://h/new"
    assert d["headers"] == {b"X-Mine": [b"m"]} and d["meta"] == {"tag": "t"}


def test_a_request_past_the_scheduler_keeps_only_what_no_middleware_adds():
    """No note: it came past the scheduler (a component's engine.download()), after the
    middlewares: what they add to every request is dropped, as from an old store."""
    request = Request("http://h/p", headers={"X-Mine": "m"}, meta={"tag": "t"})
    _downloaded(request)
    d = StoredRequests().stored(request.to_dict(), request, downloaded=True)
    assert d["headers"] == {b"X-Mine": [b"m"]} and d["meta"] == {"tag": "t"}
    # never downloaded (a pending request kept for a later cycle): as the spider made it
    pending = Request("http://h/q", headers={"User-Agent": "Mine/1"}, meta={"proxy": "http://p"})
    d = StoredRequests().stored(pending.to_dict(), pending, downloaded=False)
    assert d["headers"] == {b"User-Agent": [b"Mine/1"]} and d["meta"] == {"proxy": "http://p"}


def test_store_files_are_created_readable_by_their_owner_only(tmp_path):
    old = os.umask(0o022)  # the usual umask, which gave 0644 files
    try:
        path = tmp_path / "history.sqlite3"
        with SqliteHistoryStore(path) as store:
            store.record(Visit(b"f" * 20, "http://h/p", 1.0, 200, request=_d()))
            store.flush()
            files = sorted(tmp_path.iterdir())
            assert {p.name for p in files} >= {
                "history.sqlite3",
                "history.sqlite3-wal",
                "history.sqlite3-shm",
                "history.sqlite3.lock",
            }
            for p in files:
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    finally:
        os.umask(old)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_both_stores_scrub_what_they_are_handed(backend, tmp_path, request):
    """Whoever calls record() or push_frontier() (a plug-in, a third party's code), the
    store itself never keeps a credential: each URL's request, the frontier's."""
    from scrapy_recrawl.history.redis import RedisHistoryStore

    if backend == "sqlite":
        store = SqliteHistoryStore(tmp_path / "history.sqlite3")
    else:
        store = RedisHistoryStore(request.getfixturevalue("redis_db").url, key="t")
    secret = _d(
        headers={b"Authorization": [b"Bearer s3cret"], b"X-Mine": [b"m"]},
        cookies={"a": "s3cret"},
        meta={"proxy": "http://u:s3cret@p:1", "tag": "t"},
    )
    with store:
        rec = store.record(Visit(b"f" * 20, "http://h/p", 1.0, 200, request=secret))
        store.push_frontier([(b"g" * 20, {**secret, "url": "http://h/q"}, 0)])
        store.flush()
        (kept,) = store.requests([rec.id])
        assert kept["headers"] == {b"X-Mine": [b"m"]} and "cookies" not in kept
        assert kept["meta"] == {"proxy": "http://p:1", "tag": "t"}
        (queued,) = store.pop_frontier(1)
        assert queued["headers"] == {b"X-Mine": [b"m"]} and "s3cret" not in repr(queued)


def test_a_stored_request_is_kept_as_is_unless_this_crawl_would_store_it_otherwise():
    plain = _d(headers={b"X-Mine": [b"m"]}, meta={"tag": "t", "depth": 1}, callback="parse")
    assert StoredRequests().kept_as_is(plain)
    # settings changed since it was stored: a header or meta key no longer kept
    assert not StoredRequests(headers=["x-mine"]).kept_as_is(plain)
    assert not StoredRequests(meta=["tag"]).kept_as_is(plain)
    # what no release stores today (an older release's store, a hand-written one)
    assert not StoredRequests().kept_as_is(_d(headers={b"Cookie": [b"s=1"]}))
    assert not StoredRequests().kept_as_is(_d(meta={"download_slot": "h"}))
    assert not StoredRequests().kept_as_is(_d(meta={"_recrawl_future": 1}))
    assert not StoredRequests().kept_as_is(_d(meta={"proxy": "http://u:p@proxy:8080"}))
    assert StoredRequests().kept_as_is(_d(meta={"proxy": "http://proxy:8080"}))
    assert not StoredRequests().kept_as_is(_d(cookies={"s": "1"}))


def test_a_recrawl_rebuilt_from_its_stored_request_stores_none_again(tmp_path):
    """Its visit hands the store no request (kept: the same bytes), unless it is a
    redirect's copy or a request made with its response's meta."""
    from scrapy_recrawl.stored_request import META_REBUILT
    from scrapy_recrawl.visit_recorder import VisitRecorder

    keeper = StoredRequests()
    stored = encode_stored(_d(headers={b"X-Mine": [b"m"]}, meta={"tag": "t"}))
    request = keeper.rebuild(decode_request(stored), None)
    assert request.meta[META_REBUILT] == id(request)
    crawler = get_crawler(settings_dict={"RECRAWL_STORE": str(tmp_path / "h.sqlite3")})
    with SqliteHistoryStore(str(tmp_path / "h.sqlite3")) as store:
        recorder = VisitRecorder(crawler, store, max_failures=0, stored=keeper)
        keeper.mark(request)
        assert recorder.request_dict(request) is None
        # redirected: another URL, stored as any request
        response = Response("http://h/p", status=301, headers={"Location": "/new"})
        redirected = RedirectMiddleware.from_crawler(get_crawler()).process_response(
            request, response
        )
        assert recorder.request_dict(redirected)["url"] == "http://h/new"
        # a copy with the same URL (a retry's, one an errback re-issues with another
        # callback, one restored from a JOBDIR queue): stored as its own
        fallback = request.replace(cb_kwargs={"x": 1}, dont_filter=True)
        assert recorder.request_dict(fallback)["cb_kwargs"] == {"x": 1}
        assert recorder.request_dict(request.copy()) is not None
        # received: the mark is dropped, so Request(url, meta=response.meta) is its own
        keeper.forget(request=request)
        assert META_REBUILT not in request.meta
        again = Request("http://h/p", meta=request.meta, callback=None, dont_filter=True)
        assert recorder.request_dict(again)["url"] == "http://h/p"
    # a stored request that this crawl would store otherwise is not marked
    assert (
        META_REBUILT
        not in StoredRequests(headers=["x-mine"]).rebuild(decode_request(stored), None).meta
    )
