"""A SitemapSpider with SitemapEvidenceMixin, run as a script (one process per crawl):
``python tests/evidence_spider.py JSON`` with sitemap_urls and settings; prints the items
(one per page parsed) and the stats as JSON."""

import json
import sys

from scrapy.crawler import CrawlerProcess
from scrapy.spiders import SitemapSpider

from scrapy_recrawl.evidence import SitemapEvidenceMixin

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


settings = {
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
    "RETRY_ENABLED": False,
    **args["settings"],
}
process = CrawlerProcess(settings)
crawler = process.create_crawler(EvidenceSpider)
failures = []
process.crawl(crawler).addErrback(lambda f: failures.append(f.getTraceback()))
process.start()
if failures:
    sys.stderr.write("\n".join(failures))
    sys.exit(1)
json.dump(
    {
        "items": items,
        "stats": {
            k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))
        },
    },
    sys.stdout,
    default=str,
)
