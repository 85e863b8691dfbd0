"""One line in settings.py turns recrawling on: ``ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}``."""

from __future__ import annotations

from typing import Any

#: Where the middleware sits: below HttpCompressionMiddleware (590), so it sees
#: decoded bodies, and below RedirectMiddleware (600), so redirects are
#: recorded under the URL that answered (see middleware.py).
MIDDLEWARE_ORDER = 585


class RecrawlAddon:
    """Sets the recrawl scheduler and the recording middleware."""

    def update_settings(self, settings: Any) -> None:
        # Check every RECRAWL_* setting now, while a failure still reads clearly
        # (Scrapy builds the scheduler only once the spider opens).
        from .change import ChangeDetector
        from .core.cycle import CycleConfig
        from .plugins import check_plugins
        from .scoring import Scorer

        CycleConfig.from_settings(settings)
        check_plugins(settings, Scorer.from_settings(settings).terminals_needed)
        ChangeDetector.from_settings(settings)
        settings.set("SCHEDULER", "scrapy_recrawl.scheduler.RecrawlScheduler", priority="addon")
        settings["DOWNLOADER_MIDDLEWARES"]["scrapy_recrawl.middleware.RecrawlMiddleware"] = (
            MIDDLEWARE_ORDER
        )
