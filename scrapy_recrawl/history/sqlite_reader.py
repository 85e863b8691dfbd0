"""The SQLite store's reads: one URL's record and body, and every URL's columns at once.

Each read answers from the write-back buffers first (visits recorded but not yet
flushed), then from the file. The bulk reads a cycle makes flush first:
:meth:`~SqliteReader.arrays` reads the packed copy of the scoring columns
(sqlite_packed.py: blocks of records into numpy, no object per value);
:meth:`~SqliteReader.visit_log` and :meth:`~SqliteReader.change_window` read their
table in one scan into numpy. The point reads go by id in chunks of bound
parameters, in id order; a cycle's picks are decoded by the codec's
``decode_stored_many``.
"""

from __future__ import annotations

import copy
import gc
import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Any

import numpy as np

from . import sqlite_packed
from .base import HistoryArrays, StoredBody, UrlRecord, decompress_body
from .records import window_from_bits
from .request_codec import decode_stored_many
from .sqlite_connection import SqliteConnection
from .sqlite_schema import ARRAY_COLUMNS, RECORD_FIELDS, URL_COLUMNS

_NULLABLE = ("last_visit_time", "D", "A", "R", "M")
_NAN_WHEN_NULL = ("last_visit_time", "last_change_time", "D", "A", "R", "M")
_NAN = float("nan")

#: One URL's row, and with its signature: built once (get() runs several times a visit).
_GET = f"SELECT {', '.join(URL_COLUMNS)} FROM urls WHERE fingerprint = ?"
_GET_SIGNED = (
    f"SELECT {', '.join('u.' + c for c in URL_COLUMNS)}, s.signature "
    "FROM urls u LEFT JOIN signatures s ON s.url_id = u.id WHERE u.fingerprint = ?"
)
#: ... and its kept body (the read of a record a visit reads again: a 304's copy then
#: needs no read of its own)
_GET_KEPT = (
    f"SELECT {', '.join('u.' + c for c in URL_COLUMNS)}, s.signature, "
    "b.status, b.headers, b.body FROM urls u LEFT JOIN signatures s ON s.url_id = u.id "
    "LEFT JOIN bodies b ON b.url_id = u.id WHERE u.fingerprint = ?"
)

#: ... of a block of URLs by id (read_ahead), ``(?, ?, ...)`` appended
_GET_KEPT_BY_ID = _GET_KEPT.replace("WHERE u.fingerprint = ?", "WHERE u.id IN")

#: Records read from the file kept for the visits that read them again (see
#: SqliteConnection._forget_clean): more than the requests in flight of a busy crawl
#: (each leaves the cache when its visit is recorded, all of them at each flush), and
#: few enough that their signatures (a full one is tens of KB) stay bounded (tens of MB
#: at worst, a few hundred KB when most are a first fetch's content hash).
_CLEAN_RECORDS = 1024

#: A record whose signature is longer is not kept in that cache (24 bytes an element:
#: a big page's is hundreds of KB, and 1,024 of them would hold hundreds of MB): it is
#: read again by each visit that wants it, as before the cache.
_CLEAN_SIGNATURE_MAX = 64 * 1024

#: New URLs remembered as not in the file (SqliteConnection._absent): a frontier's worth
#: of admitted URLs waiting for their first fetch, a few MB at most.
_ABSENT_KEPT = 1 << 16

#: Rows per block read by :meth:`SqliteReader.arrays` (8 MiB a block).
_ARRAY_BLOCK = 1 << 16


@contextmanager
def _no_gc() -> Iterator[None]:
    """No cyclic garbage collection while many containers are made at once (a cycle's
    decoded requests): each collection would walk every one made so far, nearly
    doubling the time at 500,000 requests. Nothing made there is a reference cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class SqliteReader(SqliteConnection):
    """The reads of the store contract (HistoryStore: get, knows, body, requests,
    arrays, urls, visit_log, change_window)."""

    def __len__(self) -> int:
        return self._count

    def knows(self, fingerprint: bytes) -> bool:
        if fingerprint in self._dirty:
            return True
        absent = self._absent
        if fingerprint in absent:
            return False
        if self._never_recorded(fingerprint):
            found = False
        else:
            found = (
                self._read(
                    lambda db: db.execute(
                        "SELECT 1 FROM urls WHERE fingerprint = ?", (fingerprint,)
                    ).fetchone()
                )
                is not None
            )
        if not found:
            if len(absent) >= _ABSENT_KEPT:
                del absent[next(iter(absent))]  # the oldest: admitted long ago
            absent[fingerprint] = None
        return found

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        rec = self._dirty.get(fingerprint)
        if rec is not None:
            return rec
        clean = self._clean
        if fingerprint in clean:
            return clean[fingerprint]
        if fingerprint in self._absent:
            return None  # known new (knows()): no row to read
        if self._never_recorded(fingerprint):
            return None
        # Not read yet (or evicted): read with its signature whatever the caller asked.
        # A visit reads the record three or four times (the validators, the observer,
        # the stored body, the record itself), and one of those reads wants the
        # signature: one read, joined, instead of four. Unknown URLs (None) are kept too.
        rec = self._fetch(fingerprint, signature=True, body=True)
        self._keep_clean(fingerprint, rec)
        return rec

    def _keep_clean(self, fingerprint: bytes, rec: UrlRecord | None) -> None:
        """Keep a record just read from the file (None: no such URL) in the cache of
        clean records, with its kept body when it was read with it."""
        clean = self._clean
        if rec is not None and len(rec.signature or b"") > _CLEAN_SIGNATURE_MAX:
            self._clean_bodies.pop(rec.id, None)
            return  # not kept: the bound of the cache's memory
        if len(clean) >= _CLEAN_RECORDS:
            old = clean.pop(next(iter(clean)))  # the oldest read: its visit is long done
            if old is not None:
                self._clean_bodies.pop(old.id, None)
        clean[fingerprint] = rec

    def read_ahead(self, ids: np.ndarray) -> None:
        """Read the records of ``ids`` (with signature and kept body) into the cache of
        clean records, in one query (capability ``"read_ahead"``): a cycle's recrawls
        are read a block ahead of their visits (frontier/local.py), not one query each
        as each visit comes. Inside a crawl one URL's query costs about 55 µs (its own
        read transaction, the fingerprint index, cold pages), a block's about 7 µs a
        URL. At most a quarter of the cache is read at once; records buffered or
        already cached are left as they are."""
        if self._db is None or not len(ids):
            return
        wanted = [int(i) for i in ids[: _CLEAN_RECORDS // 4]]
        sql = f"{_GET_KEPT_BY_ID} ({','.join('?' * len(wanted))})"
        rows = self._read(lambda db: db.execute(sql, wanted).fetchall())
        dirty, clean = self._dirty, self._clean
        for row in rows:
            fingerprint = row[1]  # URL_COLUMNS[1]
            if fingerprint in dirty or fingerprint in clean:
                continue  # newer than the file, or read already (and perhaps handed out)
            self._keep_clean(fingerprint, self._record_of(row, signature=True, body=True))

    def _fetch(
        self, fingerprint: bytes, *, signature: bool, body: bool = False
    ) -> UrlRecord | None:
        """The URL's record as the file has it (no buffer, no cache); ``body``: its kept
        body's row read with it, into the cache of clean bodies (get())."""
        # signatures can be tens of KB: joined only when wanted
        sql = _GET_KEPT if body else _GET_SIGNED if signature else _GET
        row = self._read(lambda db: db.execute(sql, (fingerprint,)).fetchone())
        if row is None:
            return None
        return self._record_of(row, signature=signature, body=body)

    def _record_of(self, row: tuple[Any, ...], *, signature: bool, body: bool) -> UrlRecord:
        """The record of a row of :data:`_GET` (``signature``: of :data:`_GET_SIGNED`;
        ``body``: of :data:`_GET_KEPT`, its kept body put in the cache of clean bodies)."""
        if body:
            kept, row = row[-3:], row[:-3]
            if kept[2] is not None and len(kept[2]) <= _CLEAN_SIGNATURE_MAX:
                self._clean_bodies[row[0]] = kept  # row[0]: the id (URL_COLUMNS[0])
        values = dict(zip(RECORD_FIELDS, row, strict=False))
        for key in _NAN_WHEN_NULL:
            if values[key] is None:
                values[key] = _NAN
        values["gone"] = bool(values["gone"])
        values["has_body"] = bool(values["has_body"])
        values["signature"] = row[-1] if signature else None
        # every field is set here (tests/test_sqlite_record_cache.py checks it): the
        # dataclass's __init__ with 29 keywords would be two thirds of the cost
        rec = object.__new__(UrlRecord)
        rec.__dict__.update(values)
        return rec

    def body(self, fingerprint: bytes) -> StoredBody | None:
        rec = self.get(fingerprint, signature=False)
        if rec is None or not rec.has_body:
            return None
        # the buffer's (this flush's visit), else as read with the record, else the file's
        pending = self._bodies.get(rec.id) or self._clean_bodies.get(rec.id)
        row = pending or self._read(
            lambda db: db.execute(
                "SELECT status, headers, body FROM bodies WHERE url_id = ?", (rec.id,)
            ).fetchone()
        )
        if row is None:
            return None
        status, headers, body = row
        return StoredBody(status=status, headers=json.loads(headers), body=decompress_body(body))

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        """The stored request of each of ``ids`` (None: none stored, or not a request).

        Read in id order (neighbouring ids share the B-tree's pages: 3x faster at 10M
        URLs than in score order) and decoded chunk by chunk as it is read, each dict
        put straight in its place: only a chunk's bytes are held at a time, not the
        whole cycle's (~500,000 requests, ~110 MB of bytes at 10M URLs, on top of
        their dicts at the peak)."""
        wanted = ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]
        # each id's place in the answer (an id asked twice: its last place, see below)
        slot = {i: n for n, i in enumerate(wanted)}
        out: list[dict[str, Any] | None] = [None] * len(wanted)
        buffered = self._requests  # visits not flushed yet: newer than the file's
        unreadable = 0

        def place(rows: list[tuple[int, bytes | None]]) -> None:
            nonlocal unreadable
            decoded = decode_stored_many(
                [blob for _, blob in rows],
                lambda n: f"requests row {rows[n][0]} of the history store {self.location}",
            )
            for (i, blob), d in zip(rows, decoded, strict=True):
                out[slot[i]] = d
                if d is None and blob is not None:
                    unreadable += 1

        with _no_gc():
            if buffered:
                place([(i, buffered[i]) for i in slot if i in buffered])
            order = sorted(slot)
            # sqlite limits bound parameters per statement; 900 is safe on every build
            for start in range(0, len(order), 900):
                chunk = order[start : start + 900]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT url_id, request FROM requests WHERE url_id IN ({marks})"
                rows = self._read(
                    lambda db, sql=sql, chunk=chunk: db.execute(sql, chunk).fetchall()
                )
                if buffered:
                    rows = [row for row in rows if row[0] not in buffered]
                place(rows)
            del order
        self.unreadable_values += unreadable
        if len(slot) < len(wanted):
            # an id asked twice: each place gets its own dict (a caller may change one)
            for n, i in enumerate(wanted):
                if slot[i] != n and out[slot[i]] is not None:
                    out[n] = copy.deepcopy(out[slot[i]])
        return out

    def arrays(self) -> HistoryArrays:
        """The scoring columns of every URL as numpy, from the packed table
        (history/sqlite_packed.py: a block of URLs a row, no object per value), in
        id order, into columns preallocated for the store's URLs: the peak memory is
        the columns plus one batch of blocks."""
        self.flush()
        size = self._count
        ids = np.empty(size, dtype=np.int64)
        columns = {name: np.empty(size, dtype=t) for name, _, t in ARRAY_COLUMNS}
        read = self._read(lambda db: sqlite_packed.read(db, size, columns, ids))
        return self._arrays(ids, columns, read)

    def _arrays(self, ids: np.ndarray, columns: dict[str, np.ndarray], read: int) -> HistoryArrays:
        columns = {name: col[:read] for name, col in columns.items()}
        for name in _NULLABLE:
            col = columns[name]
            col[col < 0] = np.nan  # the urls table's NULL (read as -1 there), or NaN here
        return HistoryArrays(ids=ids[:read], columns=columns, cycle=self._cycle)

    def _arrays_from_urls(self) -> HistoryArrays:
        """:meth:`arrays` read from the ``urls`` table itself (the read before schema
        version 9, about 1.6 µs per URL): what the packed table must always equal
        (tests/test_sqlite_packed.py), and the benchmark's baseline.

        The rows go block by block (:data:`_ARRAY_BLOCK`) through ``np.fromiter``
        into a small structured buffer, and from there into the preallocated columns.
        """
        self.flush()
        sql = "SELECT id, " + ", ".join(expr for _, expr, _ in ARRAY_COLUMNS) + " FROM urls"
        dtype = np.dtype([("id", np.int64)] + [(name, t) for name, _, t in ARRAY_COLUMNS])
        names = dtype.names or ()
        size = self._count
        out = [np.empty(size, dtype=dtype[name]) for name in names]

        def scan(db: sqlite3.Connection) -> int:
            cursor = db.execute(sql)
            done = 0
            while done < size:
                block = np.fromiter(islice(cursor, min(_ARRAY_BLOCK, size - done)), dtype)
                if not len(block):
                    break
                for name, col in zip(names, out, strict=True):
                    col[done : done + len(block)] = block[name]
                done += len(block)
            cursor.close()  # a store written since it was counted: the first rows only
            return done

        read = self._read(scan)
        columns = dict(zip(names[1:], out[1:], strict=True))
        return self._arrays(out[0], columns, read)

    def visit_log(
        self, url_ids: Iterable[int] | None = None, *, since_cycle: int | None = None
    ) -> dict[str, np.ndarray]:
        """The visit log (oldest first) as numpy columns; ``changed`` is -1 for no observation.

        ``since_cycle`` alone reads only the log's tail (schema version 7): the first
        visit of those cycles is found in the index on cycle (its entries only), and
        the rows from it on are read in log order, a range of the table, no sort. (A
        visit of an older cycle recorded late lies in that range: the condition on
        cycle still leaves it out.) With ``url_ids``, their index.
        """
        self.flush()
        sql = (
            "SELECT url_id, cycle, time, status, IFNULL(changed, -1), distance, added, removed,"
            " modified, attributes, bytes FROM visits"
        )
        params: list[int] = []
        where = []
        if url_ids is not None:
            params = [int(i) for i in url_ids]
            where.append(f"url_id IN ({','.join('?' * len(params))})")
        if since_cycle is not None:
            if url_ids is None:
                first = self._read(
                    lambda db: db.execute(
                        "SELECT MIN(id) FROM visits INDEXED BY visits_by_cycle WHERE cycle >= ?",
                        (int(since_cycle),),
                    ).fetchone()[0]
                )
                where.append("id >= ?")
                params.append(1 << 62 if first is None else int(first))  # none: no row
            where.append("cycle >= ?")
            params.append(int(since_cycle))
        if where:
            sql += " WHERE " + " AND ".join(where)
        names = "url_id cycle time status changed distance added removed modified attributes bytes"
        dtype = np.dtype([(c, np.float64 if c == "time" else np.int64) for c in names.split()])
        table = self._read(lambda db: np.fromiter(db.execute(sql + " ORDER BY id", params), dtype))
        return {c: np.ascontiguousarray(table[c]) for c in dtype.names or ()}

    def change_window(self, ids: np.ndarray, window: int) -> np.ndarray:
        """From each URL's row (``cwin``, schema version 7): one small int per URL, no
        visit log read (a cycle with the C* terminals read the whole log before)."""
        self.flush()
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) * 4 < self._count:  # a few: by id
            found = self._select_by_id("SELECT id, cwin FROM urls WHERE id IN", ids.tolist())
            cw = np.fromiter((found.get(int(i), 0) for i in ids), np.int64, len(ids))
            return window_from_bits(cw, window)
        # most of them (a cycle's scoring): one scan of the two columns
        dtype = np.dtype([("id", np.int64), ("cwin", np.int64)])
        table = self._read(
            lambda db: np.fromiter(db.execute("SELECT id, cwin FROM urls ORDER BY id"), dtype)
        )
        pos = np.searchsorted(table["id"], ids)
        pos = np.minimum(pos, max(len(table) - 1, 0))
        cw = np.zeros(len(ids), dtype=np.int64)
        if len(table):
            hit = table["id"][pos] == ids
            cw[hit] = table["cwin"][pos[hit]]
        return window_from_bits(cw, window)

    def urls(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        wanted = [int(i) for i in ids]
        found = self._select_by_id("SELECT id, url FROM urls WHERE id IN", wanted)
        found.update({rec.id: rec.url for rec in self._dirty.values()})
        return [found[i] for i in wanted]
