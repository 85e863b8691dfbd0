"""Opening a SQLite store read-only, for the offline commands.

An offline command (``recrawl-evolve``, ``recrawl-baskets``) is pointed at a
store by a user who may have mistyped it, at another application's database, at
a store a crawl is writing, or at a read-only copy. So, before SQLite is asked
anything: the path must exist and start with SQLite's header. Then it is opened
with a ``mode=ro`` URI, which never creates, migrates or switches the journal
mode of a file, and it must have the store's ``meta`` table and a schema version
this release reads. A store of an older schema of the released sequence is copied into
memory (SQLite's backup API) and upgraded there: the file stays as it was; one written
by a pre-release build is refused (base.pre_release_store).

Every query of the connection sees one snapshot: it is opened inside a read
transaction (``BEGIN``, then the first read) that is held until it is closed, so a
command's queries agree with each other while a crawl writes the store, whether
the crawl was running when the command started or started meanwhile. That is
WAL's reader beside a writer: the reader needs the store's ``-wal`` and ``-shm``
files, and SQLite creates them (empty) when they are not there yet; a read-only
connection cannot remove them again, so they may stay beside the store after the
command (the next crawl's close removes them). The store file's bytes are never
changed, and the crawl's lock (history/lock.py) is never taken.

A store with no ``-wal`` file in a directory nobody can write (no write bit, a
read-only mount: a read-only copy) is opened ``immutable`` instead, creating
nothing: no crawl can be writing it, because a crawl cannot start there (SQLite
would have to create the ``-wal`` file beside it). In a directory another user can
write but this one cannot, it is opened ``immutable`` too, with a warning that a
crawl starting meanwhile can make the command read a torn store. With a ``-wal``
file there, it is read as any WAL reader reads it, even from a read-only directory
(SQLite 3.22+).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from urllib.request import pathname2url

from .base import HistoryStoreError
from .sqlite_schema import (
    NotAStore,
    current_version,
    migrate,
    refuse_unreadable,
    schema_version,
)

_HEADER = b"SQLite format 3\x00"

logger = logging.getLogger("scrapy_recrawl.history")


def connect_read_only(path: str, location: str) -> tuple[sqlite3.Connection, int]:
    """A connection that reads the store at ``path`` and cannot change the file, and
    the schema version of the file (the connection's is always the current one).

    Raises :class:`HistoryStoreError` naming ``location`` when the path is missing,
    not a scrapy-recrawl store, or of a newer schema.
    """
    _check_file(path, location)
    query = "mode=ro&immutable=1" if _immutable(path, location) else "mode=ro"
    uri = f"file:{pathname2url(os.path.abspath(path))}?{query}"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise HistoryStoreError(f"cannot read the history store {location}: {exc}") from None
    try:
        db.execute("PRAGMA busy_timeout=10000")
        # the one snapshot every later query of this connection reads: the read
        # transaction starts at the first read below and is never ended (close ends it)
        db.execute("BEGIN")
        version = schema_version(db)
        if version is None:
            raise NotAStore("an empty SQLite database, no history in it")
        refuse_unreadable(version, location, "upgrade scrapy-recrawl")
        if version < current_version():
            db = _upgraded_in_memory(db, version, location)
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


def _immutable(path: str, location: str) -> bool:
    """Whether the store at ``path`` is read ``immutable`` (module docstring): no
    ``-wal`` file, and a directory this process cannot create one in."""
    if os.path.exists(path + "-wal"):
        return False
    directory = os.path.dirname(os.path.abspath(path))
    if os.access(directory, os.W_OK | os.X_OK):
        return False
    if not _writable_by_anyone(directory):
        return True  # nor can a crawl create its -wal there: nobody writes the store
    logger.warning(
        "recrawl: reading %s without a snapshot: its directory is writable by another "
        "user but not by this one, so SQLite cannot create the -wal/-shm files a reader "
        "beside a crawl needs; a crawl that starts while this command reads may make it "
        "read a torn store (run the command as the store's owner, or read a copy)",
        location,
    )
    return True


def _writable_by_anyone(directory: str) -> bool:
    """Whether someone could create a file in ``directory``: not on a read-only mount,
    and a write bit set in its mode (whose it is, and ACLs, aside)."""
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return False
        return bool(os.stat(directory).st_mode & 0o222)
    except OSError:
        return True  # unknown: assume the worst, and say so


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


def _upgraded_in_memory(db: sqlite3.Connection, version: int, location: str) -> sqlite3.Connection:
    """The store copied into memory and migrated there, for reading (the file is
    left at its version: the next crawl upgrades it)."""
    memory = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.backup(memory)
    finally:
        db.close()
    migrate(memory, version, location, begin="BEGIN")
    return memory
