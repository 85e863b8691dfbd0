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

With ``RECRAWL_CHANGE_SIGNAL = "items"``, ``"items"`` drops each unchanged *item* and
keeps the new and changed ones of the same page (item_watch.py compares them); ``"all"``
is refused with it (the callback would never run, so no item could say what changed).

The same spider middleware watches the items (``RECRAWL_ITEM_CHANGES``, the items
signal or a change feed: item_watch.py): it is the one component that sees every item a
callback yields for a response, and the end of that output.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from .change_feed import ChangeFeedExporter, check_change_feed
from .core.meta import UNCHANGED_FLAGS
from .item_change import UNCHANGED
from .item_watch import ItemWatch, PageWatch
from .runtime import store_for_crawler
from .settings import RecrawlSettingError, get

#: Where the add-on puts the spider middleware: close to the spider, so an unchanged
#: page's items are dropped before other middlewares spend time on them.
SPIDER_MIDDLEWARE_ORDER = 950


def skip_mode(settings: Any) -> str | None:
    """``None`` (skip nothing), ``"items"`` or ``"all"``; the start-up check runs it, so
    it refuses here what the items' settings cannot do together (module docstring)."""
    value = get(settings, "RECRAWL_SKIP_UNCHANGED")
    check_change_feed(settings)
    if value is False or value is None:
        return None
    if value == "all" and items_signal(settings):
        raise RecrawlSettingError(
            "RECRAWL_SKIP_UNCHANGED='all' with RECRAWL_CHANGE_SIGNAL='items': an unchanged "
            "page would never reach its callback, so its items could not say what changed; "
            "use RECRAWL_SKIP_UNCHANGED='items'"
        )
    if value in ("items", "all"):
        return str(value)
    if value is True:
        raise RecrawlSettingError(
            "RECRAWL_SKIP_UNCHANGED=True: say what to skip: 'items' (the callback runs and "
            "its links are followed, its items are dropped) or 'all' (the response is ignored)"
        )
    raise RecrawlSettingError(f"RECRAWL_SKIP_UNCHANGED={value!r}: expected False, 'items' or 'all'")


def items_signal(settings: Any) -> bool:
    """``RECRAWL_CHANGE_SIGNAL = "items"``: a page changed iff its items did."""
    return bool(get(settings, "RECRAWL_CHANGE_SIGNAL") == "items")


def watches_items(settings: Any) -> bool:
    """Whether the crawl compares each page's items with its previous visit's."""
    return bool(
        get(settings, "RECRAWL_ITEM_CHANGES")
        or items_signal(settings)
        or get(settings, "RECRAWL_CHANGE_FEED")
    )


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
    yields except requests, or each unchanged item with the items signal; and watches
    each page's items (module docstring). Off (NotConfigured) when it has neither job."""

    def __init__(self, crawler: Any) -> None:
        settings = crawler.settings
        skip = skip_mode(settings) == "items"
        watch = watches_items(settings)
        if not get(settings, "RECRAWL_ENABLED") or not (skip or watch):
            raise NotConfigured
        super().__init__(crawler)
        self.stats = crawler.stats
        self.skip = skip
        self.per_item = items_signal(settings)  # drop unchanged items, not pages
        self.watch: ItemWatch | None = None
        if watch:
            # a feed Scrapy cannot write was refused at start-up (skip_mode)
            feed = ChangeFeedExporter.from_settings_of(crawler)
            self.watch = ItemWatch(crawler, lambda: store_for_crawler(crawler), feed)
            from .runtime import before_close

            before_close(crawler, self.watch.flush)

    # -- the callback's output, with its end -----------------------------------

    def process_spider_output(
        self, response: Response | None, result: Iterable[Any], spider: Any = None
    ) -> Iterable[Any]:
        page = self._page(response)
        ok = False
        try:
            for o in result:
                # a request passes as it is (most of a crawl's output): no call for it
                if isinstance(o, Request) or (o := self._one(o, response, page)) is not None:
                    yield o
            ok = True
        finally:
            if page is not None:
                page.finish(ok)

    async def process_spider_output_async(
        self, response: Response | None, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        page = self._page(response)
        ok = False
        try:
            async for o in result:
                # a request passes as it is (most of a crawl's output): no call for it
                if isinstance(o, Request) or (o := self._one(o, response, page)) is not None:
                    yield o
            ok = True
        finally:
            if page is not None:
                page.finish(ok)

    def _page(self, response: Response | None) -> PageWatch | None:
        return None if self.watch is None else self.watch.page(response)

    def _one(self, o: Any, response: Response | None, page: PageWatch | None) -> Any:
        """An item (or other non-request output): passed on, or dropped (None)."""
        if page is not None:
            change = page.item(o)
            if self.skip and self.per_item:
                return self._drop() if change.status == UNCHANGED else o
        if self.skip and not self.per_item and unchanged(response):
            return self._drop()
        return o

    def _drop(self) -> None:
        if self.stats is not None:
            self.stats.inc_value("recrawl/skipped_items")
        return None
