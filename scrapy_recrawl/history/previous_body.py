"""The body before a URL's last change, kept beside the current one (``RECRAWL_KEEP_PREVIOUS``).

Why: a store keeps one body per URL, replaced at every good visit, so once a page has
changed nothing shows *what* changed. When the middleware sees a change, the body the
store still keeps is the version before it; :class:`PreviousBodies` copies it into side
storage (table :data:`TABLE`, keyed by URL id, one record per URL, replaced at the next
change) before the visit replaces it. ``scrapy recrawl-report --url URL`` diffs it against
the kept copy (insight/last_change.py).

Through the store contract's side storage only: no new store format, both backends (and
any third-party one). Bounded: one record per changed URL, its body zlib-compressed as the
stores compress theirs, and a body larger than ``RECRAWL_PREVIOUS_BODY_MAX_BYTES`` kept as
its size only (the report says so). Nothing is kept that the store does not keep already:
the body it held, and of its headers only the ``Content-Type`` (no cookie, no credential).
The record is plain data (:func:`~scrapy_recrawl.history.records.pack_record`), never a
pickle.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..settings import get
from .base import HistoryStore, StoredBody, compress_body, decompress_body
from .records import RecordError, pack_record, unpack_record

__all__ = ["TABLE", "PreviousBodies", "PreviousBody"]

#: the side-storage table (a plug-in's namespace, kept by ``clear()`` like the others')
TABLE = "previous_body"
_FORMAT = 1


@dataclass(frozen=True)
class PreviousBody:
    """The version of a URL before its last change, and when that change was seen."""

    cycle: int  #: the cycle of the visit that saw the change
    time: float  #: ... and its time (unix seconds)
    before_cycle: int  #: the cycle of the visit that fetched this version (-1: unknown)
    before_time: float  #: ... and its time (NaN: unknown)
    content_type: str | None  #: its Content-Type header as received
    size: int  #: its length in bytes
    #: its bytes; None when it was over RECRAWL_PREVIOUS_BODY_MAX_BYTES (``size`` only)
    body: bytes | None
    #: the content hash of the body the change brought (the detector's), to tell whether
    #: the current kept copy is still that one or a later, unchanged, refetch
    after: bytes

    def to_bytes(self) -> bytes:
        return pack_record(
            {
                "format": _FORMAT,
                "cycle": int(self.cycle),
                "time": float(self.time),
                "before_cycle": int(self.before_cycle),
                "before_time": float(self.before_time),
                "content_type": self.content_type,
                "size": int(self.size),
                "body": None if self.body is None else compress_body(self.body),
                "after": bytes(self.after),
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> PreviousBody:
        """The record :meth:`to_bytes` wrote; :class:`RecordError` for anything else."""
        rec = unpack_record(data)
        if rec.get("format") != _FORMAT:
            raise RecordError(f"a previous body of format {rec.get('format')!r}, not {_FORMAT}")
        try:
            packed = rec["body"]
            body = None if packed is None else decompress_body(_bytes(packed))
            content_type = rec["content_type"]
            return cls(
                cycle=_int(rec["cycle"]),
                time=_float(rec["time"]),
                before_cycle=_int(rec["before_cycle"]),
                before_time=_float(rec["before_time"]),
                content_type=None if content_type is None else str(content_type),
                size=_int(rec["size"]),
                body=body,
                after=_bytes(rec["after"]),
            )
        except (KeyError, TypeError, zlib.error) as exc:
            raise RecordError(f"not a previous body record: {exc}") from None


def _int(v: Any) -> int:
    if not isinstance(v, int):
        raise TypeError(f"expected an int, got {type(v).__name__}")
    return v


def _float(v: Any) -> float:
    if not isinstance(v, (int, float)):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    return float(v)


def _bytes(v: Any) -> bytes:
    if not isinstance(v, bytes):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    return v


def content_type_of(stored: StoredBody) -> str | None:
    return next(
        (v[0] for k, v in stored.headers.items() if k.lower() == "content-type" and v), None
    )


class PreviousBodies:
    """The crawl's side: at a changed visit, the kept body (the version before it) copied
    into :data:`TABLE` before the visit replaces it (module docstring).

    ``content_hash``: the change detector's (``ChangeDetector.content_hash``), to check that
    the kept body is the one the change was seen against (a body too large to keep leaves
    an older one in the store)."""

    def __init__(
        self, store: HistoryStore, max_bytes: int, content_hash: Callable[[bytes], bytes]
    ) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.content_hash = content_hash

    @classmethod
    def from_settings(
        cls, settings: Any, store: HistoryStore, content_hash: Callable[[bytes], bytes]
    ) -> PreviousBodies | None:
        """None when nothing is to be kept: ``RECRAWL_KEEP_PREVIOUS`` off, a limit of 0, or
        a store that keeps no bodies (``RECRAWL_STORE_BODIES = False``)."""
        limit = get(settings, "RECRAWL_PREVIOUS_BODY_MAX_BYTES")
        if not get(settings, "RECRAWL_KEEP_PREVIOUS") or limit <= 0 or not store.store_bodies:
            return None
        return cls(store, limit, content_hash)

    def changed(
        self,
        url_id: int,
        fingerprint: bytes,
        *,
        before: bytes,
        after: bytes,
        before_cycle: int,
        before_time: float,
        cycle: int,
        time: float,
    ) -> bool:
        """A visit of ``url_id`` saw a change from the body of content hash ``before`` to
        that of ``after``: keep the kept body when it is that version (True), else drop
        the URL's older record, which no longer leads to the current copy (False). Called
        before the visit is recorded; a store error propagates (the visit is then held
        and this is done again, to the same effect)."""
        stored = self.store.body(fingerprint)
        if stored is None or self.content_hash(stored.body) != before:
            self.store.side_delete(TABLE, [url_id])
            return False
        size = len(stored.body)
        record = PreviousBody(
            cycle=int(cycle),
            time=float(time),
            before_cycle=int(before_cycle),
            before_time=float(before_time) if math.isfinite(before_time) else math.nan,
            content_type=content_type_of(stored),
            size=size,
            body=stored.body if size <= self.max_bytes else None,
            after=after,
        )
        self.store.side_put(TABLE, [(url_id, record.to_bytes())])
        return True


def previous_body(store: HistoryStore, url_id: int) -> PreviousBody | None:
    """The URL's kept previous version (None: none kept); :class:`RecordError` when the
    stored value is not one this package wrote."""
    value = store.side_get(TABLE, [int(url_id)])[0]
    return None if value is None else PreviousBody.from_bytes(value)
