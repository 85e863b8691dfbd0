"""Pieces of the middleware that need no crawl: the request it stores (stored_request.py)."""

from __future__ import annotations

import pytest
import scrapy
from scrapy.http import FormRequest

from scrapy_recrawl.stored_request import request_to_dict


class Spider(scrapy.Spider):
    name = "s"

    def parse_item(self, response):
        pass

    def on_error(self, failure):
        pass


def test_request_dict_matches_scrapys_own_to_dict():
    spider = Spider()
    cases = [
        scrapy.Request("https://example.com/a", callback=spider.parse_item, meta={"k": 1}),
        scrapy.Request(
            "https://example.com/b", callback=spider.parse_item, errback=spider.on_error
        ),
        scrapy.Request("https://example.com/c", priority=5, cb_kwargs={"x": 2}),
        FormRequest("https://example.com/d", formdata={"q": "1"}, callback=spider.parse_item),
    ]
    for request in cases:
        ours = request_to_dict(request, spider)
        assert ours == request.to_dict(spider=spider)


def test_request_dict_of_a_foreign_callable_defers_to_scrapy():
    spider = Spider()
    request = scrapy.Request("https://example.com/a", callback=lambda r: None)
    try:
        request.to_dict(spider=spider)
    except ValueError as exc:
        expected = type(exc)
    with pytest.raises(expected):
        request_to_dict(request, spider)


class JsonLike(scrapy.Request):
    """A request class of a user's, with an attribute of its own."""

    attributes = (*scrapy.Request.attributes, "extra")

    def __init__(self, *args, extra=None, **kwargs):
        self.extra = extra
        super().__init__(*args, **kwargs)


def test_request_dict_of_request_subclasses_and_every_attribute_matches_scrapys():
    spider = Spider()
    cases = [
        JsonLike("https://example.com/e", callback=spider.parse_item, extra={"a": [1]}),
        scrapy.http.JsonRequest("https://example.com/f", data={"k": 1}, callback=spider.parse_item),
        scrapy.Request(
            "https://example.com/h",
            callback=spider.parse_item,
            headers={"X-A": ["1", "2"]},
            cookies={"c": "v"},
            flags=["f"],
            dont_filter=True,
            method="POST",
            body=b"x=1",
            encoding="latin-1",
        ),
    ]
    for request in cases:
        assert request_to_dict(request, spider) == request.to_dict(spider=spider)
    # the request itself is left as it was (no copy of it is made to drop its callback)
    request = cases[2]
    request_to_dict(request, spider)
    assert request.callback == spider.parse_item and request.flags == ["f"]
