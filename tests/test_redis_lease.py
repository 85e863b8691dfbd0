"""A crawl's lease on its Redis history store (issue 29): the crawl that opens the store
holds it (store_loss.py's watch, history/redis.py: hold, holders), stamped with the
Redis's clock at each epoch check, left at a clean close, expiring a timeout after its
last stamp; on a real redis-server and a real three-master cluster, the check's timer
on an injected clock. ``scrapy recrawl-reset`` reads it: tests/test_reset_races.py
refuses a reset during a real crawl with it."""

from __future__ import annotations

import json

from scrapy import Spider, signals
from scrapy.utils.test import get_crawler
from twisted.internet.task import Clock

from scrapy_recrawl.history.base import Visit
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.history.redis_liveness import process_of
from scrapy_recrawl.history.redis_schema import LEASE
from scrapy_recrawl.store_loss import watch_store_loss

KEY = "news:history"


def lease_key(store: RedisHistoryStore) -> str:
    return store.layout.store(LEASE)


def watched(store: RedisHistoryStore, timeout: float, clock: Clock):
    """``store`` opened by a crawl with RECRAWL_REDIS_WORKER_TIMEOUT = ``timeout``, its
    spider open (the check's timer started on ``clock``)."""
    crawler = get_crawler(Spider, {"RECRAWL_REDIS_WORKER_TIMEOUT": timeout})
    watch_store_loss(crawler, store, clock=clock)
    crawler.signals.send_catch_log(signals.spider_opened, spider=None)
    return crawler


def seen(client, store: RedisHistoryStore) -> float:
    return float(json.loads(client.hget(lease_key(store), store.holder))["seen"])


def test_a_crawl_holds_its_store_from_open_to_its_clean_close(redis_deployment):
    """Held at open (one holder, this process, expiring with the timeout), stamped again
    at each check -- a third of a short timeout apart, so a live crawl never looks gone
    -- and left at the close: the key is gone, nobody holds the store."""
    client = redis_deployment.client()
    clock = Clock()
    with redis_deployment.store(KEY) as reader:
        with redis_deployment.store(KEY) as store:
            assert reader.holders(30) == {}  # opened, not held: an offline command's
            crawler = watched(store, 3, clock)
            holder = store.holder
            assert holder is not None and process_of(holder).count(":") == 1
            assert list(reader.holders(3)) == [holder]
            assert 0 < client.pttl(lease_key(store)) <= 3000  # a killed crawl's lease dies
            first = seen(client, store)
            clock.advance(0.99)  # not a check yet
            assert seen(client, store) == first
            clock.advance(0.01)  # the check, 3 s / 3 after the last
            assert seen(client, store) > first  # by the Redis's clock
            store.record(Visit(b"\1" * 20, "http://example.com/1", 1.0, 200))
            crawler.signals.send_catch_log(signals.spider_closed, spider=None, reason="done")
        assert store.holder is None
        assert reader.holders(30) == {}
        assert not client.exists(lease_key(store))
    client.close()


def test_a_holder_is_judged_by_the_redis_clock_and_the_expiry_only_grows(redis_db):
    """A holder last stamped longer ago than the timeout, by the server's clock, holds
    nothing; a second crawl with a shorter timeout never cuts the first one's lease
    short; a value that is no status is no holder (read as data)."""
    client = redis_db.client()
    with (
        RedisHistoryStore(redis_db.url, key=KEY) as long,
        RedisHistoryStore(redis_db.url, key=KEY) as short,
    ):
        long.hold(60)
        short.hold(5)
        assert set(long.holders(30)) == {long.holder, short.holder}
        assert client.pttl(lease_key(long)) > 30_000
        now = long.holders(30)[long.holder]["seen"]
        client.hset(lease_key(long), short.holder, json.dumps({"seen": now - 40}))
        client.hset(lease_key(long), "x:1:junk", b"\x80 not json")
        assert set(long.holders(30)) == {long.holder}
        assert set(long.holders(50)) == {long.holder, short.holder}
        long.close()  # leaves its field only
        assert set(short.holders(50)) == {short.holder}
    client.close()


def test_a_crawl_that_outlives_a_reset_does_not_recreate_its_lease(redis_db):
    """The stamp is written behind the store's epoch, as every write: after a reset the
    crawl's next check says the loss and writes no lease into the emptied store."""
    client = redis_db.client()
    clock = Clock()
    with RedisHistoryStore(redis_db.url, key=KEY) as store:
        crawler = watched(store, 30, clock)
        with RedisHistoryStore(redis_db.url, key=KEY) as other:
            other.clear()  # what recrawl-reset does once it goes ahead
        assert not client.exists(lease_key(store))
        clock.advance(2)
        assert crawler.stats.get_value("recrawl/store_lost") == 1
        assert not client.exists(lease_key(store))
        crawler.signals.send_catch_log(signals.spider_closed, spider=None, reason="lost")
    assert not client.exists(lease_key(store))
    client.close()
