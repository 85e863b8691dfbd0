"""The Redis store's identity (history/epoch.py), on a real redis-server: an epoch
written at creation and remembered when opened; a store emptied (FLUSHDB, a restart
without persistence) or replaced between two writes gets nothing written and is
reported by name; RECRAWL_ON_STORE_LOSS = "continue" goes on with a fresh history;
the Redis settings that lose a history unnoticed are warned about at open."""

from __future__ import annotations

import logging

import pytest

from scrapy_recrawl.history import SCHEMA_VERSION, StoreLost, open_store
from scrapy_recrawl.history import redis_session as redis_module
from scrapy_recrawl.history.base import Visit
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.settings import RecrawlSettingError

from .redis_server import RedisServer

KEY = "news:history"


def visit(n: int = 1, t: float = 1.0) -> Visit:
    return Visit(bytes([n]) * 20, f"http://example.com/{n}", t, 200, request={"url": "x"})


def history_keys(client, key: str = KEY) -> list[bytes]:
    # the store's keys (schema version 5: its hash tag and its shards'), or those of
    # the version-4 layout
    return sorted(client.keys(f"{{{key}}}:*") + client.keys(f"{{{key}#*") + client.keys(f"{key}:*"))


@pytest.fixture(autouse=True)
def _config_unseen(monkeypatch):
    # each test looks at the Redis settings afresh (the store says it once per process)
    monkeypatch.setattr(redis_module, "_CONFIG_SEEN", set())


def test_a_new_store_has_an_epoch_every_process_shares(redis_db):  # noqa: F811
    client = redis_db.client()
    with (
        RedisHistoryStore(redis_db.url, key=KEY) as a,
        RedisHistoryStore(redis_db.url, key=KEY) as b,
    ):
        assert a.epoch and len(a.epoch) == 32
        assert b.epoch == a.epoch and b.epoch_created == a.epoch_created  # HSETNX: the first wins
        meta = client.hgetall(f"{{{KEY}}}:meta")
        assert meta[b"epoch"].decode() == a.epoch
        assert float(meta[b"epoch_created"]) == a.epoch_created
        assert int(meta[b"schema_version"]) == SCHEMA_VERSION
    with RedisHistoryStore(redis_db.url, key="other:history") as c:
        assert c.epoch != a.epoch  # a random token: no two stores share one


def test_flushdb_between_two_writes_stops_the_second_and_writes_nothing(redis_db):  # noqa: F811
    client = redis_db.client()
    told: list[StoreLost] = []
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        store.on_lost = told.append
        store.advance_cycle()
        store.record(visit(1))
        store.flush()
        client.flushdb()  # what a restart without persistence leaves
        with pytest.raises(StoreLost) as err:
            store.record(visit(1, 2.0))
            store.flush()  # visits are buffered: the flush finds the loss
        message = str(err.value)
        assert f"history store at {redis_db.url}" in message and repr(KEY) in message
        assert store.epoch in message and "vanished" in message
        assert "appendonly yes" in message and "docs/distributed.md" in message
        assert "RECRAWL_ON_STORE_LOSS" in message
        assert told == [err.value]  # the crawl's hook heard it before the raise
        # every other write is refused too, and nothing lands in the emptied Redis
        for write in (
            store.advance_cycle,
            store.check_epoch,
            lambda: store.push_frontier([(b"f" * 20, {"url": "http://example.com/new"}, 0)]),
            lambda: store.pop_frontier(5),
            lambda: store.side_push("content_bags", 1, b"bag", 3),
            lambda: store.side_put("content_dists", [(1, b"d")]),
            lambda: store.side_delete("content_dists", [1]),
            # a new URL's id block (INCRBY of its shard's counter), the block used up
            lambda: (store._ids.reserved.clear(), store.record(visit(9))),
        ):
            with pytest.raises(StoreLost):
                write()
        assert client.keys("*") == []


def test_a_replaced_store_is_refused_and_left_alone(redis_db):  # noqa: F811
    client = redis_db.client()
    with RedisHistoryStore(redis_db.url, key=KEY) as old:
        old.record(visit(1))
        old.flush()
        with RedisHistoryStore(redis_db.url, key=KEY) as reset:
            reset.clear()  # `scrapy recrawl-reset` while a crawl writes: a new history
            assert reset.epoch != old.epoch
            reset.record(visit(2))
            new_epoch = reset.epoch
        with pytest.raises(StoreLost, match=f"was replaced \\(now epoch {new_epoch}\\)"):
            old.record(visit(1, 5.0))
            old.flush()
        with pytest.raises(StoreLost, match="was replaced"):
            old.check_epoch()
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        assert len(store) == 1 and store.epoch == new_epoch  # only the new history's visit
        assert store.get(visit(2).fingerprint).url == "http://example.com/2"
    assert client.hget(f"{{{KEY}}}:meta", "epoch").decode() == new_epoch


def test_continue_goes_on_with_a_fresh_history(redis_db, caplog):  # noqa: F811
    client = redis_db.client()
    told: list[StoreLost] = []
    with RedisHistoryStore(redis_db.url, key=KEY, on_loss="continue") as store:
        store.on_lost = told.append
        store.claim("news")
        store.advance_cycle()
        store.advance_cycle()
        store.record(visit(1))
        store.flush()
        lost_epoch = store.epoch
        client.flushdb()
        with caplog.at_level(logging.WARNING, logger="scrapy_recrawl.history"):
            store.record(visit(1, 2.0))
            store.flush()  # visits are buffered: the flush finds the loss
            record = store.get(visit(1).fingerprint)
        assert record.visits == 1  # a fresh history: the first visit of its URL
        # its URL names its host by the id the process knew: kept in the fresh dictionary
        assert record.url == visit(1).url and store.urls([record.id]) == [visit(1).url]
        assert store.epoch != lost_epoch
        assert told == []  # not a stop
        warned = [r.getMessage() for r in caplog.records if "fresh history" in r.getMessage()]
        assert len(warned) == 1 and lost_epoch in warned[0] and store.epoch in warned[0]
        assert "RECRAWL_ON_STORE_LOSS = 'continue'" in warned[0]
        # what a new store starts with, the owner, and the cycle counter where it was
        meta = client.hgetall(f"{{{KEY}}}:meta")
        assert meta[b"epoch"].decode() == store.epoch
        assert meta[b"spider"] == b"news" and int(meta[b"schema_version"]) == SCHEMA_VERSION
        assert store.cycle == 2 and store.advance_cycle() == 3
        client.flushdb()
        store.check_epoch()  # a quiet crawl's periodic check: the same, without a write
        epoch = store.epoch
        assert client.hget(f"{{{KEY}}}:meta", "epoch").decode() == epoch != record.id
    with RedisHistoryStore(redis_db.url, key=KEY) as again:
        assert again.epoch == epoch  # the next process opens the fresh history


def test_the_setting_reaches_the_store_and_a_bad_value_is_refused(redis_db):  # noqa: F811
    settings = {"RECRAWL_STORE": redis_db.url, "RECRAWL_ON_STORE_LOSS": "continue"}
    store = open_store(settings, "news")
    assert isinstance(store, RedisHistoryStore) and store.on_loss == "continue"
    assert open_store({"RECRAWL_STORE": redis_db.url}, "news").on_loss == "stop"
    with pytest.raises(RecrawlSettingError, match="RECRAWL_ON_STORE_LOSS='carry on'"):
        open_store({**settings, "RECRAWL_ON_STORE_LOSS": "carry on"}, "news")


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_evicting_redis_is_warned_about_naming_the_setting(redis_db, caplog):  # noqa: F811
    client = redis_db.client()
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with caplog.at_level(logging.WARNING), RedisHistoryStore(redis_db.url, key=KEY):
            pass
    finally:
        client.config_set("maxmemory-policy", "noeviction")
    evict = [m for m in _warnings(caplog) if "maxmemory-policy allkeys-lru" in m]
    assert len(evict) == 1
    assert "set maxmemory-policy noeviction" in evict[0] and redis_db.url in evict[0]
    caplog.clear()
    redis_module._CONFIG_SEEN.clear()
    with caplog.at_level(logging.WARNING), RedisHistoryStore(redis_db.url, key=KEY):
        pass
    assert not [m for m in _warnings(caplog) if "maxmemory-policy" in m]  # noeviction: fine


def test_a_redis_without_persistence_is_warned_about_once(redis_db, caplog):  # noqa: F811
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            with RedisHistoryStore(redis_db.url, key=KEY):
                pass
    said = [m for m in _warnings(caplog) if "keeps nothing on disk" in m]
    assert len(said) == 1 and "set appendonly yes" in said[0] and redis_db.url in said[0]


def test_a_persistent_redis_is_not_warned_about(caplog):
    with RedisServer(appendonly=True) as server, caplog.at_level(logging.WARNING):
        with RedisHistoryStore(server.url, key=KEY):
            pass
    assert _warnings(caplog) == []


class NoConfigServer(RedisServer):
    """A managed Redis's habit: the CONFIG command is not offered."""

    def args(self) -> list[str]:
        return [*super().args(), "--rename-command", "CONFIG", '""']


def test_a_redis_refusing_config_is_not_warned_about(caplog):
    with NoConfigServer() as server:
        client = server.client()
        with caplog.at_level(logging.WARNING), RedisHistoryStore(server.url, key=KEY) as store:
            store.record(visit(1))  # the store works; only its settings cannot be read
            assert store.epoch is not None
        import redis

        with pytest.raises(redis.ResponseError):
            client.config_get("maxmemory-policy")  # refused indeed
    assert _warnings(caplog) == []


def test_a_quiet_crawl_notices_a_lost_store_at_the_check_on_its_clock(redis_db):  # noqa: F811
    """store_loss.py's timer, on an injected clock: a store emptied while nothing is
    written is noticed at the next check, CHECK_SECONDS later, and not before; the
    timer stops with the spider."""
    from scrapy import Spider, signals
    from scrapy.utils.test import get_crawler
    from twisted.internet.task import Clock

    from scrapy_recrawl.history.epoch import CHECK_SECONDS
    from scrapy_recrawl.store_loss import watch_store_loss

    crawler = get_crawler(Spider)
    clock = Clock()
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        store.record(visit())
        store.flush()
        watch_store_loss(crawler, store, clock=clock)
        crawler.signals.send_catch_log(signals.spider_opened, spider=None)
        clock.advance(CHECK_SECONDS)  # a check of a store still there: nothing said
        assert crawler.stats.get_value("recrawl/store_lost") is None
        redis_db.client().flushdb()
        clock.advance(CHECK_SECONDS - 0.01)
        assert crawler.stats.get_value("recrawl/store_lost") is None
        clock.advance(0.01)  # the next check
        assert crawler.stats.get_value("recrawl/store_lost") == 1
        crawler.signals.send_catch_log(signals.spider_closed, spider=None, reason="done")
        assert clock.getDelayedCalls() == []
