"""Per-URL history: the store interface, its backends, and the one store per crawler."""

from __future__ import annotations

import os
import weakref
from typing import Any

from ..settings import RecrawlSettingError, get
from .base import (
    SCHEMA_VERSION,
    HistoryArrays,
    HistoryStore,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
)
from .sqlite import SqliteHistoryStore

__all__ = [
    "SCHEMA_VERSION",
    "HistoryArrays",
    "HistoryStore",
    "HistoryStoreError",
    "SqliteHistoryStore",
    "StoredBody",
    "UrlRecord",
    "Visit",
    "open_store",
    "store_for_crawler",
]


def _default_sqlite_path() -> str:
    # Scrapy's project data dir (.scrapy/ beside scrapy.cfg), as HttpCacheMiddleware uses.
    from scrapy.utils.project import data_path

    return os.path.join(data_path("recrawl", createdir=True), "history.sqlite3")


def open_store(settings: Any) -> HistoryStore:
    """Build (not yet open) the store ``RECRAWL_STORE`` names.

    ``None``: ``.scrapy/recrawl/history.sqlite3`` in the project (with
    RedisRecrawlScheduler: Redis, as ``"redis"``); a path,
    ``sqlite:///relative.sqlite3`` or ``sqlite:////absolute.sqlite3``: that SQLite file;
    ``redis://host:port/db`` (``rediss://``, ``unix://``): that Redis, with
    ``REDIS_PARAMS``; ``"redis"``: the Redis scrapy-redis's ``REDIS_URL`` names.
    """
    cls_path = get(settings, "RECRAWL_STORE_CLASS", str)
    if cls_path:
        return _third_party_store(cls_path, settings)
    spec = get(settings, "RECRAWL_STORE", (str, os.PathLike))
    options = {
        "store_bodies": get(settings, "RECRAWL_STORE_BODIES", bool),
        "flush_every": get(
            settings, "RECRAWL_FLUSH_EVERY", int, lambda v: v >= 1, "a positive number of visits"
        ),
        "flush_seconds": get(
            settings,
            "RECRAWL_FLUSH_SECONDS",
            (int, float),
            lambda v: v >= 0,
            "a number of seconds >= 0",
        ),
    }
    if spec is None and _scheduler_uses_redis(settings):
        spec = "redis"  # RedisRecrawlScheduler: the store lives beside its frontier
    if spec is None:
        return SqliteHistoryStore(_default_sqlite_path(), **options)
    spec = os.fspath(spec)
    if spec == "redis" or spec.split("://", 1)[0] in ("redis", "rediss", "unix"):
        # "redis": where scrapy-redis's REDIS_URL / REDIS_HOST ... point; or a URL
        from .redis import store_from_spec

        return store_from_spec(spec, settings, store_bodies=options["store_bodies"])
    if spec.startswith("sqlite:///"):
        # as SQLAlchemy spells it: sqlite:///relative.db, sqlite:////absolute.db
        return SqliteHistoryStore(spec[len("sqlite:///") :] or _default_sqlite_path(), **options)
    if "://" in spec:
        scheme = spec.split("://", 1)[0]
        raise RecrawlSettingError(
            f"RECRAWL_STORE={spec!r}: unknown store scheme {scheme!r}; "
            "use a file path, sqlite:///path or redis://host:port/db"
        )
    return SqliteHistoryStore(spec, **options)


def _third_party_store(path: str, settings: Any) -> HistoryStore:
    """RECRAWL_STORE_CLASS: a backend of your own, as HTTPCACHE_STORAGE names one.

    Built with ``from_settings(settings)`` when the class has it, else
    ``cls(settings)``; it must offer the whole store contract (base.HistoryStore).
    """
    from scrapy.utils.misc import load_object

    try:
        cls = load_object(path)
    except (ImportError, ValueError, NameError, AttributeError) as exc:
        raise RecrawlSettingError(f"RECRAWL_STORE_CLASS={path!r}: cannot load it: {exc}") from None
    store = cls.from_settings(settings) if hasattr(cls, "from_settings") else cls(settings)
    if not isinstance(store, HistoryStore):
        missing = sorted(
            name
            for name in dir(HistoryStore)
            if not name.startswith("_") and not hasattr(store, name)
        )
        raise RecrawlSettingError(
            f"RECRAWL_STORE_CLASS={path!r} is not a history store: it lacks {', '.join(missing)} "
            "(scrapy_recrawl.history.base.HistoryStore)"
        )
    return store


def _scheduler_uses_redis(settings: Any) -> bool:
    name = settings.get("SCHEDULER") if settings is not None else None
    if not name:
        return False
    try:
        from scrapy.utils.misc import load_object

        cls = load_object(name) if isinstance(name, str) else name
    except (ImportError, ValueError, NameError, AttributeError):
        return False
    return getattr(cls, "recrawl_store_backend", None) == "redis"


_STORES: weakref.WeakKeyDictionary[Any, HistoryStore] = weakref.WeakKeyDictionary()


def store_for_crawler(crawler: Any) -> HistoryStore:
    """The one open store shared by this crawler's scheduler and middleware.

    Opened on first use. Without the recrawl scheduler (middleware alone),
    opening also starts a new cycle: one ``scrapy crawl`` = one cycle. The
    recrawl scheduler (``manages_recrawl_cycles``) starts cycles itself, so a
    JOBDIR resume can continue the cycle it interrupted. Closed (flushed) when
    the engine stops.
    """
    store = _STORES.get(crawler)
    if store is None:
        from scrapy import signals

        store = open_store(crawler.settings)
        store.open()
        from scrapy.utils.misc import load_object

        scheduler = load_object(crawler.settings["SCHEDULER"])
        if not getattr(scheduler, "manages_recrawl_cycles", False):
            store.advance_cycle()
        _STORES[crawler] = store
        crawler.signals.connect(store.close, signal=signals.engine_stopped, weak=False)
    return store
