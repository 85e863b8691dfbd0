"""Fixtures for a plug-in's or a backend's tests: an open, empty store of each kind.

Use them from a ``conftest.py`` (``from scrapy_recrawl.testing import sqlite_store``):

* :func:`sqlite_store` -- a SQLite store in the test's ``tmp_path``: needs nothing
  beyond the package and pytest;
* :func:`redis_store` -- a Redis store under a key prefix of its own (deleted after
  the test) on the redis-server named by the ``RECRAWL_TEST_REDIS_URL`` environment
  variable (``redis://127.0.0.1:6379/15``): a server you run, version 6.2 or later;
  the test fails, saying so, when the variable is unset.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..history.base import HistoryStore
from ..history.redis import RedisHistoryStore
from ..history.sqlite import SqliteHistoryStore

#: the environment variable naming the redis-server :func:`redis_store` uses
REDIS_URL_VARIABLE = "RECRAWL_TEST_REDIS_URL"


def make_sqlite_store(directory: Path, name: str = "history.sqlite3") -> SqliteHistoryStore:
    """An open, empty SQLite store in ``directory`` (writes buffered by 3 visits, so a
    test sees the buffer as the crawl does)."""
    store = SqliteHistoryStore(directory / name, flush_every=3)
    store.open()
    return store


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[HistoryStore]:
    """An open, empty SQLite history store, closed after the test."""
    store = make_sqlite_store(tmp_path)
    yield store
    store.close()


def redis_url() -> str:
    """The redis-server the Redis fixtures use (``RECRAWL_TEST_REDIS_URL``)."""
    url = os.environ.get(REDIS_URL_VARIABLE)
    if not url:
        pytest.fail(
            f"{REDIS_URL_VARIABLE} is not set: the Redis fixtures need a redis-server you "
            f"run (e.g. `redis-server --port 6390` and {REDIS_URL_VARIABLE}="
            "redis://127.0.0.1:6390/0)",
            pytrace=False,
        )
    return url


def _delete_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        # the store's own keys ({prefix}:...) and its shards' ({prefix#n}:...)
        for pattern in (f"{{{prefix}}}:*", f"{{{prefix}#*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


@contextlib.contextmanager
def redis_store_at(url: str, *, shards: int = 16) -> Iterator[HistoryStore]:
    """An open, empty Redis history store on the server at ``url``, under a key prefix
    of its own; closed, and its keys deleted, on leaving."""
    prefix = f"recrawl-test-{uuid.uuid4().hex}"
    store = RedisHistoryStore(url, key=prefix, shards=shards)
    try:
        store.open()
        yield store
        store.close()
    finally:
        _delete_prefix(url, prefix)


@pytest.fixture
def redis_store() -> Iterator[HistoryStore]:
    """An open, empty Redis history store (16 shards, the default) on
    ``RECRAWL_TEST_REDIS_URL``'s server (:func:`redis_store_at`)."""
    with redis_store_at(redis_url()) as store:
        yield store
