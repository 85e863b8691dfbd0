"""The flush bound holds when the crawl goes quiet (issue 16, item 4; issue 19 for Redis,
whose visits are buffered too since schema version 5).

A real crawl process records visits into a real SQLite store or a real Redis (batched
writes, both); the
site answers a burst, then a trickle, then nothing (one response that never comes).
While it runs, the test reads the store from outside every 0.1 s and measures, per
page, how long after the server answered it the visit was on disk: that delay is
what a SIGKILL at the worst moment would lose. After 10 quiet seconds the crawl is
SIGKILLed and every page the server answered must be in the store.
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

from scrapy_recrawl.history.redis import RedisHistoryStore

from .helpers import REPO, SPIDER_SCRIPT
from .redis_server import RedisServer

pytestmark = pytest.mark.slow

FLUSH_SECONDS = 2.0
BURST = 20
# answer delays, ms: a trickle, a 3 s gap (the visit after it makes the store flush as it
# records it, whatever came before), then one more a second later: without a timer that
# last visit would wait in the buffer for a visit that never comes
TRICKLE = [500, 1000, 1500, 2000, 2500, 3000, 6000, 7000]


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


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_sigkill_after_10_quiet_seconds_loses_no_visit_older_than_the_flush_bound(
    tmp_path, backend
):
    if backend == "redis":
        with RedisServer() as server:
            _sigkill_after_quiet(tmp_path, server.url, lambda: _stored_in_redis(server.url, KEY))
    else:
        path = tmp_path / "history.sqlite3"
        _sigkill_after_quiet(tmp_path, str(path), lambda: _stored_urls(path))


KEY = "idle:history"


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
    on_disk: dict[str, float] = {}  # url -> when the test first saw its visit in the store
    try:
        deadline = time.time() + 120
        last_answer = None
        while time.time() < deadline:
            now = time.time()
            for url in stored_urls():
                on_disk.setdefault(url, now)
            if last_answer is None and all(p in site.served for p in paths):
                last_answer = max(site.served.values())
            if last_answer is not None and now - last_answer >= 10:
                break  # 10 quiet seconds: only /slow is still out
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
    # nothing older than the bound is lost (all of it is 10 s old or more)
    assert not {u: age for u, age in lost.items() if age > FLUSH_SECONDS}, lost
    assert set(served) == stored and site.url + "/slow" not in stored
    # the window a SIGKILL at the worst moment would have lost: answer -> on disk
    delays = {u: on_disk[u] - t for u, t in served.items()}
    worst = max(delays.values())
    print(f"\nloss window: worst answer-to-disk delay {worst:.2f}s (bound {FLUSH_SECONDS}s)")
    # the bound, plus the 0.1 s poll of this test and a loaded machine's scheduling
    assert worst <= FLUSH_SECONDS + 0.5, sorted(delays.items(), key=lambda kv: -kv[1])[:5]
