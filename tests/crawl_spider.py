"""The spider the tests crawl with, run as a script (one process per crawl):
``python tests/crawl_spider.py JSON`` with urls, settings, follow."""

import asyncio
import json
import sys
import time

import scrapy
from scrapy.http import HtmlResponse

from tests.spider_script import crawl_and_print

args = json.loads(sys.argv[1])
items = []

if args.get("probe_clock_ahead"):
    # the probes' clock (estimate/probes.py: Prober(clock=...), time.time by default) that
    # many seconds ahead in this crawl: a probe due that much later is due now, and the
    # test that needs it due waits for nothing
    from scrapy_recrawl.estimate.probes import Prober

    ahead = float(args["probe_clock_ahead"])
    Prober.__init__.__kwdefaults__["clock"] = lambda: time.time() + ahead


class TestSpider(scrapy.Spider):
    name = "test"
    custom_settings = {"HTTPERROR_ALLOW_ALL": True}

    async def start(self):
        for i, url in enumerate(args["urls"]):
            if i == 1 and args.get("start_after_first_parsed"):
                # the rest only once the first response's links are enqueued: a start
                # request that comes after the spider's own link to its URL
                while not items:
                    await asyncio.sleep(0.02)
            # dont_filter: as Spider.start() makes them from start_urls (--start-dont-filter)
            yield scrapy.Request(
                url,
                callback=self.parse_page,
                meta={"tag": "kept", **(args.get("meta") or {})},
                headers=args.get("headers") or None,
                dont_filter=bool(args.get("start_dont_filter")),
            )

    def parse_page(self, response):
        if args.get("follow") and isinstance(response, HtmlResponse):
            for href in response.xpath("//a/@href").getall():
                yield response.follow(href, callback=self.parse_page, meta={"tag": "kept"})
        result = response.meta.get("recrawl")
        links = (
            [a for a in response.xpath("//a/@href").getall()]
            if isinstance(response, HtmlResponse)
            else []
        )
        items.append(
            {
                "url": response.url,
                "status": response.status,
                "flags": response.flags,
                "tag": response.meta.get("tag"),
                "links": links,
                "size": len(response.body),
                "rank": response.meta.get("recrawl_rank"),
                "cycle": response.meta.get("recrawl_cycle"),
                "download_timeout": response.meta.get("download_timeout"),
                # stored_request.py's note never reaches the spider (nor a request it
                # builds with meta=response.meta)
                "noted": "_recrawl_as_made" in response.meta,
                "recrawl": None
                if result is None
                else {
                    k: getattr(result, k)
                    for k in ("changed", "distance", "added", "removed", "modified", "attributes")
                },
            }
        )


crawl_and_print(TestSpider, args["settings"], items, **args.get("spider_args", {}))
