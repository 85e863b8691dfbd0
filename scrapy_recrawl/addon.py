"""One line in settings.py turns recrawling on: ``ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}``."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.exceptions import NotConfigured

from .settings import RecrawlSettingError

logger = logging.getLogger(__name__)

#: Where the middleware sits: below HttpCompressionMiddleware (590), so it sees
#: decoded bodies, and below RedirectMiddleware (600), so redirects are
#: recorded under the URL that answered (see middleware.py).
MIDDLEWARE_ORDER = 585


class RecrawlAddon:
    """Sets the recrawl scheduler, the recording middleware and the skip middleware."""

    def __init__(self, crawler: Any = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> RecrawlAddon:
        return cls(crawler)

    def update_settings(self, settings: Any) -> None:
        from .hubs import HUB_MIDDLEWARE_ORDER
        from .skip import SPIDER_MIDDLEWARE_ORDER
        from .startup import check_settings, enabled, startup_failure

        try:
            if not enabled(settings):
                # RECRAWL_ENABLED = False: Scrapy leaves a NotConfigured add-on out
                logger.info("recrawl: RECRAWL_ENABLED is False; scrapy-recrawl is off")
                raise NotConfigured
            # Check every RECRAWL_* setting now, while a failure still reads clearly
            # (Scrapy builds the scheduler only once the spider opens).
            check_settings(settings)
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        settings.set("SCHEDULER", "scrapy_recrawl.scheduler.RecrawlScheduler", priority="addon")
        settings["DOWNLOADER_MIDDLEWARES"]["scrapy_recrawl.middleware.RecrawlMiddleware"] = (
            MIDDLEWARE_ORDER
        )
        # off (NotConfigured) unless RECRAWL_SKIP_UNCHANGED = "items"
        settings["SPIDER_MIDDLEWARES"]["scrapy_recrawl.skip.RecrawlSpiderMiddleware"] = (
            SPIDER_MIDDLEWARE_ORDER
        )
        # which refetched page yielded which new URLs: the hubs (hubs.py, core/hubs.py)
        settings["SPIDER_MIDDLEWARES"]["scrapy_recrawl.hubs.HubSpiderMiddleware"] = (
            HUB_MIDDLEWARE_ORDER
        )
        crawler = self.crawler
        if crawler is not None and getattr(crawler, "spider", None) is not None:
            # Open the crawl's one store now: an unreachable one stops the crawl here, before
            # Scrapy installs its reactor, where the one log line is all a user sees on
            # either of Scrapy's runners (later, the Twisted one adds a traceback). A crawl
            # makes its spider before applying its settings; `scrapy shell` has none yet,
            # and `fetch` / `parse` only look at a URL (scope.py): neither opens a store.
            from .history import HistoryStoreError, StoreRefused
            from .runtime import CrawlerRuntime
            from .scope import off_reason

            if off_reason(crawler) is not None:
                return
            try:
                CrawlerRuntime.of(crawler).store()
            except StoreRefused as exc:
                raise startup_failure(exc, logged=True) from None  # said once already
            except (HistoryStoreError, RecrawlSettingError) as exc:
                raise startup_failure(exc) from None
