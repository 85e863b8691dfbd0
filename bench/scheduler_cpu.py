"""What the recrawl scheduler costs per response, in CPU, without a crawl around it.

    .venv/bin/python bench/scheduler_cpu.py [--pages 5000] [--links 5] [--repeat 3]

bench/crawl_overhead.py measures the whole crawl, whose CPU per response moves by more
than the scheduler's whole cost with the machine's load. This one drives a scheduler
in one process as the engine does over a site of ``--pages`` pages, each linking to
``--links`` pages picked at random (seeded): the start request enqueued, then each
request handed out (``next_request``) yields its page's links, each enqueued
(``enqueue_request``), until nothing is left. Three schedulers, on the same links:

* Scrapy's own ``Scheduler`` (the baseline: what a crawl without the add-on pays);
* ``RecrawlScheduler``, cycle 1: a fresh SQLite store (a warm-up cycle, every page new);
* ``RecrawlScheduler``, cycle 2: the store knows every page fetched in cycle 1 (recorded
  with its request, as the middleware records it): every page a recrawl, every link a
  duplicate.

Each figure is the fastest of ``--repeat`` runs, CPU µs per request handed out, the
scheduler's ``open()`` (the cycle planned, its recrawls rebuilt and queued) and
``close()`` included; beside it, the ``open()`` part. No download, no spider callback,
no middleware: the scheduler alone.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "example_project")]

from recrawl_demo.spiders.site import SiteSpider  # noqa: E402
from scrapy import Request  # noqa: E402
from scrapy.core.downloader import Downloader  # noqa: E402
from scrapy.core.scheduler import Scheduler  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from scrapy_recrawl.history import Visit  # noqa: E402
from scrapy_recrawl.history.sqlite import SqliteHistoryStore  # noqa: E402
from scrapy_recrawl.runtime import release_store  # noqa: E402
from scrapy_recrawl.scheduler import RecrawlScheduler  # noqa: E402
from scrapy_recrawl.stored_request import StoredRequests  # noqa: E402

BASE = "http://127.0.0.1:9"


def links(pages: int, per_page: int) -> list[list[int]]:
    rng = random.Random(1)
    return [[rng.randrange(pages) for _ in range(per_page)] for _ in range(pages)]


def crawl(cls: Any, store: str | None, graph: list[list[int]]) -> tuple[float, float, list]:
    """(CPU seconds in all, of which open(), the requests handed out) of one crawl."""
    settings: dict[str, Any] = {"LOG_LEVEL": "CRITICAL"}
    if store is not None:
        settings.update({"RECRAWL_STORE": store, "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100}})
    crawler = get_crawler(SiteSpider, settings)
    spider = crawler._create_spider(start_url=f"{BASE}/")
    crawler.spider = spider
    # the downloader's slots (RecrawlQueue asks them), no engine running
    engine = SimpleNamespace(downloader=Downloader(crawler), _slot=None, scraper=None, spider=None)
    crawler.engine = engine

    def request(page: int, **meta: Any) -> Request:
        return Request(
            f"{BASE}/page/{page}.html",
            callback=spider._callback,
            errback=spider._errback,
            cb_kwargs={"rule_index": 1},
            meta={"rule": 1, "depth": 2, **meta},
            dont_filter="is_start_request" in meta,
        )

    scheduler = cls.from_crawler(crawler)
    gc.collect()
    start = time.process_time()
    scheduler.open(spider)
    opened = time.process_time() - start
    scheduler.enqueue_request(request(0, is_start_request=True))
    handed: list[Request] = []
    for r in iter(scheduler.next_request, None):
        handed.append(r)
        for page in graph[int(r.url.rsplit("/", 1)[1].split(".")[0])]:
            scheduler.enqueue_request(request(page, link_text="p"))
    scheduler.close("finished")
    spent = time.process_time() - start
    if store is not None:
        release_store(crawler)
    return spent, opened, handed


def record(store: str, handed: list[Request]) -> None:
    """Cycle 1's pages into the store, as the middleware records them."""
    s = SqliteHistoryStore(store)
    s.open()
    kept = StoredRequests()
    crawler = get_crawler(SiteSpider)
    spider = handed[0].callback.__self__  # type: ignore[union-attr]
    for r in handed:
        d = kept.stored(r.to_dict(spider=spider), r, downloaded=True)
        fp = crawler.request_fingerprinter.fingerprint(r)
        s.record(Visit(fp, r.url, time.time(), 200, None, request=d))
    s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--links", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # Downloader(crawler) says what it cannot load
    graph = links(args.pages, args.links)
    runs: dict[str, list[tuple[float, float, int]]] = {
        "Scrapy's Scheduler": [],
        "RecrawlScheduler, cycle 1": [],
        "RecrawlScheduler, cycle 2": [],
    }
    for _ in range(args.repeat):
        spent, opened, handed = crawl(Scheduler, None, graph)
        runs["Scrapy's Scheduler"].append((spent, opened, len(handed)))
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "history.sqlite3")
            spent, opened, handed = crawl(RecrawlScheduler, store, graph)
            runs["RecrawlScheduler, cycle 1"].append((spent, opened, len(handed)))
            record(store, handed)
            spent, opened, handed = crawl(RecrawlScheduler, store, graph)
            runs["RecrawlScheduler, cycle 2"].append((spent, opened, len(handed)))
    print(f"{args.pages:,} pages, {args.links} links each, fastest of {args.repeat}\n")
    print("| scheduler, in process | requests | CPU µs per request | of which open() |")
    print("|---|---:|---:|---:|")
    for name, results in runs.items():
        spent, opened, n = min(results)
        print(f"| {name} | {n:,} | {spent / n * 1e6:.0f} | {opened / n * 1e6:.0f} |")


if __name__ == "__main__":
    main()
