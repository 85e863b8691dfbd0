"""A throw-away Scrapy project in a temporary directory, for real ``scrapy`` command
lines (``scrapy crawl``, ``scrapy recrawl-reset``) as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .helpers import REPO

SETTINGS = """
BOT_NAME = "proj"
SPIDER_MODULES = ["proj.spiders"]
ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
RETRY_ENABLED = False
LOG_LEVEL = "WARNING"
"""

# yields one item per page (its URL and flags) and follows every link
SPIDER = """
import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, start_url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url or "http://127.0.0.1:9/"]

    def parse(self, response):
        yield {"url": response.url, "flags": response.flags}
        yield from response.follow_all(css="a", callback=self.parse)
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def make_project(root: Path, settings: str = "") -> Path:
    """scrapy.cfg, proj/settings.py (SETTINGS + ``settings``) and the ``pages`` spider."""
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "settings.py").write_text(SETTINGS + settings)
    (root / "proj" / "spiders" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "pages.py").write_text(SPIDER)
    return root


def scrapy(root: Path, *args: str, input: str | None = None, timeout: float = 180) -> Run:
    """``scrapy ARGS`` in the project at ``root``, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(root)])}
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=root,
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(out.returncode, out.stdout, out.stderr)
