"""A SQLite store whose disk fills up mid-crawl (RECRAWL_STORE_CLASS in a test crawl).

Not a mock: after its second flush it caps the database at the pages it has
(``PRAGMA max_page_count``), so every later write that needs a page fails with
SQLite's own SQLITE_FULL ("database or disk is full"), as on a full disk.
"""

from scrapy_recrawl.history import SqliteHistoryStore


class FullDiskStore(SqliteHistoryStore):
    @classmethod
    def from_settings(cls, settings, *, spider, read_only):
        return cls(settings["RECRAWL_STORE"], flush_every=5, flush_seconds=60, read_only=read_only)

    flushes = 0

    def flush(self) -> None:
        super().flush()
        self.flushes += 1
        if self.flushes == 2 and self._db is not None:
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            self._db.execute(f"PRAGMA max_page_count = {pages}")
