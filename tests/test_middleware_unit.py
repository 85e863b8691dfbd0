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
