"""A Scrapy extension for bench/crawl_overhead.py: the crawl's own CPU, and where it goes.

Loaded into the crawl under measure (``EXTENSIONS``), it writes ``CRAWL_PROBE_FILE``
(JSON) when the process exits:

* ``cpu``: the process's CPU seconds from ``spider_opened`` to ``spider_closed``, the
  crawl alone: not the interpreter's start-up nor the imports, which the wall rate of
  bench/crawl_overhead.py does not count either;
* ``gc``: of those, the seconds Python's garbage collector ran (``gc.callbacks``);
* ``hooks``: with ``CRAWL_PROBE_HOOKS`` on, for each entry point of the add-on into
  Scrapy (the recording middleware's two hooks, the scheduler's two, the store's flush)
  and of Scrapy's own scheduler: calls and CPU seconds inside them, the collector's
  time left out (a collection falls wherever an allocation triggers it: on whichever
  code runs, it is not that code's cost). Each timed call pays about a microsecond of
  timing itself.

The in-process benches (bench/middleware_cpu.py, bench/scheduler_cpu.py) run one part
over and over with its code and data hot in the CPU's caches; in a crawl each response
passes through all of Scrapy between two calls of the middleware, and the same work
costs more. These figures are the crawl's.
"""

from __future__ import annotations

import atexit
import gc
import json
import time
from typing import Any

from scrapy import signals

#: (module, class, method, label): the entry points timed with CRAWL_PROBE_HOOKS
HOOKS = (
    ("scrapy.core.scheduler", "Scheduler", "enqueue_request", "Scrapy scheduler: enqueue"),
    ("scrapy.core.scheduler", "Scheduler", "next_request", "Scrapy scheduler: next"),
    ("scrapy_recrawl.scheduler", "RecrawlScheduler", "enqueue_request", "scheduler: enqueue"),
    ("scrapy_recrawl.scheduler", "RecrawlScheduler", "next_request", "scheduler: next"),
    ("scrapy_recrawl.middleware", "RecrawlMiddleware", "process_request", "middleware: request"),
    ("scrapy_recrawl.middleware", "RecrawlMiddleware", "process_response", "middleware: response"),
    ("scrapy_recrawl.history.sqlite_writer", "SqliteWriter", "flush", "store: flush"),
)


class CrawlProbe:
    def __init__(self, crawler: Any) -> None:
        self.path = crawler.settings.get("CRAWL_PROBE_FILE")
        self.crawler = crawler
        self.gc_seconds = 0.0
        self._gc_start = 0.0
        self.hooks: dict[str, list[float]] = {}
        self.opened = self.closed = 0.0
        self.gc_at_open = self.gc_at_close = 0.0
        gc.callbacks.append(self._gc)
        if crawler.settings.getbool("CRAWL_PROBE_HOOKS"):
            self._time_hooks()
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        atexit.register(self.write)

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawlProbe:
        return cls(crawler)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.process_time()
        else:
            self.gc_seconds += time.process_time() - self._gc_start

    def _time_hooks(self) -> None:
        import importlib

        for module, cls_name, name, label in HOOKS:
            cls = getattr(importlib.import_module(module), cls_name)
            original = cls.__dict__.get(name)
            if original is None:  # inherited: timed where it is defined
                continue
            setattr(cls, name, self._timed(original, label))

    def _timed(self, original: Any, label: str) -> Any:
        tally = self.hooks.setdefault(label, [0, 0.0])
        probe = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            start, gc_before = time.process_time(), probe.gc_seconds
            try:
                return original(*args, **kwargs)
            finally:
                tally[0] += 1
                tally[1] += time.process_time() - start - (probe.gc_seconds - gc_before)

        return timed

    def spider_opened(self, spider: Any) -> None:
        self.opened, self.gc_at_open = time.process_time(), self.gc_seconds

    def spider_closed(self, spider: Any, reason: str) -> None:
        self.closed, self.gc_at_close = time.process_time(), self.gc_seconds

    def write(self) -> None:
        if not self.path:
            return
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "cpu": self.closed - self.opened,
                    "gc": self.gc_at_close - self.gc_at_open,
                    "hooks": {k: {"calls": v[0], "cpu": v[1]} for k, v in self.hooks.items()},
                },
                fh,
            )
