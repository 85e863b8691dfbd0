"""The Redis store's point reads: one URL at a time (``knows``, ``get``, ``body``), each
flushing first what this process buffered for that URL (a process reads its own
writes), and the reading of a URL from its blob.
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from typing import Any

from .base import StoredBody, UrlRecord, decompress_body
from .redis_ids import IdAllocator
from .redis_record import clone, record_from
from .redis_schema import split_blob, url_from
from .redis_session import RedisSession
from .redis_writer import VisitWriter

logger = logging.getLogger("scrapy_recrawl.history")


class PointReader:
    """One URL's record, stored body, and URL (module docstring)."""

    def __init__(self, session: RedisSession, ids: IdAllocator, writer: VisitWriter) -> None:
        self.session = session
        self.ids = ids
        self.writer = writer

    def knows(self, fingerprint: bytes) -> bool:
        if fingerprint in self.writer.pending_fps:
            return True
        layout = self.session.layout
        shard, bucket, field = layout.locate(fingerprint)
        key = layout.bucket(shard, bucket)
        return bool(self.session.call("read", lambda c: c.hexists(key, field)))

    def _raw(self, fingerprint: bytes, signature: bool, body: bool) -> Any:
        if fingerprint in self.writer.pending_fps:
            self.writer.flush()
        session = self.session
        script, layout = session.script("get"), session.layout
        shard, bucket, field = layout.locate(fingerprint)
        names = ("rows", "blobs", "bigreq", "etag", "lastmod", "sig", "body")
        keys = [layout.bucket(shard, bucket)] + [layout.shard(shard, n) for n in names]
        args = [field, session.shards, int(signature), int(body)]
        return session.call("read", lambda c: script(keys=keys, args=args, client=c))

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        raw = self._raw(fingerprint, signature, False)
        if not raw:
            self.writer.cache.pop(fingerprint, None)
            return None
        uid, row, data, etag, lastmod, sig, _ = raw
        url = self.url_of(data, int(uid))
        rec = record_from(int(uid), fingerprint, row, url, etag, lastmod, sig)
        self.writer.remember(fingerprint, clone(rec), signature)
        return rec

    def url_of(self, data: bytes | None, uid: int) -> str:
        """The URL of a blob read back ("" when there is none, or it is not ours)."""
        if not data:
            return ""
        try:
            return url_from(split_blob(data)[0], self.ids.host)
        except (ValueError, struct.error, IndexError):
            self.unreadable(uid, "blob")
            return ""

    def unreadable(self, uid: int, what: str) -> None:
        """A stored value of URL ``uid`` that is not one this package wrote: counted,
        said, skipped."""
        session = self.session
        session.unreadable += 1
        logger.warning(
            "recrawl: the %s of URL id %d in the history store at %s (key %r) is not one "
            "this scrapy-recrawl wrote, skipped",
            what,
            uid,
            session.location,
            session.key,
        )

    def body(self, fingerprint: bytes) -> StoredBody | None:
        raw = self._raw(fingerprint, False, True)
        if not raw or raw[6] is None:
            return None
        data = raw[6]
        try:
            status, hlen = struct.unpack_from("<HI", data)
            headers = json.loads(data[6 : 6 + hlen])
            body = decompress_body(data[6 + hlen :])
            if not isinstance(headers, dict):
                raise ValueError("headers are not a map")
        except (struct.error, ValueError, zlib.error) as exc:
            self.session.unreadable += 1
            logger.warning(
                "recrawl: the stored body of URL id %d in the history store at %s is not a "
                "stored body, skipped: %s",
                int(raw[0]),
                self.session.location,
                exc,
            )
            return None
        return StoredBody(status=status, headers=headers, body=body)
