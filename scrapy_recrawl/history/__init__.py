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
)
from .epoch import StoreLost, on_store_loss
from .ownership import StoreRefused, default_sqlite_path, for_spider
from .sqlite import SqliteHistoryStore

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

    ``read_only``: for reading only (the offline commands): a SQLite store is then
    never created, locked, migrated or changed (history/sqlite_readonly.py).
    """
    cls_path = get(settings, "RECRAWL_STORE_CLASS", str)
    if cls_path:
        return _third_party_store(cls_path, settings)
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
    if spec is None and _scheduler_uses_redis(settings):
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
        return RedisHistoryStore(
            None if spec == "redis" else spec,
            settings=settings,
            key=for_spider(key, "RECRAWL_REDIS_KEY", spider),
            store_bodies=options["store_bodies"],
            log_maxlen=10_000_000 if maxlen is None else maxlen,
            on_loss=on_store_loss(settings),
            shards=DEFAULTS["RECRAWL_REDIS_SHARDS"] if shards is None else shards,
            flush_every=options["flush_every"],
            flush_seconds=options["flush_seconds"],
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
    if not isinstance(store, SqliteHistoryStore):
        return
    directory = os.path.dirname(os.path.abspath(store.path))
    if os.path.isdir(directory):
        return
    if os.path.abspath(store.path) == os.path.abspath(default_sqlite_path(spider)):
        return
    spec = get(settings, "RECRAWL_STORE", (str, os.PathLike))
    raise RecrawlSettingError(
        f"RECRAWL_STORE={os.fspath(spec) if spec is not None else store.path!r}: the "
        f"directory {directory} does not exist; create it, or leave RECRAWL_STORE unset "
        "for the default location"
    )


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
