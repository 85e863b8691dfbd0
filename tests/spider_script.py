"""What the tests' spider scripts (tests/crawl_spider.py, tests/evidence_spider.py)
share: crawl one spider in this process, as ``scrapy crawl`` would, and print its
items and stats as JSON on stdout (one process per crawl)."""

from __future__ import annotations

import json
import sys
from typing import Any

from scrapy.crawler import CrawlerProcess


def crawl_and_print(
    spider_cls: type, settings: dict[str, Any], items: list, **spider_args: Any
) -> None:
    """Crawl ``spider_cls`` with the tests' base settings and ``settings`` over them
    (``spider_args``: as ``scrapy crawl -a``); exit 1 (the traceback on stderr) when the
    crawler fails to start."""
    process = CrawlerProcess(
        {
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "RETRY_ENABLED": False,
            **settings,
        }
    )
    crawler = process.create_crawler(spider_cls)
    failures: list[str] = []
    process.crawl(crawler, **spider_args).addErrback(lambda f: failures.append(f.getTraceback()))
    process.start()
    if failures:  # as `scrapy crawl` does: a crawler that failed to start exits non-zero
        sys.stderr.write("\n".join(failures))
        sys.exit(1)
    stats = crawler.stats.get_stats()
    json.dump(
        {
            "items": items,
            "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))},
        },
        sys.stdout,
        default=str,
    )
