"""Scrapy settings -> plain Redis connection arguments, the scrapy-redis way.

The one place that reads ``REDIS_URL``, ``REDIS_HOST``, ``REDIS_PORT``, ``REDIS_DB``,
``REDIS_ENCODING``, ``REDIS_DECODE_RESPONSES`` and ``REDIS_PARAMS`` as scrapy-redis does
(its defaults, its setting-to-argument map, ``redis_cls`` as a class path): the history
store and the distributed frontier connect with what it returns
(history/redis_connection.py: ``connect``), so history/ imports neither Scrapy nor
scrapy-redis.
"""

from __future__ import annotations

import json
from typing import Any

from .history.redis_connection import cluster_mode, connect, location_of


def _settings_dict(settings: Any, name: str) -> dict[str, Any]:
    if settings is None:
        return {}
    getdict = getattr(settings, "getdict", None)
    if getdict is not None:
        return dict(getdict(name))
    value = settings.get(name) or {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def connection_args(settings: Any, url: str | None = None) -> tuple[dict[str, Any], str]:
    """redis-py's keyword arguments as scrapy-redis builds them from ``settings``
    (``REDIS_PARAMS`` over its defaults, then ``REDIS_URL`` / ``REDIS_HOST`` / ... ), or
    for ``url`` (``RECRAWL_STORE``'s) with ``REDIS_PARAMS``; and the setting the URL
    came from (for the one line a URL of another scheme gets)."""
    from scrapy_redis import connection, defaults

    params: dict[str, Any] = defaults.REDIS_PARAMS.copy()
    params.update(_settings_dict(settings, "REDIS_PARAMS"))
    if url is not None:
        params["url"] = url
        source = "RECRAWL_STORE"
    else:
        for name, dest in connection.SETTINGS_PARAMS_MAP.items():
            value = settings.get(name) if settings is not None else None
            if value:
                params[dest] = value
        if settings is not None and settings.get("REDIS_URL"):
            source = "REDIS_URL"
        else:
            source = "REDIS_PARAMS['url']"
    if isinstance(params.get("redis_cls"), str):
        from scrapy.utils.misc import load_object

        params["redis_cls"] = load_object(params["redis_cls"])
    return params, source


def redis_from_settings(settings: Any, url: str | None = None) -> tuple[Any, str]:
    """A client as scrapy-redis builds it from ``settings`` (or for ``url``), and where
    it points: the distributed frontier's."""
    params, source = connection_args(settings, url)
    return connect(params, cluster=cluster_mode(settings), source=source)


def redis_location(settings: Any, url: str | None = None) -> str:
    """Where :func:`redis_from_settings` would connect, for messages, without
    connecting."""
    params, source = connection_args(settings, url)
    return location_of(params, cluster=cluster_mode(settings), source=source)
