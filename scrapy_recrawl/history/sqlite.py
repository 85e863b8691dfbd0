"""The embedded default history store: one SQLite file, WAL mode, batched writes.

One process writes a store at a time (use the Redis backend for many): it holds
an OS lock on ``<store>.lock`` while open (history/lock.py), and a second one is
refused at start-up. Opened with ``read_only=True`` (the offline commands), it
takes no lock and never changes the file (history/sqlite_readonly.py).
Visits are folded into an in-memory write-back cache and written in one
transaction every ``flush_every`` visits or ``flush_seconds`` seconds, and on
close; a URL's row and its visit-log rows always go in the same transaction,
so the per-URL counters are never ahead of the log. A failed write keeps the
buffer, so nothing is lost and the next flush retries it.

The lean ``urls`` table holds only numbers and short strings, so loading a
million URLs into numpy is one table scan; signatures, request dicts and
bodies live in side tables keyed by the URL id.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

import numpy as np

from .base import (
    SCHEMA_VERSION,
    FlushFailed,
    HistoryArrays,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
    refuse_when_full,
)
from .lock import StoreLock
from .records import check_table, pack_list, unpack_list, window_from_bits
from .request_codec import decode_stored, encode_stored
from .sqlite_readonly import connect_read_only
from .sqlite_schema import (
    MIGRATIONS,
    OWNER_SQL,
    SCHEMA,
    SCRUBBED_VERSION,
    NotAStore,
    schema_version,
)
from .state import fold_visit, good_status

# Column order of the urls table as UrlRecord fields (row <-> record).
_URL_COLUMNS = (
    "id fingerprint url first_seen first_cycle visits n x sad aad_sum gad "
    "last_visit_cycle last_visit_time last_change_cycle last_change_time d a r m "
    "status gone etag last_modified has_body failures last_failure_cycle cwin"
).split()


_RECORD_FIELDS = [
    {"x": "X", "d": "D", "a": "A", "r": "R", "m": "M"}.get(c, c) for c in _URL_COLUMNS
]


# Columns handed to the scorer (HistoryArrays.columns), with their dtypes.
# NULLs come back as -1 and are turned into NaN ("not recorded").
_ARRAY_COLUMNS: list[tuple[str, str, Any]] = [
    ("n", "n", np.int64),
    ("X", "x", np.int64),
    ("sad", "sad", np.float64),
    ("aad_sum", "aad_sum", np.float64),
    ("gad", "gad", np.float64),
    ("last_visit_cycle", "last_visit_cycle", np.int64),
    ("last_visit_time", "IFNULL(last_visit_time, -1)", np.float64),
    ("D", "IFNULL(d, -1)", np.float64),
    ("A", "IFNULL(a, -1)", np.float64),
    ("R", "IFNULL(r, -1)", np.float64),
    ("M", "IFNULL(m, -1)", np.float64),
    ("gone", "gone", np.bool_),
    ("failures", "failures", np.int64),
    ("last_failure_cycle", "last_failure_cycle", np.int64),
    ("first_cycle", "first_cycle", np.int64),
    ("last_change_cycle", "last_change_cycle", np.int64),
]


logger = logging.getLogger("scrapy_recrawl.history")

_NULLABLE = ("last_visit_time", "D", "A", "R", "M")

#: Rows per block read by :meth:`SqliteHistoryStore.arrays` (8 MiB a block).
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


def _nan_to_none(x: float) -> float | None:
    return None if x is None or math.isnan(x) else x


def _create_owner_only(path: str) -> None:
    """Create the store file, empty, readable and writable by its owner only (it holds
    the crawl's requests and pages), unless it exists; SQLite gives its WAL and
    shared-memory files the same mode."""
    if path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class SqliteHistoryStore:
    """The history store in one SQLite file (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        store_bodies: bool = True,
        flush_every: int = 500,
        flush_seconds: float = 5.0,
        clock: Any = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        read_only: bool = False,
        log_maxlen: int = 10_000_000,
    ) -> None:
        self.path = os.fspath(path)
        self.location = f"sqlite:///{os.path.abspath(self.path)}"
        #: read, never write: no lock, nothing created, migrated or switched to WAL
        self.read_only = read_only
        #: the schema version of the file when opened read-only (it may be older than
        #: the one read: an older store is upgraded in memory, never on disk)
        self.file_schema_version: int | None = None
        self._lock = StoreLock(self.path, self.location)
        self.store_bodies = store_bodies
        self.flush_every = max(1, int(flush_every))
        self.flush_seconds = float(flush_seconds)
        self._clock = clock
        #: the flush timer's clock (seconds, only differences count): a test may pass its own
        self._monotonic = monotonic
        #: visits the log keeps, the newest (RECRAWL_SQLITE_LOG_MAXLEN; 0: all): each
        #: flush drops the older ones (:meth:`_trim`)
        self.log_maxlen = max(0, int(log_maxlen))
        #: visits this store object dropped from the log (said once in the log)
        self.trimmed_visits = 0
        self._db: sqlite3.Connection | None = None
        self._cycle = 0
        self._next_id = 1
        self._count = 0
        #: stored values read back that were not data (skipped): the stat
        #: ``recrawl/unreadable_values``
        self.unreadable_values = 0
        self._reset_buffers()

    # -- lifecycle ---------------------------------------------------------

    def _reset_buffers(self) -> None:
        self._dirty: dict[bytes, UrlRecord] = {}
        self._visit_rows: list[tuple[Any, ...]] = []
        self._signatures: dict[int, bytes] = {}
        self._requests: dict[int, bytes] = {}
        self._bodies: dict[int, tuple[int, str, bytes]] = {}
        self._last_flush = self._monotonic()

    def open(self) -> None:
        if self._db is not None:
            return
        if self.read_only:
            self._open_read_only()
            return
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise HistoryStoreError(
                f"cannot open the history store {self.location} (RECRAWL_STORE): {exc}"
            ) from exc
        self._lock.acquire()  # before anything is read or written: one writer per store
        db: sqlite3.Connection | None = None
        try:
            _create_owner_only(self.path)
            db = sqlite3.connect(self.path, isolation_level=None)
            db.execute("PRAGMA busy_timeout=10000")
            # what the file is, before anything is written to it (its journal mode included)
            version = schema_version(db)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if version is None:
                db.executescript(
                    "BEGIN;"
                    + SCHEMA
                    + "INSERT OR REPLACE INTO meta VALUES ('schema_version', "
                    + f"'{SCHEMA_VERSION}'), ('cycle', '0');COMMIT;"
                )
            elif version > SCHEMA_VERSION:
                raise HistoryStoreError(
                    f"history store {self.location} has schema version {version}, newer than "
                    f"this scrapy-recrawl understands ({SCHEMA_VERSION}): upgrade scrapy-recrawl "
                    "or point RECRAWL_STORE elsewhere"
                )
            else:
                for v in range(version, SCHEMA_VERSION):
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        MIGRATIONS[v](db)
                        db.execute(
                            "UPDATE meta SET value = ? WHERE key = 'schema_version'",
                            (str(v + 1),),
                        )
                        db.execute("COMMIT")
                    except BaseException:
                        db.execute("ROLLBACK")  # the store stays as it was, at version v
                        raise
                if version < SCRUBBED_VERSION <= SCHEMA_VERSION:
                    # the scrubbed requests' old bytes linger in free pages and the WAL
                    # until rewritten: rebuild the file once, and empty the WAL
                    db.execute("VACUUM")
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._load_counters(db)
        except NotAStore as exc:
            if db is not None:
                db.close()
            self._lock.release()
            raise HistoryStoreError(
                f"{self.location} is not a scrapy-recrawl history store ({exc}): nothing was "
                "written to it; check RECRAWL_STORE"
            ) from None
        except BaseException as exc:
            if db is not None:
                db.close()
            self._lock.release()
            if isinstance(exc, (sqlite3.Error, OSError)):
                raise HistoryStoreError(
                    f"cannot open the history store {self.location} (RECRAWL_STORE): {exc}"
                ) from exc
            raise
        self._db = db

    def _open_read_only(self) -> None:
        db, self.file_schema_version = connect_read_only(self.path, self.location)
        try:
            self._load_counters(db)
        except sqlite3.Error as exc:
            db.close()
            raise HistoryStoreError(
                f"cannot read the history store {self.location}: {exc}"
            ) from None
        self._db = db

    def _load_counters(self, db: sqlite3.Connection) -> None:
        self._cycle = int(db.execute("SELECT value FROM meta WHERE key='cycle'").fetchone()[0])
        self._next_id = int(db.execute("SELECT IFNULL(MAX(id), 0) FROM urls").fetchone()[0]) + 1
        self._count = int(db.execute("SELECT COUNT(*) FROM urls").fetchone()[0])

    @property
    def buffered_visits(self) -> int:
        """Visits recorded but not yet written (the next flush writes them)."""
        return len(self._visit_rows)

    def close(self) -> None:
        if self._db is None:
            return
        try:
            self.flush()
        finally:
            self._db.close()
            self._db = None
            self._lock.release()

    def __enter__(self) -> SqliteHistoryStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise HistoryStoreError(f"history store {self.location} is not open")
        return self._db

    # -- cycles ------------------------------------------------------------

    @property
    def cycle(self) -> int:
        return self._cycle

    def advance_cycle(self) -> int:
        self.flush()
        self._write(
            lambda db: db.execute(
                "UPDATE meta SET value = ? WHERE key = 'cycle'", (str(self._cycle + 1),)
            )
        )
        self._cycle += 1
        return self._cycle

    # -- reads -------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def knows(self, fingerprint: bytes) -> bool:
        if fingerprint in self._dirty:
            return True
        return (
            self._read(
                lambda db: db.execute(
                    "SELECT 1 FROM urls WHERE fingerprint = ?", (fingerprint,)
                ).fetchone()
            )
            is not None
        )

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        rec = self._dirty.get(fingerprint)
        if rec is not None:
            return rec
        # signatures can be tens of KB: join them only when the caller compares
        sig_col, join = (
            (", s.signature", " LEFT JOIN signatures s ON s.url_id = u.id")
            if signature
            else ("", "")
        )
        row = self._read(
            lambda db: db.execute(
                f"SELECT {', '.join('u.' + c for c in _URL_COLUMNS)}{sig_col} "
                f"FROM urls u{join} WHERE u.fingerprint = ?",
                (fingerprint,),
            ).fetchone()
        )
        if row is None:
            return None
        values = dict(zip(_RECORD_FIELDS, row[: len(_URL_COLUMNS)], strict=True))
        for key in ("last_visit_time", "last_change_time", "D", "A", "R", "M"):
            if values[key] is None:
                values[key] = float("nan")
        values["gone"] = bool(values["gone"])
        values["has_body"] = bool(values["has_body"])
        return UrlRecord(**values, signature=row[-1] if signature else None)

    def body(self, fingerprint: bytes) -> StoredBody | None:
        rec = self.get(fingerprint, signature=False)
        if rec is None or not rec.has_body:
            return None
        pending = self._bodies.get(rec.id)
        row = pending or self._read(
            lambda db: db.execute(
                "SELECT status, headers, body FROM bodies WHERE url_id = ?", (rec.id,)
            ).fetchone()
        )
        if row is None:
            return None
        status, headers, body = row
        return StoredBody(status=status, headers=json.loads(headers), body=zlib.decompress(body))

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        wanted = [int(i) for i in ids]
        found = self._select_by_id("SELECT url_id, request FROM requests WHERE url_id IN", wanted)
        wanted_set = set(wanted)
        found.update({i: b for i, b in self._requests.items() if i in wanted_set})
        with _no_gc():
            return [
                self._decode(found[i], f"requests row {i}") if i in found else None for i in wanted
            ]

    def _decode(self, blob: bytes, what: str) -> dict[str, Any] | None:
        d = decode_stored(blob, f"{what} of the history store {self.location}")
        if d is None:
            self.unreadable_values += 1
        return d

    def _select_by_id(self, select: str, ids: list[int]) -> dict[int, Any]:
        """``{id: value}`` for ``select`` + ``(?, ?, ...)``, in chunks of bound parameters."""
        found: dict[int, Any] = {}
        # in id order: neighbouring ids share the B-tree's pages, so a cycle's 5% of a
        # large table is read page after page (3x faster at 10M URLs than in score order)
        ids = sorted(set(ids))
        # sqlite limits bound parameters per statement; 900 is safe on every build
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            sql = f"{select} ({','.join('?' * len(chunk))})"
            found.update(
                self._read(lambda db, sql=sql, chunk=chunk: db.execute(sql, chunk).fetchall())
            )
        return found

    def arrays(self) -> HistoryArrays:
        """The ``urls`` table's scoring columns as numpy, read in one scan.

        The rows go block by block (:data:`_ARRAY_BLOCK`) through ``np.fromiter``
        into a small structured buffer, and from there into the preallocated columns:
        the peak memory is the columns plus one block, not twice the columns (a
        structured array of every row, then a contiguous copy of each column).
        """
        self.flush()
        sql = "SELECT id, " + ", ".join(expr for _, expr, _ in _ARRAY_COLUMNS) + " FROM urls"
        dtype = np.dtype([("id", np.int64)] + [(name, t) for name, _, t in _ARRAY_COLUMNS])
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
        columns = {name: col[:read] for name, col in zip(names[1:], out[1:], strict=True)}
        for name in _NULLABLE:
            col = columns[name]
            col[col < 0] = np.nan
        return HistoryArrays(ids=out[0][:read], columns=columns, cycle=self._cycle)

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

    # -- side storage (what plug-ins keep; the `side` table) ------------------------

    def side_get(self, table: str, keys: Sequence[int]) -> list[bytes | None]:
        check_table(table)
        wanted = [int(k) for k in keys]
        found: dict[int, bytes] = {}
        for start in range(0, len(wanted), 900):
            chunk = wanted[start : start + 900]
            sql = f"SELECT key, value FROM side WHERE tbl = ? AND key IN ({','.join('?' * len(chunk))})"
            found.update(
                self._read(
                    lambda db, sql=sql, chunk=chunk: db.execute(sql, [table, *chunk]).fetchall()
                )
            )
        return [found.get(k) for k in wanted]

    def side_put(self, table: str, items: Sequence[tuple[int, bytes]]) -> None:
        check_table(table)
        rows = [(table, int(k), bytes(v)) for k, v in items]
        self._write(lambda db: db.executemany("INSERT OR REPLACE INTO side VALUES (?, ?, ?)", rows))

    def side_delete(self, table: str, keys: Sequence[int]) -> None:
        check_table(table)
        rows = [(table, int(k)) for k in keys]
        self._write(lambda db: db.executemany("DELETE FROM side WHERE tbl = ? AND key = ?", rows))

    def side_items(self, table: str) -> Iterator[tuple[int, bytes]]:
        check_table(table)
        rows = self._read(
            lambda db: db.execute(
                "SELECT key, value FROM side WHERE tbl = ? ORDER BY key", (table,)
            ).fetchall()
        )
        for key, value in rows:
            yield int(key), bytes(value)

    def side_push(self, table: str, key: int, item: bytes, keep: int) -> list[bytes]:
        check_table(table)
        before: list[bytes] = []

        def push(db: sqlite3.Connection) -> None:
            row = db.execute(
                "SELECT value FROM side WHERE tbl = ? AND key = ?", (table, int(key))
            ).fetchone()
            before.extend(unpack_list(row[0] if row else None))
            kept = pack_list([bytes(item), *before][: max(1, int(keep))])
            db.execute("INSERT OR REPLACE INTO side VALUES (?, ?, ?)", (table, int(key), kept))

        self._write(push)
        return before

    def urls(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        wanted = [int(i) for i in ids]
        found = self._select_by_id("SELECT id, url FROM urls WHERE id IN", wanted)
        found.update({rec.id: rec.url for rec in self._dirty.values()})
        return [found[i] for i in wanted]

    # -- whose history (the meta row 'spider', schema version 3) ---------------

    def owner(self) -> str | None:
        row = self._read(lambda db: db.execute(OWNER_SQL).fetchone())
        return row[0] if row else None

    def claim(self, spider: str) -> str:
        # INSERT OR IGNORE: the first claim wins, a later one leaves it as it is
        self._write(
            lambda db: db.execute("INSERT OR IGNORE INTO meta VALUES ('spider', ?)", (spider,))
        )
        return self.owner() or spider

    # -- the frontier: discovered requests waiting for a cycle with budget ----

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        rows = []
        for fp, request, priority in items:
            blob = encode_stored(request)
            if blob is not None:  # not plain data: cannot be kept
                rows.append((fp, int(priority), blob))
        before = self.frontier_size()

        def write(db: sqlite3.Connection) -> None:
            seq = db.execute("SELECT IFNULL(MAX(seq), 0) FROM frontier").fetchone()[0]
            db.executemany(
                "INSERT OR IGNORE INTO frontier (fingerprint, priority, seq, request) "
                "VALUES (?, ?, ?, ?)",
                [(fp, prio, seq + i + 1, blob) for i, (fp, prio, blob) in enumerate(rows)],
            )

        self._write(write)
        return self.frontier_size() - before

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        taken: list[tuple[bytes, bytes]] = []

        def take(db: sqlite3.Connection) -> None:
            taken.extend(
                db.execute(
                    "SELECT fingerprint, request FROM frontier ORDER BY priority DESC, seq LIMIT ?",
                    (int(limit),),
                ).fetchall()
            )
            db.executemany("DELETE FROM frontier WHERE fingerprint = ?", [(fp,) for fp, _ in taken])

        self._write(take)
        out = [self._decode(blob, f"frontier entry {fp.hex()}") for fp, blob in taken]
        return [d for d in out if d is not None]

    def frontier_size(self) -> int:
        return int(self._read(lambda db: db.execute("SELECT COUNT(*) FROM frontier").fetchone()[0]))

    # -- writes ------------------------------------------------------------

    def record(self, visit: Visit) -> UrlRecord:
        self.db  # noqa: B018 -- fail early, naming the store, when it is closed
        refuse_when_full(self, self.flush_every)  # writes failing: not taken past the bound
        # the stored signature (tens of KB) is read only when this visit brings none
        rec = self.get(visit.fingerprint, signature=visit.signature is None)
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
            self._bodies[rec.id] = (visit.status, headers, zlib.compress(visit.body, 1))
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
        marks = ",".join("?" * len(_URL_COLUMNS))
        trimmed: list[int] = []

        def write(db: sqlite3.Connection) -> None:
            db.executemany(
                f"INSERT OR REPLACE INTO urls ({', '.join(_URL_COLUMNS)}) VALUES ({marks})",
                url_rows,
            )
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

    def clear(self) -> None:
        """Empty the store (``scrapy recrawl-reset``): cycle 0, no URL, visit, frontier
        request or side-storage row; the schema stays, and the file shrinks."""
        self._reset_buffers()  # buffered visits belong to the history being removed

        def wipe(db: sqlite3.Connection) -> None:
            for table in ("visits", "bodies", "requests", "signatures", "frontier", "side"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM urls")
            db.execute("UPDATE meta SET value = '0' WHERE key = 'cycle'")

        self._write(wipe)
        self._cycle, self._next_id, self._count = 0, 1, 0
        self._read(lambda db: db.execute("VACUUM"))

    @staticmethod
    def _url_row(rec: UrlRecord) -> tuple[Any, ...]:
        row = []
        for field_name in _RECORD_FIELDS:
            value = getattr(rec, field_name)
            if isinstance(value, float):
                value = _nan_to_none(value)
            elif isinstance(value, bool):
                value = int(value)
            row.append(value)
        return tuple(row)

    def _write(self, fn: Any) -> None:
        db = self.db
        if self.read_only:
            # an older store is read from a copy in memory: a write there would be lost
            raise HistoryStoreError(
                f"the history store {self.location} is open read-only: nothing is written"
            )
        try:
            db.execute("BEGIN IMMEDIATE")
            fn(db)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            # The buffers are untouched: the next flush (or close) retries them.
            raise HistoryStoreError(
                f"cannot write to the history store {self.location} (RECRAWL_STORE): {exc}"
            ) from exc

    def _read(self, fn: Any) -> Any:
        try:
            return fn(self.db)
        except sqlite3.Error as exc:
            raise HistoryStoreError(
                f"cannot read the history store {self.location} (RECRAWL_STORE): {exc}"
            ) from exc
