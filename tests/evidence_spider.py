"""A SitemapSpider with SitemapEvidenceMixin, run as a script (one process per crawl):
``python tests/evidence_spider.py JSON`` with sitemap_urls and settings; prints the items
(one per page parsed) and the stats as JSON."""

import json
import sys

from scrapy.spiders import SitemapSpider

from scrapy_recrawl.evidence import SitemapEvidenceMixin
from tests.spider_script import crawl_and_print

args = json.loads(sys.argv[1])
items = []


class EvidenceSpider(SitemapEvidenceMixin, SitemapSpider):
    name = "evidence"
    sitemap_urls = args["sitemap_urls"]

    def parse(self, response):
        items.append(
            {
                "url": response.url,
                "flags": response.flags,
                "kind": response.meta.get("recrawl_kind"),
                "rank": response.meta.get("recrawl_rank"),
                "lastmod": response.meta.get("recrawl_lastmod"),
                "changefreq": response.meta.get("recrawl_changefreq"),
            }
        )


crawl_and_print(EvidenceSpider, args["settings"], items)
