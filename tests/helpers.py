"""Test helpers: a real local HTTP server whose pages the test edits, a real
``scrapy crawl`` of it in a subprocess (Twisted's reactor cannot restart in-process),
and a store's per-URL arrays built by hand (:func:`history_arrays`)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from scrapy_recrawl.core.simulate import new_state
from scrapy_recrawl.history import HistoryArrays

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Page:
    body: bytes
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    etag: str | None = None
    last_modified: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    gzip: bool = False


def topic_page(i: int, version: int) -> Page:
    """Page ``i`` of a LocalSite at ``version``: its text and ETag change with it."""
    text = f"Page {i} says something about topic {i}, version {version}, in enough words."
    return Page(f"<html><body><p>{text}</p></body></html>".encode(), etag=f'"{i}-{version}"')


def index_page(n: int) -> Page:
    """The index linking ``/p0`` .. ``/p{n-1}``."""
    links = "".join(f'<a href="/p{j}">p{j}</a>' for j in range(n))
    return Page(f"<html><body>{links}</body></html>".encode())


class LocalSite:
    """Pages served from a dict the test edits between crawls; every request is logged."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.log: list[dict] = []
        #: an ``Authorization`` value every request must carry (401 otherwise)
        self.auth: str | None = None
        #: path -> an event its answer waits for (logged on arrival, answered once set)
        self.gates: dict[str, threading.Event] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:
                page = site.pages.get(self.path)
                inm = self.headers.get("If-None-Match")
                ims = self.headers.get("If-Modified-Since")
                site.log.append(
                    {
                        "path": self.path,
                        "if_none_match": inm,
                        "if_modified_since": ims,
                        "time": time.time(),  # when it was asked for (wall clock)
                        # every header as received, names in lower case
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                )
                gate = site.gates.get(self.path)
                if gate is not None:
                    gate.wait(60)
                if site.auth is not None and self.headers.get("Authorization") != site.auth:
                    self._send(
                        401, {"WWW-Authenticate": 'Basic realm="test"'}, b"authenticate first"
                    )
                    return
                if page is None:
                    self._send(404, {"Content-Type": "text/plain"}, b"not found")
                    return
                headers = {"Content-Type": page.content_type, **page.headers}
                if page.etag:
                    headers["ETag"] = page.etag
                if page.last_modified:
                    headers["Last-Modified"] = page.last_modified
                if page.status == 200 and (
                    (inm and page.etag and inm == page.etag)
                    or (not inm and ims and page.last_modified and ims == page.last_modified)
                ):
                    self._send(304, {k: v for k, v in headers.items() if k != "Content-Type"}, b"")
                    return
                body = page.body
                if page.gzip:
                    body = gzip.compress(body)
                    headers["Content-Encoding"] = "gzip"
                self._send(page.status, headers, body)

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LocalSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def requests_for(self, path: str) -> list[dict]:
        return [r for r in self.log if r["path"] == path]


SPIDER_SCRIPT = Path(__file__).with_name("crawl_spider.py")


def run_crawl(
    urls: list[str],
    settings: dict,
    cwd: Path,
    timeout: float = 120,
    probe_clock_ahead: float = 0.0,
    follow: bool = False,
    start_dont_filter: bool = False,
    start_after_first_parsed: bool = False,
    headers: dict[str, str] | None = None,
    spider_args: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    meta: dict | None = None,
) -> dict:
    """Crawl ``urls`` once with ``settings`` in a fresh process; returns items and stats.

    ``probe_clock_ahead``: the loop-time probes' clock runs that many seconds ahead of
    the wall clock in this crawl (time injected: a probe due later is due now).
    ``follow``: also follow every link of every page (same callback and meta).
    ``start_dont_filter``: start requests with ``dont_filter=True``, as Scrapy's
    default ``Spider.start()`` makes them from ``start_urls``.
    ``start_after_first_parsed``: the start requests after the first wait until the
    first response was parsed (its links enqueued first).
    ``headers``: the start requests' own headers; ``spider_args``: the spider's
    arguments (``scrapy crawl -a``: its attributes); ``env``: environment variables
    added to the crawl's; ``meta``: more meta of the start requests.
    """
    args = json.dumps(
        {
            "urls": urls,
            "probe_clock_ahead": probe_clock_ahead,
            "settings": settings,
            "follow": follow,
            "start_dont_filter": start_dont_filter,
            "start_after_first_parsed": start_after_first_parsed,
            "headers": headers or {},
            "spider_args": spider_args or {},
            "meta": meta or {},
        }
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    out = subprocess.run(
        [sys.executable, str(SPIDER_SCRIPT), args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise AssertionError(f"crawl failed ({out.returncode}):\n{out.stderr[-4000:]}")
    result = json.loads(out.stdout)
    result["log"] = out.stderr
    return result


def history_arrays(n, X, last, gone=None, cycle=10, **extra):
    """A store's HistoryArrays for URLs 1..len(n): the change counts ``n`` and ``X``,
    the last visit's cycle, ``gone`` (none by default), no content measures, and the
    ``extra`` columns as given."""
    size = len(n)
    cols = new_state(size)  # the columns the store hands over (core/simulate.py)
    cols["n"][:], cols["X"][:], cols["last_visit_cycle"][:] = n, X, last
    cols["gone"] = np.zeros(size, dtype=bool) if gone is None else np.asarray(gone, dtype=bool)
    cols.update(extra)
    return HistoryArrays(ids=np.arange(1, size + 1), columns=cols, cycle=cycle)


def offline_scheduler(settings: dict, *, clock=None):
    """A RecrawlScheduler built and opened without a crawl: Scrapy's real downloader
    behind a stand-in engine (what quiet() and the recrawl queue look at), nothing
    downloaded; ``clock`` (a ``task.Clock``) is set before it opens."""
    from types import SimpleNamespace

    from scrapy import Spider
    from scrapy.core.downloader import Downloader
    from scrapy.utils.test import get_crawler

    from scrapy_recrawl.scheduler import RecrawlScheduler

    class _Spider(Spider):
        name = "t"

    crawler = get_crawler(
        _Spider,
        {
            # Scrapy's default queue asks the engine's downloader for slots when built
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
            **settings,
        },
    )
    crawler.engine = SimpleNamespace(
        downloader=Downloader(crawler), _slot=None, scraper=None, _start=None
    )
    scheduler = RecrawlScheduler.from_crawler(crawler)
    if clock is not None:
        scheduler.clock = clock
        scheduler.frontier.monotonic = clock.seconds  # the cycle's length in its summary
    spider = _Spider.from_crawler(crawler)
    crawler.spider = spider
    scheduler.open(spider)
    return scheduler


def store_of_pages(path: str, pages: int, **visit) -> None:
    """A SQLite store at ``path`` of the spider ``t`` (offline_scheduler's) that knows
    ``http://example.com/p0`` ... ``p{pages - 1}``, each visited once at time 1.0 with
    a 200; ``visit``: more of each Visit's fields, as functions of the page's number."""
    from scrapy import Request
    from scrapy.utils.request import RequestFingerprinter

    from scrapy_recrawl.history import SqliteHistoryStore, Visit

    fingerprint = RequestFingerprinter().fingerprint
    with SqliteHistoryStore(path) as store:
        store.claim("t")
        for i in range(pages):
            url = f"http://example.com/p{i}"
            more = {name: make(i) for name, make in visit.items()}
            store.record(Visit(fingerprint(Request(url)), url, 1.0, 200, **more))
