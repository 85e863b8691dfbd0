"""Per-URL history: the store interface, its backends, and which store a setting names.

Plain data and files: no Scrapy, no Twisted. The one open store per crawler, and
what the crawl does around it (signals, closing the spider), is
scrapy_recrawl/runtime.py's.
"""

from __future__ import annotations

import os
from typing import Any

from ..settings import DEFAULTS, RecrawlSettingError, get
from .base import (
    SCHEMA_VERSION,
    FlushFailed,
    HistoryArrays,
    HistoryStore,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
    file_store,
)
from .class_path import scheduler_uses_redis
from .epoch import StoreLost, on_store_loss
from .ownership import StoreRefused, default_sqlite_path, for_spider
from .sqlite import SqliteHistoryStore
from .third_party import build_store

__all__ = [
    "SCHEMA_VERSION",
    "FlushFailed",
    "HistoryArrays",
    "HistoryStore",
    "HistoryStoreError",
    "SqliteHistoryStore",
    "StoreLost",
    "StoreRefused",
    "StoredBody",
    "UrlRecord",
    "Visit",
    "check_directory",
    "open_store",
]


def open_store(
    settings: Any, spider: str | None = None, *, read_only: bool = False
) -> HistoryStore:
    """Build (not yet open) the store ``RECRAWL_STORE`` names, for the spider ``spider``.

    ``None``: ``.scrapy/recrawl/<spider>/history.sqlite3`` in the project (with
    RedisRecrawlScheduler: Redis, as ``"redis"``); a path,
    ``sqlite:///relative.sqlite3`` or ``sqlite:////absolute.sqlite3``: that SQLite file;
    ``redis://host:port/db`` (``rediss://``, ``unix://``): that Redis, with
    ``REDIS_PARAMS``, keys under ``RECRAWL_REDIS_KEY`` (``<spider>:history``);
    ``"redis"``: the Redis scrapy-redis's ``REDIS_URL`` names. ``%(spider)s`` in
    ``RECRAWL_STORE`` is the spider's name (history/ownership.py).

    ``read_only``: for reading only (the offline commands): the store is then never
    created, locked, migrated, claimed or changed (SQLite: history/sqlite_readonly.py).
    ``RECRAWL_STORE_CLASS`` names a backend of one's own, built with both
    (:func:`_third_party_store`).
    """
    cls_path = get(settings, "RECRAWL_STORE_CLASS", str)
    if cls_path:
        return _third_party_store(cls_path, settings, spider=spider, read_only=read_only)
    spec = get(settings, "RECRAWL_STORE", (str, os.PathLike))
    options: dict[str, Any] = {
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
    sqlite_options = {
        **options,
        "log_maxlen": get(
            settings,
            "RECRAWL_SQLITE_LOG_MAXLEN",
            int,
            lambda v: v >= 0,
            "visits >= 0 (0: no cap)",
        ),
    }
    if spec is None and scheduler_uses_redis(settings):
        spec = "redis"  # RedisRecrawlScheduler: the store lives beside its frontier
    if spec is None:
        return SqliteHistoryStore(
            default_sqlite_path(spider), read_only=read_only, **sqlite_options
        )
    spec = for_spider(os.fspath(spec), "RECRAWL_STORE", spider)
    if spec == "redis" or spec.split("://", 1)[0] in ("redis", "rediss", "unix"):
        # "redis": where scrapy-redis's REDIS_URL / REDIS_HOST ... point; or a URL
        from .redis import RedisHistoryStore

        key = get(settings, "RECRAWL_REDIS_KEY", str) or DEFAULTS["RECRAWL_REDIS_KEY"]
        maxlen = get(
            settings, "RECRAWL_REDIS_LOG_MAXLEN", int, lambda v: v >= 0, "entries >= 0 (0: no cap)"
        )
        shards = get(
            settings, "RECRAWL_REDIS_SHARDS", int, lambda v: 1 <= v <= 1024, "1 to 1024 shards"
        )
        redis_store = RedisHistoryStore(
            None if spec == "redis" else spec,
            settings=settings,
            key=for_spider(key, "RECRAWL_REDIS_KEY", spider),
            store_bodies=options["store_bodies"],
            log_maxlen=10_000_000 if maxlen is None else maxlen,
            on_loss=on_store_loss(settings),
            shards=DEFAULTS["RECRAWL_REDIS_SHARDS"] if shards is None else shards,
            flush_every=options["flush_every"],
            flush_seconds=options["flush_seconds"],
            read_only=read_only,
        )
        return redis_store
    if spec.startswith("sqlite:///"):
        # as SQLAlchemy spells it: sqlite:///relative.db, sqlite:////absolute.db
        path = spec[len("sqlite:///") :]
        if not path:
            return SqliteHistoryStore(
                default_sqlite_path(spider), read_only=read_only, **sqlite_options
            )
    elif "://" in spec:
        scheme = spec.split("://", 1)[0]
        raise RecrawlSettingError(
            f"RECRAWL_STORE={spec!r}: unknown store scheme {scheme!r}; "
            "use a file path, sqlite:///path or redis://host:port/db"
        )
    else:
        path = spec
    return SqliteHistoryStore(path, read_only=read_only, **sqlite_options)


def check_directory(store: HistoryStore, spider: str, settings: Any) -> None:
    """A crawl's SQLite store in a directory that does not exist: a typo far more often
    than a wish for a new tree, refused (RecrawlSettingError naming RECRAWL_STORE), where
    creating it would start a full warm-up in the wrong place without a word. The
    default location is created (ownership.py); the offline commands say themselves
    that a store is missing."""
    file = file_store(store)
    if file is None:
        return
    directory = os.path.dirname(os.path.abspath(file.path))
    if os.path.isdir(directory):
        return
    if os.path.abspath(file.path) == os.path.abspath(default_sqlite_path(spider)):
        return
    spec = get(settings, "RECRAWL_STORE", (str, os.PathLike))
    raise RecrawlSettingError(
        f"RECRAWL_STORE={os.fspath(spec) if spec is not None else file.path!r}: the "
        f"directory {directory} does not exist; create it, or leave RECRAWL_STORE unset "
        "for the default location"
    )


def _third_party_store(
    path: str, settings: Any, *, spider: str | None, read_only: bool
) -> HistoryStore:
    """RECRAWL_STORE_CLASS: a backend of your own, as HTTPCACHE_STORAGE names one, built
    with ``cls.from_settings(settings, spider=spider, read_only=read_only)`` and checked
    against the store contract (history/third_party.py)."""
    return build_store(path, settings, spider=spider, read_only=read_only)


#: The crawl's one store per crawler moved to scrapy_recrawl/runtime.py (the Scrapy
#: glue stays out of history/). Until middleware.py and scheduler.py import these
#: names from there, they are handed out from here, looked up at first use: an
#: ``import`` statement here would run back up the layers (history/ is the bottom).
_MOVED_TO_RUNTIME = frozenset({"before_close", "fail_crawl", "release_store", "store_for_crawler"})


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_RUNTIME:
        import importlib

        return getattr(importlib.import_module("scrapy_recrawl.runtime"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
