"""The SQLite store's tables, and the migrations from each schema version to the next.

Every change of the stored format is a step in the one schema-version sequence
(:data:`scrapy_recrawl.history.base.SCHEMA_VERSION`), run in one transaction: a
store written by the previous release opens and upgrades, all of a step or none.
The sequence starts at the first release's schema
(:data:`~scrapy_recrawl.history.base.BASELINE_SCHEMA_VERSION`): a store written by a
build before it is refused (:func:`~scrapy_recrawl.history.base.pre_release_store`),
never upgraded.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from . import base, sqlite_packed
from .base import HistoryStoreError

#: The spider a store belongs to (no row: nobody's yet).
OWNER_SQL = "SELECT value FROM meta WHERE key = 'spider'"

#: Column order of the urls table, and the UrlRecord fields they hold (row <-> record).
URL_COLUMNS = (
    "id fingerprint url first_seen first_cycle visits n x sad aad_sum gad "
    "last_visit_cycle last_visit_time last_change_cycle last_change_time d a r m "
    "status gone etag last_modified has_body failures last_failure_cycle cwin"
).split()


RECORD_FIELDS = [{"x": "X", "d": "D", "a": "A", "r": "R", "m": "M"}.get(c, c) for c in URL_COLUMNS]


#: Columns handed to the scorer (HistoryArrays.columns): name, SQL, dtype. NULLs come
#: back as -1 and are turned into NaN ("not recorded").
ARRAY_COLUMNS: list[tuple[str, str, Any]] = [
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

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS urls (
    id INTEGER PRIMARY KEY,
    fingerprint BLOB NOT NULL UNIQUE,
    url TEXT NOT NULL,
    first_seen REAL NOT NULL,
    first_cycle INTEGER NOT NULL,
    visits INTEGER NOT NULL DEFAULT 0,
    n INTEGER NOT NULL DEFAULT 0,
    x INTEGER NOT NULL DEFAULT 0,
    sad REAL NOT NULL DEFAULT 0,
    aad_sum REAL NOT NULL DEFAULT 0,
    gad REAL NOT NULL DEFAULT 0,
    last_visit_cycle INTEGER NOT NULL DEFAULT -1,
    last_visit_time REAL,
    last_change_cycle INTEGER NOT NULL DEFAULT -1,
    last_change_time REAL,
    d REAL, a REAL, r REAL, m REAL,
    status INTEGER NOT NULL DEFAULT 0,
    gone INTEGER NOT NULL DEFAULT 0,
    etag TEXT,
    last_modified TEXT,
    has_body INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    last_failure_cycle INTEGER NOT NULL DEFAULT -1,
    cwin INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS signatures (url_id INTEGER PRIMARY KEY, signature BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS requests (url_id INTEGER PRIMARY KEY, request BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS bodies (
    url_id INTEGER PRIMARY KEY, status INTEGER NOT NULL, headers TEXT NOT NULL, body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS visits (
    id INTEGER PRIMARY KEY,
    url_id INTEGER NOT NULL,
    cycle INTEGER NOT NULL,
    time REAL NOT NULL,
    status INTEGER NOT NULL,
    changed INTEGER,
    distance INTEGER NOT NULL DEFAULT 0,
    added INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0,
    modified INTEGER NOT NULL DEFAULT 0,
    attributes INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS visits_by_url ON visits (url_id, cycle);
CREATE INDEX IF NOT EXISTS visits_by_cycle ON visits (cycle);
CREATE TABLE IF NOT EXISTS frontier (
    fingerprint BLOB PRIMARY KEY,
    priority INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    request BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS frontier_order ON frontier (priority DESC, seq);
CREATE TABLE IF NOT EXISTS side (
    tbl TEXT NOT NULL, key INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
"""
    + sqlite_packed.TABLE_SQL
)


def _pack_columns(db: sqlite3.Connection) -> None:
    """8 -> 9: the scorers' columns packed a second time (history/sqlite_packed.py),
    built from the ``urls`` table; nothing else changes."""
    sqlite_packed.rebuild(db)


#: The migrations from schema version ``v`` to ``v + 1`` (``v`` >= the baseline), each
#: run in one transaction by :func:`migrate`. A change of the stored format adds its
#: step here (and the Redis store's in history/redis_migrate.py) with the new
#: base.SCHEMA_VERSION, and a test that opens a store of the release before it
#: (tests/test_store_v8_fixtures.py: stores made by v0.1.0's own code).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {8: _pack_columns}


def current_version() -> int:
    """The schema version this release writes (base.SCHEMA_VERSION, read when asked:
    a test registers a step past it)."""
    return base.SCHEMA_VERSION


def refuse_unreadable(version: int, location: str, hint: str) -> None:
    """Refuse a store this release cannot read: of a newer schema (``hint``: what to
    do), or written by a pre-release build (base.pre_release_store)."""
    if version > current_version():
        raise HistoryStoreError(
            f"history store {location} has schema version {version}, newer than this "
            f"scrapy-recrawl understands ({current_version()}): {hint}"
        )
    if version < base.BASELINE_SCHEMA_VERSION:
        raise base.pre_release_store(location, version)


def create(db: sqlite3.Connection) -> None:
    """Make the empty database on ``db`` a new store of the current schema, cycle 0."""
    db.executescript(
        "BEGIN;"
        + SCHEMA
        + "INSERT OR REPLACE INTO meta VALUES ('schema_version', "
        + f"'{current_version()}'), ('cycle', '0');COMMIT;"
    )


def migrate(
    db: sqlite3.Connection, version: int, location: str, *, begin: str = "BEGIN IMMEDIATE"
) -> None:
    """Bring the store on ``db`` from schema ``version`` to the current one, one step a
    transaction (``begin`` starts it): a failed step is rolled back, leaving the store
    at the version before it. A store this release cannot read is refused first
    (:func:`refuse_unreadable`)."""
    refuse_unreadable(version, location, "upgrade scrapy-recrawl")
    for v in range(version, current_version()):
        db.execute(begin)
        try:
            MIGRATIONS[v](db)
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(v + 1),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")  # the store stays as it was, at version v
            raise


class NotAStore(sqlite3.DatabaseError):
    """A SQLite database, but not a scrapy-recrawl history store."""


def schema_version(db: sqlite3.Connection) -> int | None:
    """The store's schema version; None for an empty database (a new store).

    Only reads: a file that is not a store is refused (:class:`NotAStore`) before
    anything is written to it, its journal mode included.
    """
    has_meta = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
            raise NotAStore("another application's SQLite database: no meta table")
        return None
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is None:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if {"urls", "visits"} <= tables:
            return None  # a store whose creation was interrupted (before 0.4): new again
        raise NotAStore("its meta table has no schema_version")
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise NotAStore(f"its schema_version is {row[0]!r}") from None


def owner_of(path: str | os.PathLike[str]) -> str | None:
    """The owner recorded in the store file at ``path``, read without writing to it
    (None: nobody's, or not a readable store), for the message about an old file."""
    try:
        db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        try:
            row = db.execute(OWNER_SQL).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None
