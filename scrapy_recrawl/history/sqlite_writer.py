"""The SQLite store's writes: visits folded into a write-back cache, flushed in one transaction.

:meth:`~SqliteWriter.record` folds a visit into the URL's record (history/state.py's
one rule) in memory and buffers its log row, signature, request and body; every
``flush_every`` visits or ``flush_seconds`` seconds (and on close) they are written in
one transaction, a URL's row with its log rows, so the counters are never ahead of
the log. A failed write keeps the buffer for the next flush. Each flush also trims
the visit log to its cap (RECRAWL_SQLITE_LOG_MAXLEN); :meth:`~SqliteWriter.compact`
trims and rebuilds the file.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from operator import attrgetter
from typing import Any

from . import sqlite_packed
from .base import (
    FlushFailed,
    HistoryStoreError,
    UrlRecord,
    Visit,
    compress_body,
    refuse_when_full,
)
from .request_codec import encode_stored
from .sqlite_reader import SqliteReader
from .sqlite_schema import RECORD_FIELDS, URL_COLUMNS
from .state import fold_visit, good_status

logger = logging.getLogger("scrapy_recrawl.history")


#: a record's values in the order of the ``urls`` columns
_record_values = attrgetter(*RECORD_FIELDS)

#: record(): the URL not in the cache of clean records
_NOT_READ: Any = object()


class SqliteWriter(SqliteReader):
    """The buffered writes of the store contract (record, flush), and the log's cap."""

    @property
    def buffered_visits(self) -> int:
        """Visits recorded but not yet written (the next flush writes them)."""
        return len(self._visit_rows)

    def record(self, visit: Visit) -> UrlRecord:
        self.db  # noqa: B018 -- fail early, naming the store, when it is closed
        self._refuse_read_only()  # not even buffered: it could never be written
        refuse_when_full(self, self.flush_every)  # writes failing: not taken past the bound
        rec = self._dirty.get(visit.fingerprint)
        if rec is None:
            cached = self._clean.pop(visit.fingerprint, _NOT_READ)
            if visit.fingerprint in self._absent:
                del self._absent[visit.fingerprint]  # in the file from the next flush
                cached = None
            if cached is _NOT_READ and self._never_recorded(visit.fingerprint):
                cached = None
            if cached is _NOT_READ:
                # the stored signature (tens of KB) is read only when this visit brings none
                rec = self._fetch(visit.fingerprint, signature=visit.signature is None)
            elif cached is not None:
                # a copy: the callers that read it hold it as the record before this visit
                rec = object.__new__(UrlRecord)
                rec.__dict__.update(cached.__dict__)
        cycle = self._cycle if visit.cycle is None else visit.cycle
        if rec is None:
            rec = UrlRecord(
                id=self._next_id,
                url=visit.url,
                fingerprint=visit.fingerprint,
                first_seen=visit.time,
                first_cycle=self._cycle,
            )
            self._next_id += 1
            self._count += 1
            if self._seen is not None:
                self._seen.add(visit.fingerprint)
        observed = fold_visit(rec, visit, cycle)  # the one rule (history/state.py)
        if visit.signature is not None:
            rec.signature = visit.signature
            self._signatures[rec.id] = visit.signature
        if visit.request is not None:
            blob = encode_stored(visit.request)
            if blob is not None:  # else keep the previously stored request
                self._requests[rec.id] = blob
        if self.store_bodies and visit.body is not None and good_status(visit.status):
            headers = json.dumps(visit.headers or {})
            self._bodies[rec.id] = (visit.status, headers, compress_body(visit.body))
            rec.has_body = True
        self._dirty[rec.fingerprint] = rec
        self._visit_rows.append(
            (
                rec.id,
                cycle,
                visit.time,
                visit.status,
                None if not observed else int(bool(visit.changed)),
                visit.distance,
                visit.added,
                visit.removed,
                visit.modified,
                visit.attributes,
                visit.size,
            )
        )
        if (
            len(self._visit_rows) >= self.flush_every
            or self._monotonic() - self._last_flush >= self.flush_seconds
        ):
            try:
                self.flush()
            except HistoryStoreError as exc:  # the visit is buffered: not to be recorded again
                raise FlushFailed(str(exc), rec) from exc
        return rec

    def flush(self) -> None:
        if self._db is None or not (self._visit_rows or self._dirty):
            self._last_flush = self._monotonic()
            return
        url_rows = [self._url_row(rec) for rec in self._dirty.values()]
        marks = ",".join("?" * len(URL_COLUMNS))
        trimmed: list[int] = []

        def write(db: sqlite3.Connection) -> None:
            db.executemany(
                f"INSERT OR REPLACE INTO urls ({', '.join(URL_COLUMNS)}) VALUES ({marks})",
                url_rows,
            )
            # the scorers' packed copy of those rows, in the same transaction
            sqlite_packed.write(db, self._dirty.values())
            db.executemany(
                "INSERT OR REPLACE INTO signatures VALUES (?, ?)", self._signatures.items()
            )
            db.executemany("INSERT OR REPLACE INTO requests VALUES (?, ?)", self._requests.items())
            db.executemany(
                "INSERT OR REPLACE INTO bodies VALUES (?, ?, ?, ?)",
                [(i, *b) for i, b in self._bodies.items()],
            )
            db.executemany(
                "INSERT INTO visits (url_id, cycle, time, status, changed, distance, added,"
                " removed, modified, attributes, bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                self._visit_rows,
            )
            trimmed.append(self._trim(db))  # in the same transaction as the new visits

        self._write(write)
        self._reset_buffers()
        self._note_trimmed(trimmed[-1] if trimmed else 0)

    def _trim(self, db: sqlite3.Connection, maxlen: int | None = None) -> int:
        """Drop the oldest visits beyond the cap (``log_maxlen``; 0: none), in the
        transaction that appended the new ones; returns how many were dropped.

        The log's ids grow by one a visit (rows are appended, and only the oldest are
        ever deleted), so the newest ``maxlen`` are those above ``MAX(id) - maxlen``: two
        B-tree look-ups and a range delete, not a count of the log. What is dropped is
        history only: every URL's record (its estimators, its change window) is in
        ``urls`` (docs/history.md, "How long the visit log is kept").
        """
        cap = self.log_maxlen if maxlen is None else maxlen
        if cap <= 0:
            return 0
        # apart: each is one look-up at an end of the B-tree, together they scan it all
        row = db.execute(
            "SELECT (SELECT MIN(id) FROM visits), (SELECT MAX(id) FROM visits)"
        ).fetchone()
        if row[0] is None or row[1] - row[0] < cap:
            return 0
        return int(db.execute("DELETE FROM visits WHERE id <= ?", (row[1] - cap,)).rowcount)

    def _note_trimmed(self, dropped: int) -> None:
        if dropped and not self.trimmed_visits:
            logger.info(
                "recrawl: the visit log of %s holds RECRAWL_SQLITE_LOG_MAXLEN=%d visits: the "
                "oldest are dropped as new ones are written (each URL's record is kept "
                "whole; docs/history.md)",
                self.location,
                self.log_maxlen,
            )
        self.trimmed_visits += dropped

    def compact(self, maxlen: int | None = None) -> tuple[int, int, int]:
        """Drop the visits beyond the cap (``maxlen``, default :attr:`log_maxlen`; 0:
        none) and rebuild the file (VACUUM), which a trim alone never shrinks: SQLite
        reuses the freed pages for the visits that follow. ``scrapy recrawl-reset
        --compact``. Returns (visits dropped, bytes before, bytes after)."""
        self.flush()
        before = self._file_size()
        dropped: list[int] = []
        self._write(lambda db: dropped.append(self._trim(db, maxlen)))
        self._read(lambda db: db.execute("VACUUM"))
        self._read(lambda db: db.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        return dropped[0], before, self._file_size()

    def _file_size(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))

    @staticmethod
    def _url_row(rec: UrlRecord) -> tuple[Any, ...]:
        """The ``urls`` row of a record: NaN as NULL, booleans as 0/1 (a flush makes one
        per URL visited: one attrgetter call, not a getattr and two type tests a field)."""
        return tuple(
            [
                None if v != v else int(v) if v is True or v is False else v  # noqa: PLR0124 -- NaN
                for v in _record_values(rec)
            ]
        )
