"""A test extension: each scraped item's change status, as a user's ``item_scraped``
handler reads it (``response.meta["recrawl_items"].status(item)``), one JSON line per
item in ``ITEM_STATUS_FILE`` (tests/test_items_signal.py)."""

from __future__ import annotations

import json

from scrapy import signals


class ItemStatusLog:
    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def from_crawler(cls, crawler):
        ext = cls(crawler.settings.get("ITEM_STATUS_FILE"))
        crawler.signals.connect(ext.scraped, signal=signals.item_scraped)
        return ext

    def scraped(self, item, response, spider) -> None:
        changes = response.meta.get("recrawl_items")
        change = None if changes is None else changes.status(item)
        line = {
            "url": response.url,
            "status": None if change is None else change.status,
            "fields": None if change is None else list(change.fields),
        }
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
