"""The SQLite store's release baseline (issue 30, item 8) and its migration machinery.

* A store written by a build before the first release (schema version below
  ``BASELINE_SCHEMA_VERSION``) is refused as it is, never read nor upgraded: by a
  crawl (one error line, exit 1), by an offline command (one line, exit 1), and
  ``recrawl-reset`` empties it as the refusal says.
* The machinery stays for the next step: a synthetic step 9 -> 10 registered by the
  test upgrades a store of this release in place (all of the step or none of it)
  and, for a read-only reader, in memory only. (The real step 8 -> 9, on stores made
  by v0.1.0 itself: tests/test_store_v8_fixtures.py.)

Real SQLite files, real ``scrapy`` processes for the crawl.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit, base, sqlite_schema
from scrapy_recrawl.history.base import BASELINE_SCHEMA_VERSION, HistoryStoreError

from .cli_project import make_project, scrapy, scrapy_in_process
from .pre_release import store_file


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _meta_version(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        db.close()


# -- a pre-release store: refused, never touched ----------------------------------------


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("version", [1, 7])
def test_a_pre_release_store_is_refused_and_left_as_it_was(tmp_path, version, read_only):
    assert version < BASELINE_SCHEMA_VERSION
    path = store_file(tmp_path / "old.sqlite3", version)
    before = _digest(path)
    for _ in range(2):  # refused again the same way: the lock was released
        with pytest.raises(HistoryStoreError) as refused:
            SqliteHistoryStore(path, read_only=read_only).open()
        message = str(refused.value)
        assert message.startswith(f"sqlite:///{path} was written by a pre-release build")
        assert f"schema version {version};" in message and "recrawl-reset" in message
        assert "\n" not in message
    assert _digest(path) == before and _meta_version(path) == str(version)


def test_a_crawl_on_a_pre_release_store_stops_with_one_line_and_exit_1(tmp_path):
    project = make_project(tmp_path)
    path = store_file(tmp_path / "old.sqlite3", 7)
    before = _digest(path)
    run = scrapy(project, "crawl", "pages", "-s", f"RECRAWL_STORE={path}")
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, run.stderr[-3000:]
    assert "pre-release build" in errors[0] and "schema version 7" in errors[0]
    assert "recrawl-reset" in errors[0]
    assert _digest(path) == before


def test_recrawl_report_on_a_pre_release_store_is_one_line_and_exit_1(tmp_path):
    path = store_file(tmp_path / "old.sqlite3", 7)
    project = make_project(tmp_path, f"RECRAWL_STORE = {str(path)!r}\n")
    run = scrapy_in_process(project, "recrawl-report", "--spider", "pages")
    assert run.returncode == 1
    assert len(run.lines) == 1, run.stderr
    assert run.lines[0].startswith("scrapy recrawl-report: error: sqlite:///")
    assert "pre-release build" in run.lines[0] and "recrawl-reset" in run.lines[0]


def test_recrawl_reset_empties_a_pre_release_store_as_the_refusal_says(tmp_path):
    path = store_file(tmp_path / "old.sqlite3", 7, owner="blog")
    project = make_project(tmp_path, f"RECRAWL_STORE = {str(path)!r}\n")
    other = scrapy_in_process(project, "recrawl-reset", "pages", "--yes")
    assert other.returncode == 1 and "history of spider 'blog', not 'pages'" in other.stderr
    assert path.exists()  # another spider's: left as it is
    path.unlink()
    store_file(path, 7)
    run = scrapy_in_process(project, "recrawl-reset", "pages", "--yes")
    assert run.returncode == 0, run.stderr
    assert "pre-release build (schema version 7)" in run.stdout
    assert not path.exists() and not Path(f"{path}-wal").exists()
    with SqliteHistoryStore(path) as store:  # the next crawl's: a new history
        assert (len(store), store.cycle, store.owner()) == (0, 0, None)


# -- the machinery, for the next step -----------------------------------


class NextStep:
    """A step 9 -> 10 as the next release would register it: a new column, filled from
    the rows (``calls``: its runs; ``fail``: it breaks after its first statement)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch, self.calls, self.fail = monkeypatch, 0, False

    def register(self) -> None:
        assert base.SCHEMA_VERSION == 9 and BASELINE_SCHEMA_VERSION == 8
        self.monkeypatch.setattr(base, "SCHEMA_VERSION", 10)
        self.monkeypatch.setitem(sqlite_schema.MIGRATIONS, 9, self.step)

    def step(self, db: sqlite3.Connection) -> None:
        self.calls += 1
        db.execute("ALTER TABLE urls ADD COLUMN nine INTEGER NOT NULL DEFAULT 0")
        if self.fail:
            raise sqlite3.OperationalError("disk I/O error")
        db.execute("UPDATE urls SET nine = visits * 9")


@pytest.fixture
def next_step(monkeypatch):
    return NextStep(monkeypatch)


def _nines(db: sqlite3.Connection) -> list[tuple[int, int]]:
    return db.execute("SELECT id, nine FROM urls ORDER BY id").fetchall()


def test_the_next_step_upgrades_a_store_of_this_release_in_place(tmp_path, next_step):
    path = store_file(tmp_path / "h.sqlite3")  # this release's: version 9
    next_step.register()
    with SqliteHistoryStore(path) as store:
        assert next_step.calls == 1 and (len(store), store.cycle, store.owner()) == (2, 2, "pages")
        assert _nines(store.db) == [(1, 18), (2, 18)]  # two visits each
        store.record(Visit(bytes([3]) * 20, "http://h/3", 3.0, 200))  # and it goes on
    assert _meta_version(path) == "10"
    with SqliteHistoryStore(path) as store:  # once
        assert next_step.calls == 1 and len(store) == 3


def test_the_next_step_is_taken_in_memory_for_a_reader(tmp_path, next_step):
    path = store_file(tmp_path / "h.sqlite3")
    before = _digest(path)
    next_step.register()
    with SqliteHistoryStore(path, read_only=True) as store:
        assert store.file_schema_version == 9 and next_step.calls == 1
        assert _nines(store.db) == [(1, 18), (2, 18)]
        assert store.db.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'"
        ).fetchone() == ("10",)
    assert _digest(path) == before and _meta_version(path) == "9"  # the next crawl's job


def test_a_failed_step_leaves_the_store_as_it_was(tmp_path, next_step):
    path = store_file(tmp_path / "h.sqlite3")
    next_step.register()
    next_step.fail = True
    for _ in range(2):  # the lock released: the same refusal again
        with pytest.raises(HistoryStoreError, match="disk I/O error"):
            SqliteHistoryStore(path).open()
    assert next_step.calls == 2 and _meta_version(path) == "9"
    db = sqlite3.connect(path)
    columns = [r[1] for r in db.execute("PRAGMA table_info(urls)")]
    db.close()
    assert "nine" not in columns  # all of the step or none of it
    next_step.fail = False
    with SqliteHistoryStore(path) as store:
        assert _nines(store.db) == [(1, 18), (2, 18)]
