"""A store built from a bare URL connects as one built from settings does."""

from __future__ import annotations

import scrapy_redis.defaults

from scrapy_recrawl.history.redis_connection import DEFAULT_PARAMS
from scrapy_recrawl.history.redis_session import RedisSession
from scrapy_recrawl.redis_settings import connection_args


def test_the_defaults_are_scrapy_redis_own():
    assert DEFAULT_PARAMS == scrapy_redis.defaults.REDIS_PARAMS


def test_a_bare_url_gets_what_connection_args_gives_it():
    url = "redis://127.0.0.1:6399/3"
    session = RedisSession(
        "k",
        url=url,
        settings=None,
        connection=None,
        source="RECRAWL_STORE",
        client=None,
        shards=1,
        on_loss="stop",
        read_only=False,
    )
    params, source = connection_args(None, url)
    assert session._connection == params and source == "RECRAWL_STORE"
    assert session.location == "redis://127.0.0.1:6399/3"
