"""What the recrawl scheduler and its frontier ask of Scrapy's engine, in one place.

The scheduler hands requests to the engine when asked; between cycles, while a
shared Redis is away, or when a probe comes due, it needs the engine the other way
round: whether anything is still in flight (a response may bring new URLs), a nudge
for the next request before the engine's own 5 s heartbeat, and closing the spider
with a reason. These touch the engine's internals (its slot, downloader, scraper),
which no frontier reaches into: it asks :class:`EngineLink` (frontier/base.py:
``SchedulerHost.engine_link``).
"""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler


class EngineLink:
    """The engine of ``crawler``'s crawl, as the scheduler uses it (module docstring).
    Every method works before the crawl starts (nothing running: quiet, no nudge)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    def engine(self) -> Any:
        """The crawl's engine, or None before it starts."""
        # Crawler.engine raises RuntimeError (not AttributeError) before the crawl starts
        try:
            return self.crawler.engine
        except (AttributeError, RuntimeError):
            return None

    def quiet(self) -> bool:
        """Nothing downloading, scraping or left in start(): no new URL can turn up."""
        engine = self.engine()
        if engine is None:
            return True
        downloader = getattr(engine, "downloader", None)
        scraper = getattr(engine, "scraper", None)
        return (
            not getattr(downloader, "active", None)
            and (scraper is None or scraper.slot is None or scraper.slot.is_idle())
            and getattr(engine, "_start", None) is None
        )

    def wake(self) -> None:
        """Ask the engine for the next request now (its own heartbeat is 5 s)."""
        slot = getattr(self.engine(), "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def poke(self, delay: float) -> Any:
        """Ask the engine for the next request in ``delay`` seconds (the reactor's time):
        the timer (``IDelayedCall``), or None when no crawl is running."""
        slot = getattr(self.engine(), "_slot", None)
        if slot is None:
            return None
        from twisted.internet import reactor

        clock: Any = reactor  # the installed reactor (typed as the module)
        return clock.callLater(delay, slot.nextcall.schedule)

    def close_spider(self, reason: str) -> None:
        """Close the spider with ``reason`` (startup.FAILED_CLOSE_REASONS: exit 1)."""
        engine = self.engine()
        if engine is not None and engine.spider is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason=reason))
