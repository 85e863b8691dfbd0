"""The SQLite store's side storage (what plug-ins keep), its frontier and its owner.

Plug-ins keep their state in the ``side`` table (``tbl``, ``key`` -> bytes), written at
once (not buffered); discovered requests wait in the ``frontier`` table, by priority
then age; the ``meta`` row ``spider`` names the store's owner.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from .records import check_table, pack_list, unpack_list
from .request_codec import encode_stored
from .sqlite_connection import SqliteConnection
from .sqlite_schema import OWNER_SQL


class SqliteSideStorage(SqliteConnection):
    """Side storage, the frontier and the owner of the store contract."""

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
