"""The Redis store's migration to schema version 6: no credential kept at rest.

Earlier releases stored each URL's request as it was after the downloader
middlewares: with its ``Authorization``, ``Cookie`` and ``Proxy-Authorization``
headers, a proxy's password, the User-Agent and timeout of the crawl that made it
(history/request_scrub.py). In the version-5 layout (:mod:`.redis_schema`) those
requests are in three places, each rewritten here:

* the store's request-shape dictionary (``{p}:dict`` id -> shape, ``{p}:dictidx``
  shape -> id): each shape scrubbed under its id (a blob names it by id, so ids are
  kept; two shapes that become one keep both ids);
* each shard's blobs (``{p#s}:blobs``, append-only: every visit appended its blob, so
  earlier requests are still in the string, unreferenced) and big blobs
  (``{p#s}:bigreq``): the string is rewritten with only the blobs the rows name, their
  inline shapes scrubbed, and the rows' offsets updated, all of a shard at once by one
  script that first checks nothing was written since it was read (a writer meanwhile
  makes it start again; one slot: a Redis Cluster too);
* the store's frontier (``{p}:frontier:req``).

Each part is safe to run again (a scrubbed request scrubs to itself), so an
interrupted migration simply runs again at the next open; the version is marked 6
last.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .base import HistoryStoreError
from .redis_schema import BIG_BLOB, ROW_DTYPE, Layout, blob, split_blob
from .request_codec import scrubbed_previous as scrubbed

#: attempts at a shard's rewrite while other writers keep changing it
_ATTEMPTS = 100

#: Replace a shard's rows, blobs and big blobs if nothing was written since they were
#: read: the rows unchanged (their SHA1) and the append-only blobs not grown. KEYS rows,
#: blobs, bigreq; ARGV the rows' SHA1, the blobs' length, the new rows, the new blobs,
#: then (field, value) pairs of bigreq. Returns 1 when done, 0 when it must start again.
REWRITE_SHARD_LUA = r"""
local rows = redis.call('GET', KEYS[1]) or ''
if redis.sha1hex(rows) ~= ARGV[1] then return 0 end
if redis.call('STRLEN', KEYS[2]) ~= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
if ARGV[4] == '' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], ARGV[4]) end
redis.call('DEL', KEYS[3])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
return 1
"""


def migrate_5_to_6(client: Any, layout: Layout, location: str) -> None:
    """Scrub every stored request of the version-5 store ``layout`` names, then mark it
    version 6 (module docstring)."""
    _scrub_dictionary(client, layout)
    _scrub_hash(client, layout.store("frontier:req"))
    for shard in range(layout.shards):
        _scrub_shard(client, layout, shard, location)
    client.hset(layout.store("meta"), "schema_version", 6)


def _scrub_dictionary(client: Any, layout: Layout) -> None:
    shapes, index = layout.store("dict"), layout.store("dictidx")
    pipe = client.pipeline(transaction=False)  # each write safe to repeat
    for sid, shape in client.hgetall(shapes).items():
        new = scrubbed(shape)
        if new is None or new == shape:
            continue
        pipe.hset(shapes, sid, new)
        pipe.hdel(index, shape)
        pipe.hset(index, new, sid)
    pipe.execute()


def _scrub_hash(client: Any, key: str) -> None:
    pipe = client.pipeline(transaction=False)
    for field, value in client.hscan_iter(key, count=1000):
        new = scrubbed(value)
        if new is not None and new != value:
            pipe.hset(key, field, new)
    pipe.execute()


def _scrub_blob(data: bytes | None) -> bytes | None:
    """A URL's blob with its inline shape scrubbed (one naming a dictionary shape, or
    no request, is left as it is: the dictionary is scrubbed apart)."""
    if not data:
        return data
    try:
        part, sid, inline = split_blob(data)
    except (ValueError, IndexError):
        return data  # not a blob this package wrote: read as data, never run
    if inline is None:
        return data
    new = scrubbed(inline)
    return data if new is None else blob(part, 0, new)


def _scrub_shard(client: Any, layout: Layout, shard: int, location: str) -> None:
    keys = [layout.shard(shard, n) for n in ("rows", "blobs", "bigreq")]
    script = client.register_script(REWRITE_SHARD_LUA)
    for _ in range(_ATTEMPTS):
        pipe = client.pipeline(transaction=False)  # one slot; checked by the script
        for key in keys[:2]:
            pipe.get(key)
        pipe.hgetall(keys[2])
        raw, blobs, big = pipe.execute()
        raw, blobs = raw or b"", blobs or b""
        if not raw:
            return  # a shard with no URL yet
        whole = len(raw) - len(raw) % ROW_DTYPE.itemsize
        rows = np.frombuffer(raw[:whole], dtype=ROW_DTYPE).copy()
        out = bytearray()
        big_new: list[bytes] = []
        for j in range(len(rows)):
            length, offset = int(rows["req_len"][j]), int(rows["req_off"][j])
            if length == 0:
                continue
            if length == BIG_BLOB:
                field = str(layout.id_of(shard, j)).encode()
                value = big.get(field)
                if value is not None:
                    big_new += [field, _scrub_blob(value) or value]
                continue
            new = _scrub_blob(blobs[offset : offset + length]) or b""
            rows["req_off"][j] = len(out)
            rows["req_len"][j] = len(new)
            out += new
        args = [hashlib.sha1(raw).hexdigest(), len(blobs), rows.tobytes() + raw[whole:], bytes(out)]
        if script(keys=keys, args=args + big_new, client=client):
            return
    raise HistoryStoreError(
        f"history store {location}: the migration to schema version 6 kept being "
        "interrupted by other writers; stop the crawlers of the older release and retry"
    )
