"""The SQLite store's tables, and the migrations from each schema version to the next.

Every change of the stored format is a step in the one schema-version sequence
(:data:`scrapy_recrawl.history.base.SCHEMA_VERSION`), run in one transaction: a
store written by the previous release opens and upgrades, all of a step or none.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any

import numpy as np

from .legacy_pickle import BASKET_MODEL_TABLE, MODEL_DROPPED, REQUESTS_DROPPED, reencode_request
from .records import pack_record, pack_window, window_from_log
from .request_codec import scrubbed_previous
from .state import WINDOW_KEPT

logger = logging.getLogger("scrapy_recrawl.history")


#: The spider a store belongs to (schema version 3; no row: nobody's yet).
OWNER_SQL = "SELECT value FROM meta WHERE key = 'spider'"

SCHEMA = """
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


def _migrate_1_to_2(db: sqlite3.Connection) -> None:
    """Version 2: the plug-ins' own tables (created on the store's connection by
    0.1.0) become side-storage tables, read through the store contract.

    ``content_bags(url_id, bags, dists)`` -> ``content_bags`` (the same packed
    list of bags) and ``content_dists``; ``basket_probes`` rows and the
    ``basket_model`` row -> records (:func:`records.pack_record`) of their columns.
    """
    db.execute(
        "CREATE TABLE IF NOT EXISTS side (tbl TEXT NOT NULL, key INTEGER NOT NULL,"
        " value BLOB NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID"
    )
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "content_bags" in tables:
        db.execute("INSERT INTO side SELECT 'content_bags', url_id, bags FROM content_bags")
        db.execute("INSERT INTO side SELECT 'content_dists', url_id, dists FROM content_bags")
        db.execute("DROP TABLE content_bags")
    for table, key in (("basket_probes", "url_id"), ("basket_model", "id")):
        if table not in tables:
            continue
        cursor = db.execute(f"SELECT * FROM {table}")  # noqa: S608 -- fixed names
        names = [d[0] for d in cursor.description]
        rows = [
            (table, row[names.index(key)], pack_record(dict(zip(names, row, strict=True))))
            for row in cursor
        ]
        db.executemany("INSERT INTO side VALUES (?, ?, ?)", rows)
        db.execute(f"DROP TABLE {table}")


def _migrate_2_to_3(db: sqlite3.Connection) -> None:
    """Version 3: the store belongs to one spider, named by the ``meta`` row ``spider``.

    A store written before has no such row: no table changes, nothing to move. It
    stays nobody's until the first spider that opens it adopts it
    (``history.ownership.claim_store``, which says so in the log). The version step
    itself is the change: a release that does not check the owner refuses the store
    ("newer than this scrapy-recrawl understands") rather than mixing spiders in it.
    """


def _v4_requests_as_data(db: sqlite3.Connection) -> None:
    """Version 4: stored requests (``requests``, ``frontier``) are data, not pickles.

    Each version-3 pickle is read allowing no global (:mod:`.legacy_pickle`: no code
    runs) and re-encoded by :mod:`.request_codec`; one that needs a global is
    deleted (its URL stays, and is recrawled as a GET of it), counted in one warning.
    """
    dropped = {"requests": 0, "frontier": 0}
    for table, key in (("requests", "url_id"), ("frontier", "fingerprint")):
        rows = db.execute(f"SELECT {key}, request FROM {table}").fetchall()  # noqa: S608
        keep, drop = [], []
        for k, blob in rows:
            new = reencode_request(blob)
            if new is None:
                drop.append((k,))
            elif new != blob:  # already data (a migration run twice): left as it is
                keep.append((new, k))
        db.executemany(f"UPDATE {table} SET request = ? WHERE {key} = ?", keep)  # noqa: S608
        db.executemany(f"DELETE FROM {table} WHERE {key} = ?", drop)  # noqa: S608
        dropped[table] = len(drop)
    if sum(dropped.values()):
        logger.warning(
            REQUESTS_DROPPED,
            sum(dropped.values()),
            _where(db),
            dropped["requests"],
            dropped["frontier"],
        )


def _v4_drop_pickled_models(db: sqlite3.Connection) -> None:
    """Version 4: the basket model was a pickle in version 3; it is dropped, never read."""
    gone = db.execute("DELETE FROM side WHERE tbl = ?", (BASKET_MODEL_TABLE,)).rowcount
    if gone:
        logger.warning(MODEL_DROPPED, _where(db))


def _where(db: sqlite3.Connection) -> str:
    path = db.execute("PRAGMA database_list").fetchone()[2]
    return f"sqlite:///{path}"


def _v4_failure_counts(db: sqlite3.Connection) -> None:
    """Version 4, its part for failed downloads: each URL's consecutive failed cycles
    (``failures``) and the last of them (``last_failure_cycle``, -1: never).

    Nothing before counted them: every URL starts at 0 failures. (A URL that only ever
    failed has ``last_visit_cycle`` -1 and is still a candidate; its next failure
    starts its count.)
    """
    db.execute("ALTER TABLE urls ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE urls ADD COLUMN last_failure_cycle INTEGER NOT NULL DEFAULT -1")


def _migrate_3_to_4(db: sqlite3.Connection) -> None:
    """Version 4: every change of format of this release, one step (each its own part)."""
    _v4_requests_as_data(db)
    _v4_drop_pickled_models(db)
    _v4_failure_counts(db)


def _migrate_4_to_5(db: sqlite3.Connection) -> None:
    """Version 5 changed the Redis store's encoding only (compact rows, sharded keys:
    history/redis_schema.py); a SQLite store keeps its tables, and its version follows
    the one sequence."""


def _migrate_5_to_6(db: sqlite3.Connection) -> None:
    """Version 6: no credential kept at rest, and a stored request is the request as the
    spider made it (stored_request.py). Each stored request (``requests``, ``frontier``)
    of an earlier release, the request after the downloader middlewares, loses the
    credentials, cookies and what those middlewares add to every request
    (:func:`~.request_codec.scrubbed_previous`); and the store's files, made readable by
    all by earlier releases, become its owner's only (:func:`owner_only`)."""
    for table, key in (("requests", "url_id"), ("frontier", "fingerprint")):
        rows = db.execute(f"SELECT {key}, request FROM {table}").fetchall()  # noqa: S608
        changed = []
        for k, blob in rows:
            new = scrubbed_previous(blob)
            if new is not None and new != blob:
                changed.append((new, k))
        db.executemany(f"UPDATE {table} SET request = ? WHERE {key} = ?", changed)  # noqa: S608
    path = db.execute("PRAGMA database_list").fetchone()[2]
    if path:
        owner_only(path)


def _migrate_6_to_7(db: sqlite3.Connection) -> None:
    """Version 7: the visit log can be capped (RECRAWL_SQLITE_LOG_MAXLEN) without losing
    what a URL's record needs, and a cycle reads only what it uses of it. Each URL row
    keeps its last five change observations (``cwin``, as the Redis row does:
    state.push_window), computed here once from the whole log (the rule
    ``change_window()`` read it by before); and the log is indexed by cycle, for
    ``visit_log(since_cycle=...)`` (the ``Q`` terminal's last cycles, the reports)."""
    db.execute("ALTER TABLE urls ADD COLUMN cwin INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS visits_by_cycle ON visits (cycle)")
    # two int columns, not the whole log: 16 bytes an observation
    obs = np.fromiter(
        db.execute("SELECT url_id, changed FROM visits WHERE changed IS NOT NULL ORDER BY id"),
        np.dtype([("url_id", np.int64), ("changed", np.int64)]),
    )
    if not len(obs):
        return
    ids = np.unique(obs["url_id"])
    cwin = pack_window(window_from_log(ids, obs["url_id"], obs["changed"], WINDOW_KEPT))
    db.executemany(
        "UPDATE urls SET cwin = ? WHERE id = ?",
        zip(cwin.tolist(), ids.tolist(), strict=True),
    )


def _migrate_7_to_8(db: sqlite3.Connection) -> None:
    """Version 8: each cycle's record may keep the crawl's own freshness estimate of
    the cycle's end (side table ``cycle_freshness``: history/cycle_log.py), which
    recrawl-report reads instead of refitting it. Side storage takes the new table as
    it is; the cycles crawled before the upgrade have no estimate kept, and the report
    fits theirs from the visit log as it did: nothing to move. The version step is the
    change: which stores may hold figures the report shows instead of computing them
    (a release before it would ignore them)."""


def owner_only(path: str) -> None:
    """Make the store file at ``path`` and its companions (WAL, shared memory, lock)
    readable and writable by their owner only, when others could read them."""
    for name in (path, path + "-wal", path + "-shm", path + ".lock"):
        try:
            mode = os.stat(name).st_mode
            if mode & 0o077:
                os.chmod(name, mode & 0o700)
        except OSError:
            continue  # absent, or not ours to change: the crawl goes on


#: The version whose migration scrubbed credentials from stored requests: a store
#: upgraded past it is rebuilt once (VACUUM), so no old bytes stay in free pages.
SCRUBBED_VERSION = 6

# Migrations from schema version v to v + 1, each run in one transaction.
MIGRATIONS: dict[int, Any] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
    5: _migrate_5_to_6,
    6: _migrate_6_to_7,
    7: _migrate_7_to_8,
}


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
