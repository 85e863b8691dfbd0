"""A URL's record from the Redis store's bytes: one row of
:data:`~.redis_schema.ROW_DTYPE` (and the stored validators and signature) as a
:class:`~.base.UrlRecord`, and :class:`PendingRecord`, the record a buffered visit will
make, filled in when the visit is flushed.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, Protocol

from .base import HistoryStoreError, UrlRecord, Visit
from .redis_schema import GONE, HAS_BODY, NO_COUNT, ROW_DTYPE, SAD
from .state import good_status

#: one row as Python's struct reads it (ROW_DTYPE's fields in order: a record's numbers
#: without numpy, for the one-URL paths)
_ROW = struct.Struct("<iiiiiiiHBBBHIdddddHHHH")
assert _ROW.size == ROW_DTYPE.itemsize


def validator(value: bytes | None) -> str | None:
    """A stored ETag / Last-Modified, if it can be a header value (printable ASCII):
    anything else read back is not ours, and is not sent (the page is fetched whole)."""
    if value is None or not all(32 <= b < 127 for b in value):
        return None
    return value.decode("ascii")


def _count(value: int) -> float:
    return float("nan") if value == NO_COUNT else float(value)


def set_numbers(rec: UrlRecord, row: bytes) -> None:
    """Set a record's numbers from one row of :data:`ROW_DTYPE`."""
    (
        rec.n,
        rec.X,
        rec.visits,
        rec.last_visit_cycle,
        rec.last_change_cycle,
        rec.first_cycle,
        rec.last_failure_cycle,
        rec.status,
        rec.failures,
        flags,
        rec.cwin,
        _req_len,
        _req_off,
        rec.aad_sum,
        rec.gad,
        rec.last_visit_time,
        rec.last_change_time,
        rec.first_seen,
        d,
        a,
        r,
        m,
    ) = _ROW.unpack(row)
    rec.sad = float(bool(flags & SAD))
    rec.D, rec.A, rec.R, rec.M = _count(d), _count(a), _count(r), _count(m)
    rec.gone = bool(flags & GONE)
    rec.has_body = bool(flags & HAS_BODY)


def clone(rec: UrlRecord) -> UrlRecord:
    """A shallow copy of a plain record (what copy.copy gives, without its machinery)."""
    new = object.__new__(UrlRecord)
    new.__dict__.update(rec.__dict__)
    return new


def record_from(
    uid: int,
    fingerprint: bytes,
    row: bytes,
    url: str,
    etag: bytes | None,
    lastmod: bytes | None,
    sig: bytes | None,
) -> UrlRecord:
    """The record of one URL: its row, URL, and stored validators and signature."""
    rec = UrlRecord(id=uid, url=url, fingerprint=fingerprint, first_seen=0.0, first_cycle=0)
    set_numbers(rec, row)
    rec.etag, rec.last_modified, rec.signature = validator(etag), validator(lastmod), sig
    return rec


_FIELDS = tuple(f.name for f in dataclasses.fields(UrlRecord))
#: what a visit alone does not say of the record it makes (a 304 keeps the validators it
#: leaves out; a visit without a signature keeps the stored one): read when looked at
_STORED_FIELDS = frozenset({"etag", "last_modified", "signature"})


class PendingContext(Protocol):
    """What a :class:`PendingRecord` asks of its store (the writer): its flush, a URL's
    stored record, where it is."""

    @property
    def location(self) -> str: ...

    def flush(self) -> None: ...

    def get_stored(self, fingerprint: bytes) -> UrlRecord | None: ...


# the states of a PendingRecord: waiting for the flush; flushed; decoded; the stored
# fields read too
_WAITING, _FLUSHED, _DECODED, _COMPLETE = 0, 1, 2, 3


class PendingRecord(UrlRecord):
    """What the Redis store's ``record()`` returns for a URL the process has neither read
    nor written: a :class:`UrlRecord` the store fills in from the server's own fold of
    the visit when it flushes it. Looking at a field before then flushes first, so a
    caller that never looks (the usual case) costs no round trip, and one that does gets
    the record the visit made, exactly. Compares equal to the plain record it stands for;
    ``copy.copy()`` gives that plain record.

    Each field of :class:`UrlRecord` is a property here (made below, one per field):
    its value lives in ``_values`` once decoded; setting one completes the record
    first, so a value set is never overwritten by the flush."""

    # until the flush: no row, nothing decoded (class defaults: record() makes one of
    # these per visit of an unread URL, so its __init__ sets two attributes only)
    _state = _WAITING
    _row: tuple[int, bytes, Visit] | None = None
    _values: dict[str, Any]

    def __init__(self, store: PendingContext, fingerprint: bytes) -> None:
        # not UrlRecord.__init__: the fields are set when the visit is flushed
        self._store = store
        self._fp = fingerprint

    def _fill(self, uid: int, row: bytes, visit: Visit) -> None:
        """Called by the store's flush with the server's fold of the visit (decoded when
        looked at: most results of record() never are)."""
        self._row = (uid, row, visit)
        self._state = _FLUSHED

    def _decode(self) -> None:
        assert self._row is not None
        uid, row, visit = self._row
        rec = record_from(uid, self._fp, row, visit.url, None, None, visit.signature)
        good = good_status(visit.status)
        if good and visit.status != 304:  # the visit's validators replaced the stored ones
            rec.etag, rec.last_modified = visit.etag, visit.last_modified
        self._values = dict(rec.__dict__)
        exact = good and visit.status != 304 and visit.signature is not None
        self._state = _COMPLETE if exact else _DECODED

    def _complete(self, stored: bool) -> None:
        """Bring the record to what a look at a field needs (``stored``: one of the
        stored fields, read from the store unless the visit said it)."""
        if self._state == _WAITING:
            self._store.flush()  # fills this record (or raises: the visit stays buffered)
            if self._state == _WAITING:
                raise HistoryStoreError(
                    f"history store {self._store.location}: a visit of this URL was not written "
                    "(the store was lost and started afresh)"
                )
        if self._state == _FLUSHED:
            self._decode()
        if stored and self._state == _DECODED:
            found = self._store.get_stored(self._fp)
            if found is not None:
                for name in _STORED_FIELDS:
                    self._values[name] = getattr(found, name)
            self._state = _COMPLETE

    def record(self) -> UrlRecord:
        """The plain :class:`UrlRecord` (flushing first if needed)."""
        self._complete(True)
        return UrlRecord(**{name: self._values[name] for name in _FIELDS})

    def __copy__(self) -> UrlRecord:
        return self.record()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UrlRecord):  # as the dataclass compares: field by field, in order
            return tuple(getattr(self, f) for f in _FIELDS) == tuple(
                getattr(other, f) for f in _FIELDS
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as UrlRecord's


def _field(name: str) -> property:
    stored = name in _STORED_FIELDS
    need = _DECODED if not stored else _COMPLETE

    def get(self: PendingRecord) -> Any:
        if self._state < need:
            self._complete(stored)
        return self._values[name]

    def set_(self: PendingRecord, value: Any) -> None:
        if self._state < _COMPLETE:
            self._complete(True)
        self._values[name] = value

    return property(get, set_, doc=f"UrlRecord.{name}, filled in at the flush")


for _name in _FIELDS:
    setattr(PendingRecord, _name, _field(_name))
del _name
