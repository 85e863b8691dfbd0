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
history/redis.py, stamped behind the store's epoch), which ``scrapy recrawl-reset``
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

#: The Redis's own clock (KEYS[1]: a key of the hash's slot, so on a cluster the master
#: every holder stamps with answers): read only, no write. ``{seconds, microseconds}``.
NOW_LUA = r"""
local t = redis.call('TIME')
return {t[1], t[2]}
"""

#: A holder's status, stamped with the Redis's clock. KEYS[1] the hash; ARGV the holder
#: id, the status's other fields as a JSON object this package wrote (``{}``: none),
#: and the hash's expiry in milliseconds (0: none; only ever lengthened, so a holder
#: with a shorter timeout never cuts another's lease short). Returns the time seen.
#: Scripts replicate their effects (Redis >= 5 by default; asked for on older ones),
#: so a write after TIME is allowed.
STAMP_LUA = r"""
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local seen = string.format('%d.%06d', tonumber(t[1]), tonumber(t[2]))
local fields = string.sub(ARGV[2], 1, -2)
if fields ~= '{' then fields = fields .. ', ' end
redis.call('HSET', KEYS[1], ARGV[1], fields .. '"seen": ' .. seen .. '}')
local expire = tonumber(ARGV[3])
if expire > 0 and redis.call('PTTL', KEYS[1]) < expire then
  redis.call('PEXPIRE', KEYS[1], expire)
end
return seen
"""


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
