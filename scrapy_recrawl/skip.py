"""``RECRAWL_SKIP_UNCHANGED``: what a page that has not changed gives the spider.

* ``False`` (default): every response reaches its callback, flagged
  ``recrawl:unchanged`` / ``recrawl:not_modified`` when it has not changed;
* ``"items"``: the callback runs and the requests it yields are followed, but
  the items it yields for an unchanged page are dropped
  (:class:`RecrawlSpiderMiddleware`): new links are still found, nothing is
  exported twice;
* ``"all"``: an unchanged page does not reach the spider at all: the recording
  middleware records the visit, then raises ``IgnoreRequest`` (the request's
  errback, if any, gets it), as scrapy-deltafetch users expect; links on it are
  not followed.

New and changed pages always reach the callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from .core.meta import UNCHANGED_FLAGS
from .settings import RecrawlSettingError, get

#: Where the add-on puts the spider middleware: close to the spider, so an unchanged
#: page's items are dropped before other middlewares spend time on them.
SPIDER_MIDDLEWARE_ORDER = 950


def skip_mode(settings: Any) -> str | None:
    """``None`` (skip nothing), ``"items"`` or ``"all"``."""
    value = get(settings, "RECRAWL_SKIP_UNCHANGED")
    if value is False or value is None:
        return None
    if value in ("items", "all"):
        return str(value)
    if value is True:
        raise RecrawlSettingError(
            "RECRAWL_SKIP_UNCHANGED=True: say what to skip: 'items' (the callback runs and "
            "its links are followed, its items are dropped) or 'all' (the response is ignored)"
        )
    raise RecrawlSettingError(f"RECRAWL_SKIP_UNCHANGED={value!r}: expected False, 'items' or 'all'")


def unchanged(response: Response | None) -> bool:
    """The recording middleware flagged ``response`` as not changed since the last visit."""
    return response is not None and not UNCHANGED_FLAGS.isdisjoint(response.flags)


def ignore_unchanged(response: Response, inc: Callable[[str], None]) -> Response:
    """``RECRAWL_SKIP_UNCHANGED = "all"``: an unchanged page, once recorded, is ignored
    (IgnoreRequest: the request's errback gets it, ``inc`` counts it); others pass."""
    if unchanged(response):
        inc("skipped_unchanged")
        raise IgnoreRequest(f"recrawl: {response.url} has not changed")
    return response


class RecrawlSpiderMiddleware(BaseSpiderMiddleware):
    """``RECRAWL_SKIP_UNCHANGED = "items"``: drops what an unchanged page's callback
    yields except requests (module docstring). Off (NotConfigured) otherwise."""

    def __init__(self, crawler: Any) -> None:
        settings = crawler.settings
        if not get(settings, "RECRAWL_ENABLED") or skip_mode(settings) != "items":
            raise NotConfigured
        super().__init__(crawler)
        self.stats = crawler.stats

    def get_processed_item(self, item: Any, response: Response | None) -> Any:
        if unchanged(response):
            if self.stats is not None:
                self.stats.inc_value("recrawl/skipped_items")
            return None
        return item

    def get_processed_request(self, request: Request, response: Response | None) -> Request:
        return request
