"""The conditional requests the middleware sends (validators.py), on a real SQLite store,
without a crawl: which requests get the stored validators, which lose them, and the one
re-fetch without them after a 304 with no copy."""

from __future__ import annotations

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.validators import (
    META_CONDITIONAL,
    META_REFETCH,
    Validators,
    drop_ours,
    refetch_without_validators,
    sent,
)


@pytest.fixture
def store(tmp_path):
    with SqliteHistoryStore(str(tmp_path / "h.sqlite3")) as store:
        yield store


def _validators(store, *, enabled=True):
    fingerprint = get_crawler().request_fingerprinter.fingerprint
    return Validators(store, fingerprint, enabled=enabled), fingerprint


def _visited(store, fingerprint, url, *, body=b"<html>x</html>", etag='"v1"', lm="Mon"):
    store.record(
        Visit(
            fingerprint(scrapy.Request(url)), url, 1.0, 200, etag=etag, last_modified=lm,
            body=body, headers={"Content-Type": ["text/html"]},
        )
    )  # fmt: skip
    store.flush()


def test_a_kept_copys_validators_go_out_and_a_copy_of_the_request_loses_them(store):
    validators, fingerprint = _validators(store)
    _visited(store, fingerprint, "http://h/a")
    request = scrapy.Request("http://h/a")
    validators.outgoing(request)
    assert request.headers[b"If-None-Match"] == b'"v1"'
    assert request.headers[b"If-Modified-Since"] == b"Mon"
    assert request.meta[META_CONDITIONAL] is True and sent(request)
    # the stored request of this visit keeps neither
    stored = {"headers": dict(request.headers)}
    drop_ours(stored, request)
    assert {k.lower() for k in stored["headers"]} == set()
    # a redirect's copy, to a URL the store never saw: not sent yet, validators dropped
    copy = request.replace(url="http://h/elsewhere")
    assert not sent(copy)
    validators.outgoing(copy)
    assert b"If-None-Match" not in copy.headers and b"If-Modified-Since" not in copy.headers
    assert META_CONDITIONAL not in copy.meta and sent(copy)


@pytest.mark.parametrize(("etag", "lm"), [('"v1"', None), (None, "Mon")])
def test_a_copy_of_a_request_sent_with_one_validator_loses_it(store, etag, lm):
    """A page that gave only an ETag (or only a Last-Modified) was sent that one: its
    retry's or redirect's copy drops it, and the missing other is no error."""
    validators, fingerprint = _validators(store)
    _visited(store, fingerprint, "http://h/one", etag=etag, lm=lm)
    request = scrapy.Request("http://h/one")
    validators.outgoing(request)
    assert (b"If-None-Match" in request.headers) == (etag is not None)
    assert (b"If-Modified-Since" in request.headers) == (lm is not None)
    copy = request.replace(url="http://h/elsewhere")
    validators.outgoing(copy)
    assert b"If-None-Match" not in copy.headers and b"If-Modified-Since" not in copy.headers


def test_no_validators_without_a_kept_copy_or_when_off(store):
    validators, fingerprint = _validators(store)
    _visited(store, fingerprint, "http://h/nocopy", body=None)
    _visited(store, fingerprint, "http://h/novalidators", etag=None, lm=None)
    _visited(store, fingerprint, "http://h/off")
    for url in ("http://h/nocopy", "http://h/novalidators", "http://h/never"):
        request = scrapy.Request(url)
        validators.outgoing(request)
        assert b"If-None-Match" not in request.headers, url
        assert META_CONDITIONAL not in request.meta, url
    off, _ = _validators(store, enabled=False)
    request = scrapy.Request("http://h/off")
    off.outgoing(request)
    assert b"If-None-Match" not in request.headers and sent(request)


def test_the_spiders_own_conditional_request_is_left_be(store):
    validators, fingerprint = _validators(store)
    _visited(store, fingerprint, "http://h/a")
    request = scrapy.Request("http://h/a", headers={"If-Modified-Since": "Sun"})
    validators.outgoing(request)
    assert request.headers[b"If-Modified-Since"] == b"Sun"
    assert b"If-None-Match" not in request.headers and META_CONDITIONAL not in request.meta
    stored = {"headers": dict(request.headers)}
    drop_ours(stored, request)  # the spider's own header is part of its request
    assert stored["headers"] == dict(request.headers)


def test_one_refetch_without_validators_after_a_bare_304(store):
    validators, fingerprint = _validators(store)
    _visited(store, fingerprint, "http://h/a")
    request = scrapy.Request("http://h/a", meta={"tag": 1})
    validators.outgoing(request)
    again = refetch_without_validators(request)
    assert again is not None and again.dont_filter
    assert b"If-None-Match" not in again.headers and b"If-Modified-Since" not in again.headers
    assert again.meta[META_REFETCH] is True and again.meta["retry_times"] == 0
    assert again.meta["tag"] == 1 and not sent(again) and META_CONDITIONAL not in again.meta
    validators.outgoing(again)  # the store still has the copy: the re-fetch stays bare
    assert b"If-None-Match" not in again.headers
    assert refetch_without_validators(again) is None  # once only
