"""Carry each sitemap entry's ``<lastmod>`` and ``<changefreq>`` into the request Scrapy's
``SitemapSpider`` makes for it.

``SitemapSpider`` parses both but hands them only to ``sitemap_filter()``; the requests
it then makes carry the URL alone. The mixin keeps what the entries said while one
sitemap is parsed and puts it in each request's meta (``recrawl_lastmod``,
``recrawl_changefreq``: core/meta.py), where the evidence plug-in reads it::

    from scrapy.spiders import SitemapSpider
    from scrapy_recrawl.evidence import SitemapEvidenceMixin

    class ShopSpider(SitemapEvidenceMixin, SitemapSpider):
        name = "shop"
        sitemap_urls = ["https://shop.example/sitemap.xml"]

A spider's own ``sitemap_filter()`` still decides which entries become requests (the
mixin records the entries it lets through), and a request whose meta already has a key
keeps the spider's value. The mixin also turns the evidence plug-in on for the spider
(``RECRAWL_EVIDENCE``, at the spider's priority, unless set already).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy import Request
from w3lib.url import safe_url_string

from ..core.meta import META_CHANGEFREQ, META_LASTMOD

#: what a sitemap entry says, as Scrapy's Sitemap parser names it -> the meta key
_FIELDS = (("lastmod", META_LASTMOD), ("changefreq", META_CHANGEFREQ))


class SitemapEvidenceMixin:
    """Put in front of ``SitemapSpider`` in the spider's bases (module docstring)."""

    #: SitemapSpider's (or the spider's own); declared for the type checker only
    sitemap_filter: Any

    @classmethod
    def update_settings(cls, settings: Any) -> None:
        super().update_settings(settings)  # type: ignore[misc]
        if settings.get("RECRAWL_EVIDENCE") is None:
            settings.set("RECRAWL_EVIDENCE", True, priority="spider")

    def _parse_sitemap(self, response: Any) -> Iterable[Request]:
        said: dict[str, dict[str, str]] = {}
        # whatever the spider's class defines
        spiders_filter = self.sitemap_filter

        def recording(entries: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
            for entry in spiders_filter(entries):
                fields = {key: entry[name] for name, key in _FIELDS if entry.get(name)}
                loc = entry.get("loc")
                if fields and loc:
                    said[loc] = fields
                    said[safe_url_string(loc)] = fields  # as Request(loc).url reads it
                yield entry

        # SitemapSpider._parse_sitemap() consumes sitemap_filter()'s entries before it
        # returns its requests: shadowing the method on the instance for that call is
        # enough, and leaves the class's (the spider's own) in place.
        self.sitemap_filter = recording
        try:
            requests = super()._parse_sitemap(response)  # type: ignore[misc]
        finally:
            del self.sitemap_filter
        for request in requests:
            fields = said.get(request.url)
            if fields:
                for key, value in fields.items():
                    request.meta.setdefault(key, value)
            yield request
