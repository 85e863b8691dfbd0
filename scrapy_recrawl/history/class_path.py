"""Classes named by a setting (``RECRAWL_STORE_CLASS``, Scrapy's ``SCHEDULER``), loaded
with importlib: history/ imports no Scrapy, so not with Scrapy's ``load_object``."""

from __future__ import annotations

import importlib
from typing import Any


def load_class(path: str) -> Any:
    """The object at ``package.module.Name``; ImportError, AttributeError or ValueError
    (a path with no module part) when there is none."""
    module, _, name = path.rpartition(".")
    if not module or not name:
        raise ValueError(f"{path!r} is not a full class path (package.module.Name)")
    return getattr(importlib.import_module(module), name)


def scheduler_uses_redis(settings: Any) -> bool:
    """Whether ``SCHEDULER`` is a recrawl scheduler that keeps its history in Redis
    (RedisRecrawlScheduler: ``recrawl_store_backend = "redis"``): the store then lives
    beside its frontier, and ``recrawl-reset`` empties its shared cycle too. A
    scheduler that cannot be loaded is not one (the crawl says so itself)."""
    named = settings.get("SCHEDULER") if settings is not None else None
    if not named:
        return False
    try:
        cls = load_class(named) if isinstance(named, str) else named
    except (ImportError, ValueError, AttributeError):
        return False
    return getattr(cls, "recrawl_store_backend", None) == "redis"
