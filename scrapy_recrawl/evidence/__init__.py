"""Importance and sitemaps as evidence (docs/evidence.md): a per-URL weight, and each
URL's announced ``<lastmod>`` / ``<changefreq>``, kept in side storage and handed to
scoring; a trusted announced change makes the URL due now.

``plugin.py`` is the plug-in (listed in ``RECRAWL_PLUGINS_BASE``); ``sitemap.py`` the
mixin a ``SitemapSpider`` takes to carry its entries' dates into its requests.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvidencePlugin", "SitemapEvidenceMixin"]


def __getattr__(name: str) -> Any:
    # lazy: a spider importing the mixin does not load the plug-in, nor the reverse
    if name == "SitemapEvidenceMixin":
        from .sitemap import SitemapEvidenceMixin

        return SitemapEvidenceMixin
    if name == "EvidencePlugin":
        from .plugin import EvidencePlugin

        return EvidencePlugin
    raise AttributeError(name)
