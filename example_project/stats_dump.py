"""A small extension the demo uses: write the crawl's stats to STATS_DUMP_FILE as JSON."""

from __future__ import annotations

import json

from scrapy import signals


class StatsDump:
    def __init__(self, crawler, path: str) -> None:
        self.crawler = crawler
        self.path = path

    @classmethod
    def from_crawler(cls, crawler):
        ext = cls(crawler, crawler.settings.get("STATS_DUMP_FILE"))
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self, spider, reason) -> None:
        if self.path:
            stats = {
                k: v
                for k, v in self.crawler.stats.get_stats().items()
                if isinstance(v, (int, float, str))
            }
            with open(self.path, "w", encoding="utf-8") as fh:
                json.dump(stats, fh)
