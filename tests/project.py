"""A real Scrapy project in a temporary directory, run with the ``scrapy`` command in
subprocesses, as a user runs it: ``scrapy startproject``'s settings (``ROBOTSTXT_OBEY``
on), the add-on, and spiders for the sites of :class:`tests.helpers.LocalSite`.

Spiders (each takes ``-a start_url=...``): ``alpha`` and ``beta`` follow every link of
their site; ``maps`` is a ``SitemapSpider`` reading ``<start_url>sitemap.xml``;
``extras`` also sends a HEAD, a POST and a ``dont_recrawl`` request for each page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .helpers import REPO

SETTINGS = """\
BOT_NAME = "twosites"
SPIDER_MODULES = ["twosites.spiders"]
NEWSPIDER_MODULE = "twosites.spiders"
ROBOTSTXT_OBEY = True  # as `scrapy startproject` writes it
ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}
EXTENSIONS = {"twosites.stats.StatsDump": 0}
TELNETCONSOLE_ENABLED = False
RETRY_ENABLED = False  # a retry is a deliberate second fetch
HTTPERROR_ALLOW_ALL = True
LOG_LEVEL = "INFO"
"""

STATS = """\
import json

from scrapy import signals


class StatsDump:
    def __init__(self, crawler):
        self.crawler = crawler
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def closed(self, spider, reason):
        path = self.crawler.settings.get("STATS_DUMP_FILE")
        if path:
            stats = self.crawler.stats.get_stats()
            with open(path, "w") as fh:
                json.dump({k: v for k, v in stats.items() if isinstance(v, (int, float, str))}, fh)
"""

SPIDERS = """\
import scrapy
from scrapy.http import FormRequest
from scrapy.spiders import SitemapSpider


class Pages(scrapy.Spider):
    def __init__(self, start_url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url]

    def parse(self, response):
        yield {"url": response.url, "status": response.status, "flags": response.flags}
        if isinstance(response, scrapy.http.HtmlResponse):
            for href in response.xpath("//a/@href").getall():
                yield response.follow(href)


class Alpha(Pages):
    name = "alpha"


class Beta(Pages):
    name = "beta"


class Extras(Pages):
    name = "extras"

    def parse(self, response):
        yield from super().parse(response)
        yield response.request.replace(method="HEAD", callback=self.other, dont_filter=True)
        yield FormRequest(response.url, formdata={"q": "1"}, callback=self.other)
        yield response.request.replace(
            callback=self.other, dont_filter=True, meta={"dont_recrawl": True}
        )

    def other(self, response):
        yield {"url": response.url, "method": response.request.method, "other": True}


class Maps(SitemapSpider):
    name = "maps"

    def __init__(self, start_url=None, **kwargs):
        self.sitemap_urls = [start_url + "sitemap.xml"]
        super().__init__(**kwargs)

    def parse(self, response):
        yield {"url": response.url, "status": response.status}
"""


def make_project(root: Path) -> Path:
    """Write the project under ``root``; returns its directory (where scrapy.cfg is)."""
    pkg = root / "twosites"
    (pkg / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = twosites.settings\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "settings.py").write_text(SETTINGS)
    (pkg / "stats.py").write_text(STATS)
    (pkg / "spiders" / "__init__.py").write_text(SPIDERS)
    return root


@dataclass
class Run:
    returncode: int
    log: str
    stdout: str
    stats: dict
    items: list


def scrapy(project: Path, *args: str, settings: dict | None = None, timeout: float = 120) -> Run:
    """``scrapy <args> -s K=V ...`` in ``project``; the stats and ``-O`` items, if any."""
    stats_file = project / "stats.json"
    items_file = project / "items.jsonl"
    for f in (stats_file, items_file):
        f.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "scrapy", *args]
    if args[0] == "crawl":
        cmd += ["-O", str(items_file), "-s", f"STATS_DUMP_FILE={stats_file}"]
    for k, v in (settings or {}).items():
        cmd += ["-s", f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    out = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    items = (
        [json.loads(line) for line in items_file.read_text().splitlines()]
        if items_file.exists()
        else []
    )
    return Run(out.returncode, out.stderr, out.stdout, stats, items)


def crawl(project: Path, spider: str, start_url: str, **settings) -> Run:
    """``scrapy crawl <spider> -a start_url=...``; fails the test if it fails."""
    run = scrapy(project, "crawl", spider, "-a", f"start_url={start_url}", settings=settings)
    assert run.returncode == 0, run.log[-4000:]
    assert "Traceback" not in run.log, run.log[-4000:]
    return run
