"""Opening a SQLite store read-only, for the offline commands.

An offline command (``recrawl-evolve``, ``recrawl-baskets``) is pointed at a
store by a user who may have mistyped it, at another application's database, at
a store a crawl is writing, or at a read-only copy. So, before SQLite is asked
anything: the path must exist and start with SQLite's header. Then it is opened
with a ``mode=ro`` URI, which never creates, migrates or switches the journal
mode of a file, and it must have the store's ``meta`` table and a schema version
this release reads. A store of an older schema is copied into memory (SQLite's
backup API) and upgraded there: the file stays as it was.

A store a crawl is writing (its ``-wal`` file is there) is read as any WAL
reader reads it, beside the writer, even from a read-only directory (SQLite
3.22+). A store nobody writes has no ``-wal`` file; it is opened
``immutable``, which needs no ``-wal``/``-shm`` files: nothing is created beside
it, in a read-only directory or not.
"""

from __future__ import annotations

import os
import sqlite3
from urllib.request import pathname2url

from .base import SCHEMA_VERSION, HistoryStoreError
from .sqlite_schema import MIGRATIONS, NotAStore, schema_version

_HEADER = b"SQLite format 3\x00"


def connect_read_only(path: str, location: str) -> tuple[sqlite3.Connection, int]:
    """A connection that reads the store at ``path`` and cannot change the file, and
    the schema version of the file (the connection's is always the current one).

    Raises :class:`HistoryStoreError` naming ``location`` when the path is missing,
    not a scrapy-recrawl store, or of a newer schema.
    """
    _check_file(path, location)
    query = "mode=ro" if os.path.exists(path + "-wal") else "mode=ro&immutable=1"
    uri = f"file:{pathname2url(os.path.abspath(path))}?{query}"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise HistoryStoreError(f"cannot read the history store {location}: {exc}") from None
    try:
        db.execute("PRAGMA busy_timeout=10000")
        version = schema_version(db)
        if version is None:
            raise NotAStore("an empty SQLite database, no history in it")
        if version > SCHEMA_VERSION:
            raise HistoryStoreError(
                f"history store {location} has schema version {version}, newer than this "
                f"scrapy-recrawl understands ({SCHEMA_VERSION}): upgrade scrapy-recrawl"
            )
        if version < SCHEMA_VERSION:
            db = _upgraded_in_memory(db, version)
    except NotAStore as exc:
        db.close()
        raise HistoryStoreError(
            f"{location} is not a scrapy-recrawl history store ({exc}): check the path "
            "(RECRAWL_STORE, --spider)"
        ) from None
    except sqlite3.Error as exc:
        db.close()
        raise HistoryStoreError(
            f"cannot read the history store {location}: {exc} (is it a scrapy-recrawl "
            "history store?)"
        ) from None
    except BaseException:
        db.close()
        raise
    return db, version


def _check_file(path: str, location: str) -> None:
    if not os.path.exists(path):
        raise HistoryStoreError(
            f"no history store at {location}: no such file (check RECRAWL_STORE, --spider; "
            "nothing was created)"
        )
    if not os.path.isfile(path):
        raise HistoryStoreError(f"{location} is not a scrapy-recrawl history store: not a file")
    try:
        with open(path, "rb") as fh:
            header = fh.read(len(_HEADER))
    except OSError as exc:
        raise HistoryStoreError(
            f"cannot read the history store {location}: {exc.strerror}"
        ) from None
    if header != _HEADER:
        raise HistoryStoreError(
            f"{location} is not a scrapy-recrawl history store: not a SQLite file "
            "(check RECRAWL_STORE, --spider)"
        )


def _upgraded_in_memory(db: sqlite3.Connection, version: int) -> sqlite3.Connection:
    """The store copied into memory and migrated there, for reading (the file is
    left at its version: the next crawl upgrades it)."""
    memory = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.backup(memory)
    finally:
        db.close()
    for v in range(version, SCHEMA_VERSION):
        memory.execute("BEGIN")
        MIGRATIONS[v](memory)
        memory.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(v + 1),))
        memory.execute("COMMIT")
    return memory
