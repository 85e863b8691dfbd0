"""The Redis store's encoding (the layout of schema version 5, unchanged through 8): key
names, the fixed-width row and log entry, the request blob, a visit as the record script
takes it. The scripts themselves are ``.lua`` files (scrapy_recrawl/lua/history_*.lua,
loaded by :mod:`.redis_scripts`).

Every script names every key it touches in ``KEYS`` (never built from ``ARGV``), and
all the keys of one script share one hash tag, so each runs on one Redis Cluster slot
(docs/distributed.md, "The history store's encoding"): the store's own keys are tagged
``{<prefix>}``, each shard's ``{<prefix>#<shard>}``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .request_codec import encode_stored

#: One URL's numbers in schema version 5 (87 bytes, packed, little-endian), as the Lua
#: scripts pack them (struct format :data:`ROW_FORMAT`). ``flags``: bit 0 gone, bit 1
#: has_body, bit 2 present (0: an id reserved and never used), bit 3 ``sad`` (the last
#: change indicator). ``req_len``/``req_off``: the URL's blob in ``{p#s}:blobs``
#: (``req_len`` 0: none; :data:`BIG_BLOB`: in ``{p#s}:bigreq``).
ROW_DTYPE = np.dtype(
    [
        ("n", "<i4"),
        ("X", "<i4"),
        ("visits", "<i4"),
        ("last_visit_cycle", "<i4"),
        ("last_change_cycle", "<i4"),
        ("first_cycle", "<i4"),
        ("last_failure_cycle", "<i4"),  # -1: never failed
        ("status", "<u2"),
        ("failures", "u1"),  # consecutive failed cycles, saturating at 255
        ("flags", "u1"),
        ("cwin", "u1"),  # the last <= 5 change observations (content window, C1..C5)
        ("req_len", "<u2"),
        ("req_off", "<u4"),
        ("aad_sum", "<f8"),
        ("gad", "<f8"),
        ("last_visit_time", "<f8"),
        ("last_change_time", "<f8"),
        ("first_seen", "<f8"),
        ("D", "<u2"),  # counts, saturating at 65,534; NO_COUNT (65,535): NaN, none yet
        ("A", "<u2"),
        ("R", "<u2"),
        ("M", "<u2"),
    ]
)
ROW_FORMAT = "<i4i4i4i4i4i4i4I2BBBI2I4dddddI2I2I2I2"
ROW_SIZE = ROW_DTYPE.itemsize
assert ROW_SIZE == struct.calcsize("<iiiiiiiHBBBHIdddddHHHH") == 87
#: ``D``/``A``/``R``/``M`` of a URL with no change observation yet (NaN)
NO_COUNT = 0xFFFF

GONE, HAS_BODY, PRESENT, SAD = 1, 2, 4, 8
#: ``req_len`` of a blob of 65,535 bytes or more, kept in the shard's ``bigreq`` hash
BIG_BLOB = 0xFFFF

#: One visit-log entry (the columns of SqliteHistoryStore.visit_log(), then ``order``:
#: the writer's clock in microseconds times 4096 plus the visit's place in its batch,
#: which orders the entries of all shards, oldest first).
LOG_DTYPE = np.dtype(
    [
        ("url_id", "<i8"),
        ("time", "<f8"),
        ("cycle", "<i4"),
        ("status", "<i4"),
        ("changed", "<i4"),
        ("distance", "<i4"),
        ("added", "<i4"),
        ("removed", "<i4"),
        ("modified", "<i4"),
        ("attributes", "<i4"),
        ("bytes", "<i8"),
        ("order", "<i8"),
    ]
)
#: the entry less ``order`` (8 bytes the client packs, appended by the script)
LOG_FORMAT = "<i8di4i4i4i4i4i4i4i4i8"

#: Shards of a new store (``RECRAWL_REDIS_SHARDS``); a store keeps the count it was
#: created with (``{p}:meta`` field ``shards``).
DEFAULT_SHARDS = 16
#: Hashes of the URL index per shard (``{p#s}:ix:<b>``): 16 shards x 16,384 buckets
#: hold ~128 fields each (Redis's hash-max-ziplist-entries) at ~33M URLs.
BUCKETS = 1 << 14
#: Bytes of the fingerprint's hash kept as the index field.
FIELD_BYTES = 8

#: The crawl lease, ``{<p>}:lease``: a hash, holder id (``host:pid:token``) -> a JSON
#: status stamped with the Redis's clock (history/redis_liveness.py), one field per crawl
#: that has the store open, refreshed at each epoch check, deleted at its clean close,
#: and expiring ``RECRAWL_REDIS_WORKER_TIMEOUT`` after its last stamp (a killed crawl's
#: lease dies). ``scrapy recrawl-reset`` refuses while it names a live holder. Liveness,
#: not history: it came with no schema version, and a store of any version may lack it.
LEASE = "lease"

#: Bytes per GETRANGE when loading rows or blobs.
READ_CHUNK = 16 << 20

#: URL ids reserved at once per process and shard (``INCRBY {p#s}:next``).
ID_BLOCK = 256


class Layout:
    """The key names of one store: ``{<prefix>}:<name>`` for the store's own keys (one
    slot), ``{<prefix>#<shard>}:<name>`` for a shard's (one slot per shard)."""

    def __init__(self, prefix: str, shards: int) -> None:
        self.prefix = prefix
        self.shards = int(shards)

    def store(self, name: str) -> str:
        return f"{{{self.prefix}}}:{name}"

    def shard(self, shard: int, name: str) -> str:
        return f"{{{self.prefix}#{shard}}}:{name}"

    def bucket(self, shard: int, bucket: int) -> str:
        return self.shard(shard, f"ix:{bucket}")

    def shard_keys(self, shard: int) -> list[str]:
        """The keys the record script writes, in its KEYS order (the buckets follow)."""
        names = ("rows", "blobs", "bigreq", "etag", "lastmod", "sig", "body", "log", "logstart")
        return [self.shard(shard, n) for n in names]

    def locate(self, fingerprint: bytes) -> tuple[int, int, bytes]:
        """``(shard, bucket, field)`` of a fingerprint in the URL index."""
        h = hashlib.blake2b(fingerprint, digest_size=4 + FIELD_BYTES).digest()
        x = int.from_bytes(h[:4], "little")
        return x % self.shards, (x // self.shards) % BUCKETS, h[4:]

    def id_of(self, shard: int, local: int) -> int:
        """The URL id of the ``local``-th row (from 0) of ``shard``."""
        return local * self.shards + shard + 1

    def place(self, uid: int) -> tuple[int, int]:
        """``(shard, local row)`` of a URL id."""
        return (uid - 1) % self.shards, (uid - 1) // self.shards

    def glob(self) -> list[str]:
        """SCAN patterns matching every key of the store (and only its)."""
        p = "".join("\\" + c if c in "*?[]\\" else c for c in self.prefix)
        return [f"{{{p}}}:*", f"{{{p}#*"]


# -- the blob of a URL: the URL and its request, what repeats kept once ------------------
#
# byte 0 the kind: 0 no request stored, 1 a request shape of the store's dictionary (u16
# id follows), 2 the shape inline (u32 length, then it); then the URL part: byte 0, then
# the URL's UTF-8 bytes; or byte 1, a u16 id of its scheme and host (``https://host``)
# in the store's host dictionary, then the rest of the URL. A shape is the request dict
# with "url" emptied (unless the request is of another URL), as data (request_codec):
# the callback, method, headers, meta... that repeat across URLs.
BLOB_URL, BLOB_SHAPE, BLOB_INLINE = 0, 1, 2
#: shapes longer than this are kept inline (the dictionary is for what repeats)
MAX_SHAPE = 1024


def shape_of(request: dict[str, Any], url: str) -> bytes | None:
    """The request's shape as data (None: not data): its dict with ``url`` emptied when
    it is the URL's (a request that was redirected from elsewhere keeps its own)."""
    if request.get("url") == url:
        return encode_stored({**request, "url": ""})
    return encode_stored(request)


def host_of(url: str) -> tuple[str, str]:
    """``(scheme and host, the rest)`` of a URL (the whole URL and "" if it has no path)."""
    start = url.find("://")
    if start < 0:
        return "", url
    end = url.find("/", start + 3)
    return (url, "") if end < 0 else (url[:end], url[end:])


def url_part(url: str, host_id: int) -> bytes:
    """The URL part of a blob: with the id of its host (``host_id`` > 0) or whole."""
    if host_id > 0:
        rest = host_of(url)[1]
        return struct.pack("<BH", 1, host_id) + rest.encode("utf-8", "surrogateescape")
    return b"\0" + url.encode("utf-8", "surrogateescape")


def blob(part: bytes, shape_id: int, shape: bytes | None) -> bytes:
    """A URL's blob: its URL part alone (``shape`` None), or with a shape by id or inline."""
    if shape is None:
        return bytes([BLOB_URL]) + part
    if shape_id > 0:
        return struct.pack("<BH", BLOB_SHAPE, shape_id) + part
    return struct.pack("<BI", BLOB_INLINE, len(shape)) + shape + part


def split_blob(data: bytes) -> tuple[bytes, int, bytes | None]:
    """``(URL part, shape id, inline shape)`` of a blob (0 and None: no request)."""
    kind = data[0]
    if kind == BLOB_SHAPE:
        (sid,) = struct.unpack_from("<H", data, 1)
        return data[3:], sid, None
    if kind == BLOB_INLINE:
        (n,) = struct.unpack_from("<I", data, 1)
        return data[5 + n :], 0, bytes(data[5 : 5 + n])
    if kind == BLOB_URL:
        return data[1:], 0, None
    raise ValueError(f"blob kind {kind}")


def url_from(part: bytes, hosts: Callable[[int], str | None]) -> str:
    """The URL of a blob's URL part (``hosts``: a host id's scheme and host)."""
    if part[0] == 1:
        (hid,) = struct.unpack_from("<H", part, 1)
        host = hosts(hid)
        if host is None:
            raise ValueError(f"no host {hid}")
        return host + part[3:].decode("utf-8", "surrogateescape")
    if part[0] == 0:
        return part[1:].decode("utf-8", "surrogateescape")
    raise ValueError(f"URL part kind {part[0]}")


#: One visit, as lua/history_record.lua reads it (one argument: Lua struct format, then Python's):
#: the index bucket (a KEYS position), the id reserved for it if new, time, status,
#: changed (-1: no observation), distance, added, removed, modified, attributes, size,
#: gone, cycle (-1: the current one), the log order (8 bytes), then the lengths of the
#: strings that follow (-1: None): index field, ETag, Last-Modified, signature, the
#: blob's mode (0 none, 1 set, 2 the URL part only) and length, the body.
VISIT_FORMAT_LUA = "<I2i4di4i4i4i4i4i4i4i8i4i4c8i4i4i4i4i4i4i4"
VISIT_HEAD = struct.Struct("<H")
VISIT_FORMAT = struct.Struct("<idiiiiiiiqii")
VISIT_TAIL = struct.Struct("<iiiiiii")

#: entries of a dictionary (request shapes, hosts) at most (ids are u16)
MAX_SHAPES = 65_535


#: The error a guarded script answers with when the store's epoch is not the caller's
#: (lua/history_epoch_guard.lua).
LOST_ERROR = "RECRAWL_STORE_LOST"
