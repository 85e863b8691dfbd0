"""One writer per SQLite store (history/lock.py), and the read-only opening of the
offline commands (history/sqlite_readonly.py): real files, real processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_recrawl.history import HistoryStoreError, SqliteHistoryStore, Visit
from scrapy_recrawl.history.lock import StoreLocked

from .helpers import REPO


def digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def assert_read_only(path: Path, before: tuple[list[str], tuple[str, int]]) -> None:
    """The store file's bytes as they were (``before``: the folder's listing and the
    file's digest); beside it only the WAL reader's housekeeping: an empty ``-wal`` and
    the ``-shm`` index (no .lock taken, no page written: history/sqlite_readonly.py)."""
    assert digest(path) == before[1]
    housekeeping = [path.name + "-wal", path.name + "-shm"]
    assert sorted(os.listdir(path.parent)) == sorted({*before[0], *housekeeping})
    assert (path.parent / housekeeping[0]).stat().st_size == 0


def visit(u: int, cycle_time: float = 0.0) -> Visit:
    return Visit(f"fp{u}".encode(), f"http://h/{u}", 1000.0 + cycle_time, 200)


def holder(path: Path) -> subprocess.Popen:
    """Another process that opens the store at ``path`` for writing and keeps it open."""
    code = (
        "import sys, time\n"
        "from scrapy_recrawl.history import SqliteHistoryStore, Visit\n"
        "s = SqliteHistoryStore(sys.argv[1]); s.open()\n"
        "s.record(Visit(b'held', 'http://h/held', 1.0, 200)); s.flush()\n"
        "print('open', flush=True); time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path), "--as-a-crawl"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
    return proc


def test_a_second_writer_is_refused_with_the_holder_named(tmp_path):
    path = tmp_path / "h.sqlite3"
    first = SqliteHistoryStore(path)
    first.open()
    first.record(visit(1))
    second = SqliteHistoryStore(path)
    with pytest.raises(StoreLocked) as err:
        second.open()
    message = str(err.value)
    assert f"sqlite:///{path}" in message and f"pid {os.getpid()}" in message
    assert "in use by another process" in message
    first.close()
    second.open()  # released on close
    assert len(second) == 1
    second.close()
    assert (tmp_path / "h.sqlite3.lock").read_text() == ""  # no stale name left in it


def test_a_sigkilled_holder_leaves_no_stale_lock(tmp_path):
    path = tmp_path / "h.sqlite3"
    proc = holder(path)
    try:
        with pytest.raises(
            StoreLocked, match=rf"pid {proc.pid}: python\S* -c ... \S+ --as-a-crawl\)"
        ):
            SqliteHistoryStore(path).open()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (tmp_path / "h.sqlite3.lock").read_text().startswith(f"{proc.pid}\t")  # its note
    with SqliteHistoryStore(path) as store:  # the OS dropped the lock with the process
        assert store.knows(b"held") and len(store) == 1
    # a reader never waits for the lock: it reads beside a writer
    proc = holder(path)
    try:
        with SqliteHistoryStore(path, read_only=True) as store:
            assert store.knows(b"held")
    finally:
        proc.kill()
        proc.wait()


def test_a_foreign_sqlite_file_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO accounts VALUES (1, 'x')")
    db.commit()
    db.close()
    before = digest(path)
    for read_only in (False, True):
        with pytest.raises(HistoryStoreError, match="not a scrapy-recrawl history store"):
            SqliteHistoryStore(path, read_only=read_only).open()
        assert digest(path) == before
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    db.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    for read_only in (False, True):
        with pytest.raises(HistoryStoreError, match="notes.txt"):
            SqliteHistoryStore(text, read_only=read_only).open()
    assert text.read_text() == "not a database\n" * 100


def test_read_only_never_creates_and_never_writes(tmp_path):
    missing = tmp_path / "typo" / "histroy.sqlite3"
    with pytest.raises(HistoryStoreError, match=r"no history store at .*typo/histroy.sqlite3"):
        SqliteHistoryStore(missing, read_only=True).open()
    assert not missing.parent.exists()
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()  # a 0-byte file: SQLite's empty database
    with pytest.raises(HistoryStoreError, match="not a scrapy-recrawl history store"):
        SqliteHistoryStore(empty, read_only=True).open()
    assert empty.stat().st_size == 0

    path = tmp_path / "h.sqlite3"
    with SqliteHistoryStore(path) as store:
        store.record(visit(1))
    before = sorted(os.listdir(tmp_path)), digest(path)
    with SqliteHistoryStore(path, read_only=True) as store:
        assert len(store) == 1 and store.get(b"fp1") is not None
        with pytest.raises(HistoryStoreError, match="read-only"):
            store.advance_cycle()
        with pytest.raises(HistoryStoreError, match="read-only"):
            store.side_put("notes", [(1, b"x")])
    assert_read_only(path, before)


def test_read_only_reads_a_store_a_crawl_is_writing(tmp_path):
    path = tmp_path / "h.sqlite3"
    writer = SqliteHistoryStore(path, flush_every=1)
    writer.open()
    try:
        writer.record(visit(1))  # committed, in the -wal file, not yet checkpointed
        assert (tmp_path / "h.sqlite3-wal").stat().st_size > 0
        with SqliteHistoryStore(path, read_only=True) as reader:
            assert reader.knows(b"fp1")
        writer.record(visit(2))
        with SqliteHistoryStore(path, read_only=True) as reader:
            assert len(reader) == 2
    finally:
        writer.close()


def test_a_newer_store_is_refused_read_only_too(tmp_path):
    path = tmp_path / "h.sqlite3"
    with SqliteHistoryStore(path) as store:
        store.db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(HistoryStoreError, match="schema version 99, newer"):
        SqliteHistoryStore(path, read_only=True).open()


def without_privileges() -> list[str] | None:
    """A command prefix that runs a process as this user without its capabilities, so
    that root too obeys file modes (tests run as root in CI); None if impossible."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-all", "--inh-caps=-all"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


def test_a_store_in_a_read_only_folder_is_read(tmp_path):
    prefix = without_privileges()
    if prefix is None:
        pytest.skip("setpriv cannot drop capabilities here")
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "h.sqlite3"
    with SqliteHistoryStore(path) as store:
        for u in range(5):
            store.record(visit(u))
    code = (
        "import sys\nfrom scrapy_recrawl.history import SqliteHistoryStore\n"
        "open(sys.argv[1] + '.probe', 'w') if sys.argv[2] == 'write' else None\n"
        "with SqliteHistoryStore(sys.argv[1], read_only=True) as s: print(len(s))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = digest(path)
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        denied = subprocess.run(
            [*prefix, sys.executable, "-c", code, str(path), "write"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert "PermissionError" in denied.stderr  # the folder really is read-only to it
        run = subprocess.run(
            [*prefix, sys.executable, "-c", code, str(path), "read"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "5"
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    # the writer's emptied lock file is all there is beside it: no -wal, -shm, probe
    assert digest(path) == before
    assert sorted(os.listdir(folder)) == ["h.sqlite3", "h.sqlite3.lock"]


def test_recrawl_reset_is_refused_while_the_store_is_held(tmp_path):
    """The holder is another process; the command runs through Scrapy's entry point in
    this one (a process's status and stderr, tests/cli_project.py)."""
    from .cli_project import make_project, scrapy_in_process

    project = make_project(tmp_path, 'RECRAWL_STORE = "history.sqlite3"\n')
    proc = holder(project / "history.sqlite3")
    try:
        run = scrapy_in_process(project, "recrawl-reset", "pages", "--yes")
    finally:
        proc.kill()
        proc.wait()
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"in use by another process (pid {proc.pid}" in run.stderr
    # the holder is gone: the reset now goes ahead
    run = scrapy_in_process(project, "recrawl-reset", "pages", "--yes")
    assert run.returncode == 0, run.stderr


def test_an_in_memory_store_takes_no_lock_file(tmp_path, monkeypatch):
    """SQLite's ":memory:" is the connection's own database: no lock, no ":memory:.lock" left in
    the working directory."""
    monkeypatch.chdir(tmp_path)
    a, b = SqliteHistoryStore(":memory:"), SqliteHistoryStore(":memory:")
    a.open()
    b.open()  # two private databases: no writer to keep out
    a.close()
    b.close()
    assert list(tmp_path.iterdir()) == []


def _opened_scheduler(path: Path):
    from types import SimpleNamespace

    from scrapy import Spider
    from scrapy.core.downloader import Downloader
    from scrapy.utils.test import get_crawler

    from scrapy_recrawl.scheduler import RecrawlScheduler

    crawler = get_crawler(
        Spider,
        {
            "RECRAWL_STORE": str(path),
            # Scrapy's default queue asks the engine's downloader for slots: no engine here
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
        },
    )
    # what the recrawl queue looks at (its per-slot queues), as in Scrapy's MockCrawler
    crawler.engine = SimpleNamespace(downloader=Downloader(crawler), _slot=None, scraper=None)
    scheduler = RecrawlScheduler.from_crawler(crawler)
    spider = Spider.from_crawler(crawler, name="spider")
    scheduler.open(spider)
    return scheduler


def test_a_closed_scheduler_has_released_its_store(tmp_path):
    """Scrapy's scheduler contract: close() releases what open() took. Scrapy's own
    on-disk scheduler tests close a scheduler and open the next one on the same JOBDIR
    in one process, long before any engine_stopped: the store's lock must be free then,
    and what the first one recorded on disk."""
    path = tmp_path / "h.sqlite3"
    first = _opened_scheduler(path)
    first.store.record(visit(1))
    first.close("finished")
    second = _opened_scheduler(path)  # StoreLocked while the first still held it
    assert second.store.knows(b"fp1")
    second.close("finished")
    store = SqliteHistoryStore(path)
    store.open()  # and free again for anyone, as soon as the scheduler is closed
    store.close()


def test_a_lock_path_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path):
    """A store in a shared folder: ``<store>.lock`` links to someone else's file. The
    lock is opened with O_NOFOLLOW, refused naming the path, and the file keeps its bytes."""
    path = tmp_path / "h.sqlite3"
    victim = tmp_path / "precious.txt"
    victim.write_bytes(b"not a lock file\n" * 10)
    before = digest(victim)
    (tmp_path / "h.sqlite3.lock").symlink_to(victim)
    store = SqliteHistoryStore(path)
    with pytest.raises(HistoryStoreError) as err:
        store.open()
    message = str(err.value)
    assert "\n" not in message and "RECRAWL_STORE" in message
    assert f"{path}.lock is a symbolic link" in message
    assert digest(victim) == before
    # a link to nowhere is refused too, and creates nothing where it points
    (tmp_path / "h.sqlite3.lock").unlink()
    (tmp_path / "h.sqlite3.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(HistoryStoreError, match="is a symbolic link"):
        SqliteHistoryStore(path).open()
    assert not (tmp_path / "elsewhere").exists()


def test_a_lock_path_that_is_a_hard_link_is_refused_and_its_file_kept(tmp_path):
    path = tmp_path / "h.sqlite3"
    victim = tmp_path / "precious.txt"
    victim.write_bytes(b"not a lock file\n")
    before = digest(victim)
    os.link(victim, tmp_path / "h.sqlite3.lock")
    with pytest.raises(HistoryStoreError, match=r"h\.sqlite3\.lock is a hard link"):
        SqliteHistoryStore(path).open()
    assert digest(victim) == before


def test_a_crawl_refuses_a_symlinked_lock_in_one_line(tmp_path):
    from .cli_project import make_project, scrapy

    project = make_project(tmp_path, 'RECRAWL_STORE = "history.sqlite3"\n')
    victim = tmp_path / "precious.txt"
    victim.write_bytes(b"someone's data\n")
    (project / "history.sqlite3.lock").symlink_to(victim)
    run = scrapy(project, "crawl", "pages")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    refused = [line for line in run.lines if "is a symbolic link" in line]
    assert len(refused) == 1 and "RECRAWL_STORE" in refused[0], run.stderr
    assert victim.read_bytes() == b"someone's data\n"
