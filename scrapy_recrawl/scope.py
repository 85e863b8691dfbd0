"""What enters the history: the spider's own pages, fetched from the network by a crawl.

The recording middleware and the scheduler both ask this module, so the two agree
on what is a page of the spider's (docs/project.md, "What enters the history"):

* :func:`not_a_page` -- a request (and its response) that is left alone: nothing
  recorded, no conditional headers, no budget, never kept to recrawl;
* :func:`off_reason` -- a Scrapy command that only looks at a URL (``scrapy shell``,
  ``fetch``, ``view``, ``parse``, ``check``, ``bench``): the add-on is off there and
  neither reads nor writes the history.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK

from .runtime import CrawlerRuntime

logger = logging.getLogger("scrapy_recrawl")

#: ``Request.meta`` key: True keeps a request out of the history (and out of the budget)
META_DONT_RECRAWL = "dont_recrawl"


def not_a_page(request: Request, response: Response | None = None) -> str | None:
    """Why ``request`` (or its ``response``) is not one of the spider's pages, as a
    stats key under ``recrawl/not_recorded/``; None: it is one, record it.

    * ``method``: not a GET (HEAD included: no body to compare);
    * ``dont_recrawl``: the request says so (``meta["dont_recrawl"]``);
    * ``no_callback``: ``callback=NO_CALLBACK``, what Scrapy and its components fetch
      for themselves (robots.txt; anything else issued that way);
    * ``sitemap``: a sitemap (or robots.txt) that ``SitemapSpider`` reads to find its
      pages: bookkeeping, not a page;
    * ``cached``: a response that did not come from the network (HttpCacheMiddleware's
      ``cached`` flag): it says nothing about the page now.
    """
    # asked of every link a spider yields, several times (the scheduler, the middleware)
    if request.method != "GET":
        return "method"
    if request.meta.get(META_DONT_RECRAWL):
        return "dont_recrawl"
    callback = request.callback
    if callback is not None:  # None, the spider's parse (the common case): neither
        if callback is NO_CALLBACK:
            return "no_callback"
        if _is_sitemap_callback(callback):
            return "sitemap"
    if response is not None and "cached" in response.flags:
        return "cached"
    return None


def _is_sitemap_callback(callback: Any) -> bool:
    if getattr(callback, "__name__", None) != "_parse_sitemap":
        return False
    from scrapy.spiders import SitemapSpider

    return isinstance(getattr(callback, "__self__", None), SitemapSpider)


# -- Scrapy's commands that look at one URL ---------------------------------------


def off_reason(crawler: Any, *, building_engine: bool = False) -> str | None:
    """The Scrapy command this crawler runs for, when it is one that only looks at a
    URL (``"scrapy fetch"``, ...); None: a crawl, which records its visits.

    Decided once per crawler (kept by its runtime: runtime.py), by the first component
    that asks (the middleware, built with the engine: ``building_engine``):

    * ``fetch``, ``view``, ``parse``, ``check`` and ``bench`` hand their spider a
      ``start`` method of their own, defined in their module under ``scrapy.commands``;
    * ``scrapy shell`` builds the engine before any spider, outside ``Crawler.crawl()``
      (which always makes the spider first): no spider while the engine is built.
      Only the middleware can see that; a scheduler is also built and opened outside a
      crawl by Scrapy's own tests, which must get the recrawl scheduler.
    """
    return CrawlerRuntime.of(crawler).off_reason(
        lambda: _decide_off(crawler, building_engine=building_engine)
    )


def _decide_off(crawler: Any, *, building_engine: bool) -> str | None:
    reason = None
    start = getattr(getattr(crawler, "spidercls", None), "start", None)
    module = getattr(start, "__module__", "") or ""
    if module.startswith("scrapy.commands."):
        reason = f"scrapy {module.rsplit('.', 1)[1]}"
    elif building_engine and getattr(crawler, "spider", None) is None:
        if not getattr(crawler, "crawling", False):
            reason = "scrapy shell"
    if reason is not None:
        logger.info(
            "recrawl: off under `%s`: the history is neither read nor written "
            "(only a crawl records its visits)",
            reason,
        )
    return reason


def warn_http_cache(settings: Any) -> bool:
    """One warning at start-up when Scrapy's HTTP cache is on; True: it is."""
    if not settings.getbool("HTTPCACHE_ENABLED"):
        return False
    logger.warning(
        "recrawl: HTTPCACHE_ENABLED is on: responses served from Scrapy's HTTP cache "
        "(flag 'cached') reach the spider untouched and are not recorded, since a cached "
        "copy says nothing about whether the page changed; recrawls served from the cache "
        "observe nothing, and no conditional requests are sent (a cached 304 has no body). "
        "Turn the cache off for crawls that should watch for changes"
    )
    return True
