"""The SQLite store's connection: its file, its lock, opening it, and each read and write.

:class:`SqliteConnection` holds what every part of the store shares (the connection,
the counters, the write-back buffers that the writer fills and the reader reads
through) and opens the file: created owner-only, locked (history/lock.py), checked
(a newer or a pre-release schema refused), migrated in the one schema-version
sequence (sqlite_schema.migrate); or, ``read_only``, read through a snapshot that
never changes the file (history/sqlite_readonly.py). Every statement goes through
:meth:`~SqliteConnection._read` or :meth:`~SqliteConnection._write` (one
transaction, rolled back on failure), whose errors are :class:`HistoryStoreError`
lines naming the store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from .base import HistoryStoreError, UrlRecord
from .lock import StoreLock
from .request_codec import decode_stored
from .seen_filter import SeenFilter
from .sqlite_readonly import connect_read_only
from .sqlite_schema import NotAStore, create, migrate, refuse_unreadable, schema_version


def _create_owner_only(path: str) -> None:
    """Create the store file, empty, readable and writable by its owner only (it holds
    the crawl's requests and pages), unless it exists; SQLite gives its WAL and
    shared-memory files the same mode."""
    if path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class SqliteConnection:
    """The store's file and connection, and the state its parts share."""

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
        #: fingerprints :meth:`knows` found in no row, until their first visit is recorded
        #: (the scheduler asks as it admits a new URL; its visit then needs no query for
        #: a record that is not there). Unlike the cache of clean records it outlives a
        #: flush: only this object's record() adds a URL to the file while it is open.
        self._absent: dict[bytes, None] = {}
        #: every fingerprint recorded since an open that found no URL in the file (None:
        #: there were some, or read-only): :meth:`knows` needs no query for one it has
        #: never seen (seen_filter.py)
        self._seen: SeenFilter | None = None
        self._cycle = 0
        self._next_id = 1
        self._count = 0
        #: stored values read back that were not data (skipped): the stat
        #: ``recrawl/unreadable_values``
        self.unreadable_values = 0
        self._reset_buffers()

    def _reset_buffers(self) -> None:
        """The write-back buffers (sqlite_writer.py fills and flushes them; the reader
        answers from them first)."""
        self._dirty: dict[bytes, UrlRecord] = {}
        self._visit_rows: list[tuple[Any, ...]] = []
        self._signatures: dict[int, bytes] = {}
        self._requests: dict[int, bytes] = {}
        self._bodies: dict[int, tuple[int, str, bytes]] = {}
        self._last_flush = self._monotonic()
        self._forget_clean()

    def _forget_clean(self) -> None:
        """Empty the cache of records read from the file (sqlite_reader.get).

        Why a cached record stays true: while the store is open it is the only writer
        of its file (the lock of history/lock.py, taken in :meth:`open`, refuses a
        second writing process), or it is read-only and reads one snapshot
        (sqlite_readonly.py); the record of a URL changes only through this object's
        record(), which takes the URL out of the cache (into ``_dirty``), and the
        cache is emptied at each flush, clear, open and close all the same.
        """
        #: fingerprint -> the record as read from the file (None: not there)
        self._clean: dict[bytes, UrlRecord | None] = {}
        #: URL id -> its kept body's row as read with its clean record (status, headers,
        #: the compressed body): the file's until the next flush writes a new one
        self._clean_bodies: dict[int, tuple[int, str, bytes]] = {}

    def open(self) -> None:
        if self._db is not None:
            return
        self._forget_clean()  # another process may have written the file since
        self._absent.clear()
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
            # what the file is, before anything is written to it (its journal mode
            # included): a store this release does not read is refused as it is
            version = schema_version(db)
            if version is not None:
                refuse_unreadable(
                    version,
                    self.location,
                    "upgrade scrapy-recrawl or point RECRAWL_STORE elsewhere",
                )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if version is None:
                create(db)
            else:
                migrate(db, version, self.location)  # an older one of the released sequence
            self._seen = self._seen_from(self._load_counters(db))
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

    def _load_counters(self, db: sqlite3.Connection) -> int:
        """The cycle, the next URL id and the URL count; returns the URLs in the file."""
        self._cycle = int(db.execute("SELECT value FROM meta WHERE key='cycle'").fetchone()[0])
        self._next_id = int(db.execute("SELECT IFNULL(MAX(id), 0) FROM urls").fetchone()[0]) + 1
        in_file = self._count = int(db.execute("SELECT COUNT(*) FROM urls").fetchone()[0])
        # visits still buffered (a close whose flush failed): their new URLs' ids are
        # taken, though not in the file yet; a new URL must not be given one again
        unwritten = [rec.id for rec in self._dirty.values() if rec.id >= self._next_id]
        if unwritten:
            self._count += len(unwritten)
            self._next_id = max(unwritten) + 1
        return in_file

    def _seen_from(self, in_file: int) -> SeenFilter | None:
        """The filter of recorded fingerprints, when the file holds no URL: then only
        this object's record() adds one while it is open (its buffered ones too)."""
        if in_file:
            return None
        seen = SeenFilter()
        for fingerprint in self._dirty:  # a close whose flush failed: written next
            seen.add(fingerprint)
        return seen

    def _never_recorded(self, fingerprint: bytes) -> bool:
        """Surely not in the file: it held no URL at open, and this object never recorded
        this one since (seen_filter.py); False when that is not known (then ask it)."""
        seen = self._seen
        return seen is not None and fingerprint not in seen

    def close(self) -> None:
        if self._db is None:
            return
        try:
            self.flush()
        finally:
            self._db.close()
            self._db = None
            self._forget_clean()
            self._absent.clear()
            self._seen = None
            self._lock.release()

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise HistoryStoreError(f"history store {self.location} is not open")
        return self._db

    def flush(self) -> None:
        """Write what is buffered (sqlite_writer.py)."""
        raise NotImplementedError

    def _refuse_read_only(self) -> None:
        if self.read_only:
            # an older store is read from a copy in memory: a write there would be lost
            raise HistoryStoreError(
                f"the history store {self.location} is open read-only: nothing is written"
            )

    def _write(self, fn: Any) -> None:
        db = self.db
        self._refuse_read_only()
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
