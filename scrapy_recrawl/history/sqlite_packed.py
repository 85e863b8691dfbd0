"""The scorers' columns of the SQLite store, packed: read in blocks, one object per block.

Python's sqlite3 makes an object per value it returns: reading the sixteen scoring
columns of the ``urls`` table costs about 1.6 µs per URL at 10M URLs, most of a
cycle. So the ``packed`` table (schema version 9) keeps them a second time, as
fixed-width little-endian records (:data:`RECORD`, 128 bytes: one URL's record
contiguous), :data:`BLOCK` URL ids to a row: the URL with id ``i`` is record
``i % BLOCK`` of block ``i // BLOCK`` (a record of zeros: no such URL). A block is
3,968 bytes, so its row fits on one 4 KiB page: a visit rewrites that page, as it
rewrites the URL's ``urls`` page, and :func:`read` turns a run of blocks into numpy
with ``np.frombuffer``, no Python object per value.

The copy is written in the transaction that writes the ``urls`` rows (:func:`write`,
called by the flush), so a crash never leaves the two apart; :func:`rebuild` makes
it from the ``urls`` table (the migration from schema version 8, the benchmarks'
bulk builders). The rewrite of a lone record is SQL (``substr`` and ``||`` over the
block, cast back to a BLOB): the same statement on every Python (3.11's
``blobopen`` measured slower on one-page blocks); a block with several records to
write is read once and written whole.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterable
from itertools import islice

import numpy as np

from .base import UrlRecord

#: The packed table (created with the store, or by the migration from version 8).
TABLE_SQL = "CREATE TABLE IF NOT EXISTS packed (block INTEGER PRIMARY KEY, data BLOB NOT NULL);"

#: URL ids per block: 31 records of 128 bytes fit on a 4 KiB page with the row's header.
BLOCK = 31

#: One URL's record: the columns of HistoryArrays (NaN: not recorded), then whether the
#: URL exists and whether it is gone, padded to 128 bytes.
RECORD = np.dtype(
    [
        ("n", "<i8"),
        ("X", "<i8"),
        ("sad", "<f8"),
        ("aad_sum", "<f8"),
        ("gad", "<f8"),
        ("last_visit_cycle", "<i8"),
        ("last_visit_time", "<f8"),
        ("D", "<f8"),
        ("A", "<f8"),
        ("R", "<f8"),
        ("M", "<f8"),
        ("failures", "<i8"),
        ("last_failure_cycle", "<i8"),
        ("first_cycle", "<i8"),
        ("last_change_cycle", "<i8"),
        ("present", "u1"),
        ("gone", "u1"),
        ("pad", "V6"),
    ]
)
_STRUCT = struct.Struct("<qqdddqdddddqqqqBB6x")
assert RECORD.itemsize == _STRUCT.size == 128  # noqa: S101 -- the two must agree

#: The columns handed to the scorer, in RECORD's order (``gone`` a bool).
FIELDS: tuple[str, ...] = tuple(n for n in RECORD.names or () if n not in ("present", "pad"))

#: Blocks read per query batch by :func:`read` (1 MiB of records: the sixteen strided
#: copies out of it stay in the cache).
_BATCH = 256

_EMPTY_BLOCK = bytes(BLOCK * RECORD.itemsize)

_UPDATE = (
    "UPDATE packed SET data = CAST(substr(data, 1, ?) || ? || substr(data, ?) AS BLOB) "
    "WHERE block = ?"
)


def pack(rec: UrlRecord) -> bytes:
    """The 128-byte record of ``rec`` (NaN for a float not recorded)."""
    return _STRUCT.pack(
        int(rec.n),
        int(rec.X),
        float(rec.sad),
        float(rec.aad_sum),
        float(rec.gad),
        int(rec.last_visit_cycle),
        _float(rec.last_visit_time),
        _float(rec.D),
        _float(rec.A),
        _float(rec.R),
        _float(rec.M),
        int(rec.failures),
        int(rec.last_failure_cycle),
        int(rec.first_cycle),
        int(rec.last_change_cycle),
        1,
        1 if rec.gone else 0,
    )


def _float(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def write(db: sqlite3.Connection, records: Iterable[UrlRecord]) -> None:
    """Write the records of ``records`` into their blocks (inside the caller's
    transaction, the one that writes their ``urls`` rows); a block not there yet
    (ids past the last one) is made, empty, first.

    A block with one record to write is spliced in SQL (:data:`_UPDATE`); a block with
    several (a first crawl's new URLs, a recrawl of neighbouring ids) is read once,
    patched here and written once: one 4 KiB rewrite instead of one per record."""
    size = RECORD.itemsize
    by_block: dict[int, list[tuple[int, bytes]]] = {}
    for rec in records:
        block, slot = divmod(int(rec.id), BLOCK)
        by_block.setdefault(block, []).append((slot * size, pack(rec)))
    blocks = sorted(by_block)  # block order: each page of the table's B-tree once
    db.executemany(
        "INSERT OR IGNORE INTO packed VALUES (?, ?)", [(b, _EMPTY_BLOCK) for b in blocks]
    )
    spliced = []
    several = []
    for block in blocks:
        slots = by_block[block]
        if len(slots) == 1:
            at, data = slots[0]
            spliced.append((at, data, at + size + 1, block))
        else:
            several.append(block)
    db.executemany(_UPDATE, spliced)
    patched = []
    # sqlite limits bound parameters per statement; 900 is safe on every build
    for start in range(0, len(several), 900):
        chunk = several[start : start + 900]
        sql = f"SELECT block, data FROM packed WHERE block IN ({','.join('?' * len(chunk))})"
        for block, data in db.execute(sql, chunk):
            buffer = bytearray(data)
            for at, record in by_block[block]:
                buffer[at : at + size] = record
            patched.append((bytes(buffer), block))
    patched.sort(key=lambda row: row[1])
    db.executemany("UPDATE packed SET data = ? WHERE block = ?", patched)


def read(db: sqlite3.Connection, size: int, out: dict[str, np.ndarray], ids: np.ndarray) -> int:
    """Fill ``ids`` and the columns of ``out`` (each preallocated for ``size`` URLs,
    by :data:`FIELDS`) from the packed table, in id order; returns how many URLs were
    read (at most ``size``: a store written since it was counted gives its first ones).

    A batch of blocks at a time is joined into one buffer and viewed as records: the
    peak memory is the columns plus one batch.
    """
    cursor = db.execute("SELECT block, data FROM packed ORDER BY block")
    done = 0
    while done < size:
        rows = list(islice(cursor, _BATCH))
        if not rows:
            break
        recs = np.frombuffer(b"".join(data for _, data in rows), dtype=RECORD)
        first = np.repeat(np.fromiter((b for b, _ in rows), np.int64, len(rows)) * BLOCK, BLOCK)
        block_ids = first + np.tile(np.arange(BLOCK, dtype=np.int64), len(rows))
        present = recs["present"] != 0
        if not present.all():
            recs, block_ids = recs[present], block_ids[present]
        take = min(len(recs), size - done)
        ids[done : done + take] = block_ids[:take]
        for name in FIELDS:
            out[name][done : done + take] = recs[name][:take]
        done += take
    cursor.close()
    return done


def rebuild(db: sqlite3.Connection) -> int:
    """Make the packed table from the ``urls`` table (in the caller's transaction);
    returns the number of URLs packed. One scan of ``urls`` in id order, a batch of
    blocks at a time (a NULL read as NaN)."""
    db.execute(TABLE_SQL.rstrip(";"))
    db.execute("DELETE FROM packed")
    cols = (
        "id, n, x, sad, aad_sum, gad, last_visit_cycle, last_visit_time, d, a, r, m, "
        "failures, last_failure_cycle, first_cycle, last_change_cycle, gone"
    )
    src = np.dtype(
        [("id", np.int64)] + [(n, RECORD[n]) for n in FIELDS if n != "gone"] + [("gone", np.int64)]
    )
    cursor = db.execute(f"SELECT {cols} FROM urls ORDER BY id")  # noqa: S608 -- fixed text
    total = 0
    while True:
        rows = np.fromiter(islice(cursor, _BATCH * BLOCK), src)
        if not len(rows):
            break
        total += len(rows)
        block_of = rows["id"] // BLOCK
        blocks, where = np.unique(block_of, return_inverse=True)  # ids may have gaps
        data = np.zeros(len(blocks) * BLOCK, dtype=RECORD)
        # the batch's first block may hold records of the batch before: kept
        old = db.execute("SELECT data FROM packed WHERE block = ?", (int(blocks[0]),)).fetchone()
        if old is not None:
            data[:BLOCK] = np.frombuffer(old[0], dtype=RECORD)
        slots = where * BLOCK + rows["id"] % BLOCK
        for name in FIELDS:
            data[name][slots] = rows[name]
        data["present"][slots] = 1
        db.executemany(
            "INSERT OR REPLACE INTO packed VALUES (?, ?)",
            ((int(b), data[i * BLOCK : (i + 1) * BLOCK].tobytes()) for i, b in enumerate(blocks)),
        )
    cursor.close()
    return total
