"""Responses that arrive while the history store is away (issue 29, "Outages").

The middleware in this process, a real redis-server with its append-only file (stopped
and started again on the same port, its data kept), responses handed to the middleware
as the engine would, and the idle flush timer on a clock the test moves: a response the
store did not take is held, in arrival order, at most ``RECRAWL_FLUSH_EVERY``; it is
recorded (with its arrival time) at the first tick after the store is back; what is
turned away past the bound, or still held when the store closes, is said lost in one
line with its count. A store that took the visit and only failed to write its buffer
(SQLite's full disk, tests/full_disk_store.py) is not held: its own flush retries it.
"""

from __future__ import annotations

import logging

import pytest
import scrapy
from scrapy import signals
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.internet.task import Clock

from scrapy_recrawl.history import FlushFailed, HistoryStoreError
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.middleware import RecrawlMiddleware
from scrapy_recrawl.runtime import release_store

from .redis_server import RedisServer

KEY = "held:history"
TICK = 1.0  # the idle timer's period: half of RECRAWL_FLUSH_SECONDS


class _Spider(scrapy.Spider):
    name = "held"


def _page(i: int, version: int = 1) -> bytes:
    words = " ".join(f"word{i}x{version}y{k}" for k in range(40))
    return f"<html><body><h1>Page {i}</h1><p>{words}</p></body></html>".encode()


class Crawl:
    """The middleware of one crawler, its timer on a test clock."""

    def __init__(self, settings: dict, wall: list[float]) -> None:
        crawler = get_crawler(_Spider, settings)
        self.crawler = crawler
        self.spider = _Spider.from_crawler(crawler)
        crawler.spider = self.spider  # a crawl (scope.off_reason), not `scrapy shell`
        self.mw = RecrawlMiddleware.from_crawler(crawler)
        assert self.mw.tally is not None
        self.mw.tally.clock = lambda: wall[0]  # the crawl's wall clock, injected
        self.clock = Clock()
        self.mw.clock = self.clock
        crawler.signals.send_catch_log(signals.spider_opened, spider=self.spider)
        self.mw.store.claim("held")

    def fetched(self, i: int, version: int = 1) -> None:
        url = f"http://site.test/p{i}"
        request = scrapy.Request(url)
        response = HtmlResponse(url, body=_page(i, version), request=request)
        assert self.mw.process_response(request, response) is response

    def tick(self) -> None:
        self.clock.advance(TICK)

    def stat(self, name: str) -> int:
        return int(self.crawler.stats.get_value(f"recrawl/{name}", 0))

    def close(self) -> None:
        release_store(self.crawler)  # as the recrawl scheduler's close() does
        self.crawler.signals.send_catch_log(signals.spider_closed, spider=self.spider, reason="x")


def _settings(server: RedisServer, flush_every: int) -> dict:
    return {
        "RECRAWL_STORE": server.url,
        "RECRAWL_REDIS_KEY": KEY,
        "RECRAWL_FLUSH_EVERY": flush_every,
        "RECRAWL_FLUSH_SECONDS": 2 * TICK,
        "RECRAWL_LEARN_BOILERPLATE": False,
    }


def _log(server: RedisServer) -> list[tuple[str, float, int]]:
    """Each visit in the store's log, oldest first: (URL path, time, changed)."""
    with RedisHistoryStore(server.url, key=KEY) as store:
        log = store.visit_log()
        arrays = store.arrays()
        urls = dict(zip(arrays.ids.tolist(), store.urls(arrays.ids), strict=True))
    order = log["time"].argsort(kind="stable")
    return [
        (
            urls[int(log["url_id"][k])].rsplit("/", 1)[1],
            float(log["time"][k]),
            int(log["changed"][k]),
        )
        for k in order
    ]


def test_held_in_order_and_recorded_at_the_first_tick_after_the_store_is_back(redis_aof):
    wall = [1_000_000.0]
    crawl = Crawl(_settings(redis_aof, flush_every=10), wall)
    try:
        for i in (0, 1):
            crawl.fetched(i)
            wall[0] += 1
        crawl.tick()  # written: the store is reachable
        redis_aof.stop()
        for i, version in ((2, 1), (3, 1), (0, 2)):  # p0 again, changed, after p2 and p3
            crawl.fetched(i, version)
            wall[0] += 1
        assert [h.request.url[-2:] for h in crawl.mw.held] == ["p2", "p3", "p0"]
        assert crawl.stat("visits_held") == 3
        crawl.tick()  # still away: kept, retried at the next tick
        assert len(crawl.mw.held) == 3
        errors = crawl.stat("store_errors")
        assert errors >= 2  # the first response not taken, and the tick's retry
        redis_aof.start()  # the same port, its data kept
        for _ in range(3):  # the first call on a dropped connection may fail once more
            crawl.tick()
            if not crawl.mw.held:
                break
        assert not crawl.mw.held
        assert crawl.stat("visits_recorded_late") == 3
        assert crawl.stat("visits_lost") == 0
    finally:
        crawl.close()
    log = _log(redis_aof)
    assert [(path, t) for path, t, _ in log] == [
        ("p0", 1_000_000.0),
        ("p1", 1_000_001.0),
        ("p2", 1_000_002.0),  # at their arrival, not when recorded
        ("p3", 1_000_003.0),
        ("p0", 1_000_004.0),
    ]
    assert log[-1][2] == 1  # the held p0 compared with the p0 before it: changed
    assert crawl.crawler.spider is not None  # nothing lost: the crawl does not fail


def test_past_the_bound_one_is_lost_and_said_in_one_line(redis_aof, caplog):
    wall = [2_000_000.0]
    crawl = Crawl(_settings(redis_aof, flush_every=2), wall)
    try:
        crawl.fetched(0)
        crawl.tick()
        redis_aof.stop()
        for i in (1, 2, 3):  # two held (RECRAWL_FLUSH_EVERY), the third turned away
            crawl.fetched(i)
            wall[0] += 1
        assert [h.request.url[-2:] for h in crawl.mw.held] == ["p1", "p2"]
        assert crawl.stat("visits_held") == 2
        assert crawl.stat("visits_lost") == 1
        redis_aof.start()
        for _ in range(3):
            crawl.tick()
            if not crawl.mw.held:
                break
        assert not crawl.mw.held
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            crawl.close()
    finally:
        if crawl.mw.store._client is not None:
            crawl.close()
    lost = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
    assert len(lost) == 1 and lost[0].startswith("recrawl: 1 visit(s)"), lost
    assert crawl.crawler.spider is None  # scrapy crawl exits 1
    assert [path for path, _, _ in _log(redis_aof)] == ["p0", "p1", "p2"]


def test_still_held_when_the_store_closes_is_lost_counted_and_the_crawl_fails(redis_aof, caplog):
    wall = [3_000_000.0]
    crawl = Crawl(_settings(redis_aof, flush_every=10), wall)
    try:
        crawl.fetched(0)
        crawl.tick()
        redis_aof.stop()
        crawl.fetched(1)
        crawl.fetched(2)
        with caplog.at_level(logging.ERROR):
            crawl.close()  # the store never came back before the end
    finally:
        redis_aof.start()
    lost = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
    assert len(lost) == 1 and lost[0].startswith("recrawl: 2 visit(s)"), lost
    assert "was away" in lost[0]
    assert crawl.stat("visits_lost") == 2
    assert crawl.crawler.spider is None  # scrapy crawl exits 1
    assert [path for path, _, _ in _log(redis_aof)] == ["p0"]


def test_a_visit_the_store_took_is_not_held_again(tmp_path):
    """SQLite's full disk (tests/full_disk_store.py): record() took the visit and its
    flush failed (FlushFailed); the visit stays the store's, never held and recorded
    twice; what the store could not write is said lost at close, as before."""
    wall = [4_000_000.0]
    settings = {
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_STORE_CLASS": "tests.full_disk_store.FullDiskStore",  # flush_every=5
        "RECRAWL_FLUSH_SECONDS": 600,
        "RECRAWL_LEARN_BOILERPLATE": False,
    }
    crawl = Crawl(settings, wall)
    store = crawl.mw.store
    for i in range(30):
        crawl.fetched(i)
    assert not crawl.mw.held and crawl.stat("visits_held") == 0
    assert crawl.stat("visits") == 30  # each recorded once, its figures counted
    assert crawl.stat("store_errors") > 0
    pending = store.buffered_visits
    assert 0 < pending < 30
    with pytest.raises(FlushFailed):
        store.record(store_visit := _sqlite_visit())
    assert store.buffered_visits == pending + 1, store_visit
    crawl.close()
    assert crawl.crawler.spider is None


def test_a_store_whose_writes_keep_failing_takes_a_bounded_buffer(tmp_path, caplog):
    """A full disk that stays full: the store takes at most twice its flush bound of
    visits it could not write (history/base.py BUFFER_FLUSHES); past that, record()
    refuses the visit (not FlushFailed), the middleware holds the responses, at most
    RECRAWL_FLUSH_EVERY, and counts the rest lost: memory bounded, nothing lost
    silently, the crawl fails at the end with the count."""
    from scrapy_recrawl.history.base import BUFFER_FLUSHES

    wall = [5_000_000.0]
    settings = {
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_STORE_CLASS": "tests.full_disk_store.FullDiskStore",  # flush_every=5
        "RECRAWL_FLUSH_EVERY": 5,  # the middleware's hold
        "RECRAWL_FLUSH_SECONDS": 600,
        "RECRAWL_LEARN_BOILERPLATE": False,
    }
    crawl = Crawl(settings, wall)
    store = crawl.mw.store
    most, first_error = 0, None
    for i in range(80):
        crawl.fetched(i)
        most = max(most, store.buffered_visits)
        if first_error is None and crawl.stat("store_errors"):
            first_error = i
    assert first_error is not None and first_error < 50  # the disk filled up early on
    assert most == BUFFER_FLUSHES * 5  # never more than the bound
    assert len(crawl.mw.held) == 5 and crawl.stat("visits_held") >= 5
    lost = crawl.stat("visits_lost")
    assert lost > 0
    with pytest.raises(HistoryStoreError) as caught:
        store.record(_sqlite_visit())
    assert not isinstance(caught.value, FlushFailed)  # not taken: the caller keeps it
    assert store.buffered_visits == BUFFER_FLUSHES * 5
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        crawl.close()
    said = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
    assert len(said) == 1, said
    # the buffer's 10, the 5 still held and those turned away: every response counted
    assert said[0].startswith(f"recrawl: {BUFFER_FLUSHES * 5 + 5 + lost} visit(s)"), said
    assert crawl.crawler.spider is None  # scrapy crawl exits 1


def test_a_redis_refusing_writes_leaves_a_bounded_buffer(redis_aof):
    """Redis answering reads but refusing writes (after a failover it became a replica:
    "READONLY You can't write against a read only replica"): the Redis store takes
    visits it cannot write up to the same bound as SQLite's, then refuses them (not
    FlushFailed); once Redis takes writes again, the next flush writes what it took,
    once. (A URL new to the process is refused at once: its id is reserved by a write.)"""
    from scrapy_recrawl.history import Visit
    from scrapy_recrawl.history.base import BUFFER_FLUSHES

    from .ports import free_port

    client = redis_aof.client()
    urls = [(bytes([4, i]) * 10, f"http://site.test/p{i}") for i in range(20)]
    with RedisHistoryStore(redis_aof.url, key=KEY, flush_every=3) as store:
        for fp, url in urls:  # known to this process: a later visit needs no id
            store.record(Visit(fp, url, 1.0, 200))
        store.flush()
        client.replicaof("127.0.0.1", free_port())  # a master that never answers
        try:
            taken = failed = 0
            refused = None
            for i, (fp, url) in enumerate(urls):
                try:
                    store.record(Visit(fp, url, 2.0 + i, 200))
                    taken += 1
                except FlushFailed:
                    failed += 1
                except HistoryStoreError as exc:
                    refused = exc
                    break
            assert refused is not None and "READONLY" in str(refused), refused
            assert failed > 0 and taken + failed == BUFFER_FLUSHES * 3
            assert store.buffered_visits == BUFFER_FLUSHES * 3
        finally:
            client.replicaof("no", "one")
        store.flush()
        assert store.buffered_visits == 0
    with RedisHistoryStore(redis_aof.url, key=KEY) as store:
        assert store.visit_log()["url_id"].size == len(urls) + BUFFER_FLUSHES * 3


def _sqlite_visit():
    from scrapy_recrawl.history import Visit

    return Visit(b"\x01" * 20, "http://site.test/extra", 1.0, 200)


def test_a_redis_store_that_took_the_visit_says_so_and_writes_it_when_back(redis_aof):
    """The Redis store's side of the contract: a visit of a URL it has read, recorded
    while Redis is away, is taken (FlushFailed, the record returned with it) and
    written by the first flush after Redis is back, once."""
    from scrapy_recrawl.history import Visit

    fp = b"\x02" * 20
    with RedisHistoryStore(redis_aof.url, key=KEY, flush_every=1) as store:
        store.record(Visit(fp, "http://site.test/a", 1.0, 200))
        store.flush()
        assert store.get(fp) is not None  # read: the next record() needs no round trip
        redis_aof.stop()
        with pytest.raises(FlushFailed) as caught:
            store.record(Visit(fp, "http://site.test/a", 2.0, 200))
        assert caught.value.record.visits == 2
        assert store.buffered_visits == 1
        redis_aof.start()
        for _ in range(3):  # a dropped connection may fail once more
            try:
                store.flush()
                break
            except HistoryStoreError:
                continue  # retried, as the idle tick does
        assert store.buffered_visits == 0
    with RedisHistoryStore(redis_aof.url, key=KEY) as store:
        assert store.visit_log()["time"].tolist() == [1.0, 2.0]


def test_items_signal_on_a_full_disk_keeps_crawling_and_counts_what_it_lost(tmp_path):
    """RECRAWL_CHANGE_SIGNAL = "items" on a disk that fills up: the refetches held for
    their items' verdict fill their hold (no callback completes them here) while the
    store refuses visits (its buffer full): the oldest is counted lost and the crawl goes
    on -- it used to retry the oldest without end, a hung crawl."""
    import signal

    def hung(*_: object) -> None:
        raise AssertionError("a response never came back from the middleware")

    wall = [5_000_000.0]
    settings = {
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_STORE_CLASS": "tests.full_disk_store.FullDiskStore",  # flush_every=5
        "RECRAWL_FLUSH_EVERY": 5,
        "RECRAWL_FLUSH_SECONDS": 600,
        "RECRAWL_LEARN_BOILERPLATE": False,
        "RECRAWL_KEEP_PREVIOUS": False,  # its side write would hold the response instead
        "RECRAWL_CHANGE_SIGNAL": "items",
    }
    crawl = Crawl(settings, wall)
    for i in range(10):
        crawl.fetched(i)
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)  # a guard against the hang only: the loop takes well under a second
    try:
        for version in range(2, 40):
            for i in range(10):
                crawl.fetched(i, version)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    observations = crawl.mw.recorder.observations
    assert observations is not None and len(observations) <= 5
    assert crawl.mw.store.buffered_visits <= 10 and observations.lost > 0
    lost = observations.lost
    crawl.close()
    assert crawl.stat("visits_lost") >= lost


def test_a_held_response_stores_its_request_as_the_spider_made_it(redis_aof):
    """Recorded after the response was received (its note of what the request held as it
    left the scheduler dropped then): the spider's own User-Agent and proxy are stored,
    as for a response recorded at once (stored_request.py)."""
    from scrapy_recrawl.stored_request import StoredRequests

    wall = [3_000_000.0]
    crawl = Crawl(_settings(redis_aof, flush_every=10), wall)
    keeper = StoredRequests()
    url = "http://site.test/own"
    try:
        redis_aof.stop()
        request = scrapy.Request(
            url, headers={"User-Agent": "Mine/1"}, meta={"proxy": "http://p:1"}
        )
        keeper.mark(request)  # as the scheduler hands it out
        response = HtmlResponse(url, body=_page(9), request=request)
        assert crawl.mw.process_response(request, response) is response
        assert len(crawl.mw.held) == 1
        keeper.forget(response=response, request=request)  # response_received
        redis_aof.start()
        for _ in range(3):
            crawl.tick()
            if not crawl.mw.held:
                break
        assert crawl.stat("visits_recorded_late") == 1
    finally:
        crawl.close()
    with RedisHistoryStore(redis_aof.url, key=KEY) as store:
        ids = store.arrays().ids
        (stored,) = store.requests(ids)
    assert stored is not None
    assert stored["headers"] == {b"User-Agent": [b"Mine/1"]}
    assert stored["meta"] == {"proxy": "http://p:1"}
