"""Connecting to a Redis from plain connection arguments, and naming it in a message
without its password.

scrapy_recrawl/redis_settings.py turns scrapy-redis's settings (``REDIS_URL``,
``REDIS_HOST`` / ``REDIS_PORT``, ``REDIS_PARAMS``, or ``RECRAWL_STORE``'s URL) into
redis-py's keyword arguments; this module connects with them, importing neither Scrapy
nor scrapy-redis. ``RECRAWL_REDIS_CLUSTER = True``: the Redis named is a seed node of a
Redis Cluster, and the client is a ``redis.cluster.RedisCluster`` (the arguments passed
on to every node's connections). A mismatch -- a cluster named but a single Redis
found, or the reverse -- is one :class:`RedisModeError` naming the setting, raised when
the client first connects (docs/distributed.md, "Redis Cluster").

:func:`redis_from_settings` and :func:`redis_location` take Scrapy settings, for the
callers that still hand them over (frontier/, the store built with ``settings=``): they
ask redis_settings.py for the arguments when called (no import of Scrapy here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .base import HistoryStoreError

#: the setting that says the Redis is a cluster (settings.py)
CLUSTER_SETTING = "RECRAWL_REDIS_CLUSTER"


class RedisModeError(HistoryStoreError):
    """A Redis Cluster where a single Redis was named, or the reverse (one line)."""


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis
    from redis.exceptions import RedisClusterException

    # RedisClusterException is not a RedisError (cross-slot scripts, no node reachable)
    return (redis.RedisError, RedisClusterException, OSError)


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


def cluster_mode(settings: Any) -> bool:
    """``RECRAWL_REDIS_CLUSTER``: every Redis the crawl names is a Redis Cluster (a
    Settings-like mapping, read with this package's reader: no Scrapy needed)."""
    if settings is None:
        return False
    from ..settings import get

    return bool(get(settings, CLUSTER_SETTING, bool))


def _wants_tls(params: dict[str, Any]) -> bool:
    """A ``rediss://`` URL, or ``ssl=True`` in REDIS_PARAMS (named ``rediss://`` too)."""
    if params.get("url"):
        return urlsplit(str(params["url"])).scheme.lower() == "rediss"
    return bool(params.get("ssl"))


#: the URL schemes redis-py accepts (redis.connection.parse_url)
SCHEMES = ("redis", "rediss", "unix")


def _check_scheme(url: str, setting: str) -> None:
    """A URL Redis does not accept (``http://...``) is one line naming the setting, not
    redis-py's ValueError with a traceback from wherever the client is first built."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        from ..settings import RecrawlSettingError

        raise RecrawlSettingError(
            f"{setting}={redacted(url)!r}: a Redis URL starts with redis://, rediss:// or "
            f"unix://, not {scheme + '://' if scheme else 'no scheme'}"
        )


def _param_location(params: dict[str, Any]) -> str:
    if params.get("url"):
        return redacted(str(params["url"]))
    scheme = (
        "rediss" if _wants_tls(params) or _tls_class(params.get("connection_class")) else "redis"
    )
    return f"{scheme}://{params.get('host', 'localhost')}:{params.get('port', 6379)}/0"


def _tls_class(connection_class: Any) -> bool:
    if connection_class is None:
        return False
    from .redis_tls import is_tls

    return is_tls(connection_class)


def connect(
    params: Mapping[str, Any], *, cluster: bool = False, source: str = "RECRAWL_STORE"
) -> tuple[Any, str]:
    """A redis-py client for plain connection arguments (redis-py's keywords, ``url``
    among them; ``redis_cls`` a class: scrapy_recrawl/redis_settings.py makes them from
    scrapy-redis's settings), and its location for messages (password left out).
    ``cluster``: a Redis Cluster client (``RECRAWL_REDIS_CLUSTER``); ``source``: the
    setting the URL came from, for the one line a URL of another scheme gets.

    A single Redis is not connected to here (its first command checks that it is not
    a cluster node); a cluster client learns the slots from its seed node now, so an
    unreachable or non-cluster seed raises here."""
    params = _checked(params, source)
    if cluster:
        return _cluster_client(params)
    # a single Redis: its connections check, once each, that it is not a cluster node
    params["redis_connect_func"] = _refuse_cluster_node
    if params.get("url") and _wants_tls(params):
        from .redis_tls import BoundedTlsConnection

        # rediss://: the TLS handshake bounded and not retried (redis_tls.py); the
        # URL's and the arguments' ssl_* options reach it as they reach redis-py's own
        params["connection_class"] = BoundedTlsConnection
    cls = params.pop("redis_cls", None)
    if cls is None:
        import redis

        cls = redis.StrictRedis
    url = params.pop("url", None)
    client = cls.from_url(url, **params) if url else cls(**params)
    return client, client_location(client)


def location_of(
    params: Mapping[str, Any], *, cluster: bool = False, source: str = "RECRAWL_STORE"
) -> str:
    """Where :func:`connect` would connect, for messages, without connecting (a cluster
    client would: it learns the slots when built)."""
    if cluster:
        return f"{_param_location(_checked(params, source))} (Redis Cluster)"
    return connect(params, source=source)[1]


def _checked(params: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A copy of the arguments, its URL's scheme checked, never decoding (the store
    keeps binary data)."""
    out = dict(params)
    if out.get("url"):
        _check_scheme(str(out["url"]), source)
    out["decode_responses"] = False
    return out


def redis_from_settings(settings: Any, url: str | None = None) -> tuple[Any, str]:
    """A client as scrapy-redis builds it from ``settings`` (or for ``url``): kept for
    the callers that hand over Scrapy settings (frontier/, the store built from
    settings); scrapy_recrawl/redis_settings.py reads them (scrapy-redis's way), this
    package only connects."""
    from ..redis_settings import connection_args

    params, source = connection_args(settings, url)
    return connect(params, cluster=cluster_mode(settings), source=source)


def redis_location(settings: Any, url: str | None = None) -> str:
    """Where :func:`redis_from_settings` would connect, for messages, without
    connecting."""
    from ..redis_settings import connection_args

    params, source = connection_args(settings, url)
    return location_of(params, cluster=cluster_mode(settings), source=source)


def _cluster_client(params: dict[str, Any]) -> tuple[Any, str]:
    from redis.cluster import RedisCluster
    from redis.exceptions import RedisClusterException

    location = _param_location(params)
    cls = params.pop("redis_cls", None)
    if cls is None or not (isinstance(cls, type) and issubclass(cls, RedisCluster)):
        cls = RedisCluster  # REDIS_PARAMS' redis_cls names a single-Redis class
    db = params.pop("db", 0)
    if int(db or 0) != 0:
        raise RedisModeError(
            f"REDIS_DB / REDIS_PARAMS db={db!r}: a Redis Cluster ({CLUSTER_SETTING}) has "
            "only database 0"
        )
    url = params.pop("url", None)
    try:
        if url is not None:
            client = cls.from_url(url, **params)
        else:
            client = cls(**params)
    except RedisClusterException as exc:
        if "Cluster mode is not enabled" in str(exc):
            raise RedisModeError(
                f"the Redis at {location} is a single Redis, not a Redis Cluster node, but "
                f"{CLUSTER_SETTING} is True: set {CLUSTER_SETTING} = False, or name a node "
                "of the cluster"
            ) from None
        if "db" in str(exc) and "cluster mode" in str(exc):
            raise RedisModeError(f"{location}: {exc} ({CLUSTER_SETTING})") from None
        raise HistoryStoreError(
            f"cannot reach the Redis Cluster at {location} ({CLUSTER_SETTING}): {exc}"
        ) from exc
    return client, f"{location} (Redis Cluster)"


def _refuse_cluster_node(conn: Any) -> None:
    """A single-Redis connection's set-up: redis-py's own, then ``INFO cluster``; a
    cluster node (``cluster_enabled:1``) is refused while RECRAWL_REDIS_CLUSTER is off.
    A Redis that refuses ``INFO`` (an ACL without it, a proxy) is let through."""
    from redis.exceptions import ResponseError

    conn.on_connect()
    conn.send_command("INFO", "cluster")
    try:
        reply = conn.read_response()
    except ResponseError:
        return  # INFO refused (an ACL, a proxy): cannot tell, a cluster's MOVED will say
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    if "cluster_enabled:1" in text:
        conn.disconnect()
        path = getattr(conn, "path", None)
        scheme = "rediss" if _tls_class(type(conn)) else "redis"
        where = f"unix://{path}" if path else f"{scheme}://{conn.host}:{conn.port}"
        raise RedisModeError(
            f"the Redis at {where} is a Redis Cluster node, but {CLUSTER_SETTING} is False: "
            f"set {CLUSTER_SETTING} = True to use the cluster"
        )


def client_location(client: Any) -> str:
    nodes = getattr(client, "get_nodes", None)
    if nodes is not None and not hasattr(client, "connection_pool"):
        first = client.get_default_node() or nodes()[0]
        pool = getattr(getattr(first, "redis_connection", None), "connection_pool", None)
        scheme = "rediss" if _tls_class(getattr(pool, "connection_class", None)) else "redis"
        return f"{scheme}://{first.host}:{first.port}/0 (Redis Cluster)"
    pool = client.connection_pool
    kw = pool.connection_kwargs
    if "path" in kw:
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    # a rediss:// URL gives the pool an SSL connection class, not an `ssl` keyword
    scheme = "rediss" if kw.get("ssl") or _tls_class(pool.connection_class) else "redis"
    return f"{scheme}://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"
