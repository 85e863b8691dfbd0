"""scrapy-recrawl: keep a Scrapy crawl fresh by recrawling what is likeliest to have changed.

``ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}`` in settings.py sets up both
components; see docs/ for the settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["RecrawlAddon", "RecrawlMiddleware", "RecrawlScheduler", "RedisRecrawlScheduler"]

if TYPE_CHECKING:
    from .addon import RecrawlAddon
    from .middleware import RecrawlMiddleware
    from .redis_scheduler import RedisRecrawlScheduler
    from .scheduler import RecrawlScheduler


def __getattr__(name: str) -> Any:
    # Lazy: importing the package (e.g. for settings or scoring) must not pull in Scrapy.
    if name == "RecrawlAddon":
        from .addon import RecrawlAddon

        return RecrawlAddon
    if name == "RecrawlMiddleware":
        from .middleware import RecrawlMiddleware

        return RecrawlMiddleware
    if name == "RecrawlScheduler":
        from .scheduler import RecrawlScheduler

        return RecrawlScheduler
    if name == "RedisRecrawlScheduler":
        from .redis_scheduler import RedisRecrawlScheduler

        return RedisRecrawlScheduler
    raise AttributeError(f"module 'scrapy_recrawl' has no attribute {name!r}")
