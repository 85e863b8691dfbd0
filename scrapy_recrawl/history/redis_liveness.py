"""Who is alive, by the Redis's clock: one liveness rule for every process that
announces itself in a Redis.

A *holder* (a process) keeps one field of a hash: its id (``host:pid:token``,
:func:`holder_id`) -> a JSON status, stamped by the server with its own ``TIME``
(:data:`STAMP_LUA`); a reader takes the statuses seen within a timeout of the
server's ``TIME`` now (:func:`seen_within`). Neither side reads a machine's own
clock, so a machine whose clock is off (minutes ahead or behind) neither looks
gone to the others nor takes them for gone. A holder leaves by deleting its field
(HDEL, which never creates a key); one that was killed counts until the timeout
has passed (``RECRAWL_REDIS_WORKER_TIMEOUT``, :func:`worker_timeout`).

Two hashes use it: the workers of a ``RedisRecrawlScheduler`` cycle
(``<spider>:recrawl:workers``, frontier/redis.py, stamped behind the shared cycle's
fence) and the crawl lease of a Redis history store (``{<p>}:lease``,
history/redis_lease.py, stamped behind the store's epoch), which ``scrapy recrawl-reset``
reads to refuse while any crawl holds the store. Statuses are read as JSON data:
nothing read back is unpickled or evaluated, and a field that is not a status this
package wrote is no holder.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from typing import Any

from .. import lua

#: The Redis's own clock, read only (lua/liveness_now.lua): ``{seconds, microseconds}``.
NOW_LUA = lua.load("liveness_now")

#: A holder's status, stamped with the Redis's clock (lua/liveness_stamp.lua): KEYS[1]
#: the hash; ARGV :func:`stamp_args`. Returns the time seen.
STAMP_LUA = lua.load("liveness_stamp")


def worker_timeout(settings: Any) -> float:
    """``RECRAWL_REDIS_WORKER_TIMEOUT``, checked: the seconds of silence after which a
    holder counts as gone."""
    from ..settings import get

    return float(
        get(settings, "RECRAWL_REDIS_WORKER_TIMEOUT", (int, float), lambda v: v > 0, "seconds > 0")
    )


def holder_id() -> str:
    """A new holder id for this process: ``host:pid:token`` (the token tells two holders
    of one process apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def process_of(holder: str) -> str:
    """The process a holder id names, ``host:pid`` (its token dropped)."""
    return holder.rsplit(":", 1)[0] if holder.count(":") >= 2 else holder


def stamp_args(holder: str, fields: Mapping[str, Any], expire_seconds: float = 0.0) -> list[Any]:
    """:data:`STAMP_LUA`'s ARGV: ``holder``'s status with ``fields`` (JSON data), the
    hash kept ``expire_seconds`` after this stamp (0: no expiry)."""
    return [holder, json.dumps(dict(fields)), max(0, int(round(expire_seconds * 1000)))]


def server_time(answer: Any) -> float:
    """:data:`NOW_LUA`'s answer as seconds since the epoch."""
    seconds, micros = answer
    return int(seconds) + int(micros) / 1e6


def seen_within(raw: Mapping[Any, Any], now: float, timeout: float) -> dict[str, dict[str, Any]]:
    """The holders of a hash read whole (``raw``: HGETALL) whose status was stamped at
    most ``timeout`` seconds before ``now`` (the server's time), by id, with their
    status. A field that is not a status this package wrote is skipped (read as data)."""
    out = {}
    for k, v in raw.items():
        try:
            status = json.loads(v)
            seen = float(status["seen"])
            holder = k.decode() if isinstance(k, bytes) else str(k)
        except (ValueError, TypeError, KeyError):
            continue  # not a status stamped here: no holder
        if now - seen <= timeout:
            out[holder] = status
    return out
