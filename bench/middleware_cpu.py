"""What the recording middleware costs per response, in CPU, without a crawl around it.

    .venv/bin/python bench/middleware_cpu.py [--pages 1000] [--repeat 3]

bench/crawl_overhead.py measures the whole crawl, whose wall rate moves by 10% and more
with the machine's load. This one runs the middleware's two hooks (``process_request``,
``process_response``) in one process over the example site's pages, as a crawl of the
``site`` spider hands them (the request noted as it leaves the scheduler, its fingerprint
made, as the dupefilter makes it), and times them in CPU seconds:

* cycle 1: a fresh SQLite store, every page a first fetch (a 200 recorded with its body);
* cycle 2: the same store again, each request rebuilt from the URL's stored request
  (as the scheduler rebuilds a recrawl), every page answering 304 to the conditional
  request (the kept copy handed to the spider).

Each cycle's figure is the fastest of ``--repeat`` runs; beside it, the part spent in
the history store's own calls (get, knows, body, record, flush; nested calls counted
once). The boilerplate pairs a first fetch asks for are not fetched (no engine).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from email.utils import format_datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "example_project")]

from recrawl_demo.spiders.site import SiteSpider  # noqa: E402
from scrapy import Request  # noqa: E402
from scrapy.http import HtmlResponse, Response  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from example_project.site import SiteModel, _noise  # noqa: E402
from scrapy_recrawl.history.sqlite import SqliteHistoryStore  # noqa: E402
from scrapy_recrawl.middleware import RecrawlMiddleware  # noqa: E402
from scrapy_recrawl.runtime import release_store  # noqa: E402
from scrapy_recrawl.stored_request import StoredRequests  # noqa: E402

BASE = "http://127.0.0.1:9"
STORE_CALLS = ("get", "knows", "body", "record", "flush")


class StoreClock:
    """CPU seconds spent in the store's own calls (an outer call only: record's get is
    record's)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    def wrap(self, cls: type, name: str) -> None:
        inner = getattr(cls, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return inner(*args, **kwargs)
            self._depth += 1
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start
                self._depth -= 1

        setattr(cls, name, timed)


def pages(n: int) -> list[tuple[str, bytes, dict[str, str]]]:
    """The site's first ``n`` pages as it serves them (body with its noise, headers)."""
    model = SiteModel(pages=n, seed=1)
    out = []
    for i in range(n):
        r = model.render_page(i, 0)
        script, ad = _noise()
        headers = {
            "ETag": r.etag,
            "Last-Modified": format_datetime(r.last_modified, usegmt=True),
            "Cache-Control": "no-cache",
            "X-Sim-Day": "0",
            "Content-Type": "text/html; charset=utf-8",
            "Date": "Mon, 01 Jan 2024 12:00:00 GMT",
            "Server": "BaseHTTP/0.6 Python/3.11",
        }
        out.append((f"{BASE}/page/{i}.html", r.head + script + r.middle + ad + r.tail, headers))
    return out


def cycle(
    store: str, site: list[tuple[str, bytes, dict[str, str]]], second: bool, clock: StoreClock
) -> tuple[float, float]:
    """(CPU µs per response in the two hooks, of which in the store) for one cycle."""
    settings = {
        "RECRAWL_STORE": store,
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "LOG_LEVEL": "CRITICAL",
        "RECRAWL_SCORER": "gp4c",
        "RECRAWL_BUDGET": "5%",
    }
    crawler = get_crawler(SiteSpider, settings)
    spider = crawler._create_spider(start_url=f"{BASE}/")
    crawler.spider = spider
    crawler.engine = type("NoEngine", (), {"spider": None})()  # no boilerplate pair fetched
    middleware = RecrawlMiddleware.from_crawler(crawler)
    as_made = StoredRequests.from_settings(crawler.settings)
    work: list[tuple[Request, Response]] = []
    made = [
        Request(
            url,
            callback=spider._callback,
            errback=spider._errback,
            cb_kwargs={"rule_index": 1},
            meta={"rule": 1, "link_text": "page", "depth": 2},
        )
        for url, _, _ in site
    ]
    if second:
        # a recrawl is rebuilt from its URL's stored request, as the scheduler does it
        store = middleware.store
        fps = [crawler.request_fingerprinter.fingerprint(r) for r in made]
        ids = [store.get(fp, signature=False).id for fp in fps]  # type: ignore[union-attr]
        made = [as_made.rebuild(d, spider) for d in store.requests(ids)]  # type: ignore[arg-type]
        store._forget_clean()  # type: ignore[attr-defined]  # the records read above: cold
    for request, (url, body, headers) in zip(made, site, strict=True):
        as_made.mark(request)  # as the scheduler hands it out
        crawler.request_fingerprinter.fingerprint(request)  # as the dupefilter made it
        if second:
            bare = {k: v for k, v in headers.items() if k != "Content-Type"}
            response: Response = Response(url, status=304, headers=bare, request=request)
        else:
            response = HtmlResponse(url, status=200, headers=headers, body=body, request=request)
        work.append((request, response))
    gc.collect()
    clock.seconds = 0.0
    start = time.process_time()
    for request, response in work:
        middleware.process_request(request, spider)
        middleware.process_response(request, response, spider)
    middleware.store.flush()
    spent = time.process_time() - start
    release_store(crawler)
    n = len(work)
    return spent / n * 1e6, clock.seconds / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    clock = StoreClock()
    for name in STORE_CALLS:
        clock.wrap(SqliteHistoryStore, name)
    site = pages(args.pages)
    runs: dict[str, list[tuple[float, float]]] = {"cycle 1": [], "cycle 2": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "history.sqlite3")
            runs["cycle 1"].append(cycle(store, site, False, clock))
            runs["cycle 2"].append(cycle(store, site, True, clock))
    print(f"{args.pages:,} pages, fastest of {args.repeat}, {sys.executable}\n")
    print("| middleware, in process | CPU µs per response | of which the store |")
    print("|---|---:|---:|")
    for name, results in runs.items():
        total, in_store = min(results)
        print(f"| {name} | {total:.0f} | {in_store:.0f} |")


if __name__ == "__main__":
    main()
