"""The flush bound holds when the crawl goes quiet (issue 16, item 4; issue 19 for Redis,
whose visits are buffered too since schema version 5).

The bound itself on injected time (issue 28): the store's own timer (a visit recorded
``RECRAWL_FLUSH_SECONDS`` after the last flush writes the buffer) and the middleware's
idle timer (every half bound, visits or not), each on a clock the test moves, to the
hundredth of a second and at no wall-clock cost.

Then one real crawl process per backend records visits into a real SQLite store or a
real Redis (batched writes, both); the site answers a burst, then a trickle, then
nothing (one response that never comes). A few quiet seconds after the last answer
(more than the bound) the crawl is SIGKILLed and every page the server answered must
be in the store: the idle timer is wired into a real crawl, and nothing older than the
bound is lost.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import scrapy
from scrapy import signals
from scrapy.utils.test import get_crawler
from twisted.internet.task import Clock

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.base import Visit
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.middleware import RecrawlMiddleware

from .helpers import REPO, SPIDER_SCRIPT
from .redis_server import RedisServer

FLUSH_SECONDS = 2.0
BURST = 20
# answer delays, ms: a trickle after the burst; without the idle timer its visits would
# wait in the buffer for a visit that never comes (the store flushes as it records a
# visit only once the bound has passed since its last flush)
TRICKLE = [500, 1000, 1500]
# quiet seconds before the SIGKILL: the bound, and as much again for a loaded machine's
# scheduling of the crawl process (the bound itself is tested exactly, on injected time)
QUIET = 2 * FLUSH_SECONDS
KEY = "idle:history"


# -- the bound, on injected time -------------------------------------------------------


class FakeMonotonic:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fp(i: int) -> bytes:
    return i.to_bytes(4, "big") * 5


def _visit(i: int) -> Visit:
    return Visit(_fp(i), f"http://h/{i}", float(i), 200)


def _open_store(backend: str, tmp_path, request, **options):  # noqa: ANN001, ANN202
    """An open store of ``backend`` and a function giving the URLs stored, as another
    process reading the store sees them."""
    if backend == "sqlite":
        path = tmp_path / "history.sqlite3"
        store = SqliteHistoryStore(path, **options)
        store.open()
        return store, lambda: _stored_urls(path)
    server = request.getfixturevalue("redis_db")
    store = RedisHistoryStore(server.url, key=KEY, **options)
    store.open()
    return store, lambda: _visited_in_redis(server.url)


def _visited_in_redis(url: str) -> set[str]:
    """The URLs ``_visit()`` made (ids 0-9) with a visit in the Redis store, read by
    another client."""
    store = RedisHistoryStore(url, key=KEY)
    store.open()
    try:
        return {rec.url for i in range(10) if (rec := store.get(_fp(i))) is not None}
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_visit_recorded_once_the_bound_has_passed_flushes_the_buffer(backend, tmp_path, request):
    clock = FakeMonotonic()
    store, stored = _open_store(
        backend, tmp_path, request, flush_every=10_000, flush_seconds=10.0, monotonic=clock
    )
    try:
        store.claim("s")
        store.record(_visit(0))
        store.flush()  # the timer starts now
        store.record(_visit(1))
        clock.now += 9.99  # just inside the bound: buffered
        store.record(_visit(2))
        assert stored() == {"http://h/0"}
        clock.now += 0.01  # the bound since the last flush: this visit writes them all
        store.record(_visit(3))
        assert _eventually(stored) == {f"http://h/{i}" for i in range(4)}
        clock.now += 9.99  # the timer restarted at that flush
        store.record(_visit(4))
        assert "http://h/4" not in stored()
    finally:
        store.close()
    assert "http://h/4" in stored()  # close() writes what is left


def _eventually(stored) -> set[str]:  # noqa: ANN001
    """What ``stored()`` gives once a write sent is done: at once on SQLite (written as
    recorded); on Redis, the batch record() sent without waiting for its answer is run
    by the server a moment later (not a bound under test: 10 s for a loaded machine)."""
    deadline = time.monotonic() + 10
    while len(found := stored()) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


class _Spider(scrapy.Spider):
    name = "s"


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_the_idle_timer_writes_a_quiet_crawls_visits_within_the_bound(backend, tmp_path, request):
    """No visit after the last: the middleware's timer (every half bound) writes it, at
    most a bound after it was recorded. The store's own record-time timer never fires
    here: the bound (600 s) is far longer than the test takes, and the clock of the
    middleware's timer moves at the test's word."""
    bound = 600.0
    settings = {"RECRAWL_FLUSH_SECONDS": bound, "RECRAWL_FLUSH_EVERY": 10_000}
    if backend == "sqlite":
        path = tmp_path / "history.sqlite3"
        settings["RECRAWL_STORE"] = str(path)

        def stored() -> set[str]:
            return _stored_urls(path)
    else:
        server = request.getfixturevalue("redis_db")
        settings |= {"RECRAWL_STORE": server.url, "RECRAWL_REDIS_KEY": KEY}

        def stored() -> set[str]:
            return _visited_in_redis(server.url)

    crawler = get_crawler(_Spider, settings)
    spider = _Spider.from_crawler(crawler)
    crawler.spider = spider  # a crawl (scope.off_reason), not `scrapy shell`
    mw = RecrawlMiddleware.from_crawler(crawler)
    clock = Clock()
    mw.clock = clock
    crawler.signals.send_catch_log(signals.spider_opened, spider=spider)  # starts the timer
    try:
        mw.store.claim("s")
        # a visit recorded right after a tick, in the middle and right before the next:
        # each on disk at the next tick, never later than the bound after it
        for i, offset in enumerate([0.0, 0.01, bound / 4, bound / 2 - 0.01], start=1):
            tick = clock.seconds() + bound / 2 - (clock.seconds() % (bound / 2))
            clock.advance(offset)
            mw.store.record(_visit(i))
            recorded = clock.seconds()
            clock.advance(tick - recorded - 0.01)
            assert f"http://h/{i}" not in stored(), offset  # buffered until the tick
            clock.advance(0.01)
            assert f"http://h/{i}" in stored(), offset
            assert clock.seconds() - recorded <= bound
        assert len(clock.getDelayedCalls()) == 1  # the one timer, and nothing else
    finally:
        crawler.signals.send_catch_log(signals.spider_closed, spider=spider, reason="done")
        mw.store.close()
    assert clock.getDelayedCalls() == []  # stopped with the spider


# -- a real crawl, SIGKILLed once quiet ----------------------------------------------


class QuietSite:
    """/fast/i answers at once, /t/ms after ms milliseconds, /slow never (in a test's time).
    ``served[path]`` is the wall time each answer was written."""

    def __init__(self) -> None:
        self.served: dict[str, float] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/slow":
                    time.sleep(300)
                elif self.path.startswith("/t/"):
                    time.sleep(int(self.path.rsplit("/", 1)[1]) / 1000)
                body = f"<html><body><p>page {self.path} has a few words</p></body></html>"
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                site.served[self.path] = time.time()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _stored_urls(path) -> set[str]:
    try:
        db = sqlite3.connect(path, timeout=1)
        try:
            rows = db.execute(
                "SELECT u.url FROM visits v JOIN urls u ON u.id = v.url_id"
            ).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return set()  # not created yet
    return {r[0] for r in rows}


def _stored_in_redis(url: str, key: str) -> set[str]:
    """The URLs with a visit in the Redis store, read by another process (this one)."""
    store = RedisHistoryStore(url, key=key)
    try:
        store.open()
        ids = sorted(set(store.visit_log()["url_id"].tolist()))
        return set(store.urls(ids)) if ids else set()
    except Exception:  # not created yet
        return set()
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_sigkill_once_quiet_loses_no_visit_older_than_the_flush_bound(tmp_path, backend):
    if backend == "redis":
        with RedisServer() as server:
            _sigkill_after_quiet(tmp_path, server.url, lambda: _stored_in_redis(server.url, KEY))
    else:
        path = tmp_path / "history.sqlite3"
        _sigkill_after_quiet(tmp_path, str(path), lambda: _stored_urls(path))


def _sigkill_after_quiet(tmp_path, store: str, stored_urls) -> None:  # noqa: ANN001
    site = QuietSite()
    paths = [f"/fast/{i}" for i in range(BURST)] + [f"/t/{ms}" for ms in TRICKLE]
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": store,
        "RECRAWL_REDIS_KEY": KEY,
        "RECRAWL_FLUSH_SECONDS": FLUSH_SECONDS,
        "RECRAWL_FLUSH_EVERY": 10_000,  # never by count here: only the time bound
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
        "DOWNLOAD_TIMEOUT": 600,
    }
    args = json.dumps({"urls": [site.url + p for p in [*paths, "/slow"]], "settings": settings})
    proc = subprocess.Popen(
        [sys.executable, str(SPIDER_SCRIPT), args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 120
        last_answer = None
        while time.time() < deadline:
            now = time.time()
            if last_answer is None and all(p in site.served for p in paths):
                last_answer = max(site.served.values())
            if last_answer is not None and now - last_answer >= QUIET:
                break  # quiet for longer than the bound: only /slow is still out
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            time.sleep(0.1)
        else:
            pytest.fail("the site was not crawled in time")
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.time()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        site.close()
    stored = stored_urls()
    served = {site.url + p: t for p, t in site.served.items()}
    lost = {u: killed - t for u, t in served.items() if u not in stored}
    # nothing older than the bound is lost (all of it is QUIET seconds old or more)
    assert not {u: age for u, age in lost.items() if age > FLUSH_SECONDS}, lost
    assert set(served) == stored and site.url + "/slow" not in stored
