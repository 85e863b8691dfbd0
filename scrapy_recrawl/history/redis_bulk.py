"""Writing many URLs at once into the Redis store's layout (schema version 5), and the
migration of a schema-version-4 store into it (the one bulk writer serves both, and
bench/redis_store.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import HistoryStoreError
from .epoch import new_epoch
from .redis_schema import (
    BIG_BLOB,
    GONE,
    HAS_BODY,
    LOG_DTYPE,
    LOG_DTYPE_V4,
    MAX_SHAPES,
    NO_COUNT,
    PRESENT,
    ROW_DTYPE,
    ROW_DTYPE_V4,
    ROWS_PER_SHARD_V4,
    SAD,
    Layout,
    blob,
    delete_own_keys,
    host_of,
    shape_of,
    url_part,
)

logger = logging.getLogger("scrapy_recrawl.history")

#: Seconds after which another process's unfinished migration is taken over.
MIGRATION_STALE = 300.0


def delete_store_keys(client: Any, layout: Layout) -> None:
    """Delete every key of the store's hash tags (its own and its shards'), one key per
    command in a pipeline (on a cluster, each goes to its slot's node)."""
    keys: list[Any] = []
    for pattern in layout.glob():
        keys.extend(client.scan_iter(match=pattern, count=1000))
    for start in range(0, len(keys), 1000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 1000]:
            pipe.delete(key)
        pipe.execute()


def drop_v4_leftovers(client: Any, prefix: str) -> None:
    """A migration to version 5 that stopped after marking the new layout done leaves the
    version-4 keys: delete them (nothing reads them any more)."""
    if client.exists(f"{prefix}:meta"):
        delete_own_keys(client, prefix)


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


def rows_from_v4(old: np.ndarray) -> np.ndarray:
    """Version-4 rows (120 bytes) as version-5 rows (87 bytes; no blob located yet)."""
    new = np.zeros(len(old), dtype=ROW_DTYPE)
    for name in ROW_DTYPE.names or ():
        if name in (old.dtype.names or ()) and name not in (
            "status",
            "failures",
            "D",
            "A",
            "R",
            "M",
        ):
            new[name] = old[name]
    new["status"] = np.clip(old["status"], 0, 0xFFFF)
    for name in ("D", "A", "R", "M"):
        new[name] = np.where(
            np.isnan(old[name]), NO_COUNT, np.clip(np.nan_to_num(old[name]), 0, NO_COUNT - 1)
        )
    new["failures"] = np.clip(old["failures"], 0, 255)
    new["flags"] = (
        PRESENT * (old["present"] > 0)
        + GONE * (old["gone"] > 0)
        + HAS_BODY * (old["has_body"] > 0)
        + SAD * (old["sad"] > 0)
    )
    return new


def migrate_4_to_5(client: Any, prefix: str, location: str) -> None:
    """Version 5: the version-4 keys (``<p>:rows:N``, ``ids``, ``urls``, ``req``, ...)
    re-encoded into the new layout with **one shard** (so every URL keeps its id, and the
    id-keyed side storage needs no re-keying) and its store keys copied.

    Old-release writers are fenced off first: the old ``<p>:meta`` loses its epoch, so
    their every write is refused (they stop with the "store vanished" error). Re-runnable:
    the new layout is marked done (schema_version 5) last, after everything is copied;
    a run that stopped before is started again from the old keys, which are deleted
    only after the mark. Another process running it waits for it (or takes it over
    after :data:`MIGRATION_STALE` seconds).
    """
    from .request_codec import decode_stored

    old_meta = f"{prefix}:meta"
    layout = Layout(prefix, 1)
    where = f"{location} (key {prefix!r})"
    token = f"{new_epoch()[0]}:{time.time()!r}"
    mine = client.hsetnx(old_meta, "migrating", token)
    if not mine:
        held = (client.hget(old_meta, "migrating") or b"").decode()
        since = float(held.split(":", 1)[1]) if ":" in held else 0.0
        if time.time() - since < MIGRATION_STALE:
            for _ in range(600):
                if client.hget(layout.store("meta"), "schema_version") is not None:
                    return
                time.sleep(0.1)
            raise HistoryStoreError(
                f"history store {where}: another process is migrating it to schema "
                "version 5; open it again when that is done"
            )
        client.hset(old_meta, "migrating", token)
    # fence: keep the epoch aside, so the old release's guarded scripts refuse
    pipe = client.pipeline()
    pipe.hget(old_meta, "epoch")
    pipe.hget(old_meta, "epoch_v4")
    epoch, kept = pipe.execute()
    if epoch is not None:
        pipe = client.pipeline()
        pipe.hset(old_meta, "epoch_v4", epoch)
        pipe.hdel(old_meta, "epoch")
        pipe.execute()
    else:
        epoch = kept
    delete_store_keys(client, layout)  # what an interrupted run wrote
    meta = {k.decode(): v for k, v in client.hgetall(old_meta).items() if isinstance(k, bytes)}
    next_id = int(client.get(f"{prefix}:next_id") or 0)
    rps = int(meta.get("rows_per_shard") or ROWS_PER_SHARD_V4)
    raw = b"".join(
        client.get(f"{prefix}:rows:{s}") or b"" for s in range((next_id + rps - 1) // rps)
    )
    old_rows = np.frombuffer(raw[: next_id * ROW_DTYPE_V4.itemsize], dtype=ROW_DTYPE_V4)
    old_rows = old_rows[: len(old_rows)]
    index = {int(v): bytes(k) for k, v in client.hscan_iter(f"{prefix}:ids", count=1000)}
    urls = {int(k): v for k, v in client.hscan_iter(f"{prefix}:urls", count=1000)}
    reqs = {int(k): v for k, v in client.hscan_iter(f"{prefix}:req", count=1000)}
    ids = np.array(sorted(i for i in index if 1 <= i <= len(old_rows)), dtype=np.int64)
    rows = rows_from_v4(old_rows[ids - 1]) if len(ids) else np.zeros(0, dtype=ROW_DTYPE)
    shapes: dict[bytes, int] = {}
    hosts: dict[str, int] = {}
    blobs = []
    unreadable = 0
    for uid in ids.tolist():
        url = urls.get(uid, b"").decode("utf-8", "surrogateescape")
        request = None
        if uid in reqs:
            request = decode_stored(reqs[uid], f"{prefix}:req field {uid} in {where}")
            unreadable += request is None
        shape = shape_of(request, url) if request is not None else None
        sid = 0
        if shape is not None and len(shape) <= 1024 and len(shapes) < MAX_SHAPES:
            sid = shapes.setdefault(shape, len(shapes) + 1)
        host = host_of(url)[0]
        hid = hosts.setdefault(host, len(hosts) + 1) if host and len(hosts) < MAX_SHAPES else 0
        blobs.append(blob(url_part(url, hid), sid, shape))
    write_bulk(
        client,
        layout,
        ids=ids,
        rows=rows,
        fingerprints=[index[i] for i in ids.tolist()],
        blobs=blobs,
        shapes=list(shapes),
        hosts=list(hosts),
        next_local=[next_id],
    )
    # id-keyed hashes and the store's own keys: the same values under the new names
    renames = {
        "sig": layout.shard(0, "sig"),
        "etag": layout.shard(0, "etag"),
        "lastmod": layout.shard(0, "lastmod"),
        "body": layout.shard(0, "body"),
        "logstart": layout.shard(0, "logstart"),
        "cycle": layout.store("cycle"),
        "frontier": layout.store("frontier"),
        "frontier:fp": layout.store("frontier:fp"),
        "frontier:req": layout.store("frontier:req"),
        "frontier:seq": layout.store("frontier:seq"),
    }
    for key in client.scan_iter(match=f"{prefix}:side:*", count=1000):
        name = key.decode()[len(prefix) + 1 :]
        if name.count(":") == 1:
            renames[name] = layout.store(name)
    for old, new in renames.items():
        data = client.dump(f"{prefix}:{old}")
        if data is not None:
            client.restore(new, 0, data, replace=True)
    # the visit log: each entry as it was, with the same entry id (logstart holds them)
    start = "-"
    log = layout.shard(0, "log")
    while True:
        batch = client.xrange(f"{prefix}:log", min=start, max="+", count=10_000)
        if not batch:
            break
        pipe = client.pipeline(transaction=False)
        for entry_id, fields in batch:
            v4 = np.frombuffer(fields[b"v"], dtype=LOG_DTYPE_V4)
            entry = np.zeros(len(v4), dtype=LOG_DTYPE)
            for name in LOG_DTYPE_V4.names or ():
                entry[name] = v4[name]
            ms, seq = entry_id.decode().split("-")
            entry["order"] = (int(ms) * 1000 << 12) + int(seq) % 4096
            pipe.xadd(log, {"v": entry.tobytes()}, id=entry_id)
        pipe.execute()
        ms, seq = batch[-1][0].decode().split("-")
        start = f"{ms}-{int(seq) + 1}"
    new_meta: dict[str, Any] = {"shards": 1}
    for name in ("spider", "epoch_created"):
        if meta.get(name) is not None:
            new_meta[name] = meta[name]
    if epoch is not None:
        new_meta["epoch"], new_meta["shards_marked"] = epoch, 1
        client.hset(layout.shard(0, "meta"), "epoch", epoch)
    client.hset(layout.store("meta"), mapping=new_meta)
    client.hset(layout.store("meta"), "schema_version", 5)  # the mark: done
    delete_own_keys(client, prefix)
    if unreadable:
        logger.warning(
            "recrawl: %d stored requests in the history store at %s were not data; their "
            "URLs stay and are recrawled as a GET of the URL",
            unreadable,
            where,
        )
