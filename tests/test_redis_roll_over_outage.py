"""Redis going away just as a continuous crawl's cycle rolls over, when the engine
finds the spider idle (scheduler._on_idle): an outage to wait out, as everywhere else
(frontier/outage.py), not an exception out of the idle handler. Seen in a real crawl
(tests/test_redis_store_loss_crawl.py, once under pytest -n 2): Scrapy logged the
ConnectionError's traceback and closed the spider as "finished", exit 0."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scrapy import Spider, signals
from scrapy.core.downloader import Downloader
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.test import get_crawler
from twisted.internet.task import Clock

from scrapy_recrawl.redis_scheduler import RedisRecrawlScheduler


class _Spider(Spider):
    name = "t"


def test_redis_away_at_an_idle_roll_over_keeps_the_spider_open(redis_db):
    crawler = get_crawler(
        _Spider,
        {
            "REDIS_URL": redis_db.url,
            "RECRAWL_CONTINUOUS": True,
            "RECRAWL_WARMUP_CYCLES": 0,
            "RECRAWL_BUDGET": 5,
            "RECRAWL_CYCLE_PERIOD": 60,
            "RECRAWL_REDIS_OUTAGE_SECONDS": 30,
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
        },
    )
    crawler.engine = SimpleNamespace(  # what quiet() and the queues look at
        downloader=Downloader(crawler), _slot=None, scraper=None, _start=None, spider=None
    )
    scheduler = RedisRecrawlScheduler.from_crawler(crawler)
    clock = Clock()
    clock.advance(1000.0)
    scheduler.clock = clock
    spider = _Spider.from_crawler(crawler)
    crawler.spider = spider
    scheduler.open(spider)
    try:
        first = scheduler.frontier.cycle
        clock.advance(61)  # the next period has started: the idle handler rolls over
        redis_db.stop()
        with pytest.raises(DontCloseSpider):  # kept open for Redis to come back
            scheduler._on_idle(spider)
        assert crawler.stats.get_value("recrawl/redis_outages") == 1
        assert scheduler.frontier.cycle == first
    finally:
        redis_db.ensure_running()
        crawler.signals.send_catch_log(signals.spider_closed, spider=spider, reason="done")
