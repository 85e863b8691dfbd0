"""Two spiders crawled by one CrawlerProcess, in this process, with the add-on; then what
each crawler's runtime (scrapy_recrawl/runtime.py) held, printed as JSON on stdout.

``python tests/two_spiders_script.py JSON`` with ``site`` (the LocalSite's URL) and
``store`` (RECRAWL_STORE, with ``%(spider)s``). tests/test_runtime.py runs it."""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess

from scrapy_recrawl.cycle_summary import CycleTally
from scrapy_recrawl.hubs import HubTally
from scrapy_recrawl.last_modified import LastModifiedTally
from scrapy_recrawl.plugins import Plugins
from scrapy_recrawl.runtime import ATTRIBUTE, CrawlerRuntime
from scrapy_recrawl.scoring import Scorer

args = json.loads(sys.argv[1])
closed_hooks: dict[str, list[str]] = {"alpha": [], "beta": []}


class Pages(scrapy.Spider):
    paths: tuple[str, ...] = ()

    async def start(self):
        for path in self.paths:
            yield scrapy.Request(args["site"] + path, callback=self.parse)

    def parse(self, response):
        yield {"url": response.url}


class Alpha(Pages):
    name = "alpha"
    paths = ("/a0", "/a1", "/a2")
    custom_settings = {"RECRAWL_SCORER": "aad+"}


class Beta(Pages):
    name = "beta"
    paths = ("/b0", "/b1")
    custom_settings = {
        "RECRAWL_SCORER": "nutch",
        "RECRAWL_PLUGINS": {"tests.third_party_plugin.ShortestUrlsFirst": 500},
        "SHORTEST_URLS_FIRST": True,
    }


process = CrawlerProcess(
    {
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": args["store"],
    }
)
crawlers = {spider.name: process.create_crawler(spider) for spider in (Alpha, Beta)}
failures: list[str] = []
for crawler in crawlers.values():
    process.crawl(crawler).addErrback(lambda f: failures.append(f.getTraceback()))
process.start()
if failures:
    sys.stderr.write("\n".join(failures))
    sys.exit(1)


def held(name: str, crawler) -> dict:
    runtime = getattr(crawler, ATTRIBUTE)
    # asked again after the crawl: the same runtime, with what the crawl put in it
    assert CrawlerRuntime.of(crawler) is runtime
    stats = crawler.stats.get_stats()
    return {
        "runtime": id(runtime),
        "runtime_crawler_is_this": runtime.crawler is crawler,
        "scorer": runtime.part(Scorer).name,
        "plugins": [type(p).__name__ for p in runtime.part(Plugins).instances],
        "parts": {
            cls.__name__: id(runtime.part(cls))
            for cls in (Scorer, CycleTally, HubTally, LastModifiedTally, Plugins)
        },
        "tally_stats_are_this_crawlers": runtime.part(CycleTally).stats is crawler.stats,
        "fetched": stats.get("recrawl/last_cycle/fetched"),
        "items": stats.get("item_scraped_count"),
        "refused": runtime.refused is not None,
        "off": runtime.off_reason(lambda: "undecided"),
    }


json.dump({name: held(name, crawler) for name, crawler in crawlers.items()}, sys.stdout)
