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
  inline shapes scrubbed, and the rows' offsets updated, all of a shard in one
  MULTI/EXEC under WATCH (a writer meanwhile makes it start again);
* the store's frontier (``{p}:frontier:req``).

Each part is safe to run again (a scrubbed request scrubs to itself), so an
interrupted migration simply runs again at the next open; the version is marked 6
last.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import HistoryStoreError
from .redis_schema import BIG_BLOB, ROW_DTYPE, Layout, blob, split_blob
from .request_codec import scrubbed_previous as scrubbed

#: attempts at a shard's rewrite while other writers keep changing it
_ATTEMPTS = 100


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
    pipe = client.pipeline()  # one slot: the store's hash tag
    for sid, shape in client.hgetall(shapes).items():
        new = scrubbed(shape)
        if new is None or new == shape:
            continue
        pipe.hset(shapes, sid, new)
        pipe.hdel(index, shape)
        pipe.hset(index, new, sid)
    pipe.execute()


def _scrub_hash(client: Any, key: str) -> None:
    pipe = client.pipeline()
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
    import redis

    rows_key, blobs_key, big_key = (layout.shard(shard, n) for n in ("rows", "blobs", "bigreq"))
    for _ in range(_ATTEMPTS):
        with client.pipeline() as pipe:
            try:
                pipe.watch(rows_key, blobs_key, big_key)
                raw = pipe.get(rows_key) or b""
                if not raw:
                    return  # a shard with no URL yet
                rows = np.frombuffer(
                    raw[: len(raw) - len(raw) % ROW_DTYPE.itemsize], dtype=ROW_DTYPE
                ).copy()
                blobs = pipe.get(blobs_key) or b""
                big = pipe.hgetall(big_key)
                out = bytearray()
                big_new: dict[bytes, bytes] = {}
                for j in range(len(rows)):
                    length, offset = int(rows["req_len"][j]), int(rows["req_off"][j])
                    if length == 0:
                        continue
                    if length == BIG_BLOB:
                        field = str(layout.id_of(shard, j)).encode()
                        value = big.get(field)
                        if value is not None:
                            big_new[field] = _scrub_blob(value) or value
                        continue
                    new = _scrub_blob(blobs[offset : offset + length]) or b""
                    rows["req_off"][j] = len(out)
                    rows["req_len"][j] = len(new)
                    out += new
                pipe.multi()
                whole = len(raw) - len(raw) % ROW_DTYPE.itemsize
                pipe.set(rows_key, rows.tobytes() + raw[whole:])
                if out:
                    pipe.set(blobs_key, bytes(out))
                else:
                    pipe.delete(blobs_key)
                pipe.delete(big_key)
                if big_new:
                    pipe.hset(big_key, mapping=big_new)
                pipe.execute()
                return
            except redis.WatchError:
                continue
    raise HistoryStoreError(
        f"history store {location}: the migration to schema version 6 kept being "
        "interrupted by other writers; stop the crawlers of the older release and retry"
    )
