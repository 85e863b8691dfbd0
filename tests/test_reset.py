"""``scrapy recrawl-reset SPIDER``: one spider's history emptied, after a yes, and
nothing else touched (SQLite file; Redis store keys and the shared cycle)."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.redis import RedisHistoryStore

from .cli_project import make_project, scrapy
from .helpers import LocalSite, Page

pytestmark = pytest.mark.slow


@pytest.fixture
def site():
    with LocalSite() as site:
        site.pages["/"] = Page(b'<html><body><a href="/a">a</a><a href="/b">b</a></body></html>')
        site.pages["/a"] = Page(b"<html><body><p>a</p></body></html>")
        site.pages["/b"] = Page(b"<html><body><p>b</p></body></html>")
        yield site


def test_reset_asks_then_empties_the_spiders_sqlite_store(tmp_path, site):
    project = make_project(tmp_path, 'RECRAWL_STORE = "history.sqlite3"\n')
    for _ in range(2):
        run = scrapy(project, "crawl", "pages", "-a", f"start_url={site.url}/")
        assert run.returncode == 0, run.stderr
    with SqliteHistoryStore(project / "history.sqlite3") as store:
        assert (len(store), store.cycle) == (3, 2)

    run = scrapy(project, "recrawl-reset", "pages", input="n\n")
    assert run.returncode == 1 and "nothing deleted" in run.stderr
    assert "3 URLs, cycle 2" in run.stdout and "history.sqlite3" in run.stdout
    with SqliteHistoryStore(project / "history.sqlite3") as store:
        assert len(store) == 3  # declined: untouched

    run = scrapy(project, "recrawl-reset", "pages", input="y\n")  # no terminal, no --yes
    assert run.returncode == 1 and "no terminal" in run.stderr
    with SqliteHistoryStore(project / "history.sqlite3") as store:
        assert len(store) == 3  # a piped "y" is no confirmation
    missing = project / "typo" / "histroy.sqlite3"
    run = scrapy(project, "recrawl-reset", "pages", "--yes", "-s", f"RECRAWL_STORE={missing}")
    assert run.returncode == 1 and "has no history at" in run.stderr
    assert not missing.parent.exists()  # a mistyped path is not created to be emptied

    run = scrapy(project, "recrawl-reset", "pages", "--yes")
    assert run.returncode == 0, run.stderr
    with SqliteHistoryStore(project / "history.sqlite3") as store:
        assert (len(store), store.cycle) == (0, 0)
    run = scrapy(project, "crawl", "pages", "-a", f"start_url={site.url}/", "-s", "LOG_LEVEL=INFO")
    assert "recrawl cycle 1: warm-up" in run.stderr  # as on the first day


def test_reset_reads_the_spiders_own_settings(tmp_path):
    project = make_project(tmp_path)
    spider = (project / "proj" / "spiders" / "pages.py").read_text()
    spider = spider.replace(
        'name = "pages"', 'name = "pages"\n    custom_settings = {"RECRAWL_STORE": "mine.db"}'
    )
    (project / "proj" / "spiders" / "pages.py").write_text(spider)
    with SqliteHistoryStore(project / "mine.db") as store:
        store.record(Visit(b"1" * 20, "http://h/", 0.0, 200))
    run = scrapy(project, "recrawl-reset", "pages", "-y")
    assert run.returncode == 0, run.stderr
    assert "mine.db" in run.stdout
    with SqliteHistoryStore(project / "mine.db") as store:
        assert len(store) == 0


def test_reset_of_an_unknown_spider_or_store_fails_cleanly(tmp_path):
    project = make_project(tmp_path)
    run = scrapy(project, "recrawl-reset", "nope", "--yes")
    assert run.returncode != 0 and "Spider not found: nope" in run.stderr
    run = scrapy(
        project, "recrawl-reset", "pages", "--yes", "-s", "RECRAWL_STORE=redis://127.0.0.1:1/0"
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "cannot open the history store of spider 'pages'" in run.stderr


def test_reset_on_redis_leaves_other_spiders_keys(tmp_path, redis_db):  # noqa: F811
    client = redis_db.client()
    # another store under a longer prefix than this spider's, and another spider's cycle
    with RedisHistoryStore(redis_db.url, key="pages:history:other") as other:
        other.record(Visit(b"2" * 20, "http://h/x", 0.0, 200))
    client.hset("other:recrawl:state", "cycle", 4)
    # this spider's store (RECRAWL_REDIS_KEY's default, "%(spider)s:history") and its
    # shared cycle (RedisRecrawlScheduler's keys)
    with RedisHistoryStore(redis_db.url, key="pages:history") as mine:
        mine.advance_cycle()
        mine.record(Visit(b"1" * 20, "http://h/a", 0.0, 200))
    client.hset("pages:recrawl:state", "cycle", 1)
    client.hset("pages:recrawl:starts:1", "fp", "w")
    client.sadd("pages:dupefilter:1", "fp")
    client.lpush("pages:requests", "r")

    project = make_project(
        tmp_path,
        f'SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"\nREDIS_URL = "{redis_db.url}"\n',
    )
    run = scrapy(project, "recrawl-reset", "pages", "--yes")
    assert run.returncode == 0, run.stderr
    assert "1 URLs, cycle 1" in run.stdout and "shared cycle" in run.stdout

    with RedisHistoryStore(redis_db.url, key="pages:history") as mine:
        assert (len(mine), mine.cycle) == (0, 0)
    with RedisHistoryStore(redis_db.url, key="pages:history:other") as other:
        assert len(other) == 1
    left = sorted(k.decode() for k in client.keys("*"))
    assert "other:recrawl:state" in left
    # of this spider's keys only its emptied store's meta (and its shards') is left; the
    # longer prefix's stay (schema version 5: keys under the hash tags {pages:history}
    # and {pages:history#<shard>})
    assert [k for k in left if k.startswith("pages:")] == []
    mine_left = [k for k in left if k.startswith(("{pages:history}", "{pages:history#"))]
    assert "{pages:history}:meta" in mine_left
    assert all(k.endswith(":meta") for k in mine_left)
    assert any(k.startswith("{pages:history:other}") for k in left)
    client.close()


def test_compact_keeps_the_history_and_gives_back_the_trimmed_log(tmp_path):
    project = make_project(tmp_path, 'RECRAWL_STORE = "history.sqlite3"\n')
    path = project / "history.sqlite3"
    with SqliteHistoryStore(path, log_maxlen=0) as store:
        store.claim("pages")
        for cycle in range(1, 31):
            store.advance_cycle()
            for u in range(100):
                store.record(Visit(bytes([u]) * 20, f"http://h/{u}", float(cycle), 200, u % 2 == 0))
        records = store.arrays()
    size = path.stat().st_size
    run = scrapy(
        project, "recrawl-reset", "pages", "--compact", "-s", "RECRAWL_SQLITE_LOG_MAXLEN=500"
    )
    assert run.returncode == 0, run.stderr
    assert "2500 visits dropped" in run.stdout and "every URL's record kept" in run.stdout
    # the 2,500 dropped visits' pages given back: a visit is about 60 bytes with its two
    # index entries (docs/benchmarks.md); at least half of that, whatever else the file holds
    assert size - path.stat().st_size >= 2500 * 30
    with SqliteHistoryStore(path) as store:
        assert len(store.visit_log()["url_id"]) == 500 and store.cycle == 30
        after = store.arrays()
        for name, column in records.columns.items():  # nothing of the records lost
            np.testing.assert_array_equal(after.columns[name], column)
