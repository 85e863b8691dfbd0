"""Which Redis, from scrapy-redis's settings, and how to name it in a message without its password."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.RedisError, OSError)


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def _settings_dict(settings: Any, name: str) -> dict[str, Any]:
    if settings is None:
        return {}
    getdict = getattr(settings, "getdict", None)
    if getdict is not None:
        return dict(getdict(name))
    value = settings.get(name) or {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def redis_from_settings(settings: Any, url: str | None = None) -> tuple[Any, str]:
    """A redis-py client as scrapy-redis builds it (``REDIS_URL``, ``REDIS_HOST``,
    ``REDIS_PORT``, ``REDIS_DB``, ``REDIS_PARAMS``), or for ``url`` with
    ``REDIS_PARAMS``; and its location for messages (password left out)."""
    from scrapy_redis import connection, defaults

    params: dict[str, Any] = defaults.REDIS_PARAMS.copy()
    params.update(_settings_dict(settings, "REDIS_PARAMS"))
    if url is None:
        for source, dest in connection.SETTINGS_PARAMS_MAP.items():
            value = settings.get(source) if settings is not None else None
            if value:
                params[dest] = value
    else:
        params["url"] = url
    # the store keeps binary data: never let the client decode it
    params["decode_responses"] = False
    if isinstance(params.get("redis_cls"), str):
        from scrapy.utils.misc import load_object

        params["redis_cls"] = load_object(params["redis_cls"])
    client = connection.get_redis(**params)
    return client, client_location(client)


def client_location(client: Any) -> str:
    kw = client.connection_pool.connection_kwargs
    if "path" in kw:
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    scheme = "rediss" if kw.get("ssl") else "redis"
    return f"{scheme}://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"
