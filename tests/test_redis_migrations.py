"""The Redis store's schema versions (history/redis_migrate.py): a store from before the
first release is refused in one line, in the store, a crawl and a command; clear()
empties it (that is how `scrapy recrawl-reset` starts it afresh); the migration
machinery runs the next release's steps in order (a made-up step 9 -> 10 here; the real
8 -> 9 on a store made by v0.1.0: tests/test_store_v8_fixtures.py); a store
opened read-only is never created, upgraded or written."""

from __future__ import annotations

import pytest

from scrapy_recrawl.history import SCHEMA_VERSION, HistoryStoreError, Visit, redis_migrate
from scrapy_recrawl.history.base import BASELINE_SCHEMA_VERSION
from scrapy_recrawl.history.redis import RedisHistoryStore

KEY = "books:history"
META = "{books:history}:meta"


def _visit(u: int, t: float = 1000.0) -> Visit:
    return Visit(bytes([u]) * 20, f"http://h/{u}", t, 200, None, request={"url": f"http://h/{u}"})


def _dump(client) -> dict:
    return {k: client.dump(k) for k in client.keys("*") if not k.endswith(b":lease")}


def _filled(url: str, urls: int = 3) -> None:
    with RedisHistoryStore(url, key=KEY) as store:
        store.advance_cycle()
        for u in range(urls):
            store.record(_visit(u))


@pytest.mark.parametrize("version", range(1, BASELINE_SCHEMA_VERSION))
def test_a_pre_release_store_is_refused_in_one_line_and_left_as_it_is(redis_db, version):
    _filled(redis_db.url)
    client = redis_db.client()
    client.hset(META, "schema_version", version)
    before = _dump(client)
    store = RedisHistoryStore(redis_db.url, key=KEY)
    with pytest.raises(HistoryStoreError) as err:
        store.open()
    message = str(err.value)
    assert "\n" not in message
    assert f"history store {redis_db.url} (key 'books:history')" in message
    assert f"pre-release build of scrapy-recrawl (schema version {version};" in message
    assert "`scrapy recrawl-reset SPIDER`" in message
    assert _dump(client) == before  # nothing written, nothing migrated
    store.close()
    client.close()


def test_the_layout_before_version_5_is_refused_too(redis_db):
    """Schema versions 1 to 4 kept their keys as ``<prefix>:<name>`` (no hash tag)."""
    client = redis_db.client()
    client.hset(f"{KEY}:meta", mapping={"schema_version": 4, "spider": "books"})
    client.set(f"{KEY}:next_id", 3)
    client.set("books:history:other:kept", 1)  # a longer prefix's: not this store's
    with pytest.raises(HistoryStoreError, match="schema version 4;"):
        RedisHistoryStore(redis_db.url, key=KEY).open()
    assert client.keys("{books:history*") == []  # no new store created beside it
    # clear() (recrawl-reset) empties it: the next open finds a new, empty store
    store = RedisHistoryStore(redis_db.url, key=KEY)
    store.clear()
    store.close()
    assert client.keys(f"{KEY}:*") == [b"books:history:other:kept"]
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        assert len(store) == 0 and store.cycle == 0 and store.owner() is None
    client.close()


def test_a_refused_store_is_emptied_by_clear_and_opens_afresh(redis_db):
    _filled(redis_db.url)
    client = redis_db.client()
    client.hset(META, "schema_version", 6)
    store = RedisHistoryStore(redis_db.url, key=KEY)
    with pytest.raises(HistoryStoreError, match="pre-release"):
        store.open()
    store.clear()
    store.close()
    assert int(client.hget(META, "schema_version")) == SCHEMA_VERSION
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        assert len(store) == 0 and store.cycle == 0
        store.record(_visit(1))
        assert len(store) == 1
    client.close()


def test_a_store_of_a_newer_build_is_refused(redis_db):
    _filled(redis_db.url)
    client = redis_db.client()
    client.hset(META, "schema_version", SCHEMA_VERSION + 1)
    with pytest.raises(HistoryStoreError, match="newer than this scrapy-recrawl understands"):
        RedisHistoryStore(redis_db.url, key=KEY).open()
    client.close()


# -- the machinery kept for the next release ------------------------------------------


def _step_9_to_10(calls: list):
    """A made-up step: every URL's blob gains nothing, the meta gains a field; it checks
    the version it starts from and writes the next one with its change (MULTI/EXEC)."""

    def step(client, layout, location):
        calls.append(location)
        meta = layout.store("meta")
        if int(client.hget(meta, "schema_version")) != 9:
            return
        pipe = client.pipeline()
        pipe.hset(meta, "made_up", "yes")
        pipe.hset(meta, "schema_version", 10)
        pipe.execute()

    return step


def test_the_next_release_adds_a_step_and_it_runs_once(redis_db, monkeypatch):
    _filled(redis_db.url)
    calls: list = []
    monkeypatch.setattr(redis_migrate, "STEPS", {9: _step_9_to_10(calls)})
    monkeypatch.setattr(redis_migrate, "TARGET", 10)
    client = redis_db.client()
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        assert len(store) == 3  # the history kept
        store.record(_visit(7))
    assert calls == [redis_db.url]
    assert client.hget(META, "schema_version") == b"10" and client.hget(META, "made_up") == b"yes"
    with RedisHistoryStore(redis_db.url, key=KEY) as store:  # at 10 now: no step runs
        assert len(store) == 4
    assert len(calls) == 1
    # a new store is made at the version this build writes
    with RedisHistoryStore(redis_db.url, key="fresh:history") as store:
        assert store.cycle == 0
    assert client.hget("{fresh:history}:meta", "schema_version") == b"10"
    client.close()


def test_steps_run_in_order_and_a_missing_one_is_said(redis_db, monkeypatch):
    _filled(redis_db.url)
    order: list = []

    def step(start):
        def run(client, layout, location):
            order.append(start)
            client.hset(layout.store("meta"), "schema_version", start + 1)

        return run

    client = redis_db.client()
    client.hset(META, "schema_version", 8)  # as v0.1.0 left it
    client.close()
    monkeypatch.setattr(redis_migrate, "STEPS", {8: step(8), 9: step(9)})
    monkeypatch.setattr(redis_migrate, "TARGET", 10)
    with RedisHistoryStore(redis_db.url, key=KEY):
        pass
    assert order == [8, 9]
    monkeypatch.setattr(redis_migrate, "STEPS", {})
    monkeypatch.setattr(redis_migrate, "TARGET", 11)
    with pytest.raises(HistoryStoreError, match="no upgrade from schema version 10 to 11"):
        RedisHistoryStore(redis_db.url, key=KEY).open()


# -- read-only --------------------------------------------------------------------------


def test_a_read_only_store_reads_and_never_writes(redis_db):
    _filled(redis_db.url)
    client = redis_db.client()
    before = _dump(client)
    store = RedisHistoryStore(redis_db.url, key=KEY, read_only=True)
    store.open()
    assert store.read_only and len(store) == 3 and store.cycle == 1
    assert store.epoch == client.hget(META, "epoch").decode()
    assert store.urls([store.get(bytes([0]) * 20).id]) == ["http://h/0"]
    writes = [
        lambda: store.record(_visit(9)),
        store.advance_cycle,
        lambda: store.claim("books"),
        lambda: store.side_put("t", [(1, b"x")]),
        lambda: store.side_push("t", 1, b"x", 3),
        lambda: store.side_delete("t", [1]),
        lambda: store.push_frontier([(b"f" * 20, {"url": "http://h/new"}, 0)]),
        lambda: store.pop_frontier(3),
        lambda: store.hold(30),
        store.clear,
    ]
    for write in writes:
        with pytest.raises(HistoryStoreError) as err:
            write()
        assert f"history store {redis_db.url} (key 'books:history') is open read-only" in str(
            err.value
        )
    store.close()
    assert _dump(client) == before
    client.close()


def test_a_read_only_store_is_never_created_nor_upgraded(redis_db, monkeypatch):
    client = redis_db.client()
    with pytest.raises(HistoryStoreError, match="does not exist: nothing to read"):
        RedisHistoryStore(redis_db.url, key=KEY, read_only=True).open()
    assert client.keys("*") == []
    _filled(redis_db.url)
    monkeypatch.setattr(redis_migrate, "STEPS", {9: _step_9_to_10([])})
    monkeypatch.setattr(redis_migrate, "TARGET", 10)
    with pytest.raises(HistoryStoreError, match="open read-only: cannot upgrade it"):
        RedisHistoryStore(redis_db.url, key=KEY, read_only=True).open()
    assert client.hget(META, "schema_version") == b"9"
    client.close()


# -- in a crawl and in a command: one line, exit 1 --------------------------------------


@pytest.mark.slow
def test_a_crawl_and_a_command_refuse_a_pre_release_store_in_one_line(tmp_path, redis_db):
    from .project import make_project, scrapy

    project = make_project(tmp_path)
    client = redis_db.client()
    with RedisHistoryStore(redis_db.url, key="alpha:history") as store:
        store.claim("alpha")
        store.record(_visit(1))
    client.hset("{alpha:history}:meta", "schema_version", 7)
    before = _dump(client)
    settings = {"SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler", "REDIS_URL": redis_db.url}
    runs = {
        "crawl": scrapy(
            project, "crawl", "alpha", "-a", "start_url=http://127.0.0.1:9/", settings=settings
        ),
        "report": scrapy(project, "recrawl-report", "--spider", "alpha", settings=settings),
    }
    for what, run in runs.items():
        assert run.returncode != 0, (what, run.log[-3000:])
        assert "Traceback" not in run.log, (what, run.log[-3000:])
        said = [
            line for line in run.log.splitlines() if "pre-release build of scrapy-recrawl" in line
        ]
        assert len(said) == 1, (what, run.log[-3000:])
        assert "(key 'alpha:history')" in said[0] and "schema version 7;" in said[0]
        assert "recrawl-reset" in said[0]
    assert _dump(client) == before
    # what the line says to do works: the store's keys go, unread, and it opens afresh
    reset = scrapy(project, "recrawl-reset", "alpha", "--yes", settings=settings)
    assert reset.returncode == 0, reset.log[-3000:]
    assert "pre-release build" in reset.stdout and "Traceback" not in reset.log
    left = [k for k in client.keys("*") if b"alpha:history" in k]
    assert left and all(k.endswith(b":meta") for k in left)  # a new store's, nothing else
    with RedisHistoryStore(redis_db.url, key="alpha:history") as store:
        assert len(store) == 0 and store.cycle == 0
    client.close()
