"""``RECRAWL_CHANGE_FEED``: one record per new, changed or removed item, through Scrapy's
feed exports.

Why Scrapy's feed exports: every storage Scrapy supports (local files, S3, GCS, FTP,
stdout, a storage of the project's own in ``FEED_STORAGES``), its URI parameters
(``%(name)s``, ``%(time)s``), batches and post-processing work for the change feed too.

How: a second instance of Scrapy's ``FeedExporter`` with the one feed the setting names
(:class:`ChangeFeedExporter`), which the spider middleware hands each
:class:`ItemChangeRecord` directly. The records never enter the item pipelines, the
``item_scraped`` signal or ``item_scraped_count`` (a user's pipelines and ``FEEDS`` see
only the spider's items), unlike a record yielded as an item and filtered by ``FEEDS``'
``item_classes``, which every pipeline would see first. The setting is a URI
(JSON Lines) or a dict of ``FEEDS``' shape (``{uri: {"format": ..., ...}}``; the format
defaults to ``jsonlines``).
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.extensions.feedexport import FeedExporter
from scrapy.http import Response

from .core.meta import META_CYCLE
from .item_change import ItemChange
from .settings import RecrawlSettingError, get


@dataclass
class ItemChangeRecord:
    """One line of the change feed."""

    url: str
    cycle: int | None
    time: str  # ISO 8601, UTC (the crawl's wall clock: the shared store's on Redis)
    key: str
    status: str  # new, changed or removed
    fields: list[str] = field(default_factory=list)
    #: field -> {"old": ..., "new": ...}, where the values were kept (RECRAWL_ITEM_VALUES)
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)


def record_of(response: Response, change: ItemChange, wall: float) -> ItemChangeRecord:
    diffs = {
        name: {"old": change.old.get(name), "new": change.new.get(name)}
        for name in change.fields
        if name in change.old or name in change.new
    }
    when = datetime.datetime.fromtimestamp(wall, datetime.timezone.utc)
    return ItemChangeRecord(
        url=response.url,
        cycle=response.meta.get(META_CYCLE),
        time=when.isoformat(timespec="seconds"),
        key=change.key,
        status=change.status,
        fields=list(change.fields),
        changes=diffs,
    )


def feeds_of(value: Any) -> dict[str, dict[str, Any]]:
    """``RECRAWL_CHANGE_FEED`` as ``FEEDS``' shape (module docstring)."""
    if isinstance(value, str):
        return {value: {"format": "jsonlines"}}
    out: dict[str, dict[str, Any]] = {}
    for uri, options in dict(value).items():
        if not isinstance(options, dict):
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_FEED={value!r}: each feed's options must be a dict, as in FEEDS"
            )
        out[str(uri)] = {"format": "jsonlines", **options}
    return out


def check_change_feed(settings: Any) -> None:
    """Refuse, at start-up, a ``RECRAWL_CHANGE_FEED`` whose storage (URI scheme) or
    format Scrapy has no component for (``FEED_STORAGES``, ``FEED_EXPORTERS``)."""
    value = get(settings, "RECRAWL_CHANGE_FEED")
    if not value or not hasattr(settings, "getwithbase"):
        return
    storages = settings.getwithbase("FEED_STORAGES")
    exporters = settings.getwithbase("FEED_EXPORTERS")
    for uri, options in feeds_of(value).items():
        scheme = urlsplit(uri).scheme
        if len(scheme) <= 1:
            scheme = "file"  # a plain path (or a Windows drive letter), as Scrapy reads it
        if scheme not in storages:
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_FEED={value!r}: no feed storage for {scheme!r} URIs "
                f"(FEED_STORAGES has {', '.join(sorted(storages))})"
            )
        if options["format"] not in exporters:
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_FEED={value!r}: no feed exporter for the format "
                f"{options['format']!r} (FEED_EXPORTERS)"
            )


class ChangeFeedExporter(FeedExporter):
    """Scrapy's FeedExporter over the change feed only (module docstring); records are
    given to :meth:`export`, not taken from the ``item_scraped`` signal."""

    def __init__(self, crawler: Any, feeds: dict[str, dict[str, Any]]) -> None:
        own = crawler.settings.copy()
        own.frozen = False  # a copy of the crawl's settings, for this exporter alone
        own.set("FEEDS", feeds, priority="cmdline")
        own.set("FEED_URI", None, priority="cmdline")
        # the same crawler with its own feed settings: FeedExporter reads both from it
        shim = copy.copy(crawler)
        shim.settings = own
        try:
            super().__init__(shim)
        except NotConfigured:
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_FEED={feeds!r}: no feed storage or exporter for it "
                "(FEED_STORAGES, FEED_EXPORTERS)"
            ) from None

    @classmethod
    def from_settings_of(cls, crawler: Any) -> ChangeFeedExporter | None:
        value = get(crawler.settings, "RECRAWL_CHANGE_FEED")
        if not value:
            return None
        exporter = cls(crawler, feeds_of(value))
        crawler.signals.connect(exporter.open_spider, signals.spider_opened)
        crawler.signals.connect(exporter.close_spider, signals.spider_closed)
        return exporter

    def export(self, response: Response, change: ItemChange, wall: float) -> None:
        spider = getattr(self.crawler, "spider", None)
        self.item_scraped(record_of(response, change, wall), spider)  # type: ignore[arg-type]
