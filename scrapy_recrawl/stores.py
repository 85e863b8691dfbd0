"""Which history store the settings name, built for a spider: ``RECRAWL_STORE``,
``RECRAWL_STORE_CLASS`` and the scheduler (RedisRecrawlScheduler keeps its history in
Redis).

Above history/: it reads scrapy-redis's connection settings the scrapy-redis way
(redis_settings.py), which history/ (no Scrapy, no scrapy-redis) never does; the
stores are then built from plain arguments.
"""

from __future__ import annotations

import os
from typing import Any

from .history.base import HistoryStore, file_store
from .history.class_path import scheduler_uses_redis
from .history.epoch import on_store_loss
from .history.ownership import default_sqlite_path, for_spider
from .history.sqlite import SqliteHistoryStore
from .history.third_party import build_store
from .settings import DEFAULTS, RecrawlSettingError, get

__all__ = ["check_directory", "open_store"]


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
    ``RECRAWL_STORE_CLASS`` names a backend of one's own, as HTTPCACHE_STORAGE names
    one, built with both and checked against the store contract
    (:func:`~.history.third_party.build_store`).
    """
    cls_path = get(settings, "RECRAWL_STORE_CLASS")
    if cls_path:
        return build_store(cls_path, settings, spider=spider, read_only=read_only)
    spec = get(settings, "RECRAWL_STORE")
    options: dict[str, Any] = {
        "store_bodies": get(settings, "RECRAWL_STORE_BODIES"),
        "flush_every": get(settings, "RECRAWL_FLUSH_EVERY"),
        "flush_seconds": get(settings, "RECRAWL_FLUSH_SECONDS"),
    }
    sqlite_options = {
        **options,
        "log_maxlen": get(settings, "RECRAWL_SQLITE_LOG_MAXLEN"),
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
        from .history.redis import RedisHistoryStore
        from .redis_settings import connection_args

        key = get(settings, "RECRAWL_REDIS_KEY") or DEFAULTS["RECRAWL_REDIS_KEY"]
        maxlen = get(settings, "RECRAWL_REDIS_LOG_MAXLEN")
        shards = get(settings, "RECRAWL_REDIS_SHARDS")
        # scrapy-redis's way: REDIS_PARAMS over its defaults, then REDIS_URL (or this URL)
        params, source = connection_args(settings, None if spec == "redis" else spec)
        return RedisHistoryStore(
            connection=params,
            source=source,
            settings=settings,
            key=for_spider(key, "RECRAWL_REDIS_KEY", spider),
            log_maxlen=10_000_000 if maxlen is None else maxlen,
            on_loss=on_store_loss(settings),
            shards=DEFAULTS["RECRAWL_REDIS_SHARDS"] if shards is None else shards,
            read_only=read_only,
            **options,
        )
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
    spec = get(settings, "RECRAWL_STORE")
    raise RecrawlSettingError(
        f"RECRAWL_STORE={os.fspath(spec) if spec is not None else file.path!r}: the "
        f"directory {directory} does not exist; create it, or leave RECRAWL_STORE unset "
        "for the default location"
    )
