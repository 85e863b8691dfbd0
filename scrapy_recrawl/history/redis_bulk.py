"""Writing many URLs at once into the Redis store's layout (bench/redis_store.py; the
writer a future migration that re-encodes a store would use), and deleting a store's
keys (clear(): its own, and a pre-release store's of the layout before version 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .redis_schema import BIG_BLOB, MAX_SHAPES, PRESENT, ROW_DTYPE, Layout


def delete_store_keys(client: Any, layout: Layout) -> None:
    """Delete every key of the store's hash tags (its own and its shards')."""
    keys: list[Any] = []
    for pattern in layout.glob():
        keys.extend(client.scan_iter(match=pattern, count=1000))
    _delete(client, keys)


def _delete(client: Any, keys: list[Any]) -> None:
    """Delete ``keys``, one key per command, pipelined a thousand at a time (on a
    cluster, each goes to its slot's node)."""
    for start in range(0, len(keys), 1000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 1000]:
            pipe.delete(key)
        pipe.execute()


#: The first name after the prefix of every key a store of schema versions 1 to 4 wrote
#: (``<prefix>:rows:3``, ``<prefix>:side:basket_model``, ...): what clear() deletes of a
#: pre-release store so that ``scrapy recrawl-reset`` can empty it.
PRE_RELEASE_NAMES = frozenset(
    {"meta", "cycle", "ids", "next_id", "log", "logstart", "frontier", "rows", "side"}
    | {"urls", "req", "sig", "body", "etag", "lastmod", "bags", "dists"}
)


def delete_pre_release_keys(client: Any, prefix: str) -> None:
    """Delete the keys of a store of schema versions 1 to 4 under ``prefix``
    (``<prefix>:<name>``; not a longer prefix's, such as ``recrawl:<spider>:...``)."""
    skip = len(prefix) + 1
    keys = []
    for key in client.scan_iter(match=f"{_escaped(prefix)}:*", count=1000):
        name = key.decode("latin-1") if isinstance(key, bytes) else key
        if name[skip:].split(":", 1)[0] in PRE_RELEASE_NAMES:
            keys.append(key)
    _delete(client, keys)


def _escaped(prefix: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix)


def write_bulk(
    client: Any,
    layout: Layout,
    *,
    ids: np.ndarray,
    rows: np.ndarray,
    fingerprints: Sequence[bytes],
    blobs: Sequence[bytes],
    shapes: Sequence[bytes] = (),
    hosts: Sequence[str] = (),
    next_local: Sequence[int] | None = None,
) -> None:
    """Write URLs into an empty store of ``layout``: their rows (:data:`ROW_DTYPE`, the
    blob locations filled in here), index entries and blobs (history/redis.py: ``blob``;
    a shape id ``i`` refers to ``shapes[i - 1]``, a host id ``i`` to ``hosts[i - 1]``,
    written as the store's dictionaries).
    ``ids`` must place each URL in the shard of its fingerprint (or the store has one
    shard). ``next_local``: each shard's id counter (default: past its last row)."""
    S = layout.shards
    ids = np.asarray(ids, dtype=np.int64)
    shard_of = (ids - 1) % S
    local_of = (ids - 1) // S
    pipe = client.pipeline(transaction=False)
    for i, shape in enumerate(shapes[:MAX_SHAPES], start=1):
        pipe.hset(layout.store("dict"), i, shape)
        pipe.hset(layout.store("dictidx"), shape, i)
    for i, host in enumerate(hosts[:MAX_SHAPES], start=1):
        pipe.hset(layout.store("hosts"), i, host)
        pipe.hset(layout.store("hostidx"), host, i)
    pipe.execute()
    buckets: dict[tuple[int, int], dict[bytes, int]] = {}
    for k, fp in enumerate(fingerprints):
        shard, bucket, field = layout.locate(fp)
        if S > 1 and shard != shard_of[k]:
            raise ValueError(f"URL id {int(ids[k])} is not in its fingerprint's shard {shard}")
        buckets.setdefault((shard, bucket), {})[field] = int(ids[k])
    lens = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    if len(lens) and lens.max() >= BIG_BLOB:
        raise ValueError("a blob of 65,535 bytes or more: write it with record()")
    for s in range(S):
        mine = np.flatnonzero(shard_of == s)
        order = mine[np.argsort(local_of[mine], kind="stable")]
        count = int(local_of[order[-1]]) + 1 if len(order) else 0
        table = np.zeros(count, dtype=ROW_DTYPE)
        here = rows[order]
        here["req_len"] = lens[order]
        here["req_off"] = np.cumsum(lens[order]) - lens[order]
        table[local_of[order]] = here
        _set_big(client, layout.shard(s, "rows"), table.tobytes())
        _set_big(client, layout.shard(s, "blobs"), b"".join([blobs[k] for k in order.tolist()]))
        counter = count if next_local is None else int(next_local[s])
        client.set(layout.shard(s, "next"), counter)
        client.hset(layout.shard(s, "meta"), "urls", int((table["flags"] & PRESENT > 0).sum()))
    items = list(buckets.items())
    for start in range(0, len(items), 2000):
        pipe = client.pipeline(transaction=False)
        for (shard, bucket), mapping in items[start : start + 2000]:
            pipe.hset(layout.bucket(shard, bucket), mapping=mapping)
        pipe.execute()


def _set_big(client: Any, key: str, data: bytes, chunk: int = 8 << 20) -> None:
    """SET a string of any size in pieces of ``chunk`` bytes (SETRANGE appends)."""
    client.delete(key)
    for start in range(0, len(data), chunk):
        client.setrange(key, start, data[start : start + chunk])
