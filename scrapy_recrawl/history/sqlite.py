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

The class is made of one part per job: the file, its lock and each statement
(sqlite_connection.py), the reads (sqlite_reader.py), the buffered writes
(sqlite_writer.py), side storage, the frontier and the owner (sqlite_side.py); the
tables and the migrations are in sqlite_schema.py, the read-only opening in
sqlite_readonly.py.
"""

from __future__ import annotations

import os
import sqlite3

from .sqlite_schema import ARRAY_COLUMNS, URL_COLUMNS
from .sqlite_side import SqliteSideStorage
from .sqlite_writer import SqliteWriter

# the names the benchmarks import (bench/sqlite_scale.py, bench/sqlite_retention.py)
_URL_COLUMNS = URL_COLUMNS
_ARRAY_COLUMNS = ARRAY_COLUMNS


class SqliteHistoryStore(SqliteWriter, SqliteSideStorage):
    """The history store in one SQLite file (see the module docstring): the whole
    store contract (history/base.py), with the capabilities ``"file"`` and
    ``"read_ahead"``."""

    capabilities: frozenset[str] = frozenset({"file", "read_ahead"})

    @property
    def label(self) -> str:
        """The store file's name."""
        return os.path.basename(self.path)

    def __enter__(self) -> SqliteHistoryStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def clear(self) -> None:
        """Empty the store (``scrapy recrawl-reset``): cycle 0, no URL, visit, frontier
        request, side-storage row or owner; the schema stays, and the file shrinks."""
        self.db  # noqa: B018 -- fail early, naming the store, when it is closed
        self._refuse_read_only()
        self._reset_buffers()  # buffered visits belong to the history being removed

        def wipe(db: sqlite3.Connection) -> None:
            for table in ("visits", "bodies", "requests", "signatures", "frontier", "side"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM urls")
            db.execute("DELETE FROM packed")  # the scorers' copy of urls (sqlite_packed.py)
            db.execute("UPDATE meta SET value = '0' WHERE key = 'cycle'")
            db.execute("DELETE FROM meta WHERE key = 'spider'")  # nobody's, as a new store

        self._write(wipe)
        self._cycle, self._next_id, self._count = 0, 1, 0
        self._seen = self._seen_from(0)  # no URL in the file now
        self._read(lambda db: db.execute("VACUUM"))
